"""Turn lifecycle integrity: exactly-once settle under a kill, a stop that a
running turn cannot undo, stale run markers repaired (issues 13.2, 14.1, 14.6)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli import clock
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent, set_lifecycle
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.tick import tick_agent
from holon_cli.runtime.turn import loop as turn_loop
from holon_cli.runtime.turn import run_turn
from holon_cli.runtime.turn import settle as turn_settle
from holon_cli.runtime.turn.journal import journal_path
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.catalog import default_catalog


class Killed(BaseException):
    """Stands in for SIGKILL: no handler of the turn runs, only `finally`."""


def script(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def terminals(store: AgentStore) -> tuple[int, int, int]:
    ev = sum(1 for e in store.events.records() if e["kind"] == "turn_terminal")
    tr = sum(1 for t in store.ledger("transcript").records() if t["kind"] == "turn_terminal")
    br = sum(1 for b in store.ledger("briefs").records() if b["kind"] in ("result", "failure"))
    return ev, tr, br


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


# ------------------------------------------------------------ 13.2 exactly once


def test_a_settled_turn_is_finished_not_aborted_at_the_replay_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed before the queue settle on every attempt up to the replay limit:
    the turn had already decided how it ended, so the next turn finishes
    recording it (processed), instead of aborting a message whose completed
    terminal and result brief are already written."""
    model = script(tmp_path, [{"text": "all done"}])
    env = admit("do it")
    store = open_agent(None)
    real_settle = q.settle

    def kill(*a: Any, **k: Any) -> None:
        raise Killed

    monkeypatch.setattr(q, "settle", kill)
    for _ in range(q.MAX_ATTEMPTS):
        with pytest.raises(Killed):
            run_turn(None, cli_model=model, catalog=default_catalog())
    monkeypatch.setattr(q, "settle", real_settle)
    # the first attempt reached the model; the replays only finish recording
    # the saved settlement (no model request) and do not count
    assert len(q.load(store).in_flight()) == 1

    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.ran and res.message_id == env["id"] and res.status == "completed"
    st = q.load(store)
    assert st.entries == {} and st.processed == 1 and st.aborted == 0
    assert terminals(store) == (1, 1, 1)


def test_an_unsettled_turn_is_still_aborted_at_the_replay_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay limit still holds for a turn that reaches the model and dies
    before deciding its end (killed during the provider request)."""
    from holon_cli.providers import chain

    model = script(tmp_path, [{"text": "all done"}])
    admit("do it")
    store = open_agent(None)

    def kill(*a: Any, **k: Any) -> Any:
        raise Killed

    real_call = chain.call_with_fallback
    monkeypatch.setattr(chain, "call_with_fallback", kill)
    for _ in range(q.MAX_ATTEMPTS):
        with pytest.raises(Killed):
            run_turn(None, cli_model=model, catalog=default_catalog())
    monkeypatch.setattr(chain, "call_with_fallback", real_call)
    assert run_turn(None, cli_model=model, catalog=default_catalog()).ran is False
    st = q.load(store)
    assert st.entries == {} and st.aborted == 1
    assert terminals(store) == (0, 0, 0)


def test_kills_before_the_model_is_reached_never_abort_the_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31 item 29: three kills in a row aborted a message even when no
    turn got as far as the model (start-up, context building). Such a crash
    is requeued without counting an attempt, however often it happens."""
    model = script(tmp_path, [{"text": "all done"}])
    env = admit("do it")
    store = open_agent(None)
    real_execute = turn_loop.TurnRun.execute

    def kill(self: Any) -> Any:
        raise Killed

    monkeypatch.setattr(turn_loop.TurnRun, "execute", kill)
    for _ in range(q.MAX_ATTEMPTS * 3):
        with pytest.raises(Killed):
            run_turn(None, cli_model=model, catalog=default_catalog())
    monkeypatch.setattr(turn_loop.TurnRun, "execute", real_execute)
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.ran and res.message_id == env["id"] and res.status == "completed"
    st = q.load(store)
    assert st.aborted == 0 and st.processed == 1
    requeued = [
        r
        for r in store.ledger("queue").records()
        if r.get("op") == "status" and r.get("status") == "interrupted"
    ]
    assert len(requeued) == q.MAX_ATTEMPTS * 3
    assert all(r.get("counted") is False for r in requeued)
    assert terminals(store) == (1, 1, 1)


def test_a_kill_inside_the_provider_round_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script_runner: Any
) -> None:
    """Mixed: kills before the model do not count, kills during the request
    do; the message is aborted at the third counted one, and says why."""
    from holon_cli.providers import chain

    model = script(tmp_path, [{"text": "all done"}])
    env = admit("do it")
    store = open_agent(None)
    real_execute = turn_loop.TurnRun.execute
    real_call = chain.call_with_fallback

    def kill(*a: Any, **k: Any) -> Any:
        raise Killed

    for _ in range(q.MAX_ATTEMPTS):
        monkeypatch.setattr(turn_loop.TurnRun, "execute", kill)
        with pytest.raises(Killed):
            run_turn(None, cli_model=model, catalog=default_catalog())
        monkeypatch.setattr(turn_loop.TurnRun, "execute", real_execute)
        monkeypatch.setattr(chain, "call_with_fallback", kill)
        with pytest.raises(Killed):
            run_turn(None, cli_model=model, catalog=default_catalog())
        monkeypatch.setattr(chain, "call_with_fallback", real_call)
    assert run_turn(None, cli_model=model, catalog=default_catalog()).ran is False
    st = q.load(store)
    assert st.aborted == 1
    from holon_cli.runtime.inspect import agent_summary

    (ab,) = agent_summary(store)["aborted_messages"]
    assert ab["message_id"] == env["id"] and ab["reason"] == "max_attempts_exceeded"
    assert ab["attempts"] == q.MAX_ATTEMPTS
    res = script_runner.run(["holon", "status"], print_result=False, env=dict(os.environ))
    text = res.stdout
    assert res.returncode == 0, res.stderr
    assert f"{env['id']}: max_attempts_exceeded" in text and "holon queue requeue" in text
    # a requeue takes it off the list
    q.requeue(store, env["id"])
    assert agent_summary(store)["aborted_messages"] == []


@pytest.mark.parametrize("fail_at", ["queue_settle", "after_brief", "after_transcript"])
def test_kill_before_queue_settle_completes_the_message_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: str
) -> None:
    model = script(tmp_path, [{"text": "all done"}])
    env = admit("do it")
    store = open_agent(None)
    real_settle, real_transcript = q.settle, turn_loop.TurnRecorder.transcript
    real_brief = turn_settle.write_brief

    def kill(*a: Any, **k: Any) -> None:
        raise Killed

    if fail_at == "queue_settle":
        monkeypatch.setattr(q, "settle", kill)
    elif fail_at == "after_brief":

        def brief_then_kill(*a: Any, **k: Any) -> None:
            real_brief(*a, **k)
            raise Killed

        monkeypatch.setattr(turn_settle, "write_brief", brief_then_kill)
    else:

        def transcript_then_kill(self: Any, kind: str, **f: Any) -> None:
            real_transcript(self, kind, **f)
            if kind == "turn_terminal":
                raise Killed

        monkeypatch.setattr(turn_loop.TurnRecorder, "transcript", transcript_then_kill)
    with pytest.raises(Killed):
        run_turn(None, cli_model=model, catalog=default_catalog())
    monkeypatch.setattr(q, "settle", real_settle)
    monkeypatch.setattr(turn_settle, "write_brief", real_brief)
    monkeypatch.setattr(turn_loop.TurnRecorder, "transcript", real_transcript)
    assert q.load(store).in_flight(), "the kill left the message dequeued"

    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.ran and res.replayed and res.message_id == env["id"]
    assert res.status == "completed" and res.final_text == "all done"
    assert terminals(store) == (1, 1, 1)
    st = q.load(store)
    assert st.entries == {} and st.processed == 1
    assert not journal_path(store).exists()
    assert store.read_record()["state"]["status"] == "awake_idle"
    # nothing left to replay
    assert run_turn(None, cli_model=model, catalog=default_catalog()).ran is False
    assert terminals(store) == (1, 1, 1)


def test_failed_turn_replay_writes_one_failure_brief(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = script(tmp_path, [{"fail": {"kind": "auth"}}])
    admit("do it")
    store = open_agent(None)
    real = q.settle
    monkeypatch.setattr(q, "settle", lambda *a, **k: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        run_turn(None, cli_model=model, catalog=default_catalog())
    monkeypatch.setattr(q, "settle", real)
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.status == "aborted"
    assert terminals(store) == (1, 1, 1)
    assert q.load(store).aborted == 1


# ----------------------------------------------------------- 14.1 stop holds


def test_stop_during_a_turn_holds_after_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = script(
        tmp_path,
        [
            {"tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "true"}}]},
            {"text": "finished"},
        ],
    )
    admit("work")
    real = default_catalog().execute

    def stop_then_execute(*a: Any, **k: Any) -> Any:
        set_lifecycle(None, "stop")
        return real(*a, **k)

    monkeypatch.setattr(default_catalog(), "execute", stop_then_execute)
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.status == "completed"
    state = open_agent(None).read_record()["state"]
    assert state["status"] == "stopped"
    assert state["current_run_id"] is None
    # only `agent start` leaves it
    assert set_lifecycle(None, "start")["status"] == "awake_idle"


def test_stop_during_a_sleeping_turn_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = script(tmp_path, [{"tool_calls": [{"name": "Sleep", "arguments": {}}]}])
    admit("rest")
    real = default_catalog().execute

    def stop_then_execute(*a: Any, **k: Any) -> Any:
        set_lifecycle(None, "stop")
        return real(*a, **k)

    monkeypatch.setattr(default_catalog(), "execute", stop_then_execute)
    run_turn(None, cli_model=model, catalog=default_catalog())
    assert open_agent(None).read_record()["state"]["status"] == "stopped"


@pytest.mark.parametrize("exc", [RuntimeError("tool plane bug"), KeyboardInterrupt()])
def test_stop_during_a_failing_turn_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    model = script(
        tmp_path,
        [{"tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "true"}}]}, {"text": "x"}],
    )
    admit("work")

    def stop_then_fail(*a: Any, **k: Any) -> Any:
        set_lifecycle(None, "stop")
        raise exc

    monkeypatch.setattr(default_catalog(), "execute", stop_then_fail)
    with pytest.raises(type(exc)):
        run_turn(None, cli_model=model, catalog=default_catalog())
    assert open_agent(None).read_record()["state"]["status"] == "stopped"


def test_stop_before_the_turn_marks_running_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop landing between the dequeue and the turn's start."""
    model = script(tmp_path, [{"text": "x"}])
    admit("work")
    real = q.dequeue_next

    def dequeue_then_stop(*a: Any, **k: Any) -> Any:
        entry = real(*a, **k)
        set_lifecycle(None, "stop")
        return entry

    monkeypatch.setattr(q, "dequeue_next", dequeue_then_stop)
    run_turn(None, cli_model=model, catalog=default_catalog())
    assert open_agent(None).read_record()["state"]["status"] == "stopped"


def test_tick_sleep_expiry_does_not_undo_a_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_agent(None)
    past = clock.iso(clock.now() - 60)
    store.update_state(lambda s: s.update(status="asleep", sleeping_until=past))
    # stop after tick has read the record (tick reads, then ingests, then wakes)
    real_read = store.read_record
    calls = {"n": 0}

    def read_then_stop() -> dict[str, Any]:
        calls["n"] += 1
        rec = real_read()
        if calls["n"] == 1:
            set_lifecycle(None, "stop")
        return rec

    monkeypatch.setattr(store, "read_record", read_then_stop)
    res = tick_agent(store)
    monkeypatch.undo()
    assert store.read_record()["state"]["status"] == "stopped"
    assert not any(a["action"] == "woke" for a in res["actions"])
    assert q.pending_count(store) == 0


# ------------------------------------------------- 14.6 stale run repaired


def _kill_after_queue_settle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentStore:
    model = script(tmp_path, [{"text": "done", "usage": {"input_tokens": 7, "output_tokens": 2}}])
    admit("work")
    store = open_agent(None)
    real = turn_loop.finish_agent_state

    def kill(*a: Any, **k: Any) -> None:
        raise Killed

    monkeypatch.setattr(turn_loop, "finish_agent_state", kill)
    with pytest.raises(Killed):
        run_turn(None, cli_model=model, catalog=default_catalog())
    monkeypatch.setattr(turn_loop, "finish_agent_state", real)
    dead = _dead_pid()
    store.update_state(lambda s: s.update(current_run_pid=dead))
    st = store.read_record()["state"]
    assert st["status"] == "awake_running" and st["current_run_id"]
    assert q.load(store).processed == 1
    return store


def test_next_turn_repairs_a_run_killed_after_the_queue_settle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _kill_after_queue_settle(tmp_path, monkeypatch)
    res = run_turn(None, cli_model=script(tmp_path, [{"text": "x"}]), catalog=default_catalog())
    assert res.ran is False
    st = store.read_record()["state"]
    assert st["status"] == "awake_idle" and st["current_run_id"] is None
    assert st["last_closure"] == {"outcome": "completed", "runtime_posture": "awake"}
    assert st["last_turn_token_usage"]["total_tokens"] == 9
    assert not journal_path(store).exists()
    assert any(e["kind"] == "agent_state_repaired" for e in store.events.records())
    assert terminals(store) == (1, 1, 1)


def test_tick_repairs_a_run_killed_after_the_queue_settle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _kill_after_queue_settle(tmp_path, monkeypatch)
    res = tick_agent(store)
    assert any(a["action"] == "repaired_stale_run" for a in res["actions"])
    st = store.read_record()["state"]
    assert st["status"] == "awake_idle" and st["current_run_id"] is None


def test_tick_leaves_a_live_turn_alone(tmp_path: Path) -> None:
    store = open_agent(None)
    store.update_state(lambda s: s.update(status="awake_running", current_run_id="turn_x"))
    lock = store.turn_lock()
    lock.try_acquire()
    try:
        res = tick_agent(store)
    finally:
        lock.release()
    assert not any(a["action"] == "repaired_stale_run" for a in res["actions"])
    assert store.read_record()["state"]["status"] == "awake_running"


# ------------------------------------------------- 8.15 status last_turn


def test_last_turn_is_the_last_completed_turn_that_reported_usage(tmp_path: Path) -> None:
    def run(steps: list[dict[str, Any]], name: str) -> None:
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump({"steps": steps}))
        admit(name)
        run_turn(
            None, cli_model=f"scripted:{p}", sleep=lambda s: None, catalog=default_catalog()
        )  # no retry backoff

    store = open_agent(None)
    run([{"text": "a", "usage": {"input_tokens": 7, "output_tokens": 2}}], "first")
    assert store.read_record()["state"]["last_turn_token_usage"]["total_tokens"] == 9
    run([{"fail": {"kind": "server_error", "status": 500}}], "failed")
    run([{"text": "no usage reported"}], "silent")
    assert store.read_record()["state"]["last_turn_token_usage"]["total_tokens"] == 9
    run([{"text": "b", "usage": {"input_tokens": 1, "output_tokens": 1}}], "second")
    assert store.read_record()["state"]["last_turn_token_usage"]["total_tokens"] == 2
