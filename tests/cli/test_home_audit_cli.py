"""`holon home audit` on the command line: text and `--json`, exit codes."""

from __future__ import annotations

import json
from typing import Any

from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime.workitems import create_work_item


def stuck_agent(aid: str = "stuck") -> str:
    store = create_agent(aid)
    wid: str = create_work_item(store, "runnable forever", plan_status="ready")["work_item"]["id"]

    def mutate(st: Any) -> None:
        st["status"] = "asleep"

    store.update_state(mutate)
    return wid


def test_healthy_home_exit_0(script_runner: Any) -> None:
    script_runner.run(["holon", "enqueue", "hi"], check=True)
    res = script_runner.run(["holon", "home", "audit"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("ok: audited 1 agent(s) and 1 message(s)")
    res = script_runner.run(["holon", "home", "audit", "--json"])
    out = json.loads(res.stdout)
    assert res.returncode == 0 and out["ok"] is True and out["command"] == "home audit"
    assert out["data"]["findings"] == [] and out["data"]["agents"] == 1


def test_stuck_home_lists_findings_and_exits_1(script_runner: Any) -> None:
    wid = stuck_agent()
    res = script_runner.run(["holon", "home", "audit"])
    assert res.returncode == 1
    assert res.stdout.startswith("no_future_wake") and "stuck:" in res.stdout and wid in res.stdout
    assert "1 finding(s)" in res.stderr
    res = script_runner.run(["holon", "home", "audit", "--json"])
    out = json.loads(res.stdout)
    assert res.returncode == 1 and out["ok"] is False
    assert out["error"]["kind"] == "audit_findings"
    (f,) = out["data"]["findings"]
    assert set(f) == {"agent_id", "kind", "detail"}
    assert (f["agent_id"], f["kind"]) == ("stuck", "no_future_wake")


def test_a_message_wakes_the_stuck_agent(script_runner: Any) -> None:
    stuck_agent()
    assert script_runner.run(["holon", "home", "audit"]).returncode == 1
    script_runner.run(["holon", "enqueue", "--agent", "stuck", "go on"], check=True)
    assert script_runner.run(["holon", "home", "audit"]).returncode == 0


def test_audit_help_has_a_cron_example(script_runner: Any) -> None:
    res = script_runner.run(["holon", "home", "audit", "--help"])
    assert res.returncode == 0 and "holon home audit" in res.stdout and "* * *" in res.stdout
