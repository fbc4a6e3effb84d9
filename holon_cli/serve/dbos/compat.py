"""The one seam onto DBOS Transact's private names (pinned ``dbos>=3.4,<4``).

Every use of a DBOS private name lives here, so nothing else in the package
touches them: the DBOS instance and its system database (``_dbos``,
``_sys_db``), the workflow context and its function id (``_context``), the
step serializer (``_serialization``), the retry decorator and the conflict
error (``_sys_db.db_retry``, ``_error``), recovery of a dead worker's
workflows (``DBOS._recover_pending_workflows``) and the SQL over DBOS's
system tables (``workflow_status``, ``operation_outputs``).

Why each is used (the public API cannot say it): the pass workflow's step
records are written directly (see :class:`~holon_cli.serve.dbos.steps.DbosSteps`:
"record only if missing", "no answer, no step", skip a finished turn), and a
worker asks whether a pass of an agent is already enqueued and not started.

``tests/serve/test_dbos_compat.py`` is the contract test: it fails when a
DBOS release renames or reshapes one of these names; the Postgres tests
(``tests/e2e/test_scaleout_dbos_steps.py``) exercise the SQL.

``dbos`` and ``sqlalchemy`` are imported inside the functions.
"""

from __future__ import annotations

from typing import Any


def current_context() -> Any:
    """The running workflow's DBOS context (raises outside a workflow)."""
    from dbos._context import assert_current_dbos_context

    return assert_current_dbos_context()


def context_workflow_id(ctx: Any) -> str:
    return str(ctx.workflow_id)


def context_function_id(ctx: Any) -> int:
    """The function id of the workflow's last step."""
    return int(ctx.function_id)


def set_context_function_id(ctx: Any, fid: int) -> None:
    """Move the workflow's step counter (past a finished turn's steps)."""
    ctx.function_id = fid


def next_step(ctx: Any) -> tuple[int, str | None]:
    """Take the workflow's next function id, as a DBOS step does: that id and
    the execution's ownership token."""
    step_ctx = ctx.snapshot_step_ctx()
    return int(step_ctx.function_id), step_ctx.owner_xid


def workflow_steps(workflow_id: str) -> dict[int, tuple[str, Any]]:
    """The recorded steps of a workflow: function id -> (name, output)."""
    from dbos._dbos import _get_dbos_instance

    sys_db = _get_dbos_instance()._sys_db
    return {
        int(st["function_id"]): (st["function_name"], st["output"])
        for st in sys_db.list_workflow_steps(workflow_id)
    }


def serialize_output(value: Any) -> tuple[str | None, str]:
    """A step's output as DBOS stores it: (serialized, serialization)."""
    from dbos._dbos import _get_dbos_instance
    from dbos._serialization import serialize_value

    return serialize_value(value, None, _get_dbos_instance()._serializer)


def recover_pending_workflows(executor_ids: list[str]) -> list[Any]:
    """Have DBOS recover the pending workflows of these (dead) executors."""
    from dbos import DBOS

    return list(DBOS._recover_pending_workflows(executor_ids))


def pass_waiting(queue: str, partition_key: str, app_version: str) -> bool:
    """Whether a workflow of ``queue`` with this partition key is enqueued and
    not started yet, for this application version (or none). Raises when the
    database cannot say."""
    import sqlalchemy as sa
    from dbos._dbos import _get_dbos_instance

    sys_db = _get_dbos_instance()._sys_db
    schema = sys_db.schema or "public"
    query = sa.text(
        f'SELECT 1 FROM "{schema}".workflow_status WHERE queue_name = :q '
        "AND status = 'ENQUEUED' AND queue_partition_key = :a "
        "AND (application_version IS NULL OR application_version = :v) LIMIT 1"
    )
    args = {"q": queue, "a": partition_key, "v": app_version}
    with sys_db.engine.connect() as conn:
        return conn.execute(query, args).first() is not None


def write_steps(workflow_id: str, rows: list[Any], owner_xid: str | None, done_ms: int) -> None:
    """Step rows in one transaction and one statement: the ownership check
    DBOS's own step records make (``FOR NO KEY UPDATE`` on the workflow's
    row) and a multi-row insert, as plain SQL (SQLAlchemy's compiled
    multi-row insert cost more CPU than the round trip); retried through a
    database outage as DBOS retries its own. A row already there is left
    alone; when nothing was inserted and the workflow is no longer owned by
    ``owner_xid``, DBOS's ``DBOSWorkflowConflictIDError``."""
    import sqlalchemy as sa
    from dbos._dbos import _get_dbos_instance
    from dbos._error import DBOSWorkflowConflictIDError
    from dbos._sys_db import db_retry

    sys_db = _get_dbos_instance()._sys_db
    schema = sys_db.schema or "public"
    params: dict[str, object] = {
        "wf": workflow_id,
        "owner": owner_xid,
        "done": done_ms,  # one value across retries
        "app": sys_db.app_name,
    }
    for i, row in enumerate(rows):
        params |= {
            f"f{i}": row["function_id"],
            f"n{i}": row["function_name"],
            f"o{i}": row["output"],
            f"s{i}": row["started_at_epoch_ms"],
            f"z{i}": row["serialization"],
        }
    insert = sa.text(insert_steps_sql(schema, len(rows)))
    check = sa.text(f'SELECT owner_xid FROM "{schema}".workflow_status WHERE workflow_uuid = :wf')

    @db_retry(sys_db=sys_db)
    def write() -> None:
        with sys_db.engine.begin() as conn:
            if conn.execute(insert, params).fetchall():
                return
            # nothing inserted: rows a retried commit already wrote, or not ours any more
            if owner_xid is not None and conn.execute(check, params).scalar() != owner_xid:
                raise DBOSWorkflowConflictIDError(workflow_id)

    write()


def insert_steps_sql(schema: str, n: int) -> str:
    """One statement: lock the workflow's row if this execution still owns it
    (as DBOS's step records do) and insert ``n`` step rows (``:f<i>`` function
    id, ``:n<i>`` name, ``:o<i>`` output, ``:s<i>`` started at, ``:z<i>``
    serialization); a row already there is left alone."""
    vals = ", ".join(
        f"(CAST(:f{i} AS integer), CAST(:n{i} AS text), CAST(:o{i} AS text), "
        f"CAST(:s{i} AS bigint), CAST(:z{i} AS text))"
        for i in range(n)
    )
    return (
        f'WITH owner AS (SELECT 1 FROM "{schema}".workflow_status WHERE workflow_uuid = :wf '
        "AND (CAST(:owner AS text) IS NULL OR owner_xid = :owner) FOR NO KEY UPDATE) "
        f'INSERT INTO "{schema}".operation_outputs (workflow_uuid, function_id, function_name, '
        "output, error, child_workflow_id, started_at_epoch_ms, completed_at_epoch_ms, "
        "serialization, application_name, retention_timestamp) "
        "SELECT :wf, v.fid, v.name, v.output, NULL, NULL, v.started, :done, v.ser, :app, "
        "CAST(EXTRACT(epoch FROM now()) * 1000 AS bigint) "
        f"FROM (VALUES {vals}) AS v(fid, name, output, started, ser) "
        "WHERE EXISTS (SELECT 1 FROM owner) "
        "ON CONFLICT (workflow_uuid, function_id) DO NOTHING RETURNING function_id"
    )
