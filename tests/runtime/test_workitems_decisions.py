"""Each rule of the "Decisions" section of the Work Item Centered Agent
Runtime RFC, one behaviour per test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon_cli import clock
from holon_cli.providers.base import ToolCall
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools import base
from holon_cli.tools import workitem_tools as _tools  # noqa: F401  (registers the tools)

T0 = 1_780_000_000.0


@pytest.fixture
def store(now: list[float]) -> AgentStore:
    return open_agent()


def call(
    store: AgentStore,
    name: str,
    args: dict[str, Any],
    *,
    text: str = "",
    others: list[ToolCall] | None = None,
) -> dict[str, Any]:
    me = ToolCall("call_1", name, args)
    ctx = base.ToolContext(
        store=store,
        agent_id=store.agent_id,
        execution_root=store.layout.home,
        cwd=store.layout.home,
        workspace_anchor=store.layout.home,
        turn_id="trn_test",
        round_text=text,
        round_calls=[me, *(others or [])],
    )
    res = base.execute(base._REGISTRY[name], ctx, me)
    out: dict[str, Any] = json.loads(res.content)
    return out


def events(store: AgentStore, kind: str) -> list[dict[str, Any]]:
    return [e for e in store.events.records() if e["kind"] == kind]


def focus(store: AgentStore) -> str | None:
    return store.read_record()["state"]["current_work_item_id"]


def new(store: AgentStore, objective: str = "obj", **kw: Any) -> str:
    wid: str = wi.create_work_item(store, objective, **kw)["work_item"]["id"]
    return wid


# ------------------------------------------------------- PickWorkItem Reason


def test_reason_is_required_when_switching_away_from_runnable_current(store: AgentStore) -> None:
    a, b = new(store, "a"), new(store, "b")
    wi.pick_work_item(store, a)
    res = wi.pick_work_item(store, b, reason="higher priority operator request")
    assert res["warnings"] == [] and res["switch_kind"] == "explicit_focus_override"
    data = events(store, "work_item_picked")[-1]["data"]
    assert data["reason"] == "higher priority operator request"
    assert data["reason_required"] is True and data["reason_missing"] is False
    assert data["previous_work_item_id"] == a and data["current_work_item_id"] == b
    assert data["previous_readiness"] == "runnable" and data["current_readiness"] == "runnable"
    assert data["switch_kind"] == "explicit_focus_override" and data["agent_id"] == "main"


def test_reason_not_required_without_a_current_item(store: AgentStore) -> None:
    a = new(store)
    res = wi.pick_work_item(store, a)
    assert res["warnings"] == []
    data = events(store, "work_item_picked")[-1]["data"]
    assert data["reason_required"] is False and data["reason_missing"] is False


def test_reason_not_required_when_current_is_not_runnable(store: AgentStore) -> None:
    a, b = new(store, "a"), new(store, "b")
    wi.update_work_item(store, a, blocked_by="waiting on review")
    wi.pick_work_item(store, a)  # picked for review; still blocked
    res = wi.pick_work_item(store, b)
    assert not [w for w in res["warnings"] if w["kind"] == "pick_reason_missing"]
    data = events(store, "work_item_picked")[-1]["data"]
    assert data["reason_required"] is False and data["switch_kind"] == "switch_from_non_runnable"


def test_reason_is_stored_only_on_the_picked_event(store: AgentStore) -> None:
    a, b = new(store, "a"), new(store, "b")
    wi.pick_work_item(store, a)
    wi.pick_work_item(store, b, reason="UNIQUE-REASON-TOKEN")
    assert "UNIQUE-REASON-TOKEN" not in store.ledger("work_items").path.read_text()
    assert "UNIQUE-REASON-TOKEN" not in store.layout.agent_file.read_text()
    for wid in (a, b):
        w = wi.get_work_item(store, wid)["work_item"]
        assert "UNIQUE-REASON-TOKEN" not in json.dumps(w)
        assert "UNIQUE-REASON-TOKEN" not in Path(w["plan_artifact"]["path"]).read_text()
    assert [e["data"]["reason"] for e in events(store, "work_item_picked")][
        -1
    ] == "UNIQUE-REASON-TOKEN"


# --------------------------------------------- Missing reason compatibility


def test_missing_reason_is_a_warning_and_the_pick_succeeds(store: AgentStore) -> None:
    a, b = new(store, "a"), new(store, "b")
    wi.pick_work_item(store, a)
    out = call(store, "PickWorkItem", {"work_item_id": b})
    assert out["ok"] is True and focus(store) == b
    assert [w["kind"] for w in out["warnings"]] == ["pick_reason_missing"]
    data = events(store, "work_item_picked")[-1]["data"]
    assert (
        data["reason_required"] is True
        and data["reason_missing"] is True
        and data["reason"] is None
    )


# ------------------------------------------------- Picking Blocked WorkItems


def test_picking_a_blocked_item_is_allowed_and_it_stays_blocked(store: AgentStore) -> None:
    a = new(store)
    wi.update_work_item(store, a, blocked_by="waiting for CI")
    out = call(store, "PickWorkItem", {"work_item_id": a})
    assert out["ok"] is True and focus(store) == a
    assert out["work_item"]["blocked_by"] == "waiting for CI"
    assert out["work_item"]["readiness"] == "blocked"
    assert "picked_non_runnable" in [w["kind"] for w in out["warnings"]]
    assert wi.activation_signal(store) is None  # a picked blocked item is not continued


def test_blocked_item_becomes_runnable_only_after_explicit_clear(store: AgentStore) -> None:
    a = new(store)
    wi.update_work_item(store, a, blocked_by="waiting for CI")
    wi.pick_work_item(store, a)
    wi.update_work_item(store, a, blocked_by=None)
    sig = wi.activation_signal(store)
    assert sig is not None and sig["action"] == "continue_current" and sig["work_item_id"] == a


# ------------------------------------------------------ Focus Release Timing


@pytest.mark.parametrize(
    "tool, args",
    [
        ("CompleteWorkItem", {}),
        ("UpdateWorkItem", {"blocked_by": "waiting on the operator"}),
        ("UpdateWorkItem", {"plan_status": "needs_input"}),
    ],
)
def test_focus_is_released_inside_the_mutation(
    store: AgentStore, tool: str, args: dict[str, Any]
) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    out = call(
        store,
        tool,
        {"work_item_id": a, **args},
        text="Report." if tool == "CompleteWorkItem" else "",
    )
    assert out["ok"] is True
    assert out["focus_released"] is True and out["current_work_item_id"] is None
    assert focus(store) is None  # already persisted when the tool result is returned
    assert out["work_item"]["is_current"] is False


def test_other_updates_keep_focus(store: AgentStore) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    res = wi.update_work_item(store, a, plan_status="ready", todo_list=[{"text": "x"}])
    assert res["focus_released"] is False and focus(store) == a


def test_clearing_a_blocker_never_repicks(store: AgentStore) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    wi.update_work_item(store, a, blocked_by="x")
    assert focus(store) is None
    res = wi.update_work_item(store, a, blocked_by=None)
    assert focus(store) is None and res["work_item"]["readiness"] == "runnable"
    assert "PickWorkItem" in (res["note"] or "")


# ---------------------------------------------------------- Process Notes


def test_no_standalone_process_note_ledger(store: AgentStore) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    wi.update_work_item(store, a, todo_list=[{"text": "x", "state": "completed"}])
    call(store, "CompleteWorkItem", {"work_item_id": a}, text="Done.")
    names = {p.name for p in store.layout.ledger_dir.iterdir()}
    assert not any("process_note" in n for n in names)


# ---------------------------------------- CompleteWorkItem report source


def test_complete_tool_takes_no_report_argument(store: AgentStore) -> None:
    schema = base._REGISTRY["CompleteWorkItem"].spec().input_schema
    assert list(schema["properties"]) == ["work_item_id"]
    a = new(store)
    out = call(store, "CompleteWorkItem", {"work_item_id": a, "result_summary": "dup"})
    assert out["ok"] is False and out["kind"] == "invalid_arguments"
    assert wi.get_work_item(store, a)["work_item"]["state"] == "open"


def test_same_round_text_is_promoted_after_success(store: AgentStore) -> None:
    a = new(store, "Split fixtures")
    wi.pick_work_item(store, a)
    report = "Split the compaction fixtures into tests/support/compaction.rs; focused tests pass."
    out = call(store, "CompleteWorkItem", {"work_item_id": a}, text=report)
    assert out["ok"] is True and out["warnings"] == []
    w = wi.get_work_item(store, a)["work_item"]
    assert w["result_summary"] == report
    assert w["completion_report"] == {"text": report, "source": "result_summary"}
    (ds,) = store.ledger("delivery_summaries").records()
    assert (
        ds["work_item_id"] == a
        and ds["text"] == report
        and ds["v"] == 1
        and ds["id"] == out["delivery_summary_id"]
    )
    (brief,) = store.ledger("briefs").records()
    assert brief["kind"] == "result" and brief["visibility"] == "work_done"
    assert brief["text"] == report and brief["work_item_id"] == a and brief["id"] == out["brief_id"]
    done = events(store, "work_item_completed")[-1]
    assert done["data"]["report_promoted"] is True and done["turn_id"] == "trn_test"


def test_failed_completion_promotes_nothing(store: AgentStore) -> None:
    a = new(store)
    wi.complete_work_item(store, a, source="operator", cancel_waits=cancel_for_work_item)
    out = call(store, "CompleteWorkItem", {"work_item_id": a}, text="All done!")
    assert out["ok"] is False and out["kind"] == "work_item_completed" and out["hint"]
    assert wi.get_work_item(store, a)["work_item"]["result_summary"] is None
    assert (
        store.ledger("delivery_summaries").records() == []
        and store.ledger("briefs").records() == []
    )


def test_no_same_round_text_completes_without_a_report(store: AgentStore) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    out = call(store, "CompleteWorkItem", {"work_item_id": a}, text="   ")
    assert out["ok"] is True
    assert [w["kind"] for w in out["warnings"]] == ["missing_completion_report"]
    w = wi.get_work_item(store, a)["work_item"]
    assert (
        w["state"] == "completed" and w["result_summary"] is None and w["completion_report"] is None
    )
    assert (
        store.ledger("delivery_summaries").records() == []
        and store.ledger("briefs").records() == []
    )


def test_text_is_not_promoted_for_an_unfocused_item(store: AgentStore) -> None:
    a, b = new(store, "a"), new(store, "b")
    wi.pick_work_item(store, a)
    out = call(store, "CompleteWorkItem", {"work_item_id": b}, text="Progress on a: tests pass.")
    assert out["ok"] is True
    assert [w["kind"] for w in out["warnings"]] == ["completion_report_not_focused"]
    assert wi.get_work_item(store, b)["work_item"]["result_summary"] is None
    assert store.ledger("delivery_summaries").records() == []
    assert focus(store) == a  # completing another item leaves focus alone


def test_several_completions_in_one_round_promote_nothing(store: AgentStore) -> None:
    a, b = new(store, "a"), new(store, "b")
    wi.pick_work_item(store, a)
    other = ToolCall("call_2", "CompleteWorkItem", {"work_item_id": b})
    out = call(store, "CompleteWorkItem", {"work_item_id": a}, text="Both done.", others=[other])
    assert out["ok"] is True
    assert [w["kind"] for w in out["warnings"]] == ["completion_report_ambiguous"]
    assert wi.get_work_item(store, a)["work_item"]["result_summary"] is None
    assert store.ledger("delivery_summaries").records() == []


def test_repeated_completion_of_the_same_item_is_not_ambiguous(store: AgentStore) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    dup = ToolCall("call_2", "CompleteWorkItem", {"work_item_id": a})
    out = call(store, "CompleteWorkItem", {"work_item_id": a}, text="Done.", others=[dup])
    assert out["ok"] is True and out["warnings"] == []
    assert wi.get_work_item(store, a)["work_item"]["result_summary"] == "Done."


# ---------------------------------------- CompleteWorkItem With Unfinished Todos
# ---------------------------------------- CompleteWorkItem Warning Receipt


def test_unfinished_todos_complete_with_a_structured_warning(store: AgentStore) -> None:
    todos = [
        {"text": "run regression tests", "state": "pending"},
        {"text": "update docs", "state": "in_progress"},
        {"text": "release notes", "state": "pending"},
        {"text": "implement", "state": "completed"},
    ]
    a = new(store, todo_list=todos)
    wi.pick_work_item(store, a)
    out = call(
        store,
        "CompleteWorkItem",
        {"work_item_id": a},
        text="Implemented; docs and tests still open.",
    )
    assert out["ok"] is True and out["work_item"]["state"] == "completed"
    (warn,) = out["warnings"]
    assert warn["kind"] == "unfinished_todos"
    assert warn["message"] == "Work item completed with unfinished todo items."
    assert warn["pending_count"] == 2 and warn["in_progress_count"] == 1
    assert {"text": "run regression tests", "state": "pending"} in warn["sample"]
    data = events(store, "work_item_completed")[-1]["data"]
    assert data["completed_with_unfinished_todos"] is True
    assert (
        data["unfinished_todo_count"] == 3
        and data["pending_todo_count"] == 2
        and data["in_progress_todo_count"] == 1
    )
    # the promoted report preserves the warning
    (ds,) = store.ledger("delivery_summaries").records()
    assert ds["warnings"][0]["kind"] == "unfinished_todos"


def test_no_unfinished_todos_means_no_warnings(store: AgentStore) -> None:
    a = new(store, todo_list=[{"text": "x", "state": "completed"}])
    wi.pick_work_item(store, a)
    out = call(store, "CompleteWorkItem", {"work_item_id": a}, text="Done.")
    assert out["warnings"] == []
    assert (
        events(store, "work_item_completed")[-1]["data"]["completed_with_unfinished_todos"] is False
    )


# ---------------------------------------------- WaitingIntent Trigger State


def _wait(store: AgentStore, wid: str, **kw: Any) -> None:
    store.ledger("waiting_intents").append(
        {
            "v": 1,
            "id": "wait_1",
            "work_item_id": wid,
            "kind": "external",
            "status": "active",
            "trigger_count": 0,
            "last_triggered_at": None,
            **kw,
        }
    )


def test_triggered_is_derived_and_the_wait_stays_active(
    store: AgentStore, now: list[float]
) -> None:
    a = new(store)
    wi.update_work_item(store, a, blocked_by="waiting for review")
    _wait(store, a)
    assert wi.get_work_item(store, a)["work_item"]["has_triggered_waits"] is False
    now[0] += 10
    _wait(store, a, trigger_count=1, last_triggered_at=clock.now_iso())
    w = wi.get_work_item(store, a)["work_item"]
    assert w["has_triggered_waits"] is True and w["has_active_waits"] is True
    now[0] += 10
    _wait(store, a, trigger_count=2, last_triggered_at=clock.now_iso())  # a second review comment
    w = wi.get_work_item(store, a)["work_item"]
    assert w["waits"][0]["trigger_count"] == 2 and w["has_triggered_waits"] is True
    # a trigger never clears the blocker or completes the item
    assert (
        w["blocked_by"] == "waiting for review"
        and w["state"] == "open"
        and w["readiness"] == "blocked"
    )


def test_a_cancelled_wait_is_not_active(store: AgentStore) -> None:
    a = new(store)
    _wait(store, a, kind="task")
    assert wi.get_work_item(store, a)["work_item"]["scheduling_state"] == "waiting_task"
    _wait(store, a, kind="task", status="cancelled")
    assert wi.get_work_item(store, a)["work_item"]["scheduling_state"] == "runnable"


# ---------------------------------------- Context Budget / Candidate Ranking


def test_no_full_plan_body_in_any_read_or_projection(store: AgentStore) -> None:
    body = "PLAN-START\n" + ("detail line\n" * 400) + "PLAN-TAIL-MARKER\n"
    a = new(store, "current", plan=body)
    b = new(store, "queued", plan=body)
    wi.pick_work_item(store, a)
    text = wi.project_work_queue(store) or ""
    assert "PLAN-START" in text and "PLAN-TAIL-MARKER" not in text
    for wid in (a, b):
        w = wi.get_work_item(store, wid)["work_item"]
        assert w["plan_artifact"]["preview_complete"] is False
        assert "PLAN-TAIL-MARKER" not in json.dumps(w)
    assert "PLAN-TAIL-MARKER" not in json.dumps(wi.list_work_items(store, include_todo_list=True))


def test_candidate_ranking_in_the_projection(store: AgentStore, now: list[float]) -> None:
    ids = []
    for i in range(3):
        now[0] += 1
        ids.append(new(store, f"queued {i}"))
    now[0] += 1
    wi.update_work_item(
        store, ids[0], todo_list=[{"text": "touched"}]
    )  # now the most recently updated
    text = wi.project_work_queue(store) or ""
    pos = [text.index(f"{w} ") for w in ids]
    assert pos[1] < pos[2] < pos[0]  # updated_at ascending: fairness for older work
