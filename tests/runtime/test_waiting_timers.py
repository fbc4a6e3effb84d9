"""Timers: the record, firing from tick, coalescing, cancel, the Sleep wake."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from holon_cli import clock
from holon_cli.errors import NotFoundError, RejectedError, UsageError
from holon_cli.model.timer import PUBLIC_FIELDS, advance, parse_duration_ms
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent, set_lifecycle
from holon_cli.runtime.tick import tick_agent
from holon_cli.runtime.waiting import timers
from holon_cli.store.agent_store import AgentStore

T0 = 1_780_000_000.0


def ef(env: dict[str, Any], camel: str) -> Any:
    """An envelope field under its camelCase or snake_case name."""
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return env[snake] if snake in env else env[camel]


@pytest.fixture
def now() -> Iterator[list[float]]:
    t = [T0]
    clock.set_clock(lambda: t[0])
    yield t
    clock.set_clock(None)


@pytest.fixture
def store(now: list[float]) -> AgentStore:
    return open_agent()


def queued(store: AgentStore) -> list[dict[str, Any]]:
    with store.lock():
        st = q.load(store)
        q.ingest(store, st)
    return [dict(q.load_envelope(store, e)) for e in st.pending()]


def timer_ticks(store: AgentStore) -> list[dict[str, Any]]:
    return [e for e in queued(store) if e["kind"] == "timer_tick"]


# ------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("text", "ms"),
    [("500ms", 500), ("90s", 90_000), ("5m", 300_000), ("2h", 7_200_000), ("1d", 86_400_000)],
)
def test_duration_forms(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "5", "5w", "-5m", "0s", "m", "five minutes", "1.2.3s"])
def test_bad_duration_names_the_forms(text: str) -> None:
    with pytest.raises(UsageError) as ei:
        parse_duration_ms(text, flag="--after")
    assert "500ms, 90s, 5m, 2h or 1d" in (ei.value.hint or "") and ei.value.exit_code == 2


def test_advance_is_the_first_schedule_point_after_now() -> None:
    assert advance(1000, 100, 1000) == (1100, 0)
    assert advance(1000, 100, 1050) == (1100, 0)
    assert advance(1000, 100, 1350) == (1400, 3)  # three scheduled fires were missed


# ------------------------------------------------------------------ add


def test_add_is_an_audit_event_not_a_message(store: AgentStore, now: list[float]) -> None:
    rec = timers.add_timer(store, after_ms=60_000, message="check CI")
    assert tuple(rec) == PUBLIC_FIELDS
    assert rec["id"].startswith("tmr_") and rec["status"] == "active"
    assert rec["next_fire_at"] == clock.iso(T0 + 60) and rec["every_ms"] is None
    assert rec["fire_count"] == 0 and rec["last_fired_at"] is None
    assert queued(store) == []
    assert [e["kind"] for e in store.events.records()][-1] == "timer_created"
    assert timers.list_timers(store) == [rec]
    # the snapshot and the ledger agree after a reload from the ledger alone
    timers.state_file(store, "timers").unlink()
    assert timers.list_timers(store) == [rec]


def test_add_rejects_bad_values_and_unknown_work_item(store: AgentStore) -> None:
    with pytest.raises(UsageError):
        timers.add_timer(store, after_ms=1000, every_ms=10)
    with pytest.raises(UsageError):
        timers.add_timer(store, after_ms=1000, message="x" * 5000)
    with pytest.raises(NotFoundError):
        timers.add_timer(store, after_ms=1000, work_item_id="wi_missing")
    set_lifecycle(None, "stop")
    with pytest.raises(RejectedError):
        timers.add_timer(store, after_ms=1000)
    assert timers.list_timers(store, include_all=True) == []


# ----------------------------------------------------------------- fire


def test_due_one_shot_fires_once_with_the_spec_envelope(
    store: AgentStore, now: list[float]
) -> None:
    rec = timers.add_timer(store, after_ms=1000, message="look at the deploy")
    assert tick_agent(store)["actions"] == []  # not due yet
    now[0] += 1
    actions = tick_agent(store)["actions"]
    assert [a["action"] for a in actions] == ["timer_fired"]
    (msg,) = timer_ticks(store)
    assert msg["origin"]["kind"] == "timer" and rec["id"] in msg["origin"].values()
    assert msg["trust"] == "trusted_system" and ef(msg, "deliverySurface") == "timer_scheduler"
    assert ef(msg, "sourceRefs")["timer_id"] == rec["id"]
    assert msg["body"] == {"type": "text", "text": "look at the deploy"}
    after = timers.list_timers(store, include_all=True)[0]
    assert after["status"] == "fired" and after["fire_count"] == 1
    assert after["last_fired_at"] == clock.iso(T0 + 1) and after["next_fire_at"] is None
    now[0] += 100
    assert tick_agent(store)["actions"] == [] or all(
        a["action"] != "timer_fired" for a in tick_agent(store)["actions"]
    )
    assert len(timer_ticks(store)) == 1


def test_default_text_names_the_timer(store: AgentStore, now: list[float]) -> None:
    rec = timers.add_timer(store, after_ms=10)
    now[0] += 1
    tick_agent(store)
    assert rec["id"] in timer_ticks(store)[0]["body"]["text"]


def test_repeating_timer_coalesces_missed_fires_into_one_message(
    store: AgentStore, now: list[float]
) -> None:
    rec = timers.add_timer(store, after_ms=60_000, every_ms=60_000)
    now[0] += 60 * 10 + 30  # ten scheduled fires passed while nothing ran
    actions = tick_agent(store)["actions"]
    fired = [a for a in actions if a["action"] == "timer_fired"]
    assert len(fired) == 1 and fired[0]["missed_fires"] == 9
    t = timers.list_timers(store)[0]
    assert t["fire_count"] == 1 and t["next_fire_at"] == clock.iso(T0 + 60 * 11)
    assert len(timer_ticks(store)) == 1
    # due again while the first timer_tick is still queued: only counts
    now[0] += 60
    actions = tick_agent(store)["actions"]
    assert [a["action"] for a in actions if a["timer_id"] == rec["id"]] == ["timer_coalesced"]
    assert len(timer_ticks(store)) == 1
    assert timers.list_timers(store)[0]["fire_count"] == 2
    # once that message was handled, the next fire admits a new one
    with store.lock():
        st = q.load(store)
        mid = st.pending()[0]["message_id"]
        q.set_status(store, st, mid, "dequeued", turn_id="t")
    q.settle(store, mid, "processed")
    now[0] += 60
    tick_agent(store)
    assert len(timer_ticks(store)) == 1 and timer_ticks(store)[0]["id"] != mid


def test_different_timers_never_coalesce(store: AgentStore, now: list[float]) -> None:
    timers.add_timer(store, after_ms=1000)
    timers.add_timer(store, after_ms=1000)
    now[0] += 2
    tick_agent(store)
    assert len(timer_ticks(store)) == 2


def test_a_crash_after_admission_does_not_duplicate_the_message(
    store: AgentStore, now: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    timers.add_timer(store, after_ms=1000, every_ms=60_000)
    now[0] += 2
    real = timers._append

    def crash(*a: Any, **kw: Any) -> None:
        if a[2] == "fired":
            raise KeyboardInterrupt  # the process dies between admit and ledger append
        real(*a, **kw)

    monkeypatch.setattr(timers, "_append", crash)
    with pytest.raises(KeyboardInterrupt):
        timers.fire_due(store)
    monkeypatch.setattr(timers, "_append", real)
    assert timers.list_timers(store)[0]["fire_count"] == 0
    actions = timers.fire_due(store)
    assert [a["action"] for a in actions] == ["timer_coalesced"]
    assert len(timer_ticks(store)) == 1
    assert timers.list_timers(store)[0]["fire_count"] == 1


def test_bound_work_item_is_carried(store: AgentStore, now: list[float]) -> None:
    from holon_cli.runtime import workitems as wi

    wid = wi.create_work_item(store, "watch the deploy")["work_item"]["id"]
    timers.add_timer(store, after_ms=10, work_item_id=wid)
    now[0] += 1
    tick_agent(store)
    assert ef(timer_ticks(store)[0], "workItemId") == wid


# --------------------------------------------------------------- cancel


def test_cancel(store: AgentStore, now: list[float]) -> None:
    rec = timers.add_timer(store, after_ms=1000)
    out = timers.cancel_timer(store, rec["id"])
    assert out["changed"] and out["timer"]["status"] == "cancelled"
    again = timers.cancel_timer(store, rec["id"])
    assert again["changed"] is False and again["previous_status"] == "cancelled"
    now[0] += 5
    tick_agent(store)
    assert timer_ticks(store) == []
    with pytest.raises(NotFoundError):
        timers.cancel_timer(store, "tmr_nope")


@pytest.mark.slow
def test_cancel_racing_a_fire_fires_once_or_not_at_all(store: AgentStore, now: list[float]) -> None:
    for _ in range(20):
        rec = timers.add_timer(store, after_ms=1)
        now[0] += 1
        results: dict[str, Any] = {}

        def fire(out: dict[str, Any] = results) -> None:
            out["fire"] = timers.fire_due(store)

        def cancel(out: dict[str, Any] = results, tid: str = rec["id"]) -> None:
            out["cancel"] = timers.cancel_timer(store, tid)

        a = threading.Thread(target=fire)
        b = threading.Thread(target=cancel)
        a.start()
        b.start()
        a.join()
        b.join()
        final = [t for t in timers.list_timers(store, include_all=True) if t["id"] == rec["id"]][0]
        msgs = [m for m in timer_ticks(store) if ef(m, "sourceRefs")["timer_id"] == rec["id"]]
        if final["status"] == "fired":
            assert len(msgs) == 1 and final["fire_count"] == 1
            assert results["cancel"]["changed"] is False
        else:
            assert final["status"] == "cancelled" and msgs == [] and final["fire_count"] == 0


# ------------------------------------------------------------ Sleep wake


def test_timed_sleep_wakes_through_a_timer(store: AgentStore, now: list[float]) -> None:
    from holon_cli.runtime.waiting.scheduler import after_turn

    store.update_state(lambda s: s.update(status="asleep"))
    (act,) = after_turn(store, sleep_ms=30_000)
    assert act["action"] == "sleep_timer_set"
    now[0] += 10
    assert tick_agent(store)["actions"] == []
    assert store.read_record()["state"]["status"] == "asleep"
    now[0] += 25
    acts = [a["action"] for a in tick_agent(store)["actions"]]
    assert acts[:2] == ["timer_fired", "woke"]
    (msg,) = timer_ticks(store)
    assert msg["metadata"]["timer_purpose"] == "sleep" and "sleep" in msg["body"]["text"]
    assert store.read_record()["state"]["status"] == "awake_idle"
    now[0] += 100
    tick_agent(store)
    assert len(timer_ticks(store)) == 1  # wakes once


def test_open_ended_sleep_stays_asleep_through_tick(store: AgentStore, now: list[float]) -> None:
    from holon_cli.runtime import workitems as wi

    wid = wi.create_work_item(store, "runnable work")["work_item"]["id"]
    wi.pick_work_item(store, wid)
    store.update_state(lambda s: s.update(status="asleep"))
    for _ in range(3):
        now[0] += 3600
        res = tick_agent(store)
        assert res["actions"] == [] and res["idle_reason"].startswith("asleep")
    assert queued(store) == [] and store.read_record()["state"]["status"] == "asleep"
