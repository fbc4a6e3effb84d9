"""Contract test of ``serve/dbos/compat.py``, the one seam onto DBOS
Transact's private names: each name it uses still exists with the shape it
relies on, and the system tables have the columns its SQL names. A DBOS
release that moves one fails here, not in a worker. (The SQL itself runs
against Postgres in ``tests/e2e/test_scaleout_dbos_steps.py``.)"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

pytest.importorskip("dbos")

from holon_cli.serve.dbos import compat  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[2] / "holon_cli"


def test_the_private_names_it_imports_exist() -> None:
    from dbos import DBOS
    from dbos._context import DBOSContext, assert_current_dbos_context
    from dbos._dbos import _get_dbos_instance
    from dbos._error import DBOSWorkflowConflictIDError
    from dbos._serialization import serialize_value
    from dbos._sys_db import SystemDatabase, db_retry

    assert callable(assert_current_dbos_context) and callable(_get_dbos_instance)
    assert issubclass(DBOSWorkflowConflictIDError, BaseException)
    assert "sys_db" in inspect.signature(db_retry).parameters
    assert list(inspect.signature(serialize_value).parameters) == [
        "value",
        "serialization_type",
        "serializer",
    ]
    assert "workflow_id" in inspect.signature(SystemDatabase.list_workflow_steps).parameters
    assert callable(DBOS._recover_pending_workflows)
    assert hasattr(DBOSContext, "snapshot_step_ctx")


def test_the_context_function_id_counts_steps() -> None:
    from dbos._context import DBOSContext

    ctx = DBOSContext()
    ctx.workflow_id = "wf-1"
    ctx.owner_xid = "me"
    compat.set_context_function_id(ctx, 4)
    assert compat.context_function_id(ctx) == 4
    assert compat.next_step(ctx) == (5, "me")
    assert compat.context_function_id(ctx) == 5
    assert compat.context_workflow_id(ctx) == "wf-1"


def test_a_step_output_round_trips_through_the_default_serializer() -> None:
    from dbos._serialization import DefaultSerializer, deserialize_value, serialize_value

    out, ser = serialize_value({"kind": "turn", "n": 1}, None, DefaultSerializer())
    assert isinstance(out, str) and isinstance(ser, str)
    assert deserialize_value(out, ser, DefaultSerializer()) == {"kind": "turn", "n": 1}


def test_the_system_tables_have_the_columns_the_sql_names() -> None:
    from dbos._schemas.system_database import SystemSchema

    status = {c.name for c in SystemSchema.workflow_status.c}
    outputs = {c.name for c in SystemSchema.operation_outputs.c}
    sql = compat.insert_steps_sql("dbos", 2)
    insert_cols = re.search(r"operation_outputs \(([^)]*)\)", sql)
    assert insert_cols is not None
    assert {c.strip() for c in insert_cols.group(1).split(",")} <= outputs
    assert {
        "workflow_uuid",
        "owner_xid",
        "queue_name",
        "status",
        "queue_partition_key",
        "application_version",
    } <= status
    assert ":f1" in sql and ":f2" not in sql  # one value tuple per row


def test_no_other_module_touches_a_dbos_private_name() -> None:
    """The seam holds: outside compat, nothing in the package imports from a
    ``dbos._*`` module or reaches a DBOS private attribute."""
    private = {"_sys_db", "_recover_pending_workflows", "_serializer", "snapshot_step_ctx"}
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "serve" / "dbos" / "compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dbos._"):
                found.append(f"{path.relative_to(PACKAGE)}: from {node.module}")
            elif isinstance(node, ast.Attribute) and node.attr in private:
                found.append(f"{path.relative_to(PACKAGE)}: .{node.attr}")
    assert found == []
