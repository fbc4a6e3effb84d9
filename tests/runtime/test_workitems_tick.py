"""Scheduler-facing work-plane signals: activation, blocker rechecks,
turn-end commit and ``holon run``'s final text."""

from __future__ import annotations

from typing import Any

import pytest

from holon_cli import clock
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.catalog import default_catalog

T0 = 1_780_000_000.0


@pytest.fixture
def store(now: list[float]) -> AgentStore:
    return open_agent()


def new(store: AgentStore, objective: str = "obj", **kw: Any) -> str:
    wid: str = wi.create_work_item(store, objective, **kw)["work_item"]["id"]
    return wid


def focus(store: AgentStore) -> str | None:
    return store.read_record()["state"]["current_work_item_id"]


def events(store: AgentStore, kind: str) -> list[dict[str, Any]]:
    return [e for e in store.events.records() if e["kind"] == kind]


# ------------------------------------------------------------- activation


def test_no_work_items_no_signal(store: AgentStore) -> None:
    assert wi.activation_signal(store) is None


def test_continue_current_runnable(store: AgentStore) -> None:
    a = new(store, "Split fixtures", todo_list=[{"text": "move", "state": "in_progress"}])
    wi.pick_work_item(store, a)
    sig = wi.activation_signal(store)
    assert sig is not None
    assert sig["action"] == "continue_current" and sig["work_item_id"] == a
    assert "Split fixtures" in sig["text"] and "move" in sig["text"]


def test_current_runnable_wins_over_other_candidates(store: AgentStore, now: list[float]) -> None:
    a, b = new(store, "a"), new(store, "b")
    wi.update_work_item(store, b, blocked_by="review")
    now[0] += 5
    store.ledger("waiting_intents").append(
        {
            "v": 1,
            "id": "w1",
            "work_item_id": b,
            "kind": "external",
            "status": "active",
            "trigger_count": 1,
            "last_triggered_at": clock.now_iso(),
        }
    )
    wi.pick_work_item(store, a)
    sig = wi.activation_signal(store)
    assert sig is not None and sig["action"] == "continue_current"  # external events do not preempt


def test_queued_runnable_wakes_to_pick_without_changing_focus(
    store: AgentStore, now: list[float]
) -> None:
    a = new(store, "older")
    now[0] += 1
    b = new(store, "newer")
    sig = wi.activation_signal(store)
    assert sig is not None and sig["action"] == "activate_queued" and sig["work_item_id"] is None
    assert [c["work_item_id"] for c in sig["candidates"]] == [a, b]
    assert "PickWorkItem" in sig["text"]
    assert focus(store) is None  # the scheduler never picks


def test_triggered_blocked_is_surfaced_for_review(store: AgentStore, now: list[float]) -> None:
    a = new(store, "queued")
    b = new(store, "blocked")
    wi.update_work_item(store, b, blocked_by="review")
    now[0] += 5
    store.ledger("waiting_intents").append(
        {
            "v": 1,
            "id": "w1",
            "work_item_id": b,
            "kind": "external",
            "status": "active",
            "trigger_count": 1,
            "last_triggered_at": clock.now_iso(),
        }
    )
    sig = wi.activation_signal(store)
    assert sig is not None and sig["action"] == "review_triggered"
    assert [c["work_item_id"] for c in sig["candidates"]] == [b]
    assert wi.get_work_item(store, b)["work_item"]["blocked_by"] == "review"
    # once the agent reviewed it (re-stated the blocker), the queued item is next
    now[0] += 5
    wi.update_work_item(store, b, blocked_by="still waiting for review")
    sig = wi.activation_signal(store)
    assert (
        sig is not None
        and sig["action"] == "activate_queued"
        and sig["candidates"][0]["work_item_id"] == a
    )


@pytest.mark.parametrize("kind", ["blocked", "needs_input", "completed"])
def test_non_runnable_items_do_not_activate(store: AgentStore, kind: str) -> None:
    a = new(store)
    if kind == "blocked":
        wi.update_work_item(store, a, blocked_by="x")
    elif kind == "needs_input":
        wi.update_work_item(store, a, plan_status="needs_input")
    else:
        wi.complete_work_item(store, a, source="operator", cancel_waits=cancel_for_work_item)
    assert wi.activation_signal(store) is None


def test_fingerprint_changes_only_with_new_information(store: AgentStore, now: list[float]) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    s1 = wi.activation_signal(store)
    s2 = wi.activation_signal(store)
    assert s1 is not None and s2 is not None and s1["fingerprint"] == s2["fingerprint"]
    now[0] += 1
    wi.update_work_item(store, a, todo_list=[{"text": "next"}])
    s3 = wi.activation_signal(store)
    assert s3 is not None and s3["fingerprint"] != s1["fingerprint"]


# ---------------------------------------------------------------- recheck


def test_recheck_due_fires_once_per_deadline(store: AgentStore, now: list[float]) -> None:
    a = new(store, "waiting on CI")
    wi.pick_work_item(store, a)
    wi.update_work_item(store, a, blocked_by="CI running", recheck_after_ms=60_000)
    assert wi.recheck_due(store, T0 + 59) == []
    (due,) = wi.recheck_due(store, T0 + 61)
    assert (
        due["work_item_id"] == a
        and due["blocked_by"] == "CI running"
        and "CI running" in due["text"]
    )
    w = wi.get_work_item(store, a)["work_item"]
    assert w["recheck_consumed_at"] == clock.iso(T0)
    # a reminder, not a resolution: still blocked, focus unchanged
    assert w["blocked_by"] == "CI running" and w["readiness"] == "blocked" and focus(store) is None
    assert wi.recheck_due(store, T0 + 3600) == []
    assert len(events(store, "work_item_recheck_due")) == 1


def test_restating_the_blocker_rearms_the_recheck(store: AgentStore, now: list[float]) -> None:
    a = new(store)
    wi.update_work_item(store, a, blocked_by="x", recheck_after_ms=1000)
    assert len(wi.recheck_due(store, T0 + 2)) == 1
    now[0] = T0 + 10
    wi.update_work_item(store, a, blocked_by="x, still", recheck_after_ms=1000)
    assert wi.recheck_due(store, T0 + 10.5) == []
    assert len(wi.recheck_due(store, T0 + 12)) == 1


def test_recheck_due_accepts_iso_and_ignores_cleared_and_completed(store: AgentStore) -> None:
    a, b, c = new(store, "a"), new(store, "b"), new(store, "c")
    for wid in (a, b, c):
        wi.update_work_item(store, wid, blocked_by="x", recheck_after_ms=1000)
    wi.update_work_item(store, b, blocked_by=None)
    wi.complete_work_item(store, c, source="operator", cancel_waits=cancel_for_work_item)
    due = wi.recheck_due(store, clock.iso(T0 + 5))
    assert [d["work_item_id"] for d in due] == [a]


# ---------------------------------------------------------- turn-end commit


def test_turn_end_without_a_bound_item_does_nothing(store: AgentStore) -> None:
    assert wi.turn_end_commit(store, None, {"blocking_wait": "x"})["action"] == "skipped"


def test_turn_end_leaves_the_item_open_without_facts(store: AgentStore) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    size = store.ledger("work_items").size()
    res = wi.turn_end_commit(store, a, {})
    assert res == {"work_item_id": a, "action": "none", "reason": "remains_open"}
    assert store.ledger("work_items").size() == size and focus(store) == a


def test_turn_end_blocks_the_bound_item_on_a_blocking_wait(store: AgentStore) -> None:
    a, b = new(store, "a"), new(store, "b")
    wi.pick_work_item(store, a)
    wi.pick_work_item(store, b, reason="switch mid-turn")  # focus moved during the turn
    res = wi.turn_end_commit(
        store, a, {"blocking_wait": "waiting for task tsk_1 (cargo test)", "recheck_after_ms": 5000}
    )
    assert res["action"] == "blocked" and res["work_item_id"] == a
    w = wi.get_work_item(store, a)["work_item"]
    assert w["blocked_by"] == "waiting for task tsk_1 (cargo test)" and w[
        "recheck_at"
    ] == clock.iso(T0 + 5)
    assert focus(store) == b  # the commit applies to the bound item, not the current one
    assert events(store, "work_item_updated")[-1]["data"]["source"] == "turn_end"
    assert events(store, "work_item_turn_end_commit")[-1]["work_item_id"] == a


def test_turn_end_block_releases_focus_of_the_bound_current_item(store: AgentStore) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    res = wi.turn_end_commit(store, a, {"blocking_wait": "waiting for task tsk_1"})
    assert res["focus_released"] is True and focus(store) is None


def test_turn_end_never_completes_nor_overwrites_a_blocker(store: AgentStore) -> None:
    a = new(store)
    wi.update_work_item(store, a, blocked_by="agent's own words")
    res = wi.turn_end_commit(store, a, {"blocking_wait": "runtime words", "completed": True})
    assert res["action"] == "none" and res["reason"] == "already_blocked"
    w = wi.get_work_item(store, a)["work_item"]
    assert w["blocked_by"] == "agent's own words" and w["state"] == "open"


def test_turn_end_after_explicit_completion(store: AgentStore) -> None:
    a = new(store)
    wi.complete_work_item(store, a, source="operator", cancel_waits=cancel_for_work_item)
    assert wi.turn_end_commit(store, a, {"blocking_wait": "x"})["reason"] == "completed"
    assert wi.turn_end_commit(store, "wi_gone", {})["action"] == "skipped"


# ------------------------------------------------------------- final text


def test_newest_completion_report_since(store: AgentStore, now: list[float]) -> None:
    a, b = new(store, "a"), new(store, "b")
    wi.pick_work_item(store, a)
    wi.complete_work_item(store, a, report="report A", cancel_waits=cancel_for_work_item)
    run_start = clock.iso(T0 + 10)
    assert wi.newest_completion_report_since(store, run_start) is None  # produced before this run
    now[0] = T0 + 20
    wi.pick_work_item(store, b)
    wi.complete_work_item(store, b, report="report B", cancel_waits=cancel_for_work_item)
    assert wi.newest_completion_report_since(store, run_start) == "report B"
    assert wi.newest_completion_report_since(store, clock.iso(T0)) == "report B"


def test_completion_without_report_is_not_final_text(store: AgentStore) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    wi.complete_work_item(store, a, report="", cancel_waits=cancel_for_work_item)
    assert wi.newest_completion_report_since(store, clock.iso(T0 - 1)) is None


# ------------------------------------------------------- closure and aliases


def test_closure_waiting_reason(store: AgentStore, now: list[float]) -> None:
    assert wi.closure_waiting_reason(store) is None  # no work items: message-driven
    a = new(store, "a")
    assert wi.closure_waiting_reason(store) is None  # runnable work exists
    wi.update_work_item(store, a, blocked_by="upstream release")
    assert wi.closure_waiting_reason(store) == "awaiting_external_change"
    b = new(store, "b")
    store.ledger("waiting_intents").append(
        {
            "v": 1,
            "id": "w1",
            "work_item_id": b,
            "kind": "task",
            "status": "active",
            "trigger_count": 0,
        }
    )
    assert wi.closure_waiting_reason(store) == "awaiting_task_result"
    c = new(store, "c")
    wi.update_work_item(store, c, plan_status="needs_input")
    assert wi.closure_waiting_reason(store) == "awaiting_operator_input"
    for wid in (a, b, c):
        wi.complete_work_item(store, wid, source="operator", cancel_waits=cancel_for_work_item)
    assert wi.closure_waiting_reason(store) is None


def test_signal_and_recheck_carry_the_engine_aliases(store: AgentStore) -> None:
    a = new(store)
    sig = wi.activation_signal(store)
    assert sig is not None and sig["reactivation_mode"] == "activate_queued" == sig["action"]
    wi.pick_work_item(store, a)
    sig = wi.activation_signal(store)
    assert (
        sig is not None
        and sig["reactivation_mode"] == "continue_active"
        and sig["action"] == "continue_current"
    )
    wi.update_work_item(store, a, blocked_by="x", recheck_after_ms=1)
    (due,) = wi.recheck_due(store, T0 + 1)
    assert due["id"] == due["work_item_id"] == a


# ------------------------------------------- context_length_exceeded hold

CTX_FAIL = {"turn_status": "aborted", "failure_kind": "context_length_exceeded"}


def test_context_length_failure_holds_continue_active(store: AgentStore) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    assert wi.activation_signal(store)["reactivation_mode"] == "continue_active"
    res = wi.turn_end_commit(store, a, {**CTX_FAIL, "turn_id": "turn_1"})
    assert res == {
        "work_item_id": a,
        "action": "continuation_held",
        "reason": "context_length_exceeded",
    }
    assert wi.activation_signal(store) is None
    assert events(store, "work_item_continuation_held")[-1]["work_item_id"] == a
    assert focus(store) == a  # focus is not released: only the automatic continuation stops


@pytest.mark.parametrize("kind", ["rate_limited", "timeout", None])
def test_other_failures_do_not_hold(store: AgentStore, kind: str | None) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    wi.turn_end_commit(store, a, {"turn_status": "aborted", "failure_kind": kind})
    assert wi.activation_signal(store)["reactivation_mode"] == "continue_active"


@pytest.mark.parametrize("lift", ["completed_turn", "update", "pick", "focus_moves"])
def test_the_hold_lapses_on_an_explicit_action(store: AgentStore, lift: str) -> None:
    a = new(store)
    wi.pick_work_item(store, a)
    wi.turn_end_commit(store, a, CTX_FAIL)
    assert wi.activation_signal(store) is None
    if lift == "completed_turn":
        wi.turn_end_commit(store, a, {"turn_status": "completed", "failure_kind": None})
    elif lift == "update":
        wi.update_work_item(store, a, plan_status="ready", source="operator")
    elif lift == "pick":
        wi.pick_work_item(store, a, source="operator")
    else:
        b = new(store, "b")
        wi.pick_work_item(store, b, reason="other first")
    sig = wi.activation_signal(store)
    assert sig is not None and sig["reactivation_mode"] == "continue_active"


def test_a_failure_without_a_current_item_holds_nothing(store: AgentStore) -> None:
    new(store)
    res = wi.turn_end_commit(store, None, CTX_FAIL)
    assert res["action"] == "skipped"
    assert wi.activation_signal(store)["reactivation_mode"] == "activate_queued"


def test_tick_after_context_length_exceeded_queues_no_continue_active(
    store: AgentStore, tmp_path: Any
) -> None:
    """Issue 8 item 13, end to end: a turn on the current item fails with
    ``context_length_exceeded``; the next ``holon tick`` admits nothing."""
    import yaml

    from holon_cli.runtime import queue as q
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.tick import tick_agent
    from holon_cli.runtime.turn import run_turn

    a = new(store)
    wi.pick_work_item(store, a)
    script = tmp_path / "s.yaml"
    script.write_text(
        yaml.safe_dump({"steps": [{"fail": {"kind": "context_length_exceeded", "status": 400}}]})
    )
    admit("go on")
    res = run_turn(None, cli_model=f"scripted:{script}", catalog=default_catalog())
    assert res.status == "aborted" and res.failure_kind == "context_length_exceeded"
    assert q.pending_count(store) == 0
    out = tick_agent(store)
    assert not [x for x in out["actions"] if x["action"] == "activated"], out
    assert q.pending_count(store) == 0
    # an operator pick lifts the hold: the next tick continues the item
    wi.pick_work_item(store, a, source="operator")
    out = tick_agent(store)
    assert [x["work_signal"]["reactivation_mode"] for x in out["actions"]] == ["continue_active"]
