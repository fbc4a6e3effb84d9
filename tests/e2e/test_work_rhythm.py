"""The RFC's work rhythm, end to end through `holon` commands (in-process) and the
scripted model: discover, create drafts, refine plan.md, ready, todos, block
with blocked_by, switch, complete with a same-round report, resume, complete.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

RHYTHM = """
steps:
  - text: "Two separate objectives; recording both as drafts."
    tool_calls:
      - {id: c_a, name: CreateWorkItem, arguments: {objective: "Fix flaky login test", \
plan_status: draft}}
      - {id: c_b, name: CreateWorkItem, arguments: {objective: "Upgrade httpx to 0.28", \
plan_status: draft}}
  - tool_calls: [{id: p_a, name: PickWorkItem, arguments: {work_item_id: "{{c_a.work_item_id}}"}}]
  - tool_calls:
      - id: edit_a
        name: ExecCommand
        arguments: {cmd: "printf 'Race in session fixture; fix the fixture, not the \
app.\\\\nVerify: pytest -k login --count 50\\\\n' >> '{{c_a.work_item.plan_artifact.path}}'"}
  - tool_calls:
      - id: ready_a
        name: UpdateWorkItem
        arguments: {work_item_id: "{{c_a.work_item_id}}", plan_status: ready,
                    todo_list: [{text: reproduce, state: in_progress}, {text: fix fixture, state: \
pending}, {text: verify, state: pending}]}
  - tool_calls:
      - id: get_a
        name: GetWorkItem
        arguments: {work_item_id: "{{c_a.work_item_id}}"}
  - expect_tool_result_contains: "Race in session fixture"   # GetWorkItem saw the plan edit
    tool_calls:
      - name: UpdateWorkItem
        arguments: {work_item_id: "{{c_a.work_item_id}}",
                    todo_list: [{text: reproduce, state: completed}, {text: fix fixture, state: \
completed}, {text: verify, state: in_progress}]}
  - tool_calls:
      - {id: block_a, name: UpdateWorkItem, arguments: {work_item_id: "{{c_a.work_item_id}}", \
blocked_by: "waiting for CI on branch fix-login", recheck_after: 3600000}}
  - tool_calls: [{id: pick_b, name: PickWorkItem, arguments: {work_item_id: \
"{{c_b.work_item_id}}"}}]
  - tool_calls: [{name: UpdateWorkItem, arguments: {work_item_id: "{{c_b.work_item_id}}", \
plan_status: ready, todo_list: [{text: bump and test, state: completed}]}}]
  - text: "Upgraded httpx to 0.28; the test suite passes unchanged."
    tool_calls: [{id: done_b, name: CompleteWorkItem, arguments: {work_item_id: \
"{{c_b.work_item_id}}"}}]
  - "The login fix is waiting on CI; I'll resume when it reports."
  - tool_calls:
      - {id: resume_a, name: PickWorkItem, arguments: {work_item_id: "{{c_a.work_item_id}}", \
reason: "CI reported green"}}
      - {id: unblock_a, name: UpdateWorkItem, arguments: {work_item_id: "{{c_a.work_item_id}}", \
blocked_by: null}}
  - text: "Fixed the session-fixture race; 50/50 login runs pass and CI is green."
    tool_calls:
      - name: UpdateWorkItem
        arguments: {work_item_id: "{{c_a.work_item_id}}", todo_list: [{text: verify, state: \
completed}]}
      - {id: done_a, name: CompleteWorkItem, arguments: {work_item_id: "{{c_a.work_item_id}}"}}
  - "Both work items are done."
"""


_runner: list[Any] = []


@pytest.fixture(autouse=True)
def _in_process(script_runner: Any) -> Iterator[None]:
    # every step is a plain `holon` command: in-process is enough (and fast)
    _runner.append(script_runner)
    yield
    _runner.clear()


def holon(*args: str, check: bool = True) -> Any:
    res = _runner[0].run(["holon", *args], print_result=False)
    if check and res.returncode != 0:
        raise AssertionError(
            f"holon {' '.join(args)} -> {res.returncode}\n{res.stdout}\n{res.stderr}"
        )
    return res


def data(*args: str) -> dict:
    return json.loads(holon(*args, "--json").stdout)["data"]


def test_work_rhythm(tmp_path: Path) -> None:
    script = tmp_path / "rhythm.yaml"
    script.write_text(RHYTHM)
    model = f"scripted:{script}"
    holon("agent", "create", "dev", "--model", model)

    run = data(
        "run", "--agent", "dev", "--max-turns", "4", "Two issues: flaky login test; upgrade httpx"
    )
    assert run["final_status"] == "waiting", run
    # final_text prefers the completion report produced in this run
    assert run["final_text"] == "Upgraded httpx to 0.28; the test suite passes unchanged."
    assert run["raw_final_text"] == "The login fix is waiting on CI; I'll resume when it reports."

    items = {w["objective"]: w for w in data("workitem", "list", "--agent", "dev")["work_items"]}
    a, b = items["Fix flaky login test"], items["Upgrade httpx to 0.28"]
    assert b["state"] == "completed" and b["result_summary"].startswith("Upgraded httpx")
    assert (
        a["state"] == "open"
        and a["blocked_by"] == "waiting for CI on branch fix-login"
        and a["recheck_at"]
    )
    plan = Path(a["plan_artifact"]["path"]).read_text()
    assert "Race in session fixture" in plan
    st = data("status", "--agent", "dev")
    assert st["current_work_item_id"] is None  # focus released when b completed
    assert st["work_items"]["blocked"] == 1 and st["work_items"]["completed"] == 1

    # the operator reports CI; the agent resumes, unblocks and completes
    holon("enqueue", "--agent", "dev", "CI for fix-login is green")
    turn = data("turn", "--agent", "dev")
    assert turn["status"] == "completed" and turn["closure"]["outcome"] == "completed"

    a = data("workitem", "show", a["id"], "--agent", "dev")["work_item"]
    assert a["state"] == "completed" and a["blocked_by"] is None
    assert a["completion_report"] and "50/50" in json.dumps(a["completion_report"])

    briefs = [
        json.loads(line)
        for line in (Path(st["agent_home"]) / ".holon/ledger/briefs.jsonl").read_text().splitlines()
    ]
    work_done = [b for b in briefs if b["visibility"] == "work_done"]
    assert len(work_done) == 2
    summaries = (
        (Path(st["agent_home"]) / ".holon/ledger/delivery_summaries.jsonl").read_text().splitlines()
    )
    assert len(summaries) == 2
    kinds = [
        json.loads(line)["kind"]
        for line in holon("tail", "--agent", "dev", "--jsonl").stdout.splitlines()
    ]
    for k in (
        "work_item_created",
        "work_item_picked",
        "work_item_updated",
        "work_item_completed",
        "plan_artifact_changed",
    ):
        assert k in kinds, k
    assert data("status", "--agent", "dev")["current_work_item_id"] is None
    assert holon("home", "check", check=False).returncode == 0
