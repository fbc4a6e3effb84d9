"""``holon task`` through the real console script: ids, exit codes, output."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest


def holon(script_runner: Any, *args: str, stdin: str | None = None) -> Any:
    kwargs: dict[str, Any] = {"print_result": False}
    if stdin is not None:
        import io

        kwargs["stdin"] = io.StringIO(stdin)
    return script_runner.run(["holon", *args], env=dict(os.environ), **kwargs)


def jrun(script_runner: Any, *args: str, **kw: Any) -> tuple[int, dict[str, Any]]:
    r = holon(script_runner, *args, "--json", **kw)
    return r.returncode, json.loads(r.stdout)


def wait_status(script_runner: Any, tid: str, want: str, within: float = 20) -> dict[str, Any]:
    end = time.monotonic() + within
    while True:
        _, d = jrun(script_runner, "task", "status", tid)
        if d["data"]["task"]["status"] == want or time.monotonic() > end:
            return d["data"]["task"]
        time.sleep(0.1)


def test_task_run_list_output_status(script_runner: Any, tmp_path: Path) -> None:
    r = holon(script_runner, "task", "run", "--workdir", str(tmp_path), "--", "echo hi; sleep 0.3")
    assert r.returncode == 0, r.stderr
    tid = r.stdout.strip()
    assert tid.startswith("task_")
    code, listed = jrun(script_runner, "task", "list")
    assert code == 0
    follow = holon(script_runner, "task", "output", tid, "--follow")
    assert follow.returncode == 0 and follow.stdout == "hi\n"
    assert "completed" in follow.stderr
    snap = wait_status(script_runner, tid, "completed")
    assert snap["exit_status"] == 0 and snap["command"]["workdir"] == str(tmp_path.resolve())
    code, out = jrun(script_runner, "task", "output", tid)
    assert out["data"]["retrieval_status"] == "success"
    code, listed = jrun(script_runner, "task", "list", "--all")
    assert [t["task_id"] for t in listed["data"]["tasks"]] == [tid]
    # the result rejoined the agent as one queued message
    end = time.monotonic() + 10
    while True:  # the result is admitted just after the terminal record is written
        st = json.loads(holon(script_runner, "status", "--json").stdout)["data"]
        if st["pending"] == 1 or time.monotonic() > end:
            break
        time.sleep(0.1)
    assert st["pending"] == 1
    stop = holon(script_runner, "task", "stop", tid)
    assert stop.returncode == 0 and "already completed" in stop.stdout


def test_bad_input_exit_codes(script_runner: Any, tmp_path: Path) -> None:
    r = holon(script_runner, "task", "status", "task_nope")
    assert r.returncode == 3 and "unknown task" in r.stderr
    code, err = jrun(script_runner, "task", "stop", "task_nope")
    assert code == 3 and err["ok"] is False and err["error"]["kind"] == "not_found"
    r = holon(script_runner, "task", "run", "--workdir", str(tmp_path / "missing"), "--", "true")
    assert r.returncode == 2
    tid = holon(script_runner, "task", "run", "--", "sleep 30").stdout.strip()
    r = holon(script_runner, "task", "input", tid, "hello")
    assert r.returncode == 4 and "accepts_input" in r.stderr
    stop = holon(script_runner, "task", "stop", tid)
    assert stop.returncode == 0 and "cancelled" in stop.stdout
    r = holon(script_runner, "task", "input", tid, "hello")
    assert r.returncode == 4


def test_task_input_from_stdin(script_runner: Any) -> None:
    tid = holon(
        script_runner, "task", "run", "--accepts-input", "--", "read a; echo got:$a"
    ).stdout.strip()
    r = holon(script_runner, "task", "input", tid, "-", stdin="line\n")
    assert r.returncode == 0, r.stderr
    wait_status(script_runner, tid, "completed")
    assert holon(script_runner, "task", "output", tid).stdout == "got:line\n"


def _run_exit_3(script_runner: Any) -> None:
    r = holon(script_runner, "task", "run", "--", "sh", "-c", "exit 3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith("task_")
    assert "could not start" not in r.stderr, r.stderr


def test_a_task_that_exits_at_once_started(script_runner: Any) -> None:
    """Issue 31 item 16: a command that ran and already exited non-zero is
    ``failed`` with an exit status; that is not "could not start: None"."""
    _run_exit_3(script_runner)
    _, listed = jrun(script_runner, "task", "list", "--all")
    (t,) = listed["data"]["tasks"]
    snap = wait_status(script_runner, t["task_id"], "failed")
    assert snap["exit_status"] == 3 and snap["error"] is None


@pytest.mark.slow
def test_task_run_start_exit_race_50_times(script_runner: Any) -> None:
    for _ in range(50):
        _run_exit_3(script_runner)


def test_a_task_that_cannot_start_says_why(script_runner: Any, tmp_path: Path) -> None:
    from holon_cli.model.task import never_started

    assert never_started(
        {"status": "failed", "exit_status": None, "signal": None, "error": "ENOENT"}
    )  # type: ignore[typeddict-item]
    assert not never_started({"status": "failed", "exit_status": 3, "signal": None, "error": None})  # type: ignore[typeddict-item]
    assert not never_started(
        {"status": "failed", "exit_status": None, "signal": "SIGKILL", "error": None}
    )  # type: ignore[typeddict-item]
