"""``holon mcp`` and the ``mcp_servers`` config keys (issue 38): every bad
input a user can type gets a clear error and the contract's exit code."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp_helpers import FAKE, close_servers, fake, write_config


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    close_servers()


def j(res: Any) -> dict[str, Any]:
    return json.loads(res.stdout)


@pytest.mark.parametrize(
    ("servers", "key", "words"),
    [
        ({"Bad Name": {"command": "x"}}, "mcp_servers.Bad Name", "server name"),
        ({"a" * 33: {"command": "x"}}, "mcp_servers." + "a" * 33, "1-32"),
        ({"t": {}}, "mcp_servers.t", "no transport"),
        ({"t": {"command": "x", "url": "http://h/mcp"}}, "mcp_servers.t", "not both"),
        ({"t": {"command": "x", "headers": {"a": "b"}}}, "mcp_servers.t.headers", "stdio"),
        ({"t": {"url": "http://h/mcp", "env": {"A": "b"}}}, "mcp_servers.t.env", "HTTP"),
        ({"t": {"url": "ftp://h"}}, "mcp_servers.t.url", "http://"),
        ({"t": {"command": ""}}, "mcp_servers.t.command", "empty"),
        (
            {"t": {"command": "x", "startup_timeout": "soon"}},
            "mcp_servers.t.startup_timeout",
            "duration",
        ),
        ({"t": {"command": "x", "tool_timeout": -1}}, "mcp_servers.t.tool_timeout", "duration"),
        ({"t": {"command": "x", "protocol": "2024-01-01"}}, "mcp_servers.t.protocol", "auto"),
        ({"t": {"command": "x", "enabled": "yes"}}, "mcp_servers.t.enabled", "true or false"),
        ({"t": {"command": "x", "args": "a b"}}, "mcp_servers.t.args", "list"),
        ({"t": {"command": "x", "enabled_tools": [""]}}, "mcp_servers.t.enabled_tools[0]", "tool"),
        ({"t": {"url": "http://h/mcp", "network": "off"}}, "mcp_servers.t.network", "stdio"),
        ({"t": {"command": "x", "nope": 1}}, "mcp_servers.t.nope", "unknown key"),
    ],
)
def test_a_bad_server_entry_is_exit_2_naming_the_key(
    script_runner: Any, holon_home: Path, servers: dict[str, Any], key: str, words: str
) -> None:
    write_config(holon_home, servers)
    for args in (["mcp", "list", "--json"], ["turn", "--json"], ["status", "--json"]):
        res = script_runner.run(["holon", *args])
        if args[0] == "status":  # status still answers, naming the broken config
            assert key in j(res)["data"]["config_error"]
            continue
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        err = j(res)["error"]
        assert err["kind"] == "config_error" and key in err["message"] and words in err["message"]


def test_per_agent_servers_merge_by_name(script_runner: Any, holon_home: Path) -> None:
    p = write_config(holon_home, {"a": fake(), "b": fake()})
    data = yaml.safe_load(p.read_text())
    data["agents"] = {
        "main": {"mcp_servers": {"b": {"enabled": False}, "c": {"url": "http://127.0.0.1:9/mcp"}}},
        "ops": {"mcp_servers": {"a": {"url": "http://127.0.0.1:9/mcp"}}},
    }
    p.write_text(yaml.safe_dump(data))
    rows = j(script_runner.run(["holon", "mcp", "list", "--json"]))["data"]["servers"]
    assert [(r["name"], r["transport"], r["state"]) for r in rows] == [
        ("a", "stdio", "unknown"),
        ("b", "stdio", "disabled"),
        ("c", "http", "unknown"),
    ]
    script_runner.run(["holon", "agent", "create", "ops"], check=True)
    rows = j(script_runner.run(["holon", "mcp", "list", "--agent", "ops", "--json"]))["data"]
    assert [(r["name"], r["transport"]) for r in rows["servers"]] == [("a", "http"), ("b", "stdio")]


def test_an_agent_entry_without_a_home_entry_needs_a_transport(
    script_runner: Any, holon_home: Path
) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        yaml.safe_dump({"agents": {"main": {"mcp_servers": {"x": {"enabled": True}}}}})
    )
    res = script_runner.run(["holon", "mcp", "list", "--json"])
    assert res.returncode == 2 and "agents.main.mcp_servers.x" in j(res)["error"]["message"]


def test_unquoted_protocol_date_is_read_as_the_version(
    script_runner: Any, holon_home: Path
) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        f"mcp_servers:\n  t:\n    command: {sys.executable}\n    args: [{FAKE}]\n"
        "    protocol: 2026-07-28\n"
    )
    res = script_runner.run(["holon", "mcp", "check", "--json"])
    assert res.returncode == 0, res.stdout
    assert j(res)["data"]["servers"][0]["protocol"] == "2026-07-28"


def test_agents_of_the_wrong_type_is_a_config_error(script_runner: Any, holon_home: Path) -> None:
    # the MCP date normalisation runs before the config check: a list where
    # the agents mapping belongs is the check's clear error, not a traceback
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text("agents: [1, 2]\n")
    res = script_runner.run(["holon", "mcp", "list", "--json"])
    assert res.returncode == 2, res.stdout + res.stderr
    err = j(res)["error"]
    assert err["kind"] == "config_error" and "agents" in err["message"]
    assert "Traceback" not in res.stderr


def test_list_without_servers(script_runner: Any) -> None:
    res = script_runner.run(["holon", "mcp", "list"])
    assert res.returncode == 0 and "no MCP servers configured" in res.stderr
    assert j(script_runner.run(["holon", "mcp", "list", "--json"]))["data"]["servers"] == []
    assert script_runner.run(["holon", "mcp", "check"]).returncode == 0
    assert j(script_runner.run(["holon", "mcp", "requests", "--json"]))["data"]["requests"] == []


def test_unknown_server_is_exit_3(script_runner: Any, holon_home: Path) -> None:
    write_config(holon_home, {"a": fake()})
    for args in (["check", "zzz"], ["refresh", "zzz"], ["call", "zzz", "echo"]):
        res = script_runner.run(["holon", "mcp", *args, "--json"])
        assert res.returncode == 3, args
        err = j(res)["error"]
        assert err["kind"] == "not_found" and "zzz" in err["message"] and "a" in err["hint"]


@pytest.mark.slow
def test_check_exit_codes_and_failures_named(
    script_runner: Any, holon_home: Path, tmp_path: Path
) -> None:
    write_config(
        holon_home,
        {
            "good": fake(),
            "missing": {"command": str(tmp_path / "nope")},
            "silent": fake("--discover", "silent", startup_timeout="1s", protocol="2026-07-28"),
        },
    )
    res = script_runner.run(["holon", "mcp", "check", "--json"])
    assert res.returncode == 1
    body = j(res)
    assert body["ok"] is False and body["error"]["kind"] == "mcp_unavailable"
    rows = {r["name"]: r for r in body["data"]["servers"]}
    assert rows["good"]["error"] is None and rows["good"]["state"] == "ok"
    assert "No such file" in rows["missing"]["error"]
    assert "startup_timeout" in rows["silent"]["error"] and rows["silent"]["state"] == "failed"
    assert script_runner.run(["holon", "mcp", "check", "good"]).returncode == 0
    text = script_runner.run(["holon", "mcp", "list"]).stdout
    assert "failed" in text and "missing" in text


@pytest.mark.slow
def test_auto_falls_back_on_an_error_or_a_silent_probe(
    script_runner: Any, holon_home: Path
) -> None:
    write_config(
        holon_home,
        {
            "err": fake("--discover", "error"),
            "quiet": fake("--discover", "silent", startup_timeout="2s"),
            "modern": fake("--era", "modern"),
            "legacy_pin": fake(protocol="2025-11-25"),
        },
    )
    res = script_runner.run(["holon", "mcp", "check", "--json"])
    assert res.returncode == 0, res.stdout
    proto = {r["name"]: r["protocol"] for r in j(res)["data"]["servers"]}
    assert proto == {
        "err": "2025-11-25",
        "legacy_pin": "2025-11-25",
        "modern": "2026-07-28",
        "quiet": "2025-11-25",
    }


def test_a_modern_only_server_pinned_legacy_fails_clearly(
    script_runner: Any, holon_home: Path
) -> None:
    write_config(holon_home, {"m": fake("--era", "modern", protocol="2025-11-25")})
    res = script_runner.run(["holon", "mcp", "check", "--json"])
    assert res.returncode == 1
    assert "-32022" in j(res)["data"]["servers"][0]["error"]


@pytest.mark.slow
def test_call_results_and_errors(script_runner: Any, holon_home: Path) -> None:
    write_config(holon_home, {"f": fake(tool_timeout="1s")})
    ok = script_runner.run(["holon", "mcp", "call", "f", "echo", '{"text": "hi there"}'])
    assert ok.returncode == 0 and ok.stdout.strip() == "hi there"
    js = j(script_runner.run(["holon", "mcp", "call", "f", "echo", '{"text": "x"}', "--json"]))
    assert js["ok"] and js["data"]["content"] == [{"type": "text", "text": "x"}]
    assert js["data"]["is_error"] is False
    bad = script_runner.run(["holon", "mcp", "call", "f", "echo", '{"text": "fail"}', "--json"])
    assert bad.returncode == 1 and j(bad)["error"]["kind"] == "mcp_error"
    assert j(bad)["data"]["is_error"] is True
    for raw, code in (("{nope", 2), ("[1, 2]", 2)):
        assert script_runner.run(["holon", "mcp", "call", "f", "echo", raw]).returncode == code
    unknown = script_runner.run(["holon", "mcp", "call", "f", "no_such_tool", "--json"])
    assert unknown.returncode == 1 and "Unknown tool" in j(unknown)["error"]["message"]
    hang = script_runner.run(["holon", "mcp", "call", "f", "hang", "--json"])
    assert hang.returncode == 1 and j(hang)["error"]["kind"] == "mcp_timeout"
    crash = script_runner.run(["holon", "mcp", "call", "f", "crash", "--json"])
    assert crash.returncode == 1 and j(crash)["error"]["kind"] == "mcp_unavailable"
    # nothing was admitted to the agent
    st = j(script_runner.run(["holon", "status", "--json"]))["data"]
    assert st["pending"] == 0 and st["processed"] == 0


def test_http_bearer_token_env_unset_is_named(script_runner: Any, holon_home: Path) -> None:
    write_config(
        holon_home,
        {"h": {"url": "http://127.0.0.1:9/mcp", "bearer_token_env": "HOLON_TEST_NO_SUCH_TOKEN"}},
    )
    res = script_runner.run(["holon", "mcp", "check", "--json"])
    assert res.returncode == 1
    assert "HOLON_TEST_NO_SUCH_TOKEN" in j(res)["data"]["servers"][0]["error"]


@pytest.mark.slow
def test_refresh_rewrites_the_cached_list(script_runner: Any, holon_home: Path) -> None:
    write_config(holon_home, {"f": fake()})
    assert script_runner.run(["holon", "mcp", "refresh", "f"]).returncode == 0
    (rec,) = (holon_home / "mcp" / "servers").glob("f.*.json")
    first = json.loads(rec.read_text())["listed_at"]
    assert script_runner.run(["holon", "mcp", "refresh", "--json"]).returncode == 0
    assert json.loads(rec.read_text())["listed_at"] != first
    # an edited server config is a new record (the cache is keyed by config)
    write_config(holon_home, {"f": fake("--era", "legacy")})
    assert script_runner.run(["holon", "mcp", "refresh"]).returncode == 0
    assert len(list((holon_home / "mcp" / "servers").glob("f.*.json"))) == 2
