"""Surprises found by trying holon as a brand-new user would, one test each.

Bad input ends in a clear message and the contract's exit code, with exactly
one JSON object on stdout under ``--json``, and nothing stored.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from child_signals import default_sigint
from scenarios import wait_for_event


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
    """Every message file the agent holds (admitted, or ingested at once)."""
    inbox = holon_home / "agents" / "main" / ".holon" / "inbox"
    return sorted(
        p
        for sub in ("new", "cur", "tmp")
        if (inbox / sub).is_dir()
        for p in (inbox / sub).iterdir()
    )


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
    assert env["error"]["kind"] == "invalid_utf8"
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
    assert "Traceback" not in res.stderr and "not valid UTF-8" in res.stderr

    res = run(script_runner, *args, "--json", stdin=binary_stdin(b"ok \xff\xfe"))
    assert res.returncode == 2, res.stderr
    env = one_json(res)
    assert env["command"] == command
    assert env["error"]["kind"] in ("usage_error", "invalid_utf8")
    assert pending(holon_home) == []


def test_utf8_stdin_and_arguments_still_work(script_runner: Any, holon_home: Path) -> None:
    assert run(script_runner, "agent", "create", "main").returncode == 0
    res = run(script_runner, "enqueue", "-", stdin=binary_stdin("héllo ✓".encode()))
    assert res.returncode == 0, res.stderr
    res = run(script_runner, "enqueue", "grüße")
    assert res.returncode == 0, res.stderr
    assert len(pending(holon_home)) == 2


# --- Ctrl-C under --json: still exactly one JSON object --------------------


@pytest.mark.parametrize("as_json", [True, False])
def test_ctrl_c_during_turn_is_exit_130_with_one_json_object(
    script_runner: Any, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    import holon_cli.runtime.turn as turn_mod

    assert run(script_runner, "agent", "create", "main").returncode == 0

    def interrupted(*_a: Any, **_k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(turn_mod, "run_turn", interrupted)
    res = run(script_runner, "turn", *(["--json"] if as_json else []))
    assert res.returncode == 130, res.stderr
    assert "Traceback" not in res.stderr
    if as_json:
        env = one_json(res)
        assert env["ok"] is False and env["command"] == "turn"
        assert env["error"]["kind"] == "interrupted"
    else:
        assert res.stdout == "" and "Interrupted" in res.stderr


def _holon_proc(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    # default_sigint: a background job's child would ignore Ctrl-C
    return subprocess.Popen(
        [sys.executable, "-m", "holon_cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )


@pytest.mark.slow
def test_two_turns_at_once_one_is_busy_and_ctrl_c_loses_nothing(
    holon_home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "slow.yaml"
    script.write_text("steps:\n  - sleep_ms: 20000\n    text: slow\n  - text: done after replay\n")
    env = dict(os.environ, HOLON_HOME=str(holon_home))
    h = [sys.executable, "-m", "holon_cli"]
    subprocess.run(
        [*h, "agent", "create", "main", "--model", f"scripted:{script}"],
        env=env,
        check=True,
        capture_output=True,
    )
    subprocess.run([*h, "enqueue", "hello"], env=env, check=True, capture_output=True)
    first = _holon_proc("turn", "--json", env=env)
    try:
        wait_for_event(holon_home, "message_processing_started")
        second = subprocess.run(
            [*h, "turn", "--json"], env=env, capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 75, second.stderr
        assert json.loads(second.stdout)["error"]["kind"] == "busy"
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 130, err
    assert json.loads(out)["error"]["kind"] == "interrupted" and len(out.splitlines()) == 1
    # nothing lost: the next turn replays the message and completes it
    again = subprocess.run(
        [*h, "turn", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0, again.stderr
    status = json.loads(
        subprocess.run([*h, "status", "--json"], env=env, capture_output=True, text=True).stdout
    )["data"]
    assert status["pending"] == 0 and status["in_flight"] == 0 and status["processed"] == 1


# --- the home itself -------------------------------------------------------


@pytest.mark.parametrize("args", [["status"], ["enqueue", "hi"], ["home", "check"]])
def test_holon_home_pointing_at_a_file_says_so(
    script_runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    afile = tmp_path / "not-a-dir"
    afile.write_text("x")
    monkeypatch.setenv("HOLON_HOME", str(afile))
    res = run(script_runner, *args)
    assert res.returncode == 1, res.stderr
    assert "is a file, not a folder" in res.stderr + res.stdout
    assert "disk has space" not in res.stderr and "Traceback" not in res.stderr
    res = run(script_runner, *args, "--json")
    env = one_json(res)
    assert env["ok"] is False and "is a file, not a folder" in json.dumps(env)
    assert afile.read_text() == "x"


@pytest.mark.parametrize(
    ("text", "says"),
    [("bogus: 1\n", "unknown key 'bogus'"), ("model: [\n", "invalid YAML")],
)
def test_home_check_reports_a_broken_config(
    script_runner: Any, holon_home: Path, text: str, says: str
) -> None:
    assert run(script_runner, "home", "init").returncode == 0
    (holon_home / "config.yaml").write_text(text)
    res = run(script_runner, "home", "check")
    assert res.returncode == 1, res.stdout
    assert f"PROBLEM {holon_home / 'config.yaml'}: " in res.stdout and says in res.stdout
    env = one_json(run(script_runner, "home", "check", "--json"))
    [problem] = env["error"]["details"]["problems"]
    assert problem["path"] == str(holon_home / "config.yaml") and says in problem["message"]
    # a valid config is fine again
    (holon_home / "config.yaml").write_text("model: scripted:x.yaml\n")
    assert run(script_runner, "home", "check").returncode == 0


# --- one damaged agent among healthy ones -----------------------------------


def test_a_damaged_agent_fails_cleanly_everywhere_and_the_others_do_not(
    script_runner: Any, holon_home: Path
) -> None:
    for name in ("alpha", "beta"):
        assert run(script_runner, "agent", "create", name).returncode == 0
        for i in range(3):
            assert run(script_runner, "enqueue", f"m{i}", "-a", name).returncode == 0
    lay = holon_home / "agents" / "beta" / ".holon"
    led = lay / "ledger" / "queue.jsonl"
    lines = led.read_bytes().splitlines(keepends=True)
    led.write_bytes(lines[0] + b"#GARBAGE" + lines[1][8:] + b"".join(lines[2:]))
    (lay / "state" / "queue.json").unlink()  # no snapshot to skip past the damage
    where = f"{led}:2"
    for args in (["status", "-a", "beta"], ["queue", "list", "-a", "beta"]):
        res = run(script_runner, *args)
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        assert where in res.stderr, res.stderr
        env = one_json(run(script_runner, *args, "--json"))
        assert env["error"]["kind"] == "corrupt_state"
        assert env["error"]["details"]["line"] == 2
    res = run(script_runner, "home", "check")
    assert res.returncode == 1 and f"PROBLEM {where}: " in res.stdout
    # the healthy agent is untouched
    ok = one_json(run(script_runner, "status", "-a", "alpha", "--json"))
    assert ok["ok"] is True and ok["data"]["pending"] == 3


# --- paths that are not UTF-8 ------------------------------------------------


def test_a_holon_home_path_that_is_not_utf8_is_refused_up_front(
    script_runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every record stores paths as UTF-8 JSON: such a home used to dequeue a
    # message and then crash mid-turn on every retry
    bad = os.fsdecode(os.fsencode(str(tmp_path)) + b"/h\xff")
    monkeypatch.setenv("HOLON_HOME", bad)
    res = run(script_runner, "enqueue", "hi", "--json")
    assert res.returncode == 2, res.stderr
    env = one_json(res)
    assert env["error"]["kind"] == "invalid_utf8" and "HOLON_HOME" in env["error"]["message"]
    assert not os.path.exists(bad)


def test_a_workspace_path_that_is_not_utf8_is_a_clean_error(
    script_runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = os.fsdecode(os.fsencode(str(tmp_path)) + b"/w\xff")
    os.mkdir(ws)
    monkeypatch.chdir(ws)
    script = tmp_path / "s.yaml"
    script.write_text("steps:\n  - text: ok\n")
    res = run(script_runner, "run", "--json", "--model", f"scripted:{script}", "hi")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    env = one_json(res)
    assert env["error"]["kind"] == "invalid_utf8"


def test_a_whole_tool_result_reference_renders_as_json_not_a_python_repr(
    script_runner: Any, tmp_path: Path
) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(
        "steps:\n"
        "  - tool_calls: [{name: ExecCommand, id: c, arguments: {cmd: 'echo hi'}}]\n"
        "  - text: 'whole: {{c}}'\n"
    )
    res = run(script_runner, "run", "--json", "--model", f"scripted:{script}", "go")
    assert res.returncode == 0, res.stderr
    final = one_json(res)["data"]["final_text"]
    assert final.startswith("whole: {") and "'disposition'" not in final, final
    assert json.loads(final.removeprefix("whole: "))["stdout_preview"] == "hi\n"
