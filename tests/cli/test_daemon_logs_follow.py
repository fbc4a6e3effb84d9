"""`holon daemon logs --follow`: lines appended to the daemon log are printed
as they arrive, across a rotation; Ctrl-C ends it with exit 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from child_signals import default_sigint

from holon_cli.serve import daemon as d
from holon_cli.serve import daemon_logs


def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def test_follow_yields_appended_lines_and_survives_rotation(tmp_path: Path) -> None:
    """Each step waits on what the follower printed, not on a time: the old
    version slept 0.05 s and 0.08 s and assumed the follower had polled in
    between (on a loaded machine it had not, and lines were lost)."""
    log = d.log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("old line\n")
    _res, position = daemon_logs.logs_with_position(1)
    _append(log, "first\nsecond part")  # a line without its newline is held back
    follow = daemon_logs.follow_log(0.01, start=position)
    assert next(follow) == "first"
    _append(log, " done\n")
    # rotated at once, before the follower polls again: the old file is
    # still read to its end before the new one
    log.rename(log.with_name("daemon.log.1"))
    log.write_text("after rotation\n")
    assert next(follow) == "second part done"
    assert next(follow) == "after rotation"
    follow.close()


def test_follow_reads_a_log_rotated_before_it_started_from_the_old_file(
    tmp_path: Path,
) -> None:
    log = d.log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("boot\n")
    _res, position = daemon_logs.logs_with_position(1)
    _append(log, "last words\n")
    log.rename(log.with_name("daemon.log.1"))  # a restart rotated it
    log.write_text("new daemon\n")
    got: list[str] = []
    for line in daemon_logs.follow_log(0.01, stop=lambda: len(got) == 2, start=position):
        got.append(line)
    assert got == ["last words", "new daemon"]


def test_follow_continues_where_the_tail_stopped(tmp_path: Path) -> None:
    """A line logged between printing the tail and starting to follow is not lost."""
    log = d.log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("boot\n")
    res, position = daemon_logs.logs_with_position(1)
    assert res["lines"] == ["boot"]
    _append(log, "in between\n")
    got: list[str] = []
    for line in daemon_logs.follow_log(0.01, stop=lambda: bool(got), start=position):
        got.append(line)
    assert got == ["in between"]


def test_follow_reads_a_log_created_after_the_tail_from_its_start(tmp_path: Path) -> None:
    res, position = daemon_logs.logs_with_position(5)
    assert res["lines"] == []
    d.log_path().parent.mkdir(parents=True, exist_ok=True)
    d.log_path().write_text("first\n")
    got: list[str] = []
    for line in daemon_logs.follow_log(0.01, stop=lambda: bool(got), start=position):
        got.append(line)
    assert got == ["first"]


def _readline(proc: subprocess.Popen[str], timeout: float = 20.0) -> str:
    """``proc.stdout.readline()``, failing instead of hanging when no line comes."""
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    t.start()
    t.join(timeout)
    assert box, f"no output line within {timeout}s"
    return box[0]


def test_follow_with_json_is_a_usage_error(script_runner) -> None:
    res = script_runner.run(["holon", "daemon", "logs", "--follow", "--json"])
    assert res.returncode == 2
    assert "--follow" in res.stdout + res.stderr


@pytest.mark.script_launch_mode("subprocess")
def test_follow_prints_new_lines_and_ctrl_c_exits_130(tmp_path: Path) -> None:
    log = Path(os.environ["HOLON_HOME"]) / "run" / "daemon.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("boot\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "holon_cli", "daemon", "logs", "--follow", "--tail", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        assert proc.stdout is not None
        assert _readline(proc) == "boot\n"
        _append(log, "turn finished\n")
        assert _readline(proc) == "turn finished\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
