"""`holon daemon`: start/stop/status/restart/logs against real processes;
every test stops what it started (by pid)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_helpers import HOLON, scripted_model, wait_for

LISTEN = ["--listen", "127.0.0.1:0"]


def _holon(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOLON, *args], capture_output=True, text=True, timeout=timeout)


def _data(out: subprocess.CompletedProcess[str]) -> dict[str, object]:
    doc = json.loads(out.stdout)
    assert doc["ok"], doc
    return doc["data"]  # type: ignore[no-any-return]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def home(holon_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("HOLON_MODEL", scripted_model(tmp_path))
    yield holon_home
    meta = holon_home / "run" / "daemon.json"
    if meta.exists():
        pid = json.loads(meta.read_text()).get("pid")
        if isinstance(pid, int) and _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_start_status_idempotent_stop(home: Path) -> None:
    out = _holon("daemon", "start", *LISTEN, "--json")
    assert out.returncode == 0, out.stderr
    d = _data(out)
    assert d["state"] == "running" and d["healthy"] is True and d["already_running"] is False
    pid = d["pid"]
    assert isinstance(pid, int) and _alive(pid)
    meta = json.loads((home / "run" / "daemon.json").read_text())
    assert set(meta) >= {
        "pid",
        "started_at",
        "http_addr",
        "socket_path",
        "config_fingerprint",
        "version",
    }
    # same options: no second process
    again = _data(_holon("daemon", "start", *LISTEN, "--json"))
    assert again["already_running"] is True and again["pid"] == pid
    # different options: refused, exit 4
    diff = _holon("daemon", "start", *LISTEN, "--concurrency", "2")
    assert diff.returncode == 4 and "restart" in diff.stderr
    out = _holon("daemon", "status", *LISTEN, "--json")
    assert out.returncode == 0  # running and healthy
    st = _data(out)
    assert st["state"] == "running" and st["config_matches"] is True
    assert st["activity"] in ("idle", "waiting", "processing")
    for k in (
        "active_agent_count",
        "active_task_count",
        "processing_agent_count",
        "waiting_agent_count",
        "last_failure",
        "home_dir",
    ):
        assert k in st
    # the daemon works: a message is completed
    subprocess.run([*HOLON, "enqueue", "via daemon"], check=True, capture_output=True)
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.agents.lifecycle import open_agent

    assert wait_for(lambda: q.load(open_agent(None)).processed == 1, 15)
    logs = _holon("daemon", "logs", "--tail", "5", "--json")
    assert logs.returncode == 0 and _data(logs)["log_path"].endswith("daemon.log")
    stop = _data(_holon("daemon", "stop", "--json"))
    assert stop["was_running"] is True and stop["method"] == "control_surface"
    assert wait_for(lambda: not _alive(pid), 5)
    out = _holon("daemon", "status", "--json")
    assert out.returncode == 3 and _data(out)["state"] == "stopped"
    assert _data(_holon("daemon", "stop", "--json"))["was_running"] is False
    assert open_agent(None).read_record()["state"]["status"] != "stopped"


@pytest.mark.slow
def test_stale_pid_is_cleaned_then_started(home: Path) -> None:
    run = home / "run"
    run.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (run / "daemon.json").write_text(
        json.dumps({"v": 1, "pid": dead.pid, "config_fingerprint": "x"})
    )
    assert _data(_holon("daemon", "status", "--json"))["state"] == "stale"
    out = _holon("daemon", "start", *LISTEN, "--json")
    assert out.returncode == 0, out.stderr
    d = _data(out)
    assert d["cleaned_stale"] is True and d["pid"] != dead.pid
    assert _holon("daemon", "stop").returncode == 0


@pytest.mark.slow
def test_start_failure_points_to_logs(home: Path) -> None:
    out = _holon(
        "daemon", "start", "--listen", "127.0.0.1:0", "--socket", "/nonexistent-dir/x/" + "y" * 120
    )
    assert out.returncode != 0
    assert "holon daemon logs" in out.stderr
    logs = _data(_holon("daemon", "logs", "--json"))
    assert logs["last_failure"]["phase"] == "startup"  # type: ignore[index]


@pytest.mark.slow
def test_a_second_home_on_a_busy_port_is_told_which_home_holds_it(
    home: Path, tmp_path: Path
) -> None:
    import socket

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    listen = ["--listen", f"127.0.0.1:{port}"]
    out = _holon("daemon", "start", *listen, "--json")
    assert out.returncode == 0, out.stderr
    pid = _data(out)["pid"]
    try:
        other = tmp_path / "other-home"
        res = subprocess.run(
            [*HOLON, "daemon", "start", *listen, "--json"],
            capture_output=True,
            text=True,
            timeout=90,
            env={**os.environ, "HOLON_HOME": str(other)},
        )
        assert res.returncode == 4, res.stdout
        err = json.loads(res.stdout)["error"]
        assert f"127.0.0.1:{port}" in err["message"] and str(home) in err["message"]
        assert not (other / "run" / "daemon.json").exists()
    finally:
        assert _holon("daemon", "stop").returncode == 0
    assert wait_for(lambda: not _alive(pid), 5)  # type: ignore[arg-type]
