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


def _status(script_runner: Any) -> tuple[dict[str, Any], str]:
    res = script_runner.run(["holon", "status", "--json"])
    assert res.returncode == 0, res.stderr
    text = script_runner.run(["holon", "status"])
    assert text.returncode == 0, text.stderr
    return j(res)["data"], text.stdout


def test_status_shows_aborted_messages_the_last_failure_and_a_broken_config(
    script_runner: Any, tmp_path: Any
) -> None:
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.store.layout import HomeLayout

    d, text = _status(script_runner)
    assert d["aborted"] == 0 and d["aborted_messages"] == []
    assert d["last_failure"] is None and d["config_error"] is None
    keys = {line.split("  ")[0] for line in text.splitlines()}
    assert not keys & {"last failure", "config"}
    assert any(
        line.startswith("aborted") and line.rstrip().endswith("0") for line in text.splitlines()
    )

    # a turn whose model fails: the failure is persisted on the agent
    script = tmp_path / "fail.yaml"
    script.write_text('steps:\n  - fail: {kind: client_error, message: "the model said no"}\n')
    script_runner.run(["holon", "enqueue", "first"], check=True)
    script_runner.run(["holon", "turn", "--model", f"scripted:{script}"])
    # an aborted message, with its reason
    mid = script_runner.run(["holon", "enqueue", "second"], check=True).stdout.strip()
    store = open_agent(None)
    with store.lock():
        q.ingest(store, q.load(store))
    q.settle(store, mid, "aborted", reason="max_attempts_exceeded")
    # and a config.yaml that does not parse
    HomeLayout.current().config.write_text("runtime: [unclosed\n")

    d, text = _status(script_runner)
    assert d["aborted"] >= 1
    by_id = {m["message_id"]: m for m in d["aborted_messages"]}
    assert by_id[mid]["reason"] == "max_attempts_exceeded"
    assert [m["reason"] for m in by_id.values() if m["message_id"] != mid] == [
        "turn_failed:client_error"
    ]
    assert "the model said no" in d["last_failure"]["summary"]
    assert d["last_failure"]["turn_id"] and d["last_failure"]["at"]
    assert "config.yaml" in d["config_error"]
    assert f"{mid}: max_attempts_exceeded" in text and "holon queue requeue" in text
    assert "last failure" in text and "the model said no" in text
    assert "BROKEN" in text and "config.yaml" in text

    # a requeued message is no longer listed as aborted
    HomeLayout.current().config.unlink()
    script_runner.run(["holon", "queue", "requeue", mid], check=True)
    d, text = _status(script_runner)
    assert mid not in [m["message_id"] for m in d["aborted_messages"]]
    assert d["config_error"] is None and "BROKEN" not in text
