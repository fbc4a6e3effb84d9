"""Acknowledgement briefs and task links (runtime-spec.md "Brief Output
Contract" L2215-2254: the ``acknowledgement`` form, "Acknowledgements are
useful when work will continue asynchronously" L2225, ``BriefRecord``'s
``relatedTaskId`` L2251; requirements.md §12 "Briefs": "[IMPL] ack briefs
are never produced").

A turn that hands work to a background task, a child agent or an external
wait writes an ``ack`` brief ("continuing in the background") instead of
its result, linked to the first task; a turn woken by a task's result or
status names that task on its briefs (the work item's ``work_done`` brief
included)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent, set_model_override
from holon_cli.runtime.children import handle
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.tasks import plane as tasks
from holon_cli.runtime.tick import tick_agent
from holon_cli.runtime.turn import run_turn
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.catalog import default_catalog


def script(tmp_path: Path, data: dict[str, Any], name: str = "s") -> str:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return f"scripted:{p}"


def turn(agent: str | None = None) -> Any:
    return run_turn(agent, catalog=default_catalog())


def briefs(store: AgentStore) -> list[dict[str, Any]]:
    return list(store.ledger("briefs").records())


def test_a_plain_turn_still_writes_a_result() -> None:
    set_model_override("main", "scripted:" + str(_plain()))
    env = admit("hi")
    turn()
    (b,) = briefs(open_agent(None))
    assert b["kind"] == "result" and b["related_message_id"] == env["id"]
    assert "related_task_id" not in b


def _plain() -> Path:
    from holon_cli.store.layout import home_root

    p = home_root() / "plain.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(yaml.safe_dump({"steps": ["hello"]}))
    return p


def test_spawning_a_child_acks_then_the_childs_result_names_its_task(tmp_path: Path) -> None:
    spawn = {
        "tool_calls": [
            {"name": "SpawnAgent", "arguments": {"initial_message": "Compute the answer."}}
        ]
    }
    model = script(
        tmp_path,
        {
            "agents": {"child-*": {"steps": ["42"]}},
            "steps": [spawn, "I delegated it.", "The child says 42."],
        },
    )
    open_agent(None)
    set_model_override("main", model)
    env = admit("what is the answer?")
    turn()
    parent = open_agent("main")
    (h,) = handle.list_tasks(parent)
    (ack,) = briefs(parent)
    assert ack["kind"] == "ack"
    assert ack["related_message_id"] == env["id"]
    assert ack["related_task_id"] == h["task_id"]
    assert ack["text"].startswith("I delegated it.\n\nContinuing in the background: child agent ")
    assert h["child_agent_id"] in ack["text"] and "task_result" in ack["text"]
    # the console calls it an acknowledgement
    from holon_cli.runtime.presentation import present

    ev = next(e for e in parent.events.records() if e["kind"] == "brief_recorded")
    assert present(ev)["title"] == "Acknowledged"

    # the child works, its ONE task_result wakes the parent: that brief names the task
    turn(h["child_agent_id"])
    tick_agent(parent)
    turn("main")
    last = briefs(parent)[-1]
    assert last["kind"] == "result" and last["text"] == "The child says 42."
    assert last["related_task_id"] == h["task_id"]


@pytest.mark.slow
def test_a_promoted_command_acks_with_its_task(tmp_path: Path) -> None:
    call = {"name": "ExecCommand", "arguments": {"cmd": "sleep 1; echo done", "yield_time_ms": 100}}
    model = script(
        tmp_path, {"steps": [{"tool_calls": [call]}, "Started the job.", "The job said done."]}
    )
    set_model_override("main", model)
    admit("start the job")
    turn()
    store = open_agent(None)
    (ack,) = briefs(store)
    (rec,) = tasks.unsettled_tasks(store)
    assert ack["kind"] == "ack" and ack["related_task_id"] == rec["id"]
    assert f"task {rec['id']} (sleep 1; echo done)" in ack["text"]
    end = time.monotonic() + 30
    while tasks.unsettled_tasks(store) and time.monotonic() < end:
        time.sleep(0.05)
    assert not tasks.unsettled_tasks(store)
    turn()
    last = briefs(store)[-1]
    assert last["kind"] == "result" and last["related_task_id"] == rec["id"]


def test_a_command_that_finished_in_the_turn_is_no_handoff(tmp_path: Path) -> None:
    call = {"name": "ExecCommand", "arguments": {"cmd": "echo quick"}}
    set_model_override("main", script(tmp_path, {"steps": [{"tool_calls": [call]}, "Quick."]}))
    admit("run it")
    turn()
    (b,) = briefs(open_agent(None))
    assert b["kind"] == "result" and b["text"] == "Quick."


def test_an_external_wait_acks(tmp_path: Path) -> None:
    from scenarios import WAIT_ON_CI

    set_model_override("main", script(tmp_path, WAIT_ON_CI))
    admit("release v2 when CI is green")
    turn()
    store = open_agent(None)
    (ack,) = [b for b in briefs(store) if b.get("visibility") != "work_done"]
    assert ack["kind"] == "ack" and "related_task_id" not in ack
    assert ack["text"].startswith(
        "Waiting for CI.\n\nContinuing in the background: an external wait"
    )
    assert "github-actions: CI run for v2" in ack["text"] and "trigger wakes" in ack["text"]


def test_a_task_driven_completion_brief_names_the_task(tmp_path: Path) -> None:
    store = open_agent(None)
    wid = wi.create_work_item(store, "ship it")["work_item"]["id"]
    wi.pick_work_item(store, wid)
    complete = {"name": "CompleteWorkItem", "arguments": {"work_item_id": wid}}
    model = script(tmp_path, {"steps": [{"text": "Shipped.", "tool_calls": [complete]}, "ok"]})
    set_model_override("main", model)
    admit(
        "Task task_abc completed.",
        kind="task_result",
        origin="task:task_abc",
        delivery_surface="task_rejoin",
        admission_context="runtime_owned",
    )
    turn()
    done = [b for b in briefs(store) if b.get("visibility") == "work_done"]
    assert done and done[0]["related_task_id"] == "task_abc"


def test_a_failed_turn_keeps_its_failure_brief(tmp_path: Path) -> None:
    call = {"name": "ExecCommand", "arguments": {"cmd": "sleep 2", "yield_time_ms": 100}}
    model = script(tmp_path, {"steps": [{"tool_calls": [call]}, {"fail": {"kind": "auth"}}]})
    set_model_override("main", model)
    admit("go")
    turn()
    store = open_agent(None)
    b = briefs(store)[-1]
    assert b["kind"] == "failure"
    for rec in tasks.unsettled_tasks(store):
        tasks.task_stop(store, rec["id"], wait_s=2)
