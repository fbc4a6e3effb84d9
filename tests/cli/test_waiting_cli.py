"""CLI surface of the waiting plane: holon timer, holon trigger, tick --json."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest


def j(res: Any) -> dict[str, Any]:
    return json.loads(res.stdout)


# ------------------------------------------------------------------ timer


def test_timer_add_prints_the_id_and_list_shows_the_record(script_runner: Any) -> None:
    res = script_runner.run(["holon", "timer", "add", "--after", "5m", "--message", "check CI"])
    assert res.returncode == 0, res.stderr
    tid = res.stdout.strip()
    assert tid.startswith("tmr_")
    data = j(script_runner.run(["holon", "timer", "list", "--json"]))["data"]
    (t,) = data["timers"]
    assert t["id"] == tid and t["message"] == "check CI" and t["status"] == "active"
    assert set(t) == {
        "id",
        "agent_id",
        "status",
        "created_at",
        "next_fire_at",
        "every_ms",
        "message",
        "work_item_id",
        "fire_count",
        "last_fired_at",
    }
    assert data["ledger"].endswith(".holon/ledger/timers.jsonl")
    plain = script_runner.run(["holon", "timer", "list"])
    assert tid in plain.stdout and "check CI" in plain.stdout


def test_timer_add_json_is_the_record(script_runner: Any) -> None:
    res = script_runner.run(["holon", "timer", "add", "--after", "90s", "--every", "1h", "--json"])
    d = j(res)
    assert d["ok"] and d["command"] == "timer add"
    assert d["data"]["every_ms"] == 3_600_000 and d["data"]["fire_count"] == 0


@pytest.mark.parametrize(
    "args", [["--after", "soon"], ["--after", "5"], ["--after", "1m", "--every", "0s"], []]
)
def test_timer_add_bad_duration_exit_2(script_runner: Any, args: list[str]) -> None:
    res = script_runner.run(["holon", "timer", "add", *args])
    assert res.returncode == 2
    if args:
        assert "500ms, 90s, 5m, 2h or 1d" in res.stderr
    assert (
        j(script_runner.run(["holon", "timer", "list", "--all", "--json"]))["data"]["timers"] == []
    )


def test_timer_add_bad_duration_json_envelope(script_runner: Any) -> None:
    res = script_runner.run(["holon", "timer", "add", "--after", "x", "--json"])
    d = j(res)
    assert res.returncode == 2 and d["ok"] is False and d["error"]["kind"] == "usage_error"
    assert "500ms" in d["error"]["hint"]


def test_timer_unknown_agent_and_work_item_exit_3(script_runner: Any) -> None:
    assert script_runner.run(["holon", "timer", "list", "--agent", "ghost"]).returncode == 3
    res = script_runner.run(["holon", "timer", "add", "--after", "1m", "--work-item", "wi_nope"])
    assert res.returncode == 3


def test_timer_cancel(script_runner: Any) -> None:
    tid = script_runner.run(["holon", "timer", "add", "--after", "1h"]).stdout.strip()
    res = script_runner.run(["holon", "timer", "cancel", tid])
    assert res.returncode == 0 and "cancelled" in res.stdout
    again = script_runner.run(["holon", "timer", "cancel", tid, "--json"])
    assert again.returncode == 0 and j(again)["data"]["changed"] is False
    assert "already cancelled" in script_runner.run(["holon", "timer", "cancel", tid]).stdout
    missing = script_runner.run(["holon", "timer", "cancel", "tmr_nope"])
    assert missing.returncode == 3 and "holon timer list" in missing.stderr
    assert j(script_runner.run(["holon", "timer", "list", "--json"]))["data"]["timers"] == []


def test_tick_json_lists_the_timer_fire(script_runner: Any) -> None:
    tid = script_runner.run(["holon", "timer", "add", "--after", "100ms"]).stdout.strip()
    time.sleep(0.2)
    d = j(script_runner.run(["holon", "tick", "--json"]))["data"]
    acts = d["agents"][0]["actions"]
    assert {"action": "timer_fired", "timer_id": tid}.items() <= acts[0].items()
    st = j(script_runner.run(["holon", "status", "--json"]))["data"]
    assert st["pending"] == 1
    assert "ingested" in script_runner.run(["holon", "tick"]).stdout
    assert "nothing to do" in script_runner.run(["holon", "tick"]).stdout


# ---------------------------------------------------------------- trigger


def test_trigger_show_rotate_revoke(script_runner: Any) -> None:
    d = j(script_runner.run(["holon", "trigger", "show", "--json"]))["data"]
    assert set(d) == {
        "external_trigger_id",
        "trigger_url",
        "target_agent_id",
        "delivery_mode",
        "status",
        "trigger_count",
        "last_triggered_at",
    }
    assert d["delivery_mode"] == "wake_hint" and d["status"] == "active"
    old = d["trigger_url"]
    rot = j(script_runner.run(["holon", "trigger", "rotate", "--json"]))["data"]
    assert rot["trigger_url"] != old and rot["external_trigger_id"] == d["external_trigger_id"]
    bad = script_runner.run(["holon", "trigger", "deliver", old])
    assert bad.returncode == 4 and "invalid callback token" in bad.stderr
    rev = script_runner.run(["holon", "trigger", "revoke", "--json"])
    assert j(rev)["data"]["status"] == "revoked" and j(rev)["data"]["trigger_url"] is None
    assert script_runner.run(["holon", "trigger", "deliver", rot["trigger_url"]]).returncode == 4
    assert "rotate" in script_runner.run(["holon", "trigger", "show"]).stdout


def test_trigger_deliver_json_disposition_and_stdin(script_runner: Any) -> None:
    url = j(script_runner.run(["holon", "trigger", "show", "--json"]))["data"]["trigger_url"]
    res = script_runner.run(
        [
            "holon",
            "trigger",
            "deliver",
            url,
            '{"ci": "green"}',
            "--content-type",
            "application/json",
            "--source",
            "ci",
            "--json",
        ]
    )
    assert res.returncode == 0, res.stderr
    d = j(res)["data"]
    assert d["disposition"] == "system_tick_admitted" and d["message_id"].startswith("msg_")
    token = url.rsplit("/", 1)[-1]
    res = script_runner.run(
        ["holon", "trigger", "deliver", token, "-"], stdin=io.StringIO("more news")
    )
    assert res.returncode == 0 and "coalesced" in res.stdout
    st = j(script_runner.run(["holon", "status", "--json"]))["data"]
    assert st["pending_wake_hint"]["coalesced_count"] == 1
    assert st["pending_wake_hint"]["body"] == {"type": "text", "text": "more news"}


def test_trigger_deliver_refusals(script_runner: Any) -> None:
    url = j(script_runner.run(["holon", "trigger", "show", "--json"]))["data"]["trigger_url"]
    res = script_runner.run(["holon", "trigger", "deliver", "cb_" + "0" * 32, "--json"])
    assert res.returncode == 4 and j(res)["error"]["kind"] == "invalid_callback_token"
    res = script_runner.run(
        ["holon", "trigger", "deliver", url, "{bad", "--content-type", "application/json"]
    )
    assert res.returncode == 2 and "not valid JSON" in res.stderr
    script_runner.run(["holon", "agent", "stop", "main"], check=True)
    res = script_runner.run(["holon", "trigger", "deliver", url, "--json"])
    assert res.returncode == 4 and j(res)["error"]["kind"] == "agent_stopped"
    assert "resume" in j(res)["error"]["hint"]
    script_runner.run(["holon", "agent", "start", "main"], check=True)
    assert j(script_runner.run(["holon", "status", "--json"]))["data"]["pending"] == 0
    assert (
        j(script_runner.run(["holon", "trigger", "show", "--json"]))["data"]["trigger_count"] == 0
    )


@pytest.mark.parametrize("cmd", [["timer"], ["trigger"], ["timer", "add"], ["trigger", "deliver"]])
def test_help_has_an_example(script_runner: Any, cmd: list[str]) -> None:
    res = script_runner.run(["holon", *cmd, "--help"])
    assert res.returncode == 0 and "Example" in res.stdout
