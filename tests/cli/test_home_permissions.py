"""Issue 35 item 8: every file and folder holon creates under ``HOLON_HOME``
is 0600 / 0700 (0700 for a copied executable), whichever command creates the
home first, whatever the umask.

Each creating command runs on a fresh home under umask 022 (the usual
default), then every entry of the home is checked. Before the fix ``holon
daemon start`` (and ``enqueue``, ``agent create`` ...) left the home 0755 and
the template's files 0644. Commands a model runs keep the user's umask (a
file an ``ExecCommand`` writes in a project is the user's file).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.inprocess_cli import bind_runner, run

__all__ = ["bind_runner"]
HOLON = [sys.executable, "-m", "holon_cli"]


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def open_to_others(home: Path) -> list[str]:
    """Every entry under ``home`` (itself included) others can read or enter."""
    bad = []
    for p in [home, *home.rglob("*")]:
        st = p.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        if stat.S_IMODE(st.st_mode) & 0o077:
            bad.append(f"{stat.S_IMODE(st.st_mode):04o} {p.relative_to(home.parent)}")
    return bad


def _model(tmp_path: Path) -> str:
    p = tmp_path / "model.yaml"
    p.write_text(yaml.safe_dump({"steps": [{"text": "done"}] * 4}))
    return f"scripted:{p}"


def _skill(tmp_path: Path) -> Path:
    s = tmp_path / "skill-src" / "lint"
    s.mkdir(parents=True)
    (s / "SKILL.md").write_text("---\nname: lint\ndescription: lints\n---\nRun it.\n")
    (s / "run.sh").write_text("#!/bin/sh\necho lint\n")
    (s / "run.sh").chmod(0o755)
    return s


def _repo(tmp_path: Path) -> Path:
    r = tmp_path / "project"
    r.mkdir()
    return r


# each: the command line (after `holon`), built from the test's tmp_path
COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "enqueue": lambda t: ["enqueue", "hello"],
    "home init": lambda t: ["home", "init"],
    "agent create": lambda t: ["agent", "create", "ops"],
    "status": lambda t: ["status"],
    "run": lambda t: ["run", "--keep-agent", "--model", _model(t), "hi"],
    "turn": lambda t: ["turn", "--model", _model(t)],
    "tick": lambda t: ["tick"],
    "task run": lambda t: ["task", "run", "--workdir", str(_repo(t)), "--", "true"],
    "trigger show": lambda t: ["trigger", "show"],
    "timer add": lambda t: ["timer", "add", "--after", "1h", "--message", "wake"],
    "workitem create": lambda t: ["workitem", "create", "ship it"],
    "workspace use": lambda t: ["workspace", "use", str(_repo(t))],
    "memory search": lambda t: ["memory", "search", "release"],
    "skills install": lambda t: ["skills", "install", str(_skill(t))],
    "debug prompt": lambda t: ["debug", "prompt"],
}


def _wait_gone(marker: str, timeout: float = 60.0) -> None:
    """Until no process has ``marker`` (a task id) in its command line: a
    task's supervisor outlives `holon task run` and writes the task's files
    until it exits (a later test must not find them)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        alive = False
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    alive = alive or marker.encode() in f.read()
            except OSError:
                continue
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"a process of {marker} still runs after {timeout} s")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_creating_command_makes_a_private_home(
    name: str, tmp_path: Path, holon_home: Path, umask_022: None
) -> None:
    argv = COMMANDS[name](tmp_path)
    if name == "turn":
        run("enqueue", "hello")  # something to turn (the turn writes its own files)
    res = run(*argv)
    assert res.returncode == 0, (name, res.stdout, res.stderr)
    if name == "task run":  # its supervisor writes on after the command: let it end
        _wait_gone(res.stdout.split()[-1])
    assert holon_home.is_dir(), name
    assert open_to_others(holon_home) == [], name
    assert os.umask(0o022) == 0o022  # the command gave this process its umask back


@pytest.mark.slow
def test_daemon_start_makes_a_private_home(
    tmp_path: Path, holon_home: Path, umask_022: None
) -> None:
    """The command the issue caught: a fresh home made by ``daemon start``
    (and the ``holon serve`` it spawns: run/, logs, the socket)."""
    env = {**os.environ, "HOLON_MODEL": _model(tmp_path)}
    out = subprocess.run(
        [*HOLON, "daemon", "start", "--listen", "127.0.0.1:0", "--json"],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        umask=0o022,
    )
    pid = None
    try:
        assert out.returncode == 0, out.stderr
        pid = json.loads(out.stdout)["data"]["pid"]
        sock = holon_home / "run" / "holon.sock"
        end = time.monotonic() + 30
        while not sock.exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert open_to_others(holon_home) == []
    finally:
        subprocess.run([*HOLON, "daemon", "stop"], capture_output=True, timeout=60, env=env)
        if isinstance(pid, int):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_model_run_command_keeps_the_users_umask(
    tmp_path: Path, holon_home: Path, umask_022: None
) -> None:
    """holon's own umask is 077; the command it runs for the model gets the
    user's (022 here), so a file it writes in a project is 0644."""
    wd = _repo(tmp_path)
    res = run("task", "run", "--workdir", str(wd), "--json", "--", "echo x > made.txt; umask")
    assert res.returncode == 0, res.stderr
    made = wd / "made.txt"
    end = time.monotonic() + 20
    while not made.exists() and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.1)
    assert stat.S_IMODE(made.stat().st_mode) == 0o644
    assert open_to_others(holon_home) == []


def test_apply_patch_in_a_workspace_uses_the_users_umask(
    tmp_path: Path, holon_home: Path, umask_022: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ApplyPatch`` run by a turn in the holon process (umask 077): a new
    file and folder in the user's project get the user's modes."""
    wd = _repo(tmp_path)
    patch = "*** Begin Patch\n*** Add File: sub/new.txt\n+hello\n*** End Patch\n"
    model = tmp_path / "patch.yaml"
    model.write_text(
        yaml.safe_dump(
            {
                "steps": [
                    {"tool_calls": [{"name": "ApplyPatch", "arguments": {"patch": patch}}]},
                    {"text": "done"},
                ]
            }
        )
    )
    monkeypatch.chdir(wd)
    res = run("run", "--model", f"scripted:{model}", "add the file")
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE((wd / "sub").stat().st_mode) == 0o755
    assert stat.S_IMODE((wd / "sub" / "new.txt").stat().st_mode) == 0o644
    assert open_to_others(holon_home) == []
