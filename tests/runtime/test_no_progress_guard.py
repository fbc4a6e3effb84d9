"""The no-progress guard (issue 21 §3): three turns for the same activation
without a tool call or a work-item change stop tick (and so serve) from
activating the agent again; an ``action_required`` brief says why; new
operator input lifts it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from inprocess_cli import bind_runner as bind_runner  # autouse: holon() runs in-process
from inprocess_cli import run as run_holon

from holon_cli.model.turn import NoProgressStreak, TurnProgress
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.budgets import guard

TEXT = {"text": "I will think about it.", "usage": {"input_tokens": 80, "output_tokens": 20}}
CALL = {"text": "checking", "tool_calls": [{"name": "AgentGet", "arguments": {}}]}


def data(*args: str) -> Any:
    res = run_holon(*args, "--json")
    assert res.returncode == 0, (args, res.stderr)
    return json.loads(res.stdout)["data"]


def use_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list[Any]) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump({"loop": True, "steps": steps}))
    monkeypatch.setenv("HOLON_MODEL", f"scripted:{path}")


def cycle() -> dict[str, Any]:
    """One cron minute: ``holon tick && holon turn``; returns the tick's view."""
    tick: dict[str, Any] = data("tick")["agents"][0]
    data("turn")
    return tick


def rounds() -> int:
    return sum(1 for e in open_agent().events.records() if e["kind"] == "provider_round_completed")


def guard_briefs() -> list[dict[str, Any]]:
    return [b for b in open_agent().ledger("briefs").records() if b.get("title")]


@pytest.fixture
def never_picked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The README's runaway: a work item the model never picks, a model that
    answers in text."""
    use_script(tmp_path, monkeypatch, [TEXT])
    wid: str = wi.create_work_item(open_agent(), "Upgrade httpx")["work_item"]["id"]
    return wid


def test_three_turns_without_progress_stop_activation(never_picked: str) -> None:
    ticks = [cycle() for _ in range(6)]
    assert [bool(t["actions"]) for t in ticks] == [True, True, True, False, False, False]
    assert rounds() == 3
    assert "no-progress guard" in ticks[3]["idle_reason"]
    (brief,) = guard_briefs()
    assert brief["visibility"] == "action_required" and brief["title"] == "no_progress_guard"
    assert "made no tool call and changed no work item" in brief["text"]
    assert "holon enqueue" in brief["text"]
    streak = open_agent().read_record()["state"]["no_progress"]
    assert streak is not None and streak["turns"] == 3


def test_operator_input_lifts_the_guard(never_picked: str) -> None:
    for _ in range(4):
        cycle()
    assert rounds() == 3
    data("enqueue", "pick the httpx item please")
    data("turn")
    assert open_agent().read_record()["state"]["no_progress"] is None
    ticks = [cycle() for _ in range(4)]
    assert [bool(t["actions"]) for t in ticks] == [True, True, True, False]
    assert rounds() == 7
    assert len(guard_briefs()) == 2


def test_a_tool_call_is_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # turn 1: text; turn 2: a tool call, then text; turns 3..: text
    use_script(tmp_path, monkeypatch, [TEXT, CALL, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT])
    wi.create_work_item(open_agent(), "Upgrade httpx")
    ticks = [cycle() for _ in range(6)]
    assert [bool(t["actions"]) for t in ticks] == [True, True, True, True, True, False]


def test_a_changed_work_item_is_a_new_activation(never_picked: str) -> None:
    for _ in range(4):
        cycle()
    data("workitem", "update", never_picked, "--objective", "Upgrade httpx to 0.28")
    assert cycle()["actions"], "an operator's change of the item is news: activate again"


def _progress(**kw: Any) -> TurnProgress:
    p: TurnProgress = {
        "turn_id": "t",
        "activation": "activate_queued:fp1",
        "work_item_id": None,
        "tool_calls": 0,
        "work_item_changed": False,
        "operator_input": False,
        "budget_stopped": False,
    }
    return {**p, **kw}  # type: ignore[typeddict-item]


def test_streak_rules() -> None:
    s1 = guard.next_streak(None, _progress())
    assert s1 is not None and s1["turns"] == 1
    s2 = guard.next_streak(s1, _progress())
    assert s2 is not None and s2["turns"] == 2
    # a timer or task result (no activation) and a budget stop leave it alone
    assert guard.next_streak(s2, _progress(activation=None)) == s2
    assert guard.next_streak(s2, _progress(budget_stopped=True)) == s2
    # another activation starts over; progress or operator input end it
    other = guard.next_streak(s2, _progress(activation="continue_active:fp2"))
    assert other is not None and other["turns"] == 1
    assert guard.next_streak(s2, _progress(tool_calls=1)) is None
    assert guard.next_streak(s2, _progress(work_item_changed=True)) is None
    assert guard.next_streak(s2, _progress(operator_input=True, activation=None)) is None
    s3 = guard.next_streak(s2, _progress())
    assert guard.notice(s2, s3) is not None
    assert guard.notice(s3, s3) is None  # a replay of the same settlement: once
    state: dict[str, NoProgressStreak | None] = {"no_progress": s3}
    assert guard.holds(state, "activate_queued:fp1")
    assert not guard.holds(state, "activate_queued:fp2")
