"""Issue 29 items 1-2: ``retention`` applied by ``holon home gc`` (and
serve's daily pass): closed segments age out, the home is kept under
``max_home_bytes`` oldest first, nothing unsettled is dropped, readers say
where history now starts, and ``home check`` reports usage."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.home.gc import gc_home
from holon_cli.store import ledger as L
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import HomeLayout

DAY = 86400.0


@pytest.fixture(autouse=True)
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(L, "SEGMENT_BYTES", 4000)


def config(text: str) -> None:
    cfg = HomeLayout.current().config
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(text)


def emit(store: AgentStore, n: int, pad: int = 50) -> None:
    for i in range(n):
        store.emit("agent_state_changed", {"i": i, "pad": "p" * pad})


def age(paths: list[Path], days: float) -> None:
    t = time.time() - days * DAY
    for p in paths:
        os.utime(p, (t, t))


def j(res: Any) -> dict[str, Any]:
    return json.loads(res.stdout)


def test_gc_drops_closed_segments_past_their_days_and_keeps_the_rest() -> None:
    store = open_agent(None)
    emit(store, 150)
    old = store.events.closed_segments()
    assert len(old) >= 3
    age(old[:2], 40)
    age(old[2:], 5)
    for i in range(30):
        store.ledger("transcript").append({"kind": "note", "text": f"t{i}", "at": "x"})
    config("retention:\n  events_days: 30\n")
    last = store.events.last()["event_seq"]
    report = gc_home()
    assert [d["path"] for d in report["dropped"]] == [str(p) for p in old[:2]]
    assert all(d["reason"] == "age" and d["age_days"] >= 39 for d in report["dropped"])
    # the open events and transcript segments were closed first; transcript has no limit
    assert {c["ledger"] for c in report["closed"]} == {"events", "transcript"}
    assert len(store.ledger("transcript").records()) == 30
    left = AgentStore(store.layout).events.records()
    assert left[-1]["event_seq"] == last and left[0]["event_seq"] > 1
    trimmed = store.events.trimmed()
    assert trimmed is not None and trimmed["through_seq"] == left[0]["event_seq"] - 1
    assert trimmed["segments"] == 2
    # numbering goes on above everything ever written
    assert store.emit("agent_state_changed", {})["event_seq"] == last + 1


def test_zero_days_keeps_nothing_but_the_open_segment(script_runner: Any) -> None:
    store = open_agent(None)
    emit(store, 60)
    config("retention:\n  events_days: 0\n  transcript_days: 0\n")
    res = script_runner.run(["holon", "home", "gc", "--json"])
    assert res.returncode == 0, res.stderr
    assert j(res)["data"]["dropped"]
    assert store.events.closed_segments() == []
    assert store.events.records() == []
    emit(store, 1)
    assert len(store.events.records()) == 1
    # status and tail say where history starts
    st = j(script_runner.run(["holon", "status", "--json"]))["data"]
    assert st["history_trimmed"]["events"]["through_seq"] == st["last_event_seq"] - 1
    tail = script_runner.run(["holon", "tail", "--limit", "5"])
    assert tail.returncode == 0 and "dropped by retention" in tail.stderr
    assert "agent_state_changed" in tail.stdout


def test_dry_run_changes_nothing() -> None:
    store = open_agent(None)
    emit(store, 80)
    age(store.events.closed_segments(), 10)
    config("retention:\n  events_days: 1\n")
    before = sorted(p.name for p in store.events.segments_dir.iterdir())
    size = store.events.size()
    report = gc_home(dry_run=True)
    assert report["dry_run"] and report["dropped"]
    assert sorted(p.name for p in store.events.segments_dir.iterdir()) == before
    assert store.events.size() == size
    assert store.events.trimmed() is None
    # issue 36 §6: the preview names the closes `gc` then makes, as it makes them
    would = {(c["agent_id"], c["ledger"], c["path"]) for c in report["closed"]}
    assert all(c["open_path"].endswith(".jsonl") for c in report["closed"])
    done = gc_home()
    assert {(c["agent_id"], c["ledger"], c["path"]) for c in done["closed"]} == would


def test_max_home_bytes_drops_oldest_history_first_across_agents() -> None:
    a = open_agent(None)
    from holon_cli.runtime.agents.lifecycle import create_agent

    create_agent("b")
    b = open_agent("b")
    emit(a, 100, pad=200)
    emit(b, 100, pad=200)
    age(a.events.closed_segments(), 3)  # a's history is older
    home = HomeLayout.current().root
    from holon_cli.store.retention import tree_bytes

    total = tree_bytes(home)
    limit = total - 8000
    config(f"retention:\n  max_home_bytes: {limit}\n")
    report = gc_home()
    assert report["home_bytes"] <= limit and not report["over_max_home_bytes"]
    reasons = [(d["agent_id"], d["reason"]) for d in report["dropped"]]
    assert reasons and all(r == "max_home_bytes" for _, r in reasons)
    assert reasons[0][0] == "main"  # the oldest went first
    assert tree_bytes(home) <= limit


def test_nothing_unsettled_is_dropped_even_over_the_limit() -> None:
    store = open_agent(None)
    for i in range(20):
        admit(f"message {i} " + "m" * 300, agent_id=store.agent_id)
    queue = store.ledger("queue").path
    q_before = queue.read_bytes() if queue.exists() else b""
    inbox = sorted(p.name for p in (store.layout.inbox_dir / "new").iterdir())
    config("retention:\n  max_home_bytes: 1\n  events_days: 0\n  transcript_days: 0\n")
    report = gc_home()
    assert report["over_max_home_bytes"]
    assert (queue.read_bytes() if queue.exists() else b"") == q_before
    assert sorted(p.name for p in (store.layout.inbox_dir / "new").iterdir()) == inbox
    assert store.read_record()["identity"]
    # the queue ingests and runs as before
    from holon_cli.runtime import queue as q

    q.try_ingest(store)
    assert q.pending_count(store, q.load(store)) == 20


def test_outputs_days_prunes_finished_outputs(tmp_path: Path) -> None:
    store = open_agent(None)
    out = store.layout.runtime / "outputs"
    out.mkdir(parents=True, exist_ok=True)
    old, new = out / "old.log", out / "new.log"
    old.write_text("o" * 100)
    new.write_text("n" * 100)
    age([old], 3)
    config("retention:\n  outputs_days: 2\n")
    report = gc_home()
    assert report["outputs"]["removed"] == 1
    assert not old.exists() and new.exists()


def test_home_check_reports_usage_per_agent_and_kind_and_warns(script_runner: Any) -> None:
    store = open_agent(None)
    emit(store, 60)
    store.events.close_segment()
    res = script_runner.run(["holon", "home", "check", "--json"])
    d = j(res)["data"]
    use = d["usage"]["agents"]["main"]
    assert use["bytes"] == sum(use["by_kind"].values())
    assert use["by_kind"]["events"] > 0 and use["by_kind"]["workspace"] > 0
    assert d["usage"]["max_home_bytes"] is None
    assert not any(n.get("kind") == "over_max_home_bytes" for n in d["notes"])
    config("retention:\n  max_home_bytes: 1000\n")
    res = script_runner.run(["holon", "home", "check", "--json"])
    d = j(res)["data"]
    assert res.returncode == 0 and d["usage"]["max_home_bytes"] == 1000
    (note,) = [n for n in d["notes"] if n.get("kind") == "over_max_home_bytes"]
    assert "holon home gc" in note["message"]
    plain = script_runner.run(["holon", "home", "check"])
    assert "over retention.max_home_bytes" in plain.stderr


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("retention:\n  events_days: -1\n", "retention.events_days"),
        ("retention:\n  max_home_bytes: 10GB\n", "retention.max_home_bytes"),
        ("retention:\n  keep_days: 3\n", "retention.keep_days"),
        ("retention:\n  min_free_bytes: true\n", "retention.min_free_bytes"),
    ],
)
def test_a_bad_retention_setting_names_its_key(script_runner: Any, text: str, key: str) -> None:
    store = open_agent(None)
    emit(store, 40)
    segs = store.events.closed_segments()
    config(text)
    res = script_runner.run(["holon", "home", "gc", "--json"])
    assert res.returncode == 2
    err = j(res)["error"]
    assert err["kind"] == "config_error" and key in err["message"]
    assert store.events.closed_segments() == segs  # nothing was touched


def test_gc_text_output(script_runner: Any) -> None:
    store = open_agent(None)
    emit(store, 60)
    age(store.events.closed_segments(), 9)
    config("retention:\n  events_days: 7\n")
    res = script_runner.run(["holon", "home", "gc", "--dry-run"])
    assert res.returncode == 0
    assert "would drop main events" in res.stdout and "dry run:" in res.stdout
    assert "would close main events" in res.stdout and "would be closed" in res.stdout
    res = script_runner.run(["holon", "home", "gc"])
    assert "dropped main events" in res.stdout


def test_transcript_json_and_text_say_where_history_starts(script_runner: Any) -> None:
    store = open_agent(None)
    for i in range(60):
        store.ledger("transcript").append(
            {"kind": "note", "text": f"t{i}", "at": f"2026-01-01T00:{i:02d}:00Z"}
        )
    config("retention:\n  transcript_days: 0\n")
    gc_home()
    store.ledger("transcript").append({"kind": "note", "text": "new", "at": "2026-02-01"})
    d = j(script_runner.run(["holon", "transcript", "--json"]))["data"]
    assert [e["text"] for e in d["entries"]] == ["new"]
    assert d["trimmed"]["before"] == "2026-01-01T00:59:00Z"
    res = script_runner.run(["holon", "transcript"])
    assert "transcript history up to 2026-01-01T00:59:00Z was dropped" in res.stderr


def test_next_gc_is_a_day_after_the_last_one_across_restarts() -> None:
    from holon_cli.runtime.home import gc as RT

    assert RT.next_gc_in(1000.0) == RT.GC_FIRST_DELAY_S  # never ran: soon after start
    RT.scheduled_gc(now=1000.0)
    assert RT.next_gc_in(1000.0 + 3600) == pytest.approx(DAY - 3600)
    assert RT.next_gc_in(1000.0 + 2 * DAY) == RT.GC_FIRST_DELAY_S


@pytest.mark.slow
def test_serve_applies_retention_on_its_schedule() -> None:
    import threading

    from holon_cli.serve.loop import Scheduler

    store = open_agent(None)
    emit(store, 60)
    config("retention:\n  events_days: 0\n")
    lines: list[str] = []
    sch = Scheduler(concurrency=1, sweep_s=3600, gc_s=0.3, log=lines.append)
    th = threading.Thread(target=sch.run, daemon=True)
    th.start()
    try:
        end = time.monotonic() + 10
        while not any(x.startswith("retention:") for x in lines) and time.monotonic() < end:
            time.sleep(0.05)
    finally:
        sch.stop()
        th.join(5)
    (line,) = [x for x in lines if x.startswith("retention:")][:1]
    assert "dropped" in line
    assert store.events.closed_segments() == [] and store.events.trimmed() is not None
    assert (HomeLayout.current().run_dir / "retention.json").exists()


def test_enqueue_wait_finds_the_final_text_in_a_segment_closed_meanwhile() -> None:
    from holon_cli.runtime import outcome

    store = open_agent(None)
    for i in range(30):
        store.ledger("transcript").append({"kind": "note", "text": f"old {i} " + "o" * 80})
    since = outcome.marks(store)
    store.ledger("transcript").append(
        {"kind": "turn_terminal", "turn_id": "turn_x", "text": "the answer"}
    )
    store.ledger("transcript").close_segment()  # serve's daily pass, before the waiter reads
    store.ledger("transcript").append({"kind": "note", "text": "later"})
    assert outcome._final_text(store, "turn_x", since.transcript) == "the answer"
