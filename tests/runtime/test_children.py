"""Child agents: SpawnAgent private_child through real turns (one scripted
model drives parent and child), the ONE task_result, the delegation
ledger, the task tools on the handle, the child boundary, restart safety."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.errors import RejectedError
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents import open_agent, set_model_override
from holon_cli.runtime.children import handle, supervision
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.tick import tick_agent
from holon_cli.runtime.turn import run_turn
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.catalog import default_catalog

SPAWN = {
    "tool_calls": [
        {
            "name": "SpawnAgent",
            "id": "sp",
            "arguments": {"initial_message": "Compute the answer.\nReport it back."},
        }
    ]
}


def setup(tmp_path: Path, child_steps: list[Any], parent_steps: list[Any] | None = None) -> str:
    p = tmp_path / "family.yaml"
    data = {
        "agents": {"child-*": {"steps": child_steps}},
        "steps": parent_steps or [SPAWN, "Spawned; waiting.", "Got the child's result."],
    }
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    model = f"scripted:{p}"
    open_agent(None)
    set_model_override("main", model)
    return model


def turn(agent: str | None = None) -> Any:
    return run_turn(agent, catalog=default_catalog())


def spawned(parent: AgentStore) -> dict[str, Any]:
    """The SpawnAgent result the parent's model saw."""
    for e in parent.ledger("transcript").records():
        if e.get("role") == "tool" or e.get("kind") == "tool_result":
            text = e.get("text") or e.get("content") or ""
            if "supervision_task_id" in text:
                return dict(json.loads(text))
    raise AssertionError("no SpawnAgent result in the transcript")


def task_results(store: AgentStore) -> list[dict[str, Any]]:
    """Every task_result admitted into the agent's queue (and any still in its inbox)."""
    q.ingest(store, q.load(store))
    return [
        r["message"]
        for r in store.ledger("queue").records()
        if r.get("op") == "admitted" and r["message"]["kind"] == "task_result"
    ]


def spawn_one(tmp_path: Path, child_steps: list[Any] | None = None) -> tuple[AgentStore, str, str]:
    setup(tmp_path, child_steps or ["child result: 42"])
    admit("delegate the computation")
    res = turn()
    assert res.ran and res.final_text == "Spawned; waiting."
    parent = open_agent("main")
    (h,) = handle.list_tasks(parent)
    return parent, h["task_id"], h["child_agent_id"]


def test_spawn_creates_a_supervised_private_child_with_the_contract_shape(
    tmp_path: Path,
) -> None:
    setup(tmp_path, ["child result: 42"])
    parent = open_agent("main")
    from holon_cli.runtime.children.spawn import spawn_private_child

    res = spawn_private_child(parent, "Compute the answer.\nReport it back.")
    supervision_result = res["child_supervision"]
    cid, tid = res["agent_id"], res["supervision_task_id"]
    assert res["child_agent_id"] == cid and cid.startswith("child-")
    assert res["task_handle"] == {"task_id": tid, "task_kind": "child_agent_task", "status": "running"}
    assert supervision_result == {
        "parent_agent_id": "main",
        "child_agent_id": cid,
        "supervision_task_id": tid,
        "workspace_mode": "inherit",
        "worktree": None,
        "cleanup_owner": "supervision_task",
        "followup_target": "parent_supervisor",
    }
    child = open_agent(cid)
    ident = child.read_record()["identity"]
    assert (ident["kind"], ident["visibility"], ident["ownership"], ident["profile_preset"]) == (
        "child",
        "private",
        "parent_supervised",
        "private_child",
    )
    assert ident["lineage_parent_agent_id"] == "main"
    assert ident["supervisor_agent_id"] == "main" and ident["supervision_task_id"] == tid
    # the handle: recoverable, summary from the initial message's first line
    rec = json.loads((Path(parent.layout.runtime) / "tasks" / tid / "task.json").read_text())
    assert rec["summary"] == "Compute the answer."
    assert rec["recovery"] == {
        "kind": "child_agent_task",
        "summary": "Compute the answer.",
        "prompt": "Compute the answer.\nReport it back.",
        "trust": "trusted_system",
        "workspace_mode": "inherit",
    }
    # the child's first message: runtime-owned, never operator authority
    q.ingest(child, q.load(child))
    (first,) = [r["message"] for r in child.ledger("queue").records() if r.get("op") == "admitted"]
    assert first["origin"]["kind"] == "system" and first["trust"] == "trusted_system"
    assert first["authority_class"] == "runtime_instruction"
    assert first["metadata"]["supervision_task_id"] == tid
    started = parent.ledger("delegations").records()
    assert [r["event"] for r in started] == ["started"] and started[0]["child_agent_id"] == cid


def test_one_task_result_reaches_the_parent_with_the_work_item_of_spawn_time(
    tmp_path: Path,
) -> None:
    from holon_cli.runtime import workitems as wi

    setup(tmp_path, ["child result: 42"])
    parent = open_agent("main")
    item = wi.create_work_item(parent, "delegate the computation", source="operator")
    wid = item["work_item"]["id"] if "work_item" in item else item["id"]
    parent.update_state(lambda st: st.update(current_work_item_id=wid))
    admit("delegate the computation")
    turn()
    (h,) = handle.list_tasks(parent)
    tid, cid = h["task_id"], h["child_agent_id"]
    other = wi.create_work_item(parent, "something else", source="operator")
    oid = other["work_item"]["id"] if "work_item" in other else other["id"]
    parent.update_state(lambda st: st.update(current_work_item_id=oid))  # focus moved on
    assert task_results(parent) == []
    res = turn(cid)  # the child's turn closes it: its result reaches the parent now
    assert res.final_text == "child result: 42"
    (msg,) = task_results(parent)
    assert msg["origin"] == {"kind": "task", "task_id": tid}
    assert msg["work_item_id"] == wid and msg["metadata"]["work_item_id"] == wid
    assert msg["metadata"]["result_summary"] == "child result: 42"
    admitted = [
        e for e in parent.events.records() if e["kind"] == "message_admitted"
        and e.get("message_id") == msg["id"]
    ]
    assert admitted and admitted[0].get("work_item_id") == wid
    # every later pass finds it reported: still one
    supervision.after_child_turn(open_agent(cid))
    tick_agent(parent)
    tick_agent(open_agent(cid))
    assert len(task_results(parent)) == 1
    events = [r["event"] for r in parent.ledger("delegations").records()]
    assert events == ["started", "completed"]
    status = handle.task_status(parent, tid)["task"]
    assert status["status"] == "completed" and status["result_summary"] == "child result: 42"
    assert status["child_observability"]["phase"] == "terminal"
    # the handle is final: the child converges to archived, never erased
    child = open_agent(cid)
    assert child.read_record()["state"].get("archived_at")
    assert child.layout.agent_file.exists()
