"""Task recovery notices through real processes and real kills
(runtime-spec.md "Background Task Recovery", "Recovery Behavior"
L1912-1919: on restart, incomplete tasks are reattached or marked as not
recoverable, and "Recovered tasks continue emitting task_status and
task_result as normal", so long-running work "does not silently disappear
on restart"; "TaskStatus remains observational" L1311).

- a task whose supervisor is SIGKILLed is lost: ONE ``task_status``
  (``recovery: lost``) before its ONE ``task_result``, however many
  ``holon tick`` processes race to find it;
- a task still running when ``holon serve`` is SIGKILLed is recovered by
  the next serve: ONE ``task_status`` (``recovery: recovered``) per restart,
  with ticks running at the same time, and several serve processes racing
  to take it over still admit one;
- the notice settles without a model turn and joins the transcript.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import HOLON, scripted_model, start_serve, stop, wait_for

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.tasks import procs
from holon_cli.store.agent_store import AgentStore

pytestmark = pytest.mark.slow


def sh(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOLON, *args], capture_output=True, text=True, timeout=timeout)


def task_dir(store: AgentStore, tid: str) -> Path:
    return Path(store.layout.runtime) / "tasks" / tid


def record(store: AgentStore, tid: str) -> dict[str, Any]:
    return dict(json.loads((task_dir(store, tid) / "task.json").read_text()))


def start_task(cmd: str = "sleep 300") -> tuple[AgentStore, str]:
    store = open_agent(None)
    res = sh("task", "run", "--json", "--", cmd)
    assert res.returncode == 0, res.stderr
    tid = json.loads(res.stdout)["data"]["task_id"]
    assert wait_for(lambda: procs.identity_alive(record(store, tid).get("supervisor")), 20)
    return store, tid


def messages(store: AgentStore, tid: str) -> list[dict[str, Any]]:
    """Every message of the task admitted so far, queue order first, then
    whatever still waits in the inbox."""
    with store.lock():
        q.ingest(store, q.load(store))
    out = [
        r["message"]
        for r in store.ledger("queue").records()
        if r.get("op") == "admitted" and r["message"].get("task_id") == tid
    ]
    out += [
        m for m in (store.inbox.read(p) for p in store.inbox.pending()) if m.get("task_id") == tid
    ]
    return out


def notices(store: AgentStore, tid: str, recovery: str) -> list[dict[str, Any]]:
    return [
        m
        for m in messages(store, tid)
        if m["kind"] == "task_status" and (m.get("metadata") or {}).get("recovery") == recovery
    ]


def cleanup(store: AgentStore, tid: str) -> None:
    rec = record(store, tid)
    if rec.get("status") in ("running", "starting"):
        sh("task", "stop", tid)
    p = rec.get("process") or {}
    procs.stop_tree(p.get("pgid"), p.get("marker") or tid, grace_s=1.0)


def test_a_lost_task_says_so_once_before_its_result_under_racing_ticks(tmp_path: Path) -> None:
    store, tid = start_task()
    try:
        rec = record(store, tid)
        os.kill(rec["supervisor"]["pid"], signal.SIGKILL)
        assert wait_for(lambda: not procs.identity_alive(rec["supervisor"]), 10)
        ticks = [subprocess.Popen([*HOLON, "tick"]) for _ in range(4)]
        for t in ticks:
            assert t.wait(timeout=60) == 0
        kinds = [
            (m["kind"], (m.get("metadata") or {}).get("recovery")) for m in messages(store, tid)
        ]
        assert kinds == [("task_status", "lost"), ("task_result", None)], kinds
        (note,) = notices(store, tid, "lost")
        assert note["origin"] == {"kind": "task", "task_id": tid}, note["origin"]
        assert "was lost" in note["body"]["text"] and "task_result" in note["body"]["text"]
        assert note["authority_class"] == "runtime_instruction"
        rec = record(store, tid)
        assert rec["status"] == "interrupted" and rec["stop_reason"] == "supervisor_gone"
        assert [n["recovery"] for n in rec["recovery_notices"]] == ["lost"]
        # more passes add nothing
        assert sh("tick").returncode == 0
        assert len(notices(store, tid, "lost")) == 1

        # observational: settled without a model turn, heard through the transcript
        model = scripted_model(tmp_path, "seen it")
        res = sh("turn", "--model", model, "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["data"]["final_text"] == ""
        entries = [r for r in store.ledger("transcript").records() if r.get("kind") == "message"]
        assert any(r.get("message_kind") == "task_status" and tid in r["text"] for r in entries)
    finally:
        cleanup(store, tid)


def test_a_task_running_across_serve_kills_is_recovered_once_per_restart(
    tmp_path: Path,
) -> None:
    store, tid = start_task()
    model = scripted_model(tmp_path)
    env = {"HOLON_MODEL": model}
    serves: list[subprocess.Popen[bytes]] = []
    try:
        for n in range(3):
            ticks = [] if n == 0 else [subprocess.Popen([*HOLON, "tick"]) for _ in range(3)]
            serve = start_serve(tmp_path, env=env, name=f"serve{n}")
            serves.append(serve)
            assert wait_for(
                lambda s=serve: (record(store, tid).get("runtime_owner") or {}).get("pid") == s.pid,
                40,
            ), (tmp_path / f"serve{n}.log").read_text()
            for t in ticks:
                assert t.wait(timeout=60) == 0
            # the first serve found nobody watching: nothing to say; each
            # later one took the task over from a killed serve: one notice each
            assert len(notices(store, tid, "recovered")) == n
            assert record(store, tid)["status"] == "running"
            stop(serve, signal.SIGKILL)
        found = notices(store, tid, "recovered")
        keys = [n["key"] for n in record(store, tid)["recovery_notices"]]
        assert len(found) == 2 and len(set(keys)) == 2
        assert all("still running" in m["body"]["text"] for m in found)
        assert not notices(store, tid, "lost")
    finally:
        for s in serves:
            if s.poll() is None:
                stop(s, signal.SIGKILL)
        cleanup(store, tid)


RACER = """
import json, sys, time
from pathlib import Path
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.tasks import recovery
recovery.runtime_owner_of_process(True)
go, end = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.005)
print(json.dumps(recovery.reap_orphans(open_agent(None))["recovered"]), flush=True)
while not end.exists():  # alive until every racer is done: a live watcher is left alone
    time.sleep(0.01)
"""


def test_serve_processes_racing_to_take_a_task_over_admit_one_notice(tmp_path: Path) -> None:
    """As ``serve --engine dbos`` workers would: four serve processes find a
    task whose watcher is gone at once."""
    store, tid = start_task()
    try:
        gone = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        )
        dead = {"pid": int(gone.stdout), "start_time": 1}
        from holon_cli.runtime.tasks.records import update_task

        update_task(task_dir(store, tid), lambda r: r.update({"runtime_owner": dead}))
        go, end = tmp_path / "go", tmp_path / "end"
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, str(go), str(end)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        time.sleep(1.0)  # they import and wait for the signal
        go.write_text("go")
        try:
            outs = [json.loads(r.stdout.readline() or "null") for r in racers if r.stdout]
        finally:
            end.write_text("end")
            for r in racers:
                r.wait(timeout=60)
        assert sum(len(o or []) for o in outs) == 1, outs
        assert len(notices(store, tid, "recovered")) == 1
        owner = record(store, tid)["runtime_owner"]
        assert owner["pid"] in {r.pid for r in racers}
    finally:
        cleanup(store, tid)
