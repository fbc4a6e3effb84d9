"""`holon daemon start --host/--port/--token/--access` against a real serve
process: the token reaches the child in its environment (never its command
line), control routes need it, and the same options are the same
configuration; the test stops what it started (by pid)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
from serve_helpers import HOLON, scripted_model

TOKEN = "tok-e2e-0123456789-SECRET"


def _holon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOLON, *args], capture_output=True, text=True, timeout=90)


@pytest.fixture
def home(holon_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("HOLON_MODEL", scripted_model(tmp_path))
    monkeypatch.delenv("HOLON_CONTROL_TOKEN", raising=False)
    monkeypatch.delenv("HOLON_HTTP_ADDR", raising=False)
    yield holon_home
    meta = holon_home / "run" / "daemon.json"
    if meta.exists():
        pid = json.loads(meta.read_text()).get("pid")
        if isinstance(pid, int):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
def test_daemon_start_with_host_port_token_access(home: Path) -> None:
    opts = ["--host", "127.0.0.1", "--port", "0", "--token", TOKEN, "--access", "token"]
    out = _holon("daemon", "start", *opts, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)["data"]
    pid, addr = data["pid"], data["http_addr"]
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert TOKEN.encode() not in b" ".join(argv)
    assert b"--access" in argv and b"token" in argv
    base = f"http://{addr}"
    assert httpx.get(f"{base}/agents/list", timeout=10).status_code == 401
    ok = httpx.get(f"{base}/agents/list", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert ok.status_code == 200
    # the same options again: already running; another access mode: refused (exit 4)
    again = _holon("daemon", "start", *opts)
    assert again.returncode == 0 and "already running" in again.stderr
    other = _holon("daemon", "start", "--port", "0", "--token", TOKEN, "--access", "local")
    assert other.returncode == 4 and "holon daemon restart" in other.stderr
    assert TOKEN not in (home / "run" / "daemon.log").read_text()
    assert _holon("daemon", "stop").returncode == 0
