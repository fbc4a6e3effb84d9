"""The CLI layer's one way to choose JSON, and values checked when they are
typed: DURATION and MODEL are click parameter types (exit 2, click's standard
message, nothing changed); HOLON_MODEL is checked at `run` before any work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def run(script_runner: Any, *args: str, env: dict[str, str] | None = None) -> Any:
    import os

    return script_runner.run(
        ["holon", *args], env={**os.environ, **(env or {})}, print_result=False
    )


def agents_dir(holon_home: Path) -> list[str]:
    d = holon_home / "agents"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def test_json_choice_lives_in_the_click_context_not_a_module_global(script_runner: Any) -> None:
    from holon_cli.cli import output

    assert run(script_runner, "status", "--json").returncode == 0
    assert not hasattr(output, "_current")
    assert output.json_mode() is False  # outside a command nothing is remembered
    # the next in-process command renders its error as text, not as JSON
    res = run(script_runner, "agent", "stop", "ghost")
    assert res.returncode == 3 and res.stdout == "" and "Error: unknown agent" in res.stderr


def test_errors_of_nested_commands_render_as_their_envelope(script_runner: Any) -> None:
    res = run(script_runner, "agent", "stop", "ghost", "--json")
    env = json.loads(res.stdout)
    assert res.returncode == 3 and env["command"] == "agent stop" and env["ok"] is False


@pytest.mark.parametrize("bad", ["5x", "soon", "-3m", "0s"])
def test_bad_duration_is_clicks_exit_2(script_runner: Any, bad: str) -> None:
    run(script_runner, "workitem", "create", "thing")
    wid = json.loads(run(script_runner, "workitem", "list", "--json").stdout)["data"]["work_items"][
        0
    ]["id"]
    res = run(
        script_runner, "workitem", "update", wid, "--blocked-by", "ci", "--recheck-after", bad
    )
    assert res.returncode == 2
    assert "Invalid value for '--recheck-after'" in res.stderr and "Traceback" not in res.stderr
    item = json.loads(run(script_runner, "workitem", "show", wid, "--json").stdout)["data"]
    assert item["work_item"]["blocked_by"] is None  # nothing changed


def test_good_duration_sets_the_recheck(script_runner: Any) -> None:
    run(script_runner, "workitem", "create", "thing")
    wid = json.loads(run(script_runner, "workitem", "list", "--json").stdout)["data"]["work_items"][
        0
    ]["id"]
    res = run(
        script_runner, "workitem", "update", wid, "--blocked-by", "ci", "--recheck-after", "2h"
    )
    assert res.returncode == 0, res.stderr
    item = json.loads(run(script_runner, "workitem", "show", wid, "--json").stdout)["data"]
    assert item["work_item"]["recheck_at"]


def test_agent_create_with_unknown_provider_exits_2_and_creates_nothing(
    script_runner: Any, holon_home: Path
) -> None:
    res = run(script_runner, "agent", "create", "rev", "--model", "foo/bar")
    assert res.returncode == 2
    assert "Invalid value for '--model'" in res.stderr and "unknown provider 'foo'" in res.stderr
    assert "rev" not in agents_dir(holon_home)
    res = run(script_runner, "agent", "create", "rev", "--model", "nonsense", "--json")
    env = json.loads(res.stdout)
    assert res.returncode == 2 and env["error"]["kind"] == "usage_error"
    assert env["command"] == "agent create" and "invalid model ref" in env["error"]["message"]


def test_agent_model_with_unknown_provider_exits_2_and_keeps_the_override(
    script_runner: Any,
) -> None:
    assert run(script_runner, "agent", "model", "main", "openai/gpt-4.1").returncode == 0
    res = run(script_runner, "agent", "model", "main", "foo/bar")
    assert res.returncode == 2 and "unknown provider 'foo'" in res.stderr
    shown = json.loads(run(script_runner, "agent", "model", "main", "--json").stdout)["data"]
    assert shown["model"]["effective_model"] == "openai/gpt-4.1"


def test_config_declared_provider_is_known(script_runner: Any, holon_home: Path) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        "providers:\n  local:\n    transport: openai_chat_completions\n"
        "    base_url: http://127.0.0.1:9/v1\n"
    )
    res = run(script_runner, "agent", "create", "rev", "--model", "local/llama")
    assert res.returncode == 0, res.stderr


def test_holon_model_with_unknown_provider_fails_run_at_once(
    script_runner: Any, holon_home: Path
) -> None:
    res = run(script_runner, "run", "hello", env={"HOLON_MODEL": "foo/bar"})
    assert res.returncode == 2
    assert "$HOLON_MODEL" in res.stderr and "unknown provider 'foo'" in res.stderr
    assert agents_dir(holon_home) == []  # no temporary agent was made
    res = run(script_runner, "run", "hello", "--json", env={"HOLON_MODEL": "foo/bar"})
    env = json.loads(res.stdout)
    assert res.returncode == 2 and env["command"] == "run" and env["ok"] is False


def test_run_with_unknown_provider_flag_exits_2(script_runner: Any, holon_home: Path) -> None:
    res = run(script_runner, "run", "hello", "--model", "foo/bar")
    assert res.returncode == 2 and "Invalid value for '--model'" in res.stderr
    assert agents_dir(holon_home) == []
