"""Turn engine through real `holon` processes: locking, crash replay, run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from child_signals import default_sigint

HOLON = [sys.executable, "-m", "holon_cli"]


def sh(
    *args: str, input: str | None = None, check: bool = False, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HOLON, *args], capture_output=True, text=True, input=input, timeout=timeout, check=check
    )


def write_script(path: Path, steps: list[dict]) -> str:
    path.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{path}"


def events(agent: str = "main") -> list[dict]:
    out = sh("tail", "--jsonl", "--agent", agent, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.slow
def test_concurrent_turns_exactly_one_runs(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "slow.yaml",
        [
            {
                "text": "working",
                "tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "sleep 1.5"}}],
            },
            {"text": "done"},
        ],
    )
    sh("enqueue", "one", check=True)
    sh("enqueue", "two", check=True)
    procs = [
        subprocess.Popen(
            [*HOLON, "turn", "--model", model],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    codes = sorted(p.wait(timeout=60) for p in procs)
    assert codes == [0, 75, 75], [p.stderr.read() for p in procs]
    starts = [e for e in events() if e["kind"] == "message_processing_started"]
    assert len(starts) == 1
    st = json.loads(sh("status", "--json").stdout)["data"]
    assert st["pending"] == 1 and st["processed"] == 1


@pytest.mark.slow
def test_crash_mid_turn_replays_without_rerunning_recorded_tools(
    tmp_path: Path, commands_on_host: Path
) -> None:
    marker = tmp_path / "ran.txt"
    model = write_script(
        tmp_path / "crash.yaml",
        [
            {
                "text": "step one",
                "tool_calls": [
                    {"name": "ExecCommand", "arguments": {"cmd": f"echo once >> {marker}"}}
                ],
            },
            # kills the holon process running this turn while the tool is in flight
            {
                "text": "step two",
                "tool_calls": [
                    {
                        "name": "ExecCommand",
                        "arguments": {
                            # $PPID is the command's supervisor; its parent is `holon turn`
                            "cmd": (
                                f"echo twice >> {marker}; kill -9 $(awk '{{print $4}}' "
                                "/proc/$PPID/stat); sleep 5"
                            )
                        },
                    }
                ],
            },
            {"text": "finished after replay"},
        ],
    )
    mid = sh("enqueue", "do the work", check=True).stdout.strip()
    first = sh("turn", "--model", model)
    assert first.returncode == -9 or first.returncode == 137, (first.returncode, first.stderr)
    st = json.loads(sh("status", "--json").stdout)["data"]
    assert st["in_flight"] == 1
    assert (
        st["status"] == "awake_running"
        and st["stale_run"] is True
        and "replays" in st["lifecycle_hint"]
    )
    second = sh("turn", "--model", model, "--json")
    assert second.returncode == 0, second.stderr
    res = json.loads(second.stdout)["data"]
    assert res["message_id"] == mid and res["replayed"] is True
    assert res["final_text"] == "finished after replay"
    # the recorded tool did not run again; the in-flight one was not re-run
    assert marker.read_text().splitlines() == ["once", "twice"]
    tr = json.loads(sh("transcript", "--json").stdout)["data"]["entries"]
    interrupted = [
        t
        for t in tr
        if t["kind"] == "tool_result" and (t.get("error") or {}).get("kind") == "interrupted"
    ]
    assert len(interrupted) == 1
    kinds = [e["kind"] for e in events()]
    assert "message_replayed" in kinds
    st = json.loads(sh("status", "--json").stdout)["data"]
    assert st["pending"] == 0 and st["in_flight"] == 0 and st["processed"] == 1
    assert sh("home", "check").returncode == 0


# The next three need no real process: they run `holon` in-process.


def test_run_json_offline_example(script_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = Path(__file__).resolve().parents[2]
    res = script_runner.run(
        [
            "holon",
            "run",
            "--json",
            "--model",
            f"scripted:{repo / 'examples' / 'hello.yaml'}",
            "What is here?",
        ],
        cwd=repo,
        print_result=False,
    )
    assert res.returncode == 0, res.stderr
    env = json.loads(res.stdout)
    assert env["ok"] is True and env["command"] == "run"
    d = env["data"]
    for k in (
        "final_status",
        "final_text",
        "raw_final_text",
        "agent_id",
        "model_rounds",
        "token_usage",
        "provider_attempt_timeline",
    ):
        assert k in d
    assert d["final_status"] == "completed" and d["model_rounds"] == 2
    assert d["token_usage"] == {"input_tokens": 1067, "output_tokens": 79, "total_tokens": 1146}
    tl = d["provider_attempt_timeline"]
    assert all(a["outcome"] == "succeeded" for a in tl["attempts"])
    ref = f"scripted:{repo / 'examples' / 'hello.yaml'}"
    assert tl["requested_model_ref"] == ref and tl["winning_model_ref"] == ref
    assert tl["aggregated_token_usage"] == d["token_usage"]
    # the temporary agent is private: hidden from the normal listing
    listed = json.loads(script_runner.run(["holon", "agent", "list", "--json"]).stdout)
    assert d["agent_id"] not in [a["agent_id"] for a in listed["data"]["agents"]]


def test_run_provider_failure_exit_5_with_artifact(script_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = write_script(
        tmp_path / "fail.yaml", [{"fail": {"kind": "auth", "status": 401, "message": "bad key"}}]
    )
    res = script_runner.run(["holon", "run", "--json", "--model", model, "hi"])
    assert res.returncode == 5
    env = json.loads(res.stdout)
    assert env["ok"] is False and env["error"]["kind"] == "provider_failure"
    assert (
        env["data"]["final_status"] == "failed"
        and "bad key" in env["data"]["failure_artifact"]["summary"]
    )


def test_turn_without_model_is_a_clear_error(script_runner) -> None:  # type: ignore[no-untyped-def]
    script_runner.run(["holon", "enqueue", "x"], check=True)
    res = script_runner.run(["holon", "turn"])
    assert (
        res.returncode == 2
        and "no model configured" in res.stderr
        and "Traceback" not in res.stderr
    )
    st = json.loads(script_runner.run(["holon", "status", "--json"]).stdout)["data"]
    assert st["pending"] == 1  # nothing was dequeued


@pytest.mark.slow
def test_ctrl_c_mid_turn_leaves_message_for_replay(
    tmp_path: Path, sigint_ignored: None, commands_on_host: Path
) -> None:
    import signal
    import time as _time

    model = write_script(
        tmp_path / "slow.yaml",
        [
            {
                "text": "working",
                "tool_calls": [
                    {
                        "name": "ExecCommand",
                        "arguments": {"cmd": f"echo $$ > {tmp_path / 'pid'}; sleep 20"},
                    }
                ],
            },
            {"text": "done after replay"},
        ],
    )
    sh("enqueue", "long job", check=True)
    p = subprocess.Popen(
        [*HOLON, "turn", "--model", model],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    deadline = _time.time() + 20
    while _time.time() < deadline and not any(
        e["kind"] == "assistant_round_recorded" for e in events()
    ):
        _time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130 and "Traceback" not in err
    import os as _os

    child = int((tmp_path / "pid").read_text())
    gone = False
    for _ in range(50):  # the tool's process group is terminated, not orphaned
        try:
            _os.kill(child, 0)
        except ProcessLookupError:
            gone = True
            break
        _time.sleep(0.1)
    assert gone
    st = json.loads(sh("status", "--json").stdout)["data"]
    assert st["status"] == "awake_idle" and st["in_flight"] == 1
    assert "turn_interrupted" in [e["kind"] for e in events()]
    res = sh("turn", "--model", model, "--json")
    d = json.loads(res.stdout)["data"]
    assert res.returncode == 0 and d["replayed"] and d["final_text"] == "done after replay"
