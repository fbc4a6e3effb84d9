"""The turn's I/O per round (issue 12.1): an append-only journal, one fsync
batch per round (at most 3 fsyncs), agent snapshots at turn start and end."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn
from holon_cli.runtime.turn.journal import Journal, journal_path
from holon_cli.tools.catalog import default_catalog


class Killed(BaseException):
    pass


def tool_rounds(tmp_path: Path, rounds: int, name: str, cmd: str = "true") -> str:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": cmd}}]}
        for _ in range(rounds - 1)
    ]
    steps.append({"text": "done", "usage": {"input_tokens": 5, "output_tokens": 1}})
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def test_at_most_three_fsyncs_per_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        # the scripted provider's own cursor file is the provider's I/O, not the turn's
        # (walking the frames: traceback.extract_stack also reads every source line)
        frame = sys._getframe(1)
        while frame is not None and "scripted.py" not in frame.f_code.co_filename:
            frame = frame.f_back
        if frame is None:
            counted.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)

    def fsyncs(rounds: int, name: str) -> int:
        admit(name)
        counted.clear()
        res = run_turn(
            None, cli_model=tool_rounds(tmp_path, rounds, name), catalog=default_catalog()
        )
        assert res.status == "completed" and res.model_rounds == rounds
        return len(counted)

    fsyncs(2, "warm")
    short, long = fsyncs(2, "short"), fsyncs(7, "long")
    assert (long - short) / 5 <= 3, (short, long)


def test_journal_is_append_only_and_ignores_a_torn_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admit("work")
    store = open_agent(None)
    marker = store.layout.home / "ran.txt"  # in the execution root: the default sandbox allows it
    real = default_catalog().execute
    calls = {"n": 0}

    def execute_then_kill(*a: Any, **k: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise Killed  # dies while the second round's call is in flight
        return real(*a, **k)

    monkeypatch.setattr(default_catalog(), "execute", execute_then_kill)
    model = tool_rounds(tmp_path, 3, "s", cmd=f"echo ran >> {marker}")
    with pytest.raises(Killed):
        run_turn(None, cli_model=model, catalog=default_catalog())
    monkeypatch.setattr(default_catalog(), "execute", real)
    lines = journal_path(store).read_bytes().splitlines()
    assert all(line.startswith(b'{"v":1,"op":') for line in lines)  # compact JSON records
    # a writer killed mid-append leaves a fragment: replay ignores it
    with open(journal_path(store), "ab") as f:
        f.write(b'{"v":1,"op":"item","item":{"role":"to')
    j = Journal.load(store)
    assert j is not None and j.rounds == 2 and len(j.items) == 4
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.status == "completed" and res.replayed and res.model_rounds == 3
    assert marker.read_text().splitlines() == ["ran"]  # the recorded call did not run again
    state = store.read_record()["state"]
    # totals count every successful round once, also across the crash
    assert state["total_model_rounds"] == 3
    assert state["total_input_tokens"] == 5
    assert not journal_path(store).exists()


def test_a_legacy_snapshot_journal_is_replayed(tmp_path: Path) -> None:
    from holon_cli.runtime import queue as q
    from holon_cli.store.fsio import write_snapshot

    env = admit("old build")
    store = open_agent(None)
    q.dequeue_next(store, "turn_old")
    write_snapshot(
        store.layout.state_dir / "turn_journal.json",
        {
            "v": 1,
            "turn_id": "turn_old",
            "message_id": env["id"],
            "rounds": 1,
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
            "timeline": [],
            "interject_ids": [],
            "items": [
                {"role": "user", "text": "old build", "tool_calls": []},
                {"role": "assistant", "text": "answered before the upgrade", "tool_calls": []},
            ],
        },
    )
    res = run_turn(None, cli_model=tool_rounds(tmp_path, 1, "unused"), catalog=default_catalog())
    assert res.replayed and res.final_text == "answered before the upgrade"
    assert not (store.layout.state_dir / "turn_journal.json").exists()
    assert not journal_path(store).exists()
