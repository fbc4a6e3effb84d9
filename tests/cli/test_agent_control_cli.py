"""Agent control (contract "Agent control"; control-plane RFC "Agent Plane"):
`holon agent pause`, `holon agent abort`, and an `agent_state_changed`
event for every status change."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn
from holon_cli.runtime.turn.abort import request_abort, running_run
from holon_cli.runtime.turn.result import TurnResult
from holon_cli.tools.catalog import default_catalog
from tests.inprocess_cli import bind_runner, run

__all__ = ["bind_runner"]


def script(tmp_path: Path, steps: list[Any], name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def events(kind: str, agent: str = "main") -> list[dict[str, Any]]:
    return [e for e in open_agent(agent).events.records() if e["kind"] == kind]


def transitions(agent: str = "main") -> list[tuple[str, str, str]]:
    return [
        (e["data"]["from"], e["data"]["to"], e["data"]["reason"])
        for e in events("agent_state_changed", agent)
    ]


def status(agent: str = "main") -> str:
    return str(open_agent(agent).read_record()["state"]["status"])


# -- pause -------------------------------------------------------------------------


def test_pause_holds_messages_until_start(tmp_path: Path) -> None:
    model = script(tmp_path, ["first answer"])
    open_agent()  # the default agent
    res = run("agent", "pause", "main", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)["data"]
    assert data["previous"] == "awake_idle" and data["status"] == "paused"
    assert "holon agent start" in data["lifecycle_hint"]
    assert transitions()[-1] == ("awake_idle", "paused", "operator_pause")
    # a paused agent still accepts messages: they wait
    res = run("enqueue", "while paused")
    assert res.returncode == 0, res.stderr
    res = run("turn", "--model", model, "--json")
    assert res.returncode == 4
    assert json.loads(res.stdout)["error"]["kind"] == "agent_paused"
    assert q.pending_count(open_agent()) == 1
    # pausing again changes nothing and says so
    res = run("agent", "pause", "main")
    assert res.returncode == 0 and "already paused" in res.stdout
    assert run("agent", "start", "main").returncode == 0
    assert transitions()[-1] == ("paused", "awake_idle", "operator_start")
    res = run("turn", "--model", model, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["data"]["status"] == "completed"
    assert q.pending_count(open_agent()) == 0


def test_pause_keeps_a_stopped_agent_stopped_and_refuses_unknown_agents() -> None:
    open_agent()
    assert run("agent", "stop", "main").returncode == 0
    res = run("agent", "pause", "main", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["data"]["status"] == "stopped"
    res = run("agent", "pause", "nobody")
    assert res.returncode == 3 and "unknown agent 'nobody'" in res.stderr
    res = run("agent", "pause")
    assert res.returncode == 2


# -- agent_state_changed -------------------------------------------------------------


def test_every_status_change_of_a_turn_is_an_event_and_last_brief_at_is_set(
    tmp_path: Path,
) -> None:
    store = open_agent()
    admit("hello", agent_id="main")
    res = run_turn("main", cli_model=script(tmp_path, ["hi there"]), catalog=default_catalog())
    assert res.status == "completed"
    assert transitions() == [
        ("awake_idle", "awake_running", "turn_started"),
        ("awake_running", "awake_idle", "turn_settled"),
    ]
    started = events("agent_state_changed")[0]
    assert started["turn_id"] == res.turn_id and started["message_id"] == res.message_id
    st = store.read_record()["state"]
    assert st["last_brief_at"] is not None and st["status_changed_at"] >= st["last_brief_at"]
    # a Sleep settles asleep, and the reason says so
    admit("again", agent_id="main")
    sleep = [{"text": "zz", "tool_calls": [{"name": "Sleep", "arguments": {"duration_ms": 60000}}]}]
    run_turn("main", cli_model=script(tmp_path, sleep, "z.yaml"), catalog=default_catalog())
    assert transitions()[-1] == ("awake_running", "asleep", "turn_slept")


def test_a_failed_turn_is_persisted_as_the_agents_last_failure(tmp_path: Path) -> None:
    store = open_agent()
    admit("hello", agent_id="main")
    fail = [{"fail": {"kind": "auth", "status": 401, "message": "bad key"}}]
    res = run_turn("main", cli_model=script(tmp_path, fail), catalog=default_catalog())
    assert res.status == "aborted"
    assert transitions()[-1] == ("awake_running", "awake_idle", "turn_aborted")
    lf = store.read_record()["state"]["last_failure"]
    assert lf is not None and lf["phase"] == "runtime_turn" and lf["turn_id"] == res.turn_id
    assert "auth" in lf["summary"]


# -- abort -------------------------------------------------------------------------


def test_abort_with_nothing_running_exits_0_and_says_so() -> None:
    open_agent()
    res = run("agent", "abort", "main")
    assert res.returncode == 0, res.stderr
    assert "no turn is running; nothing to abort" in res.stdout
    assert status() == "awake_idle"  # nothing changed
    res = run("agent", "abort", "main", "--json")
    assert json.loads(res.stdout)["data"] == {"agent_id": "main", "run_id": None, "running": False}


def test_abort_with_a_stale_run_id_exits_4() -> None:
    open_agent()
    res = run("agent", "abort", "main", "--run-id", "turn_gone", "--json")
    assert res.returncode == 4
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "stale_run_id" and "turn_gone" in err["message"]
    assert status() == "awake_idle"
    assert run("agent", "abort", "nobody").returncode == 3


def _turn_in_thread(model: str) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["res"] = run_turn("main", cli_model=model, catalog=default_catalog())
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            box["err"] = exc
        box["ended"] = time.monotonic()

    t = threading.Thread(target=work, daemon=True)
    t.start()
    store = open_agent()
    end = time.monotonic() + 20
    while running_run(store) is None and time.monotonic() < end:
        time.sleep(0.01)
    assert running_run(store) is not None, box
    return t, box


def _assert_aborted(res: TurnResult) -> None:
    store = open_agent()
    assert res.status == "aborted" and res.failure_kind == "operator_aborted"
    (term,) = [e for e in events("turn_terminal") if e["turn_id"] == res.turn_id]
    assert term["data"]["status"] == "aborted" and term["data"]["reason"] == "operator_aborted"
    ops = [o for o in store.ledger("queue").records() if o.get("message_id") == res.message_id]
    assert ops[-1]["status"] == "aborted" and ops[-1]["reason"] == "operator_aborted"
    assert status() == "paused"
    assert ("awake_running", "paused", "operator_aborted") in transitions()
    assert not (store.layout.state_dir / "abort_request.json").exists()
    assert store.read_record()["state"]["current_run_id"] is None


def test_abort_cancels_a_slow_provider_call(tmp_path: Path) -> None:
    store = open_agent()
    admit("think slowly", agent_id="main")
    t, box = _turn_in_thread(script(tmp_path, [{"sleep_ms": 4000, "text": "late"}]))
    run_id = running_run(store)
    status_data = json.loads(run("agent", "status", "main", "--json").stdout)["data"]
    assert status_data["current_run_id"] == run_id  # what --run-id names
    t0 = time.monotonic()
    res = run("agent", "abort", "main", "--run-id", str(run_id), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)["data"]
    assert data["outcome"] == "aborted" and data["status"] == "paused"
    t.join(5)
    assert box["ended"] - t0 < 1.5, "the turn waited for the provider"
    _assert_aborted(box["res"])
    # the message waits for nothing: it is settled; a new one waits for start
    admit("next", agent_id="main")
    assert q.pending_count(store) == 1
    assert run("agent", "start", "main").returncode == 0


def test_abort_stops_the_running_command_but_not_earlier_background_tasks(
    tmp_path: Path,
) -> None:
    store = open_agent()
    admit("run things", agent_id="main")
    steps = [
        {  # promoted at once: a background task of an earlier call
            "tool_calls": [
                {"name": "ExecCommand", "arguments": {"cmd": "sleep 30", "yield_time_ms": 10}}
            ]
        },
        {
            "tool_calls": [
                {"name": "ExecCommand", "arguments": {"cmd": "sleep 60", "yield_time_ms": 30000}}
            ]
        },
        "never reached",
    ]
    t, box = _turn_in_thread(script(tmp_path, steps))
    from holon_cli.runtime.tasks.records import iter_records

    def tasks() -> list[dict[str, Any]]:
        return [dict(r) for _d, r in iter_records(store)]

    end = time.monotonic() + 20
    while len([r for r in tasks() if r.get("process")]) < 2 and time.monotonic() < end:
        time.sleep(0.02)
    assert len(tasks()) == 2
    running_cmd = {r["command"]["cmd"]: r for r in tasks()}["sleep 60"]
    pgid = running_cmd["process"]["pgid"]
    t0 = time.monotonic()
    out = request_abort(store)
    assert out["running"] and out["status"] == "paused"
    t.join(10)
    assert box["ended"] - t0 < 2.0, "the turn waited for the command"
    _assert_aborted(box["res"])
    # the command of the aborted call is gone ...
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        pass
    else:
        raise AssertionError(f"the aborted command's group {pgid} is still alive")
    # ... the background task of the earlier call still runs
    by_cmd = {r["command"]["cmd"]: r for r in tasks()}
    assert by_cmd["sleep 30"]["promoted"] and by_cmd["sleep 30"]["status"] == "running"
    from holon_cli.runtime.tasks.control import task_stop

    task_stop(store, by_cmd["sleep 30"]["id"])


def test_ctrl_c_during_a_tool_call_stops_its_command(tmp_path: Path) -> None:
    """The call runs on a worker thread: Ctrl-C (on the turn's thread) must
    still take the call's command with it, as when the call ran there."""
    import _thread

    from holon_cli.runtime.tasks.records import iter_records

    store = open_agent()
    admit("run it", agent_id="main")
    steps = [
        {
            "tool_calls": [
                {"name": "ExecCommand", "arguments": {"cmd": "sleep 60", "yield_time_ms": 30000}}
            ]
        }
    ]
    found: list[int] = []

    def interrupt_when_running() -> None:
        end = time.monotonic() + 20
        while time.monotonic() < end:
            procs = [r.get("process") for _d, r in iter_records(store) if r.get("process")]
            if procs:
                found.append(int(procs[0]["pgid"]))
                _thread.interrupt_main()
                return
            time.sleep(0.02)

    threading.Thread(target=interrupt_when_running, daemon=True).start()
    try:
        run_turn("main", cli_model=script(tmp_path, steps), catalog=default_catalog())
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("no KeyboardInterrupt")
    assert found
    deadline = time.monotonic() + 5  # stopped, then reaped: wait on the state, not a sleep
    while True:
        try:
            os.killpg(found[0], 0)
        except ProcessLookupError:
            break
        if time.monotonic() > deadline:
            raise AssertionError("the command outlived Ctrl-C")
        time.sleep(0.02)
    assert store.read_record()["state"]["current_run_id"] is None


def test_abort_no_wait_returns_once_requested(tmp_path: Path) -> None:
    open_agent()
    admit("think slowly", agent_id="main")
    t, box = _turn_in_thread(script(tmp_path, [{"sleep_ms": 3000, "text": "late"}]))
    res = run("agent", "abort", "main", "--no-wait")
    assert res.returncode == 0, res.stderr
    assert "requested" in res.stdout and "holon agent start main" in res.stderr
    t.join(5)
    _assert_aborted(box["res"])
