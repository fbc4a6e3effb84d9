"""``tick --all`` through the wake index (runtime/wake.py): an agent is
ticked when something of it changed, when it has work, or when a deadline
came; every other agent costs a lookup. Checked against a mixed home, a
writer killed between its write and anything after it, a pass killed after
its claim, and ``home check`` / ``--repair`` of the index."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime import tick as tick_mod
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent, set_lifecycle
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.tick import tick_all
from holon_cli.store import wake as W


@pytest.fixture
def ticked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The agents each ``tick_all`` really ticked (the others were looked up)."""
    seen: list[str] = []
    real = tick_mod._tick_one

    def counting(aid: str) -> dict[str, Any]:
        seen.append(aid)
        return real(aid)

    monkeypatch.setattr(tick_mod, "_tick_one", counting)
    yield seen


def _pass(seen: list[str]) -> tuple[set[str], dict[str, dict[str, Any]]]:
    seen.clear()
    out = {r["agent_id"]: r for r in tick_all()}
    return set(seen), out


def _mixed_home(now: list[float]) -> None:
    from holon_cli.runtime.waiting.scheduler import after_turn

    for aid in ("idle", "queued", "sleeper", "worker", "blocked", "paused", "stopped"):
        create_agent(aid)
    admit("waiting for a turn", agent_id="queued")
    s = open_agent("sleeper")
    s.update_state(lambda st: st.update(status="asleep"))
    after_turn(s, sleep_ms=600_000)
    w = open_agent("worker")
    wid = wi.create_work_item(w, "runnable work")["work_item"]["id"]
    wi.pick_work_item(w, wid)
    b = open_agent("blocked")
    bid = wi.create_work_item(b, "blocked work")["work_item"]["id"]
    wi.update_work_item(b, bid, blocked_by="the upstream fix", recheck_after_ms=3_600_000)
    set_lifecycle("paused", "pause")
    set_lifecycle("stopped", "stop")


def test_a_second_pass_ticks_only_agents_with_work(
    holon_home: Path, now: list[float], ticked: list[str]
) -> None:
    _mixed_home(now)
    first, out1 = _pass(ticked)
    assert first == {"idle", "queued", "sleeper", "worker", "blocked", "paused", "stopped"}
    assert W.snapshot_path(holon_home).exists()
    second, out2 = _pass(ticked)
    # queued: a turn is due; worker: its activation is queued (a turn is due)
    assert second == {"queued", "worker"}
    # the skipped agents say what their last tick said
    for aid in ("idle", "sleeper", "blocked"):
        assert out2[aid]["actions"] == [] and out2[aid]["idle_reason"] == out1[aid]["idle_reason"]
    assert out2["paused"].get("skipped") == "paused" and out2["stopped"].get("skipped") == "stopped"
    third, _ = _pass(ticked)
    assert third == {"queued", "worker"}


def test_deadlines_and_changes_wake_the_right_agent(
    holon_home: Path, now: list[float], ticked: list[str]
) -> None:
    _mixed_home(now)
    _pass(ticked)
    _pass(ticked)
    base = {"queued", "worker"}
    # the sleeper's timer comes due: it is ticked and woken
    now[0] += 601
    got, out = _pass(ticked)
    assert got == base | {"sleeper"}
    assert "woke" in [a["action"] for a in out["sleeper"]["actions"]]
    # the blocked item's recheck comes due
    now[0] += 3600
    got, out = _pass(ticked)
    assert "blocked" in got
    assert "recheck_reminder" in [a["action"] for a in out["blocked"]["actions"]]
    # a message to an idle agent
    _pass(ticked)
    admit("hello", agent_id="idle")
    got, _ = _pass(ticked)
    assert "idle" in got
    # a paused agent started again
    set_lifecycle("paused", "start")
    got, _ = _pass(ticked)
    assert "paused" in got
    # a work item made for an agent outside a turn (`holon workitem create`)
    stopped_before = open_agent("stopped")
    set_lifecycle("stopped", "start")
    _pass(ticked)
    wi.create_work_item(stopped_before, "new work")
    got, out = _pass(ticked)
    assert "stopped" in got
    # a change of config.yaml: everyone is looked at again
    (holon_home / "config.yaml").write_text("runtime: {}\n")
    got, _ = _pass(ticked)
    assert got == {"idle", "queued", "sleeper", "worker", "blocked", "paused", "stopped"}


def test_a_new_agent_and_a_removed_one(holon_home: Path, ticked: list[str]) -> None:
    create_agent("a")
    _pass(ticked)
    create_agent("b")
    got, out = _pass(ticked)
    assert got == {"b"} and set(out) == {"a", "b"}
    import shutil

    shutil.rmtree(holon_home / "agents" / "b")
    got, out = _pass(ticked)
    assert got == set() and set(out) == {"a"}
    raw = W.read_raw(holon_home)
    assert raw is not None and set(raw["agents"]) == {"a"}


def test_a_writer_killed_between_its_write_and_the_index_loses_no_wake(
    holon_home: Path, ticked: list[str]
) -> None:
    store = create_agent("a")
    _pass(ticked)
    assert _pass(ticked)[0] == set()
    pid = os.fork()
    if pid == 0:  # marks, writes the message, dies before anything else
        try:
            W.mark(store.layout.home)
            admit_env = {"v": 2, "id": "msg_x", "kind": "agent_message"}
            store.inbox._deliver("msg_01killedwriter0000000", admit_env)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    got, out = _pass(ticked)
    assert got == {"a"}
    # the file is ingested (or quarantined): the tick saw it
    assert store.inbox.pending_count() == 0


def test_a_pass_killed_after_its_claim_leaves_the_agent_marked(
    holon_home: Path, ticked: list[str]
) -> None:
    create_agent("a")
    _pass(ticked)
    admit("x", agent_id="a")
    c = W.claim(holon_home, "a")  # a pass claims, then dies before merging
    assert c.path is not None
    got, _ = _pass(ticked)
    assert got == {"a"}
    assert not Path(c.path).exists()  # the dead pass's claim went with the merge


def test_idle_ticks_write_nothing_that_marks(holon_home: Path, ticked: list[str]) -> None:
    """A tick that finds nothing leaves no marker: the agent becomes quiet."""
    create_agent("a")
    _pass(ticked)
    assert W.marked(holon_home) == {}
    before = W.snapshot_path(holon_home).stat().st_mtime_ns
    assert _pass(ticked)[0] == set()
    assert W.snapshot_path(holon_home).stat().st_mtime_ns == before  # nothing to write


def test_home_check_finds_a_stale_late_entry_and_repair_rebuilds_the_index(
    holon_home: Path, ticked: list[str]
) -> None:
    from holon_cli.runtime.home.repair_planes import repair_all
    from holon_cli.runtime.inspect import home_check

    create_agent("a")
    create_agent("b")
    _pass(ticked)
    assert home_check()["ok"]
    # a message whose marker was lost (a writer of an older holon, a
    # power loss on a home without boot ids...)
    admit("lost wake", agent_id="a")
    for aid, names in W.marked(holon_home).items():
        for n in names:
            os.unlink(holon_home / "run" / "wake" / n)
    assert _pass(ticked)[0] == set()  # the index hides it
    report = home_check()
    assert not report["ok"]
    (p,) = report["problems"]
    assert "'a'" in p["message"] and "--repair" in p["message"]
    done = repair_all()
    assert any(a["action"] == "rebuilt" and a["path"].endswith("wake.json") for a in done)
    assert home_check()["ok"]
    got, _ = _pass(ticked)
    assert got == {"a"}


def test_a_damaged_index_is_a_finding_and_tick_looks_at_everyone(
    holon_home: Path, ticked: list[str]
) -> None:
    from holon_cli.runtime.home.repair_planes import repair_all
    from holon_cli.runtime.inspect import home_check

    create_agent("a")
    _pass(ticked)
    W.snapshot_path(holon_home).write_text("{damaged")
    assert not home_check()["ok"]
    assert _pass(ticked)[0] == {"a"}  # in doubt: everyone; the index is written again
    assert home_check()["ok"]
    W.snapshot_path(holon_home).write_text("{damaged")
    repair_all()
    assert home_check()["ok"] and _pass(ticked)[0] == set()


def test_a_damaged_agent_is_reported_and_looked_at_every_time(
    holon_home: Path, ticked: list[str]
) -> None:
    create_agent("a")
    create_agent("bad")
    (holon_home / "agents" / "bad" / ".holon" / "state" / "agent.json").write_text("{")
    got, out = _pass(ticked)
    assert out["bad"]["ok"] is False
    got, out = _pass(ticked)
    assert got == {"bad"} and out["bad"]["ok"] is False


@pytest.mark.slow
def test_an_agent_with_kept_outputs_is_due_when_the_oldest_ages_out(
    holon_home: Path, ticked: list[str]
) -> None:
    """Output pruning goes by the files' real mtimes (``time.time()``)."""
    import time

    from holon_cli.runtime.tasks.records import outputs_root
    from holon_cli.runtime.tasks.recovery import prune_due

    store = create_agent("a")
    out = outputs_root(store)
    out.mkdir(parents=True, exist_ok=True)
    f = out / "call_1.log"
    f.write_text("old output")
    aged = time.time() - 7 * 86400 + 0.8  # ages out in 0.8 s
    os.utime(f, (aged, aged))
    due = prune_due(store, {})
    assert due is not None and abs(due - (aged + 7 * 86400)) < 0.01
    _pass(ticked)
    assert _pass(ticked)[0] == set()
    time.sleep(max(0.0, due - time.time()) + 0.05)
    got, res = _pass(ticked)
    assert got == {"a"}
    assert "outputs_pruned" in [a["action"] for a in res["a"]["actions"]]
    assert not f.exists()


def test_serves_retention_pass_skips_the_home_walk_without_a_size_limit(
    holon_home: Path,
) -> None:
    from holon_cli.runtime.home.gc import gc_home, scheduled_gc
    from holon_cli.runtime.tasks.records import outputs_root

    create_agent("idle")
    out = outputs_root(create_agent("a"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "call_1.log").write_text("kept")  # something to look at: it is paced
    calls: list[int] = []
    r = scheduled_gc(pace=lambda: calls.append(1))
    assert r["home_bytes"] is None  # not measured
    assert 1 <= len(calls) <= 2  # paced for the one agent looked at; "idle" is left out
    assert isinstance(gc_home()["home_bytes"], int)  # `holon home gc` measures
    (holon_home / "config.yaml").write_text("retention: {max_home_bytes: 1000000000}\n")
    assert isinstance(scheduled_gc()["home_bytes"], int)


def test_serves_retention_pass_closes_an_open_segment_once_a_day_old(
    holon_home: Path, now: list[float]
) -> None:
    from holon_cli.runtime.home.gc import gc_home, scheduled_gc

    store = create_agent("a")
    store.emit("tick_completed", {"actions": []})
    assert scheduled_gc(now[0])["closed"] == []  # records of a moment ago: kept open
    now[0] += 13 * 3600  # the first record is now over half a day old
    (c,) = [c for c in scheduled_gc(now[0])["closed"] if c["ledger"] == "events"]
    assert c["agent_id"] == "a"
    store.emit("tick_completed", {"actions": []})
    assert [c["ledger"] for c in gc_home(now=now[0])["closed"]] == ["events"]  # every one


def test_a_removed_agent_leaves_no_marker(holon_home: Path) -> None:
    from holon_cli.runtime.agents.removal import remove_agent

    create_agent("gone")
    admit("x", agent_id="gone")
    set_lifecycle("gone", "stop")
    assert "gone" in W.marked(holon_home)
    remove_agent("gone", force=True)
    assert "gone" not in W.marked(holon_home)
