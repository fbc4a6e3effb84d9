"""``holon enqueue`` admission: snake_case JSON and the kind/origin policy
(in-process), and bytes that are not UTF-8 (argv and stdin) through a real
process, where the operating system hands them over."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inprocess_cli import bind_runner as bind_runner  # autouse: holon() below runs in-process
from inprocess_cli import run as run_holon


def holon(*args: str | bytes, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """``holon ARGS``: in-process for text arguments, a real process for bytes
    arguments or stdin. Output as bytes either way."""
    if stdin == b"" and all(isinstance(a, str) for a in args):
        res = run_holon(*args)
        return subprocess.CompletedProcess(
            args, res.returncode, res.stdout.encode(), res.stderr.encode()
        )
    return subprocess.run(
        [sys.executable, "-m", "holon_cli", *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        timeout=60,
    )


def inbox(home: Path) -> list[Path]:
    box = home / "agents" / "main" / ".holon" / "inbox"
    return sorted(p for d in ("new", "cur") for p in (box / d).glob("*.json"))


def one_json(out: bytes) -> dict[str, Any]:
    lines = [ln for ln in out.decode().splitlines() if ln.strip()]
    assert len(lines) == 1, out
    obj: dict[str, Any] = json.loads(lines[0])
    return obj


def _keys(d: Any, skip: tuple[str, ...] = ("body", "metadata")) -> list[str]:
    out: list[str] = []
    if isinstance(d, dict):
        for k, v in d.items():
            out.append(k)
            if k not in skip:
                out.extend(_keys(v, skip))
    return out


def test_enqueue_json_is_snake_case_on_stdout_and_on_disk(holon_home: Path) -> None:
    res = holon("enqueue", "hi", "--json", "--origin", "channel:slack", "--correlation-id", "c1")
    assert res.returncode == 0, res.stderr
    data = one_json(res.stdout)["data"]
    assert data["v"] == 2 and data["agent_id"] == "main" and "created_at" in data
    for key in _keys(data):
        assert re.fullmatch(r"[a-z0-9_]+", key), key
    assert data["origin"] == {"kind": "channel", "channel_id": "slack"}
    [path] = inbox(holon_home)
    assert json.loads(path.read_text()) == data


@pytest.mark.parametrize(
    ("kind", "origin"),
    [
        ("operator_prompt", "channel:slack"),
        ("control", "webhook:github"),
        ("timer_tick", "operator"),
    ],
)
def test_kind_that_does_not_match_its_origin_is_refused(
    holon_home: Path, kind: str, origin: str
) -> None:
    res = holon("enqueue", "do it", "--kind", kind, "--origin", origin, "--json")
    assert res.returncode == 2, res.stderr
    err = one_json(res.stdout)["error"]
    assert err["kind"] == "kind_origin_mismatch" and kind in err["message"]
    assert b"Traceback" not in res.stderr
    assert inbox(holon_home) == []


@pytest.mark.parametrize("origin", ["system:scheduler", "task:tsk_1", "timer:tmr_1"])
def test_cli_cannot_admit_runtime_owned_origins(holon_home: Path, origin: str) -> None:
    res = holon("enqueue", "tick", "--origin", origin, "--json")
    assert res.returncode == 2, res.stderr
    assert one_json(res.stdout)["error"]["kind"] == "origin_not_admissible"
    assert inbox(holon_home) == []


def test_non_utf8_argument_is_a_usage_error(holon_home: Path) -> None:
    res = holon("enqueue", b"\xff", "--json")
    assert res.returncode == 2, res.stderr
    err = one_json(res.stdout)["error"]
    # checked for every command at the CLI entry point, naming the argument
    assert "not valid UTF-8" in err["message"] and err["kind"] == "invalid_utf8"
    assert b"Traceback" not in res.stderr
    assert inbox(holon_home) == []
    res = holon("enqueue", "ok", "--origin", b"channel:\xff", "--json")
    assert res.returncode == 2 and b"Traceback" not in res.stderr
    assert inbox(holon_home) == []


@pytest.mark.parametrize("data", [b"\xff", b"ok \xc3\x28 bad", b"\x00\xff\xfe binary"])
def test_binary_stdin_is_a_usage_error(holon_home: Path, data: bytes) -> None:
    res = holon("enqueue", "-", "--json", stdin=data)
    assert res.returncode == 2, res.stderr
    assert one_json(res.stdout)["error"]["message"] == "message is not valid UTF-8"
    assert b"Traceback" not in res.stderr
    res = holon("enqueue", "-", stdin=data)
    assert res.returncode == 2 and b"not valid UTF-8" in res.stderr
    assert b"Traceback" not in res.stderr
    assert inbox(holon_home) == []


def test_utf8_stdin_still_works(holon_home: Path) -> None:
    res = holon("enqueue", "-", stdin="héllo ✓\n".encode())
    assert res.returncode == 0, res.stderr
    [path] = inbox(holon_home)
    assert json.loads(path.read_text())["body"]["text"] == "héllo ✓\n"
