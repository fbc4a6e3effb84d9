"""`holon daemon status` exit codes and what it reads from the home, and
`holon daemon start` refusing a foreign socket or a busy port (exit 4)
before it launches anything; runtime activity: a resting agent is idle."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn
from holon_cli.serve import daemon as d
from holon_cli.serve.host import Host, ServeOptions
from holon_cli.tools.catalog import default_catalog
from tests.inprocess_cli import bind_runner, run

__all__ = ["bind_runner"]


def envelope(res: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def script(tmp_path: Path, steps: list[Any], name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


@pytest.fixture
def no_daemon_left(holon_home: Path) -> Iterator[None]:
    yield
    meta = d.read_meta()
    assert meta is None, f"a daemon was started: {meta}"


def test_status_exit_codes_stopped_3_stale_1() -> None:
    res = run("daemon", "status", "--json")
    assert res.returncode == 3
    doc = envelope(res)
    assert doc["ok"] is True and doc["data"]["state"] == "stopped"
    assert run("daemon", "status").returncode == 3
    dead = subprocess.Popen(["true"])
    dead.wait()
    d.run_dir().mkdir(parents=True, exist_ok=True)
    d.meta_path().write_text(json.dumps({"v": 1, "pid": dead.pid, "config_fingerprint": "x"}))
    res = run("daemon", "status", "--json")
    assert res.returncode == 1
    assert envelope(res)["ok"] is True and envelope(res)["data"]["state"] == "stale"


@pytest.mark.slow
def test_start_refuses_a_socket_a_foreign_process_answers_on(
    tmp_path: Path, no_daemon_left: None
) -> None:
    path = str(tmp_path / "foreign.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    try:
        res = run("daemon", "start", "--listen", "127.0.0.1:0", "--socket", path, "--json")
    finally:
        srv.close()
    assert res.returncode == 4, res.stdout
    err = envelope(res)["error"]
    assert "owned by a live process" in err["message"] and path in err["message"]
    assert os.path.exists(path)  # not taken over


@pytest.mark.slow
def test_start_refuses_a_busy_port_and_names_it(no_daemon_left: None) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        res = run("daemon", "start", "--listen", f"127.0.0.1:{port}", "--json")
    finally:
        busy.close()
    assert res.returncode == 4
    err = envelope(res)["error"]
    assert f"127.0.0.1:{port}" in err["message"] and "in use" in err["message"]
    assert "HOLON_HTTP_ADDR" in err["hint"] and "--listen" in err["hint"]


def test_a_turn_failure_is_read_from_persisted_agent_state(tmp_path: Path) -> None:
    admit("hello", agent_id="main")
    fail = [{"fail": {"kind": "auth", "status": 401, "message": "bad key"}}]
    res = run_turn("main", cli_model=script(tmp_path, fail), catalog=default_catalog())
    assert res.status == "aborted"
    # a fresh serve process (a restart) reports it: it is not only in memory
    host = Host(ServeOptions(listen=None), catalog=default_catalog())
    lf = host.runtime_status()["last_failure"]
    assert lf is not None and lf["phase"] == "runtime_turn" and res.turn_id in lf["summary"]
    # and so does `daemon status` with no daemon running
    st = d.status()
    assert st["state"] == "stopped" and st["last_failure"]["phase"] == "runtime_turn"


def test_a_resting_agent_is_idle_and_a_timed_sleep_is_waiting(tmp_path: Path) -> None:
    store = open_agent()
    host = Host(ServeOptions(listen=None), catalog=default_catalog())
    store.update_state(lambda s: s.update({"status": "asleep"}))  # no timer: resting
    rt = host.runtime_status()
    assert rt["activity"] == "idle" and rt["waiting_agent_count"] == 0
    store.update_state(lambda s: s.update({"status": "awake_idle"}))
    admit("nap", agent_id="main")
    sleep = [{"text": "zz", "tool_calls": [{"name": "Sleep", "arguments": {"duration_ms": 60000}}]}]
    run_turn("main", cli_model=script(tmp_path, sleep), catalog=default_catalog())
    assert store.read_record()["state"]["status"] == "asleep"
    rt = host.runtime_status()
    assert rt["activity"] == "waiting" and rt["waiting_agent_count"] == 1
