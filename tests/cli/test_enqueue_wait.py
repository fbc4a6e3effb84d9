"""`holon enqueue --wait [--timeout]`: the outcome of *that* message, whoever
settles it; and `--idempotency-key`: one message per key within 24 h."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.turn import run_turn
from holon_cli.tools.catalog import default_catalog


def script(tmp_path: Path, texts: list[str], name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"steps": [{"text": t} for t in texts]}))
    return f"scripted:{p}"


def turns_when_queued(model: str, n: int, agent: str | None = None) -> threading.Thread:
    """Another `holon turn` (a thread of this process): once the waiting
    enqueue has admitted its message, run ``n`` turns."""
    store = open_agent(agent)  # created here: not by two threads at once

    def go() -> None:
        end = time.monotonic() + 20
        while time.monotonic() < end and q.pending_count(store) < n:
            time.sleep(0.02)
        for _ in range(n):
            run_turn(store=store, cli_model=model, catalog=default_catalog())

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def test_wait_prints_the_final_text_of_its_own_message(script_runner: Any, tmp_path: Path) -> None:
    script_runner.run(["holon", "enqueue", "older"], check=True)
    t = turns_when_queued(script(tmp_path, ["answer to older", "answer to mine"]), 2)
    res = script_runner.run(["holon", "enqueue", "mine", "--wait", "--timeout", "20s"])
    t.join(10)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "answer to mine\n"


def test_wait_json_has_the_outcome(script_runner: Any, tmp_path: Path) -> None:
    t = turns_when_queued(script(tmp_path, ["done it"]), 1)
    res = script_runner.run(["holon", "enqueue", "do it", "--wait", "--json"])
    t.join(10)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    d = out["data"]
    assert out["ok"] and out["command"] == "enqueue"
    assert d["message_id"].startswith("msg_") and d["status"] == "processed"
    assert d["final_text"] == "done it"
    assert d["brief"]["kind"] == "result" and d["brief"]["related_message_id"] == d["message_id"]


def test_wait_times_out_with_exit_75_and_the_id(script_runner: Any) -> None:
    t0 = time.monotonic()
    res = script_runner.run(["holon", "enqueue", "nobody turns", "--wait", "--timeout", "300ms"])
    assert res.returncode == 75
    assert time.monotonic() - t0 < 5
    mid = res.stdout.strip()
    assert mid.startswith("msg_") and mid in res.stderr and "not settled" in res.stderr
    assert q.load(open_agent(None)).entries[mid]["status"] == "queued"  # nothing lost
    res = script_runner.run(["holon", "enqueue", "again", "--wait", "--timeout=1ms", "--json"])
    assert res.returncode == 75
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "wait_timeout" and err["details"]["message_id"] in err["message"]


def test_wait_reports_a_failed_turn_with_exit_5(script_runner: Any, tmp_path: Path) -> None:
    p = tmp_path / "fail.yaml"
    p.write_text(yaml.safe_dump({"steps": [{"fail": {"kind": "client_error", "status": 400}}]}))
    t = turns_when_queued(f"scripted:{p}", 1)
    res = script_runner.run(["holon", "enqueue", "x", "--wait", "--json"])
    t.join(10)
    assert res.returncode == 5
    out = json.loads(res.stdout)
    assert out["ok"] is False and out["error"]["kind"] == "message_aborted"
    assert out["data"]["status"] == "aborted" and out["data"]["brief"]["kind"] == "failure"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--timeout", "5s"], "--timeout needs --wait"),
        (["--wait", "--timeout", "0s"], "must be positive"),
        (["--wait", "--timeout", "soon"], "--timeout"),
    ],
)
def test_bad_wait_flags_are_usage_errors_and_admit_nothing(
    script_runner: Any, args: list[str], needle: str
) -> None:
    res = script_runner.run(["holon", "enqueue", "x", *args])
    assert res.returncode == 2 and needle in res.stderr
    store = open_agent(None)
    assert q.pending_count(store) == 0


@pytest.mark.slow
@pytest.mark.script_launch_mode("subprocess")
def test_wait_for_a_turn_run_by_another_process(script_runner: Any, tmp_path: Path) -> None:
    import subprocess
    import sys

    model = script(tmp_path, ["from another process"])
    waiter = subprocess.Popen(
        [sys.executable, "-m", "holon_cli", "enqueue", "hi", "--wait", "--timeout", "30s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        store = open_agent(None)
        end = time.monotonic() + 20
        while q.pending_count(store) == 0 and time.monotonic() < end:
            time.sleep(0.02)
        res = script_runner.run(["holon", "turn", "--model", model])
        assert res.returncode == 0, res.stderr
        out, err = waiter.communicate(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    assert out == "from another process\n"


# ---------------------------------------------------------------- idempotency


def test_the_same_key_admits_one_message_and_prints_the_first_id(script_runner: Any) -> None:
    first = script_runner.run(["holon", "enqueue", "report", "--idempotency-key", "job-7"])
    again = script_runner.run(["holon", "enqueue", "report", "--idempotency-key", "job-7"])
    other = script_runner.run(["holon", "enqueue", "report", "--idempotency-key", "job-8"])
    assert first.returncode == again.returncode == other.returncode == 0
    assert first.stdout == again.stdout and other.stdout != first.stdout
    store = open_agent(None)
    assert q.pending_count(store) == 2
    from holon_cli.runtime.idempotency import find_envelope

    env = find_envelope(store, first.stdout.strip())
    assert env is not None and env["metadata"]["idempotency_key"] == "job-7"
    js = script_runner.run(["holon", "enqueue", "x", "--idempotency-key", "job-7", "--json"])
    d = json.loads(js.stdout)["data"]
    assert d["id"] == first.stdout.strip() and d["duplicate"] is True


def test_the_key_holds_after_the_message_is_settled(script_runner: Any, tmp_path: Path) -> None:
    first = script_runner.run(["holon", "enqueue", "once", "--idempotency-key", "k"])
    model = script(tmp_path, ["ok"])
    assert script_runner.run(["holon", "turn", "--model", model]).returncode == 0
    again = script_runner.run(["holon", "enqueue", "once", "--idempotency-key", "k"])
    assert again.stdout == first.stdout
    assert q.load(open_agent(None)).processed == 1 and q.pending_count(open_agent(None)) == 0


def test_a_key_older_than_24h_admits_anew(script_runner: Any, now: list[float]) -> None:
    first = script_runner.run(["holon", "enqueue", "daily", "--idempotency-key", "d"])
    now[0] += 24 * 3600 + 1
    again = script_runner.run(["holon", "enqueue", "daily", "--idempotency-key", "d"])
    assert again.returncode == 0 and again.stdout != first.stdout
    assert q.pending_count(open_agent(None)) == 2


def test_a_key_file_naming_an_undelivered_message_admits_anew(script_runner: Any) -> None:
    """A kill after the key file was written but before the delivery."""
    from holon_cli.runtime import idempotency as idem

    store = open_agent(None)
    idem.record(store, "k", "msg_never_delivered")
    res = script_runner.run(["holon", "enqueue", "x", "--idempotency-key", "k"])
    assert res.returncode == 0 and res.stdout.strip() != "msg_never_delivered"
    assert q.pending_count(store) == 1
    again = script_runner.run(["holon", "enqueue", "x", "--idempotency-key", "k"])
    assert again.stdout == res.stdout


@pytest.mark.parametrize(
    ("key", "needle"),
    [("", "--idempotency-key is empty"), ("x" * 300, "longer than"), ("a\tb", "control")],
)
def test_bad_keys_are_usage_errors(script_runner: Any, key: str, needle: str) -> None:
    res = script_runner.run(["holon", "enqueue", "x", "--idempotency-key", key])
    assert res.returncode == 2 and needle in res.stderr
    assert q.pending_count(open_agent(None)) == 0


def test_concurrent_enqueues_with_one_key_admit_one_message() -> None:
    from holon_cli.runtime.enqueue import admit

    store = open_agent(None)
    ids: list[str] = []

    def go() -> None:
        ids.append(admit("race", store=open_agent(None), idempotency_key="same")["id"])

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(set(ids)) == 1 and len(ids) == 8
    assert q.pending_count(store) == 1


@pytest.mark.slow
def test_a_retry_after_a_kill_between_storing_and_printing_gets_the_first_id(
    tmp_path: Path,
) -> None:
    """A real `holon enqueue` process SIGKILLed right after the message was
    stored (before it could print): the retry prints the first id."""
    import os
    import signal
    import subprocess
    import sys

    # the child stops itself after delivery, before printing; the test kills it then
    hook = tmp_path / "sitecustomize.py"
    hook.write_text(
        "import os, signal\n"
        "from holon_cli.store import inbox\n"
        "_deliver = inbox.Inbox.deliver\n"
        "def deliver(self, mid, env):\n"
        "    out = _deliver(self, mid, env)\n"
        "    os.kill(os.getpid(), signal.SIGSTOP)\n"
        "    return out\n"
        "inbox.Inbox.deliver = deliver\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "holon_cli", "enqueue", "pay invoice 42"]
    cmd += ["--idempotency-key", "invoice-42"]
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        store = open_agent(None)
        end = time.monotonic() + 30
        while store.inbox.pending_count() == 0 and time.monotonic() < end:
            time.sleep(0.02)
        assert store.inbox.pending_count() == 1
        os.kill(child.pid, signal.SIGKILL)
        out, _ = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL and out == b""  # the id was never printed
    stored = store.inbox.pending()[0].stem
    retry = subprocess.run(cmd, capture_output=True, text=True)
    assert retry.returncode == 0, retry.stderr
    assert retry.stdout.strip() == stored
    assert q.pending_count(store) == 1


@pytest.mark.slow
def test_ctrl_c_while_waiting_exits_130_with_the_id_and_keeps_the_message() -> None:
    import signal
    import subprocess
    import sys

    from child_signals import default_sigint

    waiter = subprocess.Popen(
        [sys.executable, "-m", "holon_cli", "enqueue", "hi", "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        store = open_agent(None)
        end = time.monotonic() + 20
        while q.pending_count(store) == 0 and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.5)  # past the ingest, into the wait (no state shows it)
        waiter.send_signal(signal.SIGINT)
        out, err = waiter.communicate(timeout=20)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 130, err
    mid = out.strip()
    assert mid.startswith("msg_") and "stays queued" in err and "Traceback" not in err
    assert q.load(store).entries[mid]["status"] == "queued"
