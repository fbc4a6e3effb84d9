"""Surprises found by trying holon as a brand-new user would, one test each.

Bad input ends in a clear message and the contract's exit code, with exactly
one JSON object on stdout under ``--json``, and nothing stored.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest


def run(script_runner: Any, *args: str, stdin: Any = None) -> Any:
    return script_runner.run(
        ["holon", *args], env=dict(os.environ), stdin=stdin, print_result=False
    )


def one_json(res: Any) -> dict[str, Any]:
    """stdout is exactly one JSON object (one line)."""
    lines = res.stdout.splitlines()
    assert len(lines) == 1, res.stdout
    obj: dict[str, Any] = json.loads(lines[0])
    return obj


def binary_stdin(data: bytes) -> io.TextIOWrapper:
    # what a C.UTF-8 locale gives a real process: stdin decoded with surrogateescape
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")


NOT_UTF8 = os.fsdecode(b"obj \xff")  # how Python hands `$'obj \xff'` to argv


def pending(holon_home: Path) -> list[Path]:
    inbox = holon_home / "agents" / "main" / ".holon" / "inbox" / "new"
    return sorted(inbox.iterdir()) if inbox.is_dir() else []


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["workitem", "create", NOT_UTF8], "workitem create"),
        (["enqueue", NOT_UTF8], "enqueue"),
        (["agent", "create", NOT_UTF8], "agent create"),
        ([NOT_UTF8], "holon"),
    ],
)
def test_an_argument_that_is_not_utf8_is_a_usage_error(
    script_runner: Any, holon_home: Path, args: list[str], command: str
) -> None:
    assert run(script_runner, "agent", "create", "main").returncode == 0
    res = run(script_runner, *args)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert "not valid UTF-8" in res.stderr and res.stdout == ""

    res = run(script_runner, *args, "--json")
    assert res.returncode == 2, res.stderr
    env = one_json(res)
    assert env["ok"] is False and env["command"] == command
    assert env["error"]["kind"] == "usage_error"
    assert "not valid UTF-8" in env["error"]["message"]
    assert "\\xff" in env["error"]["message"]  # the bad byte is shown, escaped
    # nothing stored
    assert pending(holon_home) == []
    assert not list((holon_home / "agents" / "main" / "work-items").glob("*"))


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["enqueue", "-"], "enqueue"),
        (["workitem", "create", "obj", "--plan-file", "-"], "workitem create"),
        (["run", "-", "--model", "scripted:/nope.yaml"], "run"),
    ],
)
def test_binary_stdin_is_a_usage_error(
    script_runner: Any, holon_home: Path, args: list[str], command: str
) -> None:
    assert run(script_runner, "agent", "create", "main").returncode == 0
    res = run(script_runner, *args, stdin=binary_stdin(b"\xff\xfe"))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "stdin is not valid UTF-8" in res.stderr

    res = run(script_runner, *args, "--json", stdin=binary_stdin(b"ok \xff\xfe"))
    assert res.returncode == 2, res.stderr
    env = one_json(res)
    assert env["command"] == command and env["error"]["kind"] == "usage_error"
    assert pending(holon_home) == []


def test_utf8_stdin_and_arguments_still_work(script_runner: Any, holon_home: Path) -> None:
    assert run(script_runner, "agent", "create", "main").returncode == 0
    res = run(script_runner, "enqueue", "-", stdin=binary_stdin("héllo ✓".encode()))
    assert res.returncode == 0, res.stderr
    res = run(script_runner, "enqueue", "grüße")
    assert res.returncode == 0, res.stderr
    assert len(pending(holon_home)) == 2
