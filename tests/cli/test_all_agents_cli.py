"""`tick --all` and `turn --all` with a damaged agent (issues 8.2, 8.3): the
damaged one is reported by name and skipped, the others run, the exit code is
the worst per-agent outcome, and cron output stays quiet."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from holon_cli.errors import worst_exit_code
from holon_cli.store.layout import HomeLayout


def script(tmp_path: Path, steps: list[dict]) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"steps": steps, "loop": True}))
    return f"scripted:{p}"


def damage_queue(agent: str) -> None:
    """A corrupt line in the middle of the agent's queue ledger (and no snapshot
    to skip past it)."""
    lay = HomeLayout.current().agent(agent)
    led = lay.ledger_path("queue")
    lines = led.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 2
    led.write_bytes(b'{"op": "admitted", broken\n' + b"".join(lines[1:]))
    lay.queue_file.unlink(missing_ok=True)


def setup_agents(script_runner) -> None:  # type: ignore[no-untyped-def]
    for name in ("alpha", "bad", "zeta"):
        script_runner.run(["holon", "agent", "create", name], check=True)
    script_runner.run(["holon", "enqueue", "one", "-a", "bad"], check=True)
    script_runner.run(["holon", "enqueue", "two", "-a", "bad"], check=True)
    script_runner.run(["holon", "tick", "-a", "bad"], check=True)  # ingests both
    damage_queue("bad")
    from holon_cli.runtime.enqueue import admit

    for name in ("alpha", "zeta"):
        # delivered, not yet ingested (`holon enqueue` would ingest at once)
        admit(f"hi {name}", agent_id=name)


def test_turn_all_skips_a_damaged_agent_and_runs_the_others(script_runner, tmp_path: Path) -> None:
    setup_agents(script_runner)
    model = script(tmp_path, [{"text": "done"}])
    res = script_runner.run(["holon", "turn", "--all", "--model", model])
    assert res.returncode == 1, res.stderr  # runtime damage is the worst outcome
    assert "Traceback" not in res.stderr
    err_lines = [ln for ln in res.stderr.splitlines() if "error" in ln]
    assert err_lines and all(ln.startswith("bad: ") for ln in err_lines), res.stderr
    assert "alpha: turn" in res.stderr and "zeta: turn" in res.stderr
    for name in ("alpha", "zeta"):
        st = json.loads(script_runner.run(["holon", "status", "-a", name, "--json"]).stdout)
        assert st["data"]["processed"] == 1


def test_turn_all_json_entries_carry_agent_id(script_runner, tmp_path: Path) -> None:
    setup_agents(script_runner)
    res = script_runner.run(
        ["holon", "turn", "--all", "--json", "--model", script(tmp_path, [{"text": "ok"}])]
    )
    assert res.returncode == 1
    env = json.loads(res.stdout)
    # `jq -e .ok` must agree with the exit code
    assert env["ok"] is False and env["error"]["kind"] == "agents_failed"
    assert "bad" in env["error"]["message"]
    turns = env["data"]["turns"]
    assert sorted(t["agent_id"] for t in turns) == ["alpha", "bad", "zeta"]
    bad = next(t for t in turns if t["agent_id"] == "bad")
    assert bad["ok"] is False and bad["error"]["kind"] == "corrupt_state"


def test_turn_all_provider_failure_is_exit_5(script_runner, tmp_path: Path) -> None:
    for name in ("alpha", "zeta"):
        script_runner.run(["holon", "agent", "create", name], check=True)
        script_runner.run(["holon", "enqueue", "x", "-a", name], check=True)
    # fail-fast (no retry backoff): the exit code and per-agent report are the point
    model = script(tmp_path, [{"fail": {"kind": "client_error", "status": 400}}])
    res = script_runner.run(["holon", "turn", "--all", "--model", model])
    assert res.returncode == 5
    assert "alpha: failure:" in res.stderr and "zeta: failure:" in res.stderr


def test_tick_all_skips_a_damaged_agent(script_runner) -> None:
    setup_agents(script_runner)
    res = script_runner.run(["holon", "tick", "--all"])
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("bad: error:"), res.stderr
    # the healthy agents were ticked: their inbox was ingested
    out = res.stdout.splitlines()
    assert any(ln.startswith("alpha: ingested") for ln in out)
    assert any(ln.startswith("zeta: ingested") for ln in out)
    res = script_runner.run(["holon", "tick", "--all", "--json"])
    js = json.loads(res.stdout)
    assert res.returncode == 1 and js["ok"] is False and js["error"]["kind"] == "agents_failed"
    entries = {a["agent_id"]: a for a in js["data"]["agents"]}
    assert entries["bad"]["ok"] is False and entries["bad"]["error"]["kind"] == "corrupt_state"
    assert "alpha" in entries and "zeta" in entries


def test_tick_all_is_quiet_when_nothing_to_do(script_runner) -> None:
    script_runner.run(["holon", "agent", "create", "alpha"], check=True)
    script_runner.run(["holon", "agent", "create", "beta"], check=True)
    script_runner.run(["holon", "agent", "stop", "beta"], check=True)
    res = script_runner.run(["holon", "tick", "--all"])
    assert res.returncode == 0 and res.stdout == "" and res.stderr == ""
    js = json.loads(script_runner.run(["holon", "tick", "--all", "--json"]).stdout)
    assert js["ok"] is True and "error" not in js
    res = script_runner.run(["holon", "tick", "--all", "-v"])
    assert "alpha: nothing to do" in res.stdout and "beta: skipped (stopped)" in res.stdout
    # a single agent still says so
    assert "nothing to do" in script_runner.run(["holon", "tick", "-a", "alpha"]).stdout


def test_worst_exit_code_order() -> None:
    assert worst_exit_code([]) == 0
    assert worst_exit_code([0, 75]) == 75
    assert worst_exit_code([75, 5, 0]) == 5
    assert worst_exit_code([5, 2]) == 2
    assert worst_exit_code([2, 1, 5]) == 1
    assert worst_exit_code([4, 3]) == 4
