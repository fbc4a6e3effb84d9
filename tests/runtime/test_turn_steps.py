"""The turn's step hook (``runtime/turn/steps.py``): each provider round and
each tool call goes through it in order, after the journal holds it; a
replayed turn re-walks the journal through it first and sends nothing twice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import Journal, run_turn
from holon_cli.runtime.turn.steps import DIRECT, StepRecord, differs
from holon_cli.tools.catalog import default_catalog


class Crash(BaseException):
    """The process dying here: nothing in the turn catches it."""


class Steps:
    """A recorder that keeps what it is told; ``crash_at``: die after that
    step's ``fn`` ran (the journal holds it, the recorder does not)."""

    def __init__(self, crash_at: int | None = None) -> None:
        self.log: list[tuple[str, StepRecord | None]] = []
        self.crash_at = crash_at
        self.tools_on_disk: list[bool] = []  # at each answered round: earlier calls journaled

    def _note(self, how: str, rec: StepRecord | None) -> None:
        self.log.append((how, rec))
        if self.crash_at is not None and len(self.log) == self.crash_at:
            raise Crash()

    def replayed(self, record: StepRecord) -> None:
        self.log.append(("replayed", record))

    def round(self, n: int, fn: Callable[[], StepRecord | None]) -> None:
        rec = fn()
        assert rec is None or rec["round"] == n
        if rec is not None:
            calls = [r["call_id"] for _how, r in self.log if r and r["kind"] == "tool"]
            on_disk = Journal.load(open_agent(None))
            assert on_disk is not None
            self.tools_on_disk.append(set(calls) <= set(on_disk.recorded_results()))
        self._note("round", rec)

    def tool(self, call_id: str, fn: Callable[[], StepRecord]) -> None:
        rec = fn()
        assert rec["call_id"] == call_id
        self._note("tool", rec)


def script(tmp_path: Path, steps: list[Any]) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"steps": steps, "loop": False}))
    return f"scripted:{p}"


def echo(n: int) -> dict[str, Any]:
    return {
        "text": f"round {n}",
        "usage": {"input_tokens": 10 * n, "output_tokens": 2},
        "tool_calls": [
            {"name": "ExecCommand", "arguments": {"cmd": f"echo {n} >> ran.log"}, "id": f"c{n}"}
        ],
    }


def summary(log: list[tuple[str, StepRecord | None]]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for how, rec in log:
        if rec is None:
            out.append((how, None))
        elif rec["kind"] == "round":
            out.append((how, ("round", rec["round"], tuple(rec["calls"]))))
        else:
            out.append((how, ("tool", rec["call_id"], rec["ok"])))
    return out


def ran(store: Any) -> list[str]:
    p = store.layout.home / "ran.log"
    return p.read_text().split() if p.exists() else []


def test_each_round_and_tool_call_goes_through_the_hook_in_order(tmp_path: Path) -> None:
    model = script(tmp_path, [echo(1), echo(2), {"text": "done"}])
    store = open_agent(None)
    admit("go")
    steps = Steps()
    res = run_turn(None, cli_model=model, catalog=default_catalog(), steps=steps)
    assert res.status == "completed" and res.model_rounds == 3
    assert summary(steps.log) == [
        ("round", ("round", 1, ("c1",))),
        ("tool", ("tool", "c1", True)),
        ("round", ("round", 2, ("c2",))),
        ("tool", ("tool", "c2", True)),
        ("round", ("round", 3, ())),
    ]
    assert steps.tools_on_disk == [True, True, True]
    rounds = [r for how, r in steps.log if how == "round" and r is not None]
    assert [r.get("usage", {}).get("input_tokens") for r in rounds] == [10, 20, None]
    assert ran(store) == ["1", "2"]


def test_a_crash_after_the_journal_and_before_the_record_replays_without_resending(
    tmp_path: Path,
) -> None:
    # three scripted answers and no loop: a re-sent round would exhaust the script
    model = script(tmp_path, [echo(1), echo(2), {"text": "done"}])
    store = open_agent(None)
    mid = admit("go")["id"]
    with pytest.raises(Crash):
        run_turn(None, cli_model=model, catalog=default_catalog(), steps=Steps(crash_at=3))
    assert ran(store) == ["1"]  # round 2's call never started
    again = Steps()
    res = run_turn(None, cli_model=model, catalog=default_catalog(), steps=again)
    assert res.status == "completed" and res.message_id == mid and res.replayed
    assert summary(again.log) == [
        ("replayed", ("round", 1, ("c1",))),
        ("replayed", ("tool", "c1", True)),
        ("replayed", ("round", 2, ("c2",))),  # the record the crash lost, from the journal
        ("tool", ("tool", "c2", False)),  # in flight at the crash: interrupted, not run
        ("round", ("round", 3, ())),
    ]
    assert ran(store) == ["1"]


def test_replayed_records_compare_equal_to_the_live_ones(tmp_path: Path) -> None:
    model = script(tmp_path, [echo(1), echo(2), {"text": "done"}])
    admit("go")
    live = Steps(crash_at=4)  # dies after tool c2 is journaled
    with pytest.raises(Crash):
        run_turn(None, cli_model=model, catalog=default_catalog(), steps=live)
    again = Steps()
    run_turn(None, cli_model=model, catalog=default_catalog(), steps=again)
    replayed = [r for how, r in again.log if how == "replayed"]
    assert len(replayed) == 4
    for old, new in zip([r for _h, r in live.log], replayed, strict=True):
        assert old is not None and differs(old, new) == []
    assert "usage" not in replayed[0]  # live rounds only
    assert differs(replayed[0], replayed[2]) == ["round", "calls", "text_sha"]


def test_a_round_without_an_answer_is_no_step(tmp_path: Path) -> None:
    model = script(tmp_path, [{"fail": {"kind": "client_error", "message": "no", "status": 400}}])
    admit("go")
    steps = Steps()
    res = run_turn(None, cli_model=model, catalog=default_catalog(), steps=steps)
    assert res.status == "aborted"
    assert steps.log == [("round", None)]


def test_the_default_hook_records_nothing_and_runs_each_step() -> None:
    ran_: list[int] = []
    DIRECT.round(1, lambda: ran_.append(1) or None)
    DIRECT.tool("c", lambda: ran_.append(2) or {"kind": "tool"})
    DIRECT.replayed({"kind": "round", "round": 1})
    assert ran_ == [1, 2]
