"""Crash containment of commands and tasks through real `holon` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

HOLON = [sys.executable, "-m", "holon_cli"]


def sh(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOLON, *args], capture_output=True, text=True, timeout=timeout)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def wait_for(pred, within: float = 15.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + within
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return bool(pred())


def ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


def script(tmp_path: Path, cmd: str) -> str:
    path = tmp_path / "model.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "steps": [
                    {
                        "text": "running",
                        "tool_calls": [
                            {
                                "name": "ExecCommand",
                                "arguments": {"cmd": cmd, "yield_time_ms": 120000},
                            }
                        ],
                    },
                    {"text": "done after replay"},
                ]
            }
        )
    )
    return f"scripted:{path}"


@pytest.mark.slow
def test_a_sigkilled_turn_leaves_no_command_running(tmp_path: Path, commands_on_host: Path) -> None:
    # host pids and a pid file outside the root: unsandboxed
    pidfile = tmp_path / "cmd.pid"
    model = script(tmp_path, f"echo $$ > {pidfile}; sleep 300")
    assert sh("enqueue", "go").returncode == 0
    turn = subprocess.Popen([*HOLON, "turn", "--model", model], stderr=subprocess.PIPE)
    assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "")
    pid = int(pidfile.read_text())
    turn.send_signal(signal.SIGKILL)
    turn.wait(timeout=10)
    assert wait_for(lambda: not alive(pid), 10), "the command outlived the killed turn"
    res = sh("turn", "--model", model, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["data"]["final_text"] == "done after replay"


@pytest.mark.slow
def test_killing_turn_and_supervisor_still_stops_everything_before_replay(
    tmp_path: Path, commands_on_host: Path
) -> None:
    pidfile = tmp_path / "cmd.pid"
    escaped = tmp_path / "escaped.pid"
    model = script(
        tmp_path,
        f"setsid sh -c 'echo $$ > {escaped}; exec sleep 300' & echo $$ > {pidfile}; sleep 300",
    )
    assert sh("enqueue", "go").returncode == 0
    turn = subprocess.Popen([*HOLON, "turn", "--model", model], stderr=subprocess.PIPE)
    assert wait_for(lambda: pidfile.exists() and escaped.exists() and escaped.read_text().strip())
    pid = int(pidfile.read_text())
    esc = int(escaped.read_text())
    sup = ppid(pid)
    # the whole tree at once: the turn and the supervisor
    os.kill(sup, signal.SIGKILL)
    turn.send_signal(signal.SIGKILL)
    turn.wait(timeout=10)
    assert wait_for(lambda: not alive(pid), 10), "parent-death signal did not stop the command"
    assert alive(esc), "the setsid'd process escaped the group (what the marker is for)"
    res = sh("turn", "--model", model, "--json")
    assert res.returncode == 0, res.stderr
    assert not alive(esc), "the next turn did not reap the escaped process"
    tr = json.loads(sh("transcript", "--json").stdout)["data"]["entries"]
    assert any((t.get("error") or {}).get("kind") == "interrupted" for t in tr)
    home = Path(os.environ["HOLON_HOME"]) / "agents" / "main" / ".holon" / "tasks"
    assert not home.exists() or not any(home.iterdir())
