"""`holon serve` end to end: a real serve process over a temp home with the
scripted model (no network)."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from serve_helpers import HOLON, scripted_model, start_serve, stop, wait_for, wait_log

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent


def _enqueue(text: str, *extra: str) -> str:
    out = subprocess.run([*HOLON, "enqueue", text, *extra], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _completed(agent: str | None = None) -> collections.Counter[str]:
    store = open_agent(agent, create_default=False)
    return collections.Counter(
        e["message_id"]
        for e in store.events.records()
        if e["kind"] == "turn_terminal" and e["data"]["status"] == "completed"
    )


@pytest.fixture
def model_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    model = scripted_model(tmp_path)
    monkeypatch.setenv("HOLON_MODEL", model)
    subprocess.run([*HOLON, "agent", "create", "main"], check=True, capture_output=True)
    return model


@pytest.mark.slow
def test_enqueue_is_completed_and_sigterm_exits_cleanly(tmp_path: Path, model_env: str) -> None:
    first = _enqueue("queued before serve started")
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching")
        assert wait_for(lambda: first in _completed(), 10)
        t0 = time.monotonic()
        second = _enqueue("while serving")
        assert wait_for(lambda: second in _completed(), 5), (tmp_path / "serve.log").read_text()
        assert time.monotonic() - t0 < 5
    finally:
        code = stop(proc)
    assert code == 0
    assert "stopped" in (tmp_path / "serve.log").read_text()
    store = open_agent(None)
    assert store.read_record()["state"]["status"] != "stopped"
    st = q.load(store)
    assert st.entries == {} and st.processed == 2


@pytest.mark.slow
def test_sigint_exits_cleanly(tmp_path: Path, model_env: str) -> None:
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching")
    finally:
        code = stop(proc, signal.SIGINT)
    assert code == 0


@pytest.mark.slow
def test_manual_turn_lock_is_skipped_then_retried(tmp_path: Path, model_env: str) -> None:
    store = open_agent(None)
    lock = store.turn_lock()
    lock.try_acquire()  # a manual `holon turn` is on it
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching")
        mid = _enqueue("someone else holds the turn")
        time.sleep(1.5)
        assert mid not in _completed()
        assert proc.poll() is None
        lock.release()
        assert wait_for(lambda: mid in _completed(), 5)
    finally:
        lock.release()
        assert stop(proc) == 0
    assert "error" not in (tmp_path / "serve.log").read_text()


@pytest.mark.slow
def test_new_agents_are_picked_up_and_stopped_agents_left_alone(
    tmp_path: Path, model_env: str
) -> None:
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching")
        subprocess.run([*HOLON, "agent", "create", "late"], check=True, capture_output=True)
        mid = _enqueue("hello late agent", "--agent", "late")
        assert wait_for(lambda: mid in _completed("late"), 8)
        # a stopped agent's queued message waits; nothing fails
        subprocess.run([*HOLON, "agent", "stop", "late"], check=True, capture_output=True)
        time.sleep(0.3)
        assert proc.poll() is None
    finally:
        assert stop(proc) == 0
    assert open_agent("late").read_record()["state"]["status"] == "stopped"


@pytest.mark.slow
def test_sigkill_loop_completes_every_acknowledged_message_once(
    tmp_path: Path, model_env: str
) -> None:
    rng = random.Random(1106)
    acked: list[str] = []
    for round_ in range(4):
        proc = start_serve(tmp_path)
        try:
            for i in range(5):
                acked.append(_enqueue(f"round {round_} message {i}"))
                time.sleep(rng.uniform(0.0, 0.3))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=20)
    proc = start_serve(tmp_path)
    try:
        log = tmp_path / "serve.log"
        assert wait_for(lambda: log.read_text().count("watching") == 5, 30)
        assert wait_for(lambda: set(acked) <= set(_completed()), 60), (
            tmp_path / "serve.log"
        ).read_text()[-3000:]
    finally:
        assert stop(proc) == 0
    done = _completed()
    assert all(done[m] == 1 for m in acked), {m: done[m] for m in acked if done[m] != 1}
    assert os.path.exists(tmp_path / "serve.log")


@pytest.mark.slow
def test_timer_deadline_wakes_the_agent(tmp_path: Path, model_env: str) -> None:
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching")
        time.sleep(0.5)  # the start-up pass is done; only the deadline can wake it now
        out = subprocess.run(
            [*HOLON, "timer", "add", "--after", "2s", "--message", "timer fired"],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr

        def timer_turn() -> bool:
            store = open_agent(None)
            return any(
                e["kind"] == "turn_terminal" and e["data"]["status"] == "completed"
                for e in store.events.records()
            )

        # no inbox arrival: the wake-up comes from the timer's next_fire_at
        assert wait_for(timer_turn, 15), (tmp_path / "serve.log").read_text()
    finally:
        assert stop(proc) == 0
