"""Issue 31 item 22: a cut ``events.jsonl`` never makes ``event_seq`` reuse
a number (the probe saw 25 -> 12), and ``holon home check`` says what happened."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from inprocess_cli import bind_runner as bind_runner  # autouse: holon() runs in-process
from inprocess_cli import run as run_holon

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.inspect import tail_events
from holon_cli.store.agent_store import AgentStore


def holon(*args: str) -> Any:
    import io

    return run_holon(*args, stdin=io.StringIO(""), env=dict(os.environ))


def _emit(store: AgentStore, n: int) -> list[int]:
    return [store.emit("agent_state_changed", {"i": i})["event_seq"] for i in range(n)]


def _cut_to_lines(path: Path, keep: int, extra: bytes = b"") -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:keep]) + extra)


def _problems() -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    res = holon("home", "check", "--json")
    obj = json.loads(res.stdout)
    if res.returncode == 0:
        return 0, [], obj["data"]["notes"]
    return res.returncode, obj["error"]["details"]["problems"], obj["error"]["details"]["notes"]


def test_a_cut_file_never_reuses_numbers(holon_home: Path) -> None:
    store = open_agent(None)
    seqs = _emit(store, 24)
    assert seqs[-1] == 25
    path = store.layout.ledger_path("events")
    _cut_to_lines(path, 12)
    code, problems, _ = _problems()
    assert code == 1
    (p,) = [p for p in problems if p["path"] == str(path) and "event_seq" in p["message"]]
    assert any("was cut" in q["message"] for q in problems if q["path"] == str(path))
    assert "ends at event_seq 12" in p["message"] and "up to 25" in p["message"]
    assert "next event is numbered 26" in p["message"]
    # a fresh handle (another process) numbers above the mark
    assert open_agent(None).emit("agent_state_changed", {})["event_seq"] == 26
    # a client resuming from its last id (25) gets the new event, nothing twice
    assert [e["event_seq"] for e in tail_events(open_agent(None), since=25)] == [26]
    # the hole stays visible as a note; nothing is a problem any more
    code, problems, notes = _problems()
    assert code == 0, problems
    assert any("jumps from 12 to 26" in n["message"] for n in notes)


def test_a_cut_mid_line_and_an_emptied_file(holon_home: Path) -> None:
    store = open_agent(None)
    _emit(store, 9)  # 1..10
    path = store.layout.ledger_path("events")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # mid-line: a torn tail plus lost lines
    assert _problems()[0] == 1
    assert open_agent(None).emit("agent_state_changed", {})["event_seq"] == 11
    path.write_bytes(b"")  # emptied
    code, problems, _ = _problems()
    assert code == 1 and any("up to 11" in p["message"] for p in problems)
    assert open_agent(None).emit("agent_state_changed", {})["event_seq"] == 12


def test_the_mark_sidecar_missing_or_damaged(holon_home: Path) -> None:
    store = open_agent(None)
    _emit(store, 3)  # 1..4
    mark = store.events.mark_path
    assert json.loads(mark.read_bytes())["high_water"] == 4
    assert json.loads(mark.read_bytes())["size"] == store.events.size()
    mark.unlink()  # a home from before the mark: the file is the truth
    assert _problems()[0] == 0
    assert open_agent(None).emit("agent_state_changed", {})["event_seq"] == 5
    mark.write_bytes(b"\xff\xfe garbage")
    code, problems, _ = _problems()
    assert code == 1
    assert any(p["path"] == str(mark) and "damaged" in p["message"] for p in problems)
    # appending still works (the ledger's last number) and rewrites the mark
    assert open_agent(None).emit("agent_state_changed", {})["event_seq"] == 6
    assert json.loads(mark.read_bytes())["high_water"] == 6


def test_repair_records_the_loss_and_rewrites_a_damaged_mark(holon_home: Path) -> None:
    store = open_agent(None)
    _emit(store, 9)  # 1..10
    path = store.layout.ledger_path("events")
    _cut_to_lines(path, 6)
    res = holon("home", "check", "--repair", "--json")
    assert res.returncode == 0, res.stdout
    (lost,) = [
        r for r in json.loads(res.stdout)["data"]["repairs"] if r["action"] == "loss_recorded"
    ]
    assert "events 7-10" in lost["detail"]
    last = open_agent(None).events.last()
    assert last is not None and last["event_seq"] == 11 and last["kind"] == "agent_state_repaired"
    assert last["data"]["lost_event_seq"] == [7, 10]
    store.events.mark_path.write_bytes(b"garbage")
    assert _problems()[0] == 1
    assert holon("home", "check", "--repair").returncode == 0
    assert json.loads(store.events.mark_path.read_bytes())["high_water"] == 11
    assert open_agent(None).emit("agent_state_changed", {})["event_seq"] == 12
