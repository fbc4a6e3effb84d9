"""`holon tick` and `holon status` as text a person reads (cron mail, a
terminal): no Python reprs, and status names what needs attention."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from holon_cli.cli.cmd_tick import describe_action

REPR = re.compile(r"[{}]|': |\[\'")


def j(res: Any) -> dict[str, Any]:
    return json.loads(res.stdout)


def test_tick_activation_is_one_readable_line(script_runner: Any) -> None:
    wid = j(script_runner.run(["holon", "workitem", "create", "ship the release", "--json"]))[
        "data"
    ]["work_item"]["id"]
    res = script_runner.run(["holon", "tick"])
    assert res.returncode == 0, res.stderr
    (line,) = res.stdout.splitlines()
    assert line.startswith("main: activated work items")
    assert wid in line and "system tick msg_" in line
    assert not REPR.search(line), line


@pytest.mark.parametrize(
    "action",
    [
        {"action": "ingested", "count": 2},
        {
            "action": "repaired_stale_run",
            "stale_run_id": "run_1",
            "from": "awake_running",
            "to": "awake_idle",
        },
        {"action": "recheck_reminder", "work_item_id": "wi_1"},
        {"action": "tasks_interrupted", "task_ids": ["task_1", "task_2"]},
        {"action": "outputs_pruned", "removed": 3, "freed_bytes": 10, "kept_bytes": 5},
        {"action": "timer_fired", "timer_id": "tmr_1", "fire_count": 1, "message_id": "msg_1"},
        {"action": "timer_coalesced", "timer_id": "tmr_1", "fire_count": 2, "message_id": "m"},
        {"action": "timer_skipped", "timer_id": "tmr_1", "reason": "agent_stopped"},
        {"action": "woke", "reason": "sleep_expired"},
        {"action": "sleep_timer_set", "timer_id": "tmr_2", "next_fire_at": "2026-01-01T00:00Z"},
        {"action": "hint_converted", "message_id": "msg_2", "coalesced_count": 4},
        {"action": "control_applied", "message_id": "msg_3", "control": "resume", "applied": True},
        {
            "action": "activated",
            "message_id": "msg_4",
            "work_signal": {
                "action": "review_triggered",
                "reactivation_mode": "review_triggered",
                "candidates": [{"work_item_id": "wi_2", "objective": "x"}],
                "text": "t",
            },
        },
        {"action": "something_new", "detail": {"nested": True}, "n": 1},
    ],
    ids=lambda a: a["action"],
)
def test_every_tick_action_reads_as_text(action: dict[str, Any]) -> None:
    text = describe_action(action)
    assert "\n" not in text and not REPR.search(text), text
    assert "None" not in text
    for v in action.values():
        if isinstance(v, (str, int)) and not isinstance(v, bool) and v != action["action"]:
            assert str(v) in text, (v, text)
