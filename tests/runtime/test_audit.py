"""The liveness audit (``holon home audit``): a healthy home has no finding;
each way an agent can be silently stuck is one finding naming the agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli import clock
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.home.audit import audit_home
from holon_cli.runtime.turn import run_turn
from holon_cli.runtime.waiting import timers
from holon_cli.runtime.workitems import create_work_item, update_work_item
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.catalog import default_catalog


def script(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def kinds(report: Any) -> list[tuple[str, str]]:
    return [(f["agent_id"], f["kind"]) for f in report["findings"]]


def fall_asleep(store: AgentStore) -> None:
    """The agent rests after an open-ended Sleep (no timer, no deadline)."""

    def mutate(st: Any) -> None:
        st["status"] = "asleep"
        st["sleeping_until"] = None

    store.update_state(mutate)


def test_an_empty_home_is_healthy() -> None:
    rep = audit_home()
    assert rep["ok"] and rep["findings"] == [] and rep["agents"] == 0


def test_a_healthy_home_with_history_has_no_finding(tmp_path: Path) -> None:
    store = open_agent(None)
    admit("first")
    run_turn(None, cli_model=script(tmp_path, [{"text": "done"}]), catalog=default_catalog())
    admit("still queued")
    create_work_item(store, "runnable and awake: the next tick activates it", plan_status="ready")
    other = create_agent("sleeper")
    create_work_item(other, "runnable, asleep, with a timer", plan_status="ready")
    timers.add_timer(other, after_ms=60_000, purpose="sleep")
    fall_asleep(other)
    create_agent("idle")  # no work at all
    rep = audit_home()
    assert rep["findings"] == [], rep
    assert rep["ok"] and rep["agents"] == 3 and rep["messages"] == 2


def test_an_asleep_agent_with_runnable_work_and_no_wake_is_a_finding() -> None:
    store = create_agent("stuck")
    wi = create_work_item(store, "never picked up again", plan_status="ready")
    fall_asleep(store)
    rep = audit_home()
    assert kinds(rep) == [("stuck", "no_future_wake")]
    assert (
        wi["work_item"]["id"] in rep["findings"][0]["detail"]
        and "asleep" in rep["findings"][0]["detail"]
    )
    assert not rep["ok"]


@pytest.mark.parametrize("wake", ["message", "timer", "recheck", "hint", "sleep_deadline"])
def test_each_kind_of_future_wake_clears_the_finding(wake: str) -> None:
    store = create_agent("stuck")
    wi = create_work_item(store, "runnable", plan_status="ready")
    fall_asleep(store)
    assert kinds(audit_home()) == [("stuck", "no_future_wake")]
    if wake == "message":
        admit("wake up", store=store)
    elif wake == "timer":
        timers.add_timer(store, after_ms=3_600_000)
    elif wake == "recheck":
        blocked = create_work_item(store, "waits on CI", plan_status="ready")
        update_work_item(
            store, blocked["work_item"]["id"], blocked_by="CI is red", recheck_after_ms=60_000
        )
    else:

        def mutate(st: Any) -> None:
            if wake == "hint":
                st["pending_wake_hint"] = {"source": "ci", "received_at": clock.now_iso()}
            else:
                st["sleeping_until"] = clock.iso(clock.now() + 60)

        store.update_state(mutate)
    assert audit_home()["findings"] == [], wi


def test_a_held_continuation_of_an_awake_agent_is_a_finding() -> None:
    from holon_cli.runtime.workitems import pick_work_item

    store = create_agent("held")
    wi = create_work_item(store, "current but held", plan_status="ready")
    pick_work_item(store, wi["work_item"]["id"], reason="test")
    rev = open_agent("held")
    from holon_cli.runtime.workitems import load

    item = load(rev).items[wi["work_item"]["id"]]

    def hold(st: Any) -> None:
        st["work_continuation_hold"] = {
            "work_item_id": wi["work_item"]["id"],
            "rev": item.get("rev"),
            "reason": "context_length_exceeded",
            "held_at": clock.now_iso(),
            "turn_id": None,
        }

    store.update_state(hold)
    rep = audit_home()
    assert kinds(rep) == [("held", "no_future_wake")]
    assert "held" in rep["findings"][0]["detail"]


def test_stopped_and_paused_agents_with_work_are_held_findings() -> None:
    """Held by the operator on purpose, not stuck: a finding of its own
    (``held``, naming the hold and how to lift it), never ``no_future_wake``."""
    from holon_cli.runtime.agents.lifecycle import set_lifecycle

    for aid in ("s", "p", "idle"):
        store = create_agent(aid)
        if aid != "idle":
            create_work_item(store, "runnable", plan_status="ready")
        fall_asleep(store)
    set_lifecycle("s", "stop")
    set_lifecycle("idle", "stop")  # held, but with no work: nothing waits on it

    def pause(st: Any) -> None:
        st["status"] = "paused"

    open_agent("p").update_state(pause)
    rep = audit_home()
    assert kinds(rep) == [("p", "held"), ("s", "held")]
    p, s = rep["findings"]
    assert "paused by the operator" in p["detail"] and "`holon agent start p`" in p["detail"]
    assert "stopped by the operator" in s["detail"] and "runnable work item(s)" in s["detail"]


def test_a_message_that_lost_its_queue_entry_is_a_missing_outcome() -> None:
    store = open_agent(None)
    env = admit("lost", ingest_now=True)
    snap = json.loads(store.layout.queue_file.read_text())
    snap["entries"] = [e for e in snap["entries"] if e["message_id"] != env["id"]]
    store.layout.queue_file.write_text(json.dumps(snap))
    rep = audit_home()
    assert kinds(rep) == [("main", "missing_outcome")]
    assert env["id"] in rep["findings"][0]["detail"]


def test_two_outcomes_for_one_message_is_a_finding(tmp_path: Path) -> None:
    store = open_agent(None)
    env = admit("once")
    run_turn(None, cli_model=script(tmp_path, [{"text": "ok"}]), catalog=default_catalog())
    store.ledger("queue").append(
        {
            "v": 2,
            "op": "status",
            "message_id": env["id"],
            "status": "aborted",
            "at": clock.now_iso(),
        }
    )
    rep = audit_home()
    assert kinds(rep) == [("main", "duplicate_outcome")]
    assert "processed, aborted" in rep["findings"][0]["detail"]


def test_a_requeued_message_starts_a_new_admission(tmp_path: Path) -> None:
    store = open_agent(None)
    env = admit("retry me", ingest_now=True)
    with store.lock():
        st = q.load(store)
        q.set_status(store, st, env["id"], "dequeued", turn_id="turn_x")
        q.set_status(store, st, env["id"], "aborted", reason="test")
    q.requeue(store, env["id"])
    assert audit_home()["findings"] == []
    run_turn(None, cli_model=script(tmp_path, [{"text": "ok"}]), catalog=default_catalog())
    assert audit_home()["findings"] == []


def test_a_damaged_agent_is_a_finding_and_the_others_are_still_audited() -> None:
    bad = create_agent("bad")
    create_agent("missing")
    stuck = create_agent("stuck")
    create_work_item(stuck, "runnable", plan_status="ready")
    fall_asleep(stuck)
    with open(bad.ledger("queue").path, "ab") as f:
        f.write(b"{not json}\n" + json.dumps({"v": 2, "op": "status"}).encode() + b"\n")
    open_agent("missing").layout.agent_file.unlink()
    rep = audit_home()
    assert sorted(kinds(rep)) == [
        ("bad", "damaged"),
        ("missing", "damaged"),
        ("stuck", "no_future_wake"),
    ]
    bad_detail = next(f["detail"] for f in rep["findings"] if f["agent_id"] == "bad")
    assert "queue.jsonl" in bad_detail


def test_the_audit_takes_no_lock_and_writes_nothing(tmp_path: Path) -> None:
    store = create_agent("stuck")
    create_work_item(store, "runnable", plan_status="ready")
    fall_asleep(store)
    admit("queued", store=open_agent(None))

    def tree() -> dict[str, tuple[int, int]]:
        return {
            str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in Path(store.layout.home).parent.rglob("*")
            if p.is_file()
        }

    before = tree()
    with store.lock():  # a turn or tick holding the agent lock does not block the audit
        assert kinds(audit_home()) == [("stuck", "no_future_wake")]
    assert tree() == before


def test_a_message_held_by_a_killed_turn_is_an_interrupted_turn() -> None:
    store = open_agent(None)
    env = admit("taken by a turn that died", ingest_now=True)
    with store.lock():
        st = q.load(store)
        q.set_status(store, st, env["id"], "dequeued", turn_id="turn_dead")
    rep = audit_home()
    assert kinds(rep) == [("main", "interrupted_turn")]
    assert env["id"] in rep["findings"][0]["detail"]
    lock = store.turn_lock()
    lock.try_acquire()  # a live turn holds it: the message is being worked on
    try:
        assert audit_home()["findings"] == []
    finally:
        lock.release()


@pytest.mark.parametrize("hold", ["no_progress_guard", "budget_exhausted"])
def test_agents_held_by_a_safety_rule_are_held_not_stuck(hold: str, holon_home: Path) -> None:
    """The guard and a spent budget hold an agent on purpose: a ``held``
    finding naming the rule, not a missing wake."""
    store = create_agent("held-safe")
    create_work_item(store, "runnable", plan_status="ready")
    fall_asleep(store)
    assert kinds(audit_home()) == [("held-safe", "no_future_wake")]

    if hold == "no_progress_guard":

        def hold_it(st: Any) -> None:
            st["no_progress"] = {
                "activation": "wq:x",
                "turns": 3,
                "work_item_id": None,
                "since": clock.now_iso(),
                "last_turn_id": "turn_1",
            }

        store.update_state(hold_it)
    else:  # a zero budget that stopped the agent's last turn
        (holon_home / "config.yaml").write_text("budgets:\n  tokens_per_day: 0\n")

        def stopped(st: Any) -> None:
            st["last_closure"] = {
                "outcome": "waiting",
                "runtime_posture": "asleep",
                "waiting_reason": "budget_exhausted",
            }

        store.update_state(stopped)
    rep = audit_home()
    assert kinds(rep) == [("held-safe", "held")]
    detail = rep["findings"][0]["detail"]
    if hold == "no_progress_guard":
        assert "no-progress guard" in detail and "holon enqueue --agent held-safe" in detail
    else:
        assert "budget tokens_per_day is exhausted: 0 used of 0" in detail
        assert "budgets.tokens_per_day" in detail
