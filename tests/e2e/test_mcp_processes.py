"""MCP server processes (issue 38 item 5): nothing is left running after
``holon turn`` ends, nor after a SIGKILL of the turn or of ``holon serve``
(the server's grandchildren included); serve keeps a server warm between
turns and starts a dead one again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from mcp_helpers import fake, write_config
from serve_helpers import HOLON, start_serve, stop, wait_for

pytest.importorskip("mcp", reason="needs the MCP SDK (pip install -e '.[mcp]')")
pytestmark = pytest.mark.slow


# host pids and pid files outside the execution root: these tests are about
# the servers' lifetimes, not the sandbox (tests/tools/test_sandbox_hardening.py)
HOST = {"sandbox": "none"}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] not in ("Z", "X")
    except FileNotFoundError:
        return False


def pids(pidfile: Path) -> list[int]:
    return [int(x) for x in pidfile.read_text().split()]


def model(tmp_path: Path, steps: list[object], loop: bool = False) -> str:
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump({"steps": steps, "loop": loop}))
    return f"scripted:{p}"


def call(name: str, cid: str) -> dict[str, object]:
    return {"tool_calls": [{"name": f"mcp__fake__{name}", "arguments": {}, "id": cid}]}


def test_holon_turn_ends_its_servers(holon_home: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    write_config(holon_home, {"fake": fake("--pidfile", str(pidfile))}, execution=HOST)
    m = model(tmp_path, [call("child", "c1"), "done"])
    env = {**os.environ}
    subprocess.run([*HOLON, "enqueue", "go"], check=True, env=env)
    res = subprocess.run([*HOLON, "turn", "--model", m], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    server, grandchild = pids(pidfile)
    assert wait_for(lambda: not alive(server) and not alive(grandchild), 5.0)


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_sigkill_of_the_turn_leaves_no_server_running(
    holon_home: Path, tmp_path: Path, era: str
) -> None:
    pidfile = tmp_path / "pids"
    write_config(
        holon_home, {"fake": fake("--era", era, "--pidfile", str(pidfile))}, execution=HOST
    )
    m = model(tmp_path, [call("child", "c1"), call("hang", "c2"), "never"])
    subprocess.run([*HOLON, "enqueue", "go"], check=True)
    turn = subprocess.Popen([*HOLON, "turn", "--model", m], stdout=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 20.0)
        server, grandchild = pids(pidfile)
        time.sleep(0.3)  # the hang call is in flight
        assert alive(server) and alive(grandchild)
        turn.send_signal(signal.SIGKILL)
        turn.wait(10)
        assert wait_for(lambda: not alive(server) and not alive(grandchild), 8.0), (
            f"left running: server {alive(server)}, grandchild {alive(grandchild)}"
        )
    finally:
        if turn.poll() is None:
            turn.kill()
            turn.wait()


def test_serve_keeps_a_server_warm_restarts_it_and_sigkill_leaves_nothing(
    holon_home: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    write_config(
        holon_home, {"fake": fake("--pidfile", str(pidfile), startup_timeout="60s")}, execution=HOST
    )
    m = model(tmp_path, [call("child", "c1"), "first", call("child", "c2"), "second"])
    serve = start_serve(tmp_path, env={"HOLON_MODEL": m})
    try:
        subprocess.run([*HOLON, "enqueue", "one"], check=True)
        assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 90.0)
        server, grandchild = pids(pidfile)
        time.sleep(1.0)
        assert alive(server), "serve keeps the server warm after the turn"
        # the server dies: serve starts it again (backoff 1 s), not waiting for a call
        os.kill(server, signal.SIGKILL)
        rec = holon_home / "mcp" / "servers"

        def restarted() -> bool:
            out = subprocess.run([*HOLON, "mcp", "list", "--json"], capture_output=True, text=True)
            row = json.loads(out.stdout)["data"]["servers"][0]
            return row["state"] == "ok" and bool(list(rec.glob("*.json")))

        pidfile.write_text("")
        subprocess.run([*HOLON, "enqueue", "two"], check=True)
        assert wait_for(lambda: pidfile.read_text().strip() != "", 90.0)
        assert restarted()
        server2, grandchild2 = pids(pidfile)
        assert server2 != server
        serve.send_signal(signal.SIGKILL)
        serve.wait(10)
        assert wait_for(lambda: not any(alive(p) for p in (server2, grandchild2, grandchild)), 8.0)
    finally:
        stop(serve, signal.SIGKILL)
