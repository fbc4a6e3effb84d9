"""The model-facing work-item tools: schemas, null-versus-absent, error
envelopes, effects for the turn engine."""

from __future__ import annotations

import json
from typing import Any

import pytest

from holon_cli.providers.base import ToolCall
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools import base, catalog
from holon_cli.tools import workitem_tools as _tools  # noqa: F401  (registers the tools)

NAMES = (
    "CreateWorkItem",
    "PickWorkItem",
    "UpdateWorkItem",
    "CompleteWorkItem",
    "GetWorkItem",
    "ListWorkItems",
)


@pytest.fixture
def store() -> AgentStore:
    return open_agent()


def run(
    store: AgentStore, name: str, args: dict[str, Any], *, text: str = ""
) -> tuple[dict[str, Any], base.ToolResult, base.ToolContext]:
    call = ToolCall("call_1", name, args)
    ctx = base.ToolContext(
        store=store,
        agent_id=store.agent_id,
        execution_root=store.layout.home,
        cwd=store.layout.home,
        workspace_anchor=store.layout.home,
        turn_id="trn_1",
        round_text=text,
        round_calls=[call],
    )
    res = base.execute(base._REGISTRY[name], ctx, call)
    out: dict[str, Any] = json.loads(res.content)
    return out, res, ctx


def test_all_six_tools_are_registered() -> None:
    reg = catalog.registry()
    for name in NAMES:
        assert name in reg and reg[name].description


def test_source_schemas_keep_optional_fields_optional() -> None:
    sch = {n: base._REGISTRY[n].spec().input_schema for n in NAMES}
    assert sch["CreateWorkItem"]["required"] == ["objective"]
    assert sch["UpdateWorkItem"]["required"] == ["work_item_id"]
    assert set(sch["UpdateWorkItem"]["properties"]) == {
        "work_item_id",
        "objective",
        "plan_status",
        "todo_list",
        "blocked_by",
        "recheck_after",
    }
    assert (
        sch["PickWorkItem"]["required"] == ["work_item_id"]
        and "reason" in sch["PickWorkItem"]["properties"]
    )
    assert sch["ListWorkItems"]["required"] == []
    todo = sch["UpdateWorkItem"]["properties"]["todo_list"]["items"]
    assert todo["required"] == ["text"] and todo["properties"]["state"]["enum"] == [
        "pending",
        "in_progress",
        "completed",
    ]
    assert sch["UpdateWorkItem"]["properties"]["plan_status"]["enum"] == [
        "draft",
        "ready",
        "needs_input",
    ]


def test_strict_schemas_are_valid_strict_shapes() -> None:
    for n in NAMES:
        s = base._REGISTRY[n].spec(strict=True).input_schema
        assert s["additionalProperties"] is False and s["required"] == list(s["properties"])
    blocked = (
        base._REGISTRY["UpdateWorkItem"].spec(strict=True).input_schema["properties"]["blocked_by"]
    )
    assert blocked["type"] == ["string", "null"]


# ----------------------------------------------------------- null vs absent


def test_blocked_by_absent_keeps_null_clears(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    out, _, _ = run(store, "UpdateWorkItem", {"work_item_id": wid, "blocked_by": "waiting for CI"})
    assert out["ok"] and out["work_item"]["blocked_by"] == "waiting for CI"
    out, _, _ = run(
        store, "UpdateWorkItem", {"work_item_id": wid, "plan_status": "ready"}
    )  # absent
    assert out["work_item"]["blocked_by"] == "waiting for CI" and out["changed"] == ["plan_status"]
    out, _, _ = run(
        store, "UpdateWorkItem", {"work_item_id": wid, "blocked_by": None}
    )  # explicit null
    assert out["work_item"]["blocked_by"] is None and out["work_item"]["recheck_at"] is None
    assert out["changed"] == ["blocked_by"]


def test_null_for_other_optional_fields_means_unchanged(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj", todo_list=[{"text": "keep me"}])["work_item"]["id"]
    out, _, _ = run(
        store,
        "UpdateWorkItem",
        {"work_item_id": wid, "objective": None, "todo_list": None, "plan_status": "ready"},
    )
    assert (
        out["ok"]
        and out["work_item"]["objective"] == "obj"
        and out["work_item"]["todo_list"] == [{"text": "keep me", "state": "pending"}]
    )


def test_empty_blocker_is_an_error_envelope(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    out, res, ctx = run(store, "UpdateWorkItem", {"work_item_id": wid, "blocked_by": "  "})
    assert out["ok"] is False and out["tool_name"] == "UpdateWorkItem"
    assert (
        out["kind"] == "invalid_arguments"
        and out["field"] == "blocked_by"
        and "null" in out["hint"]
    )
    assert res.error is not None and res.error["recovery_hint"]
    assert wi.get_work_item(store, wid)["work_item"]["blocked_by"] is None
    assert res.effects == base.ToolEffects()


def test_recheck_after_requires_blocked_by(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    out, _, _ = run(store, "UpdateWorkItem", {"work_item_id": wid, "recheck_after": 60000})
    assert out["ok"] is False and out["field"] == "recheck_after"
    out, _, _ = run(
        store, "UpdateWorkItem", {"work_item_id": wid, "blocked_by": "x", "recheck_after": 60000}
    )
    assert out["ok"] and out["work_item"]["recheck_at"]


# ------------------------------------------------------------- envelopes


@pytest.mark.parametrize(
    "name", ["PickWorkItem", "UpdateWorkItem", "CompleteWorkItem", "GetWorkItem"]
)
def test_unknown_id_envelope(store: AgentStore, name: str) -> None:
    args: dict[str, Any] = {"work_item_id": "wi_nope"}
    if name == "UpdateWorkItem":
        args["plan_status"] = "ready"
    out, _, _ = run(store, name, args)
    assert out["ok"] is False and out["kind"] == "work_item_not_found"
    assert (
        out["field"] == "work_item_id"
        and "ListWorkItems" in out["hint"]
        and out["retryable"] is False
    )


def test_invalid_todo_state_is_rejected_by_the_schema(store: AgentStore) -> None:
    out, _, _ = run(
        store,
        "CreateWorkItem",
        {"objective": "o", "todo_list": [{"text": "x", "state": "blocked"}]},
    )
    assert (
        out["ok"] is False
        and out["kind"] == "invalid_arguments"
        and out["field"] == "todo_list[0].state"
    )
    assert wi.list_work_items(store)["work_items"] == []


def test_missing_objective(store: AgentStore) -> None:
    out, _, _ = run(store, "CreateWorkItem", {})
    assert out["ok"] is False and out["field"] == "objective"
    out, _, _ = run(store, "CreateWorkItem", {"objective": "   "})
    assert out["ok"] is False and out["field"] == "objective"


def test_update_completed_is_rejected(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.complete_work_item(store, wid, source="operator", cancel_waits=cancel_for_work_item)
    out, _, _ = run(store, "UpdateWorkItem", {"work_item_id": wid, "plan_status": "ready"})
    assert out["ok"] is False and out["kind"] == "work_item_completed" and out["hint"]


# --------------------------------------------------------------- results


def test_create_returns_descriptor_and_leaves_focus(store: AgentStore) -> None:
    out, res, _ = run(
        store,
        "CreateWorkItem",
        {
            "objective": "Split fixtures",
            "plan": "Only tests.\n",
            "plan_status": "ready",
            "todo_list": [{"text": "inspect"}],
        },
    )
    w = out["work_item"]
    assert out["ok"] and w["plan_artifact"]["path"].endswith(f"work-items/{w['id']}/plan.md")
    assert (
        w["plan_artifact"]["preview"] == "Only tests.\n"
        and w["plan_artifact"]["preview_complete"] is True
    )
    assert "PickWorkItem" in out["note"]
    assert res.effects.work_item_mutated and not res.effects.focus_changed
    assert res.effects.work_item_id == w["id"]


def test_pick_reports_focus_change_effect(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    out, res, _ = run(store, "PickWorkItem", {"work_item_id": wid})
    assert out["ok"] and out["binding"].startswith(
        "Subsequent tool calls in this turn are bound to work item"
    )
    fx = res.effects
    assert fx.work_item_mutated and fx.focus_changed and fx.current_work_item_id == wid
    _, res, _ = run(store, "PickWorkItem", {"work_item_id": wid})
    # reaffirm: focus unchanged
    assert res.effects.work_item_mutated and not res.effects.focus_changed


def test_release_reports_focus_effect(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.pick_work_item(store, wid)
    _, res, _ = run(store, "UpdateWorkItem", {"work_item_id": wid, "plan_status": "needs_input"})
    fx = res.effects
    assert fx.work_item_mutated and fx.focus_changed and fx.current_work_item_id is None


def test_warnings_reach_the_tool_result(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj", todo_list=[{"text": "a"}])["work_item"]["id"]
    wi.pick_work_item(store, wid)
    out, res, _ = run(store, "CompleteWorkItem", {"work_item_id": wid}, text="Done.")
    assert (
        [w["kind"] for w in res.warnings]
        == ["unfinished_todos"]
        == [w["kind"] for w in out["warnings"]]
    )


def test_get_and_list(store: AgentStore) -> None:
    ids = [
        wi.create_work_item(store, f"o{i}", todo_list=[{"text": "t"}])["work_item"]["id"]
        for i in range(25)
    ]
    out, _, _ = run(store, "GetWorkItem", {"work_item_id": ids[0]})
    assert out["work_item"]["todo_list"] == [{"text": "t", "state": "pending"}]
    out, _, _ = run(store, "GetWorkItem", {"work_item_id": ids[0], "include_todo_list": False})
    assert "todo_list" not in out["work_item"] and out["work_item"]["current_todo"]["text"] == "t"
    out, _, _ = run(store, "ListWorkItems", {})
    assert len(out["work_items"]) == 20 and out["truncated"] and out["total"] == 25  # default limit
    out, _, _ = run(store, "ListWorkItems", {"filter": "completed"})
    assert out["work_items"] == []
    out, _, _ = run(store, "ListWorkItems", {"limit": 0})
    assert out["ok"] is False and out["field"] == "limit"
    out, _, _ = run(store, "ListWorkItems", {"filter": "everything"})
    assert out["ok"] is False and out["kind"] == "invalid_arguments"


def test_results_carry_the_work_item_id_for_event_binding(store: AgentStore) -> None:
    out, res, _ = run(store, "CreateWorkItem", {"objective": "o"})
    wid = out["work_item"]["id"]
    assert res.data["work_item_id"] == wid == out["work_item_id"]
    for name, args in (
        ("PickWorkItem", {}),
        ("GetWorkItem", {}),
        ("UpdateWorkItem", {"plan_status": "ready"}),
        ("CompleteWorkItem", {}),
    ):
        _, res, _ = run(store, name, {"work_item_id": wid, **args})
        assert res.data["work_item_id"] == wid, name
