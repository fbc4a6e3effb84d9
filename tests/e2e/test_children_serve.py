"""Children under a real `holon serve` and across a SIGKILL: a parent spawns
three children that finish in whatever order serve runs them, and exactly
three task_results reach it; a child's turn killed mid-request is replayed
and its ONE result still arrives."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import HOLON, start_serve, stop, wait_for, wait_log

from holon_cli.runtime.agents.lifecycle import open_agent


def _spawn(i: int) -> dict[str, Any]:
    msg = f"Part {i}: do your share and report."
    return {"name": "SpawnAgent", "id": f"sp{i}", "arguments": {"initial_message": msg}}


def _script(tmp_path: Path, child_steps: list[Any], parent_steps: list[Any]) -> str:
    p = tmp_path / "family.yaml"
    p.write_text(
        yaml.safe_dump({"agents": {"child-*": {"steps": child_steps}}, "steps": parent_steps})
    )
    return f"scripted:{p}"


def _holon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOLON, *args], capture_output=True, text=True, timeout=60)


def _results(agent: str = "main") -> list[dict[str, Any]]:
    store = open_agent(agent, create_default=False)
    return [
        r["message"]
        for r in store.ledger("queue").records()
        if r.get("op") == "admitted" and r["message"]["kind"] == "task_result"
    ]


def _processed_results() -> int:
    store = open_agent("main", create_default=False)
    ids = {m["id"] for m in _results()}
    return sum(
        1
        for e in store.events.records()
        if e["kind"] == "turn_terminal" and e.get("message_id") in ids
    )


@pytest.mark.slow
def test_serve_three_children_finish_in_any_order_exactly_three_results(tmp_path: Path) -> None:
    # each child takes a different time (by its own cursor: all replay step 1,
    # but serve runs them concurrently and they finish as they finish)
    child = [{"text": "my share is done", "sleep_ms": 150}]
    parent = [
        {"tool_calls": [_spawn(1), _spawn(2), _spawn(3)]},
        "Spawned three.",
        "ack",
        "ack",
        "ack",
    ]
    model = _script(tmp_path, child, parent)
    assert _holon("agent", "model", "main", model).returncode == 0
    assert _holon("enqueue", "split the work in three").returncode == 0
    proc = start_serve(tmp_path, "--concurrency", "4")
    try:
        wait_log(tmp_path, "watching")
        assert wait_for(lambda: _processed_results() >= 3, 60), (tmp_path / "serve.log").read_text()
        time.sleep(1.0)  # anything doubled would land now
    finally:
        assert stop(proc) == 0
    results = _results()
    assert len(results) == 3
    tids = collections.Counter(m["origin"]["task_id"] for m in results)
    assert len(tids) == 3 and set(tids.values()) == {1}
    assert {m["metadata"]["result_summary"] for m in results} == {"my share is done"}
    main = open_agent("main")
    delegations = main.ledger("delegations").records()
    assert collections.Counter(r["event"] for r in delegations) == {"started": 3, "completed": 3}
    listed = json.loads(_holon("agent", "list", "--all", "--json").stdout)["data"]["agents"]
    assert sum(1 for a in listed if a["kind"] == "child") == 3  # none erased


@pytest.mark.slow
def test_sigkill_of_a_childs_turn_still_gives_one_result(tmp_path: Path) -> None:
    child = [{"text": "slow answer", "sleep_ms": 30_000}, "answer after the replay"]
    model = _script(tmp_path, child, [{"tool_calls": [_spawn(1)]}, "Spawned.", "ack"])
    assert _holon("agent", "model", "main", model).returncode == 0
    assert _holon("enqueue", "delegate").returncode == 0
    assert _holon("turn").returncode == 0
    tasks = json.loads(_holon("task", "list", "--json").stdout)["data"]["tasks"]
    (task,) = tasks
    cid = task["child_agent_id"]
    proc = subprocess.Popen(
        [*HOLON, "turn", "--agent", cid],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    try:
        store = open_agent(cid)
        assert wait_for(lambda: store.read_record()["state"]["status"] == "awake_running", 15)
        time.sleep(0.3)  # inside the scripted request
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    status = json.loads(_holon("task", "status", task["task_id"], "--json").stdout)["data"]
    assert status["task"]["status"] == "running"  # the handle lives; the child is kept
    assert _results() == []
    res = _holon("turn", "--agent", cid, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["data"]["final_text"] == "answer after the replay"
    _holon("tick", "--all")
    _holon("tick", "--all")
    (result,) = _results()
    assert result["metadata"]["result_summary"] == "answer after the replay"
    assert result["origin"] == {"kind": "task", "task_id": task["task_id"]}
