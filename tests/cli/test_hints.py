"""Hints give the advice that fits the cause (issue 31 item 20): a socket
that cannot be created in a read-only home is not "pass a shorter --socket
path"; `holon run --help` names run's real default agent."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from holon_cli.serve.http.listen import unix_socket_error


@pytest.mark.parametrize(
    ("path", "err", "expect", "never"),
    [
        ("/h/run/holon.sock", errno.EROFS, "not writable", "shorter"),
        ("/h/run/holon.sock", errno.EACCES, "not writable", "shorter"),
        ("/h/file/holon.sock", errno.ENOTDIR, "not a folder", "shorter"),
        ("/h/run/holon.sock", errno.EADDRINUSE, "something else is at", "shorter"),
        ("/" + "x" * 120 + ".sock", errno.EINVAL, "shorter --socket path", "writable"),
    ],
)
def test_the_socket_hint_fits_the_cause(path: str, err: int, expect: str, never: str) -> None:
    exc = unix_socket_error(path, OSError(err, os.strerror(err)))
    assert exc.exit_code == 4 and path in exc.message
    assert expect in (exc.hint or "") and never not in (exc.hint or "")


def _bwrap_works() -> bool:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


def test_serve_on_a_read_only_home_says_so(holon_home: Path) -> None:
    """A real read-only home (a read-only bind mount, which holds for root
    too): serve refuses with the folder and a writable alternative."""
    if not _bwrap_works():
        pytest.skip("bubblewrap not installed (or cannot mount here)")
    from holon_cli.runtime.agents.lifecycle import open_agent

    open_agent(None)  # an initialised home, then made read-only
    holon = str(Path(sys.executable).with_name("holon"))
    res = subprocess.run(
        [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            # the home again, read-only: a fresh /dev hides a home under /dev/shm
            "--ro-bind",
            str(holon_home.parent),
            str(holon_home.parent),
            "--die-with-parent",  # a serve that hangs goes with the timed-out bwrap
            "--",
            holon,
            "serve",
            "--listen",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOLON_HOME": str(holon_home)},
    )
    assert res.returncode == 4, res.stderr
    assert "Read-only file system" in res.stderr and "not writable" in res.stderr
    assert "shorter" not in res.stderr


def test_run_help_names_the_temporary_agent_default(script_runner: Any) -> None:
    res = script_runner.run(["holon", "run", "--help"])
    text = " ".join(res.stdout.split())
    agent_line = text[text.index("-a, --agent ID") : text.index("--create-agent Create")]
    assert "'main'" not in agent_line and "temporary private agent" in agent_line
