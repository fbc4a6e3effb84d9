"""``holon run`` and background tasks: it waits for them and turns their results."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from holon_cli.errors import InterruptedError_
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.run import run_once
from holon_cli.runtime.tasks import plane
from holon_cli.tools.catalog import default_catalog


def _script(tmp_path: Path, cmd: str) -> str:
    p = tmp_path / "m.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "steps": [
                    {
                        "text": "starting the build",
                        "tool_calls": [
                            {
                                "name": "ExecCommand",
                                "arguments": {"cmd": cmd, "yield_time_ms": 100},
                            }
                        ],
                    },
                    {"text": "the build runs in the background; I will wait for its result"},
                    {"text": "the build finished"},
                ]
            }
        )
    )
    return f"scripted:{p}"


def test_run_waits_for_its_task_and_turns_the_result(tmp_path: Path) -> None:
    model = _script(tmp_path, "sleep 0.3; echo build-ok")
    start = time.monotonic()
    data = run_once(
        "build it",
        agent_id="builder",
        create=True,
        model=model,
        workspace_root=str(tmp_path),
        catalog=default_catalog(),
    )
    assert time.monotonic() - start >= 0.3
    assert data["final_status"] == "completed", data
    assert data["turns"] == 2, "the task_result was turned"
    assert data["raw_final_text"] == "the build finished"
    assert data["tasks_stopped"] == []
    store = open_agent("builder")
    (t,) = plane.list_tasks(store, include_all=True)
    assert t["status"] == "completed"


def test_no_wait_for_tasks_stops_unfinished_tasks(tmp_path: Path) -> None:
    model = _script(tmp_path, "sleep 300")
    data = run_once(
        "build it",
        agent_id="builder2",
        create=True,
        model=model,
        workspace_root=str(tmp_path),
        wait_for_tasks=False,
        catalog=default_catalog(),
    )
    assert data["final_status"] == "completed" and data["turns"] == 1
    (tid,) = data["tasks_stopped"]
    store = open_agent("builder2")
    assert plane.read_task(store, tid)["status"] == "cancelled"
    assert plane.active_tasks(store) == []


def test_a_result_ingested_by_a_concurrent_tick_is_still_turned(tmp_path: Path) -> None:
    from holon_cli.runtime import queue as q

    store = open_agent(None)
    tid = plane.run_task(store, "true", workdir=tmp_path)["task_id"]
    end = time.monotonic() + 15
    while plane.unsettled_tasks(store) and time.monotonic() < end:
        time.sleep(0.05)
    assert plane.read_task(store, tid)["result_message_id"]
    with store.lock():  # what a cron `holon tick` does meanwhile
        q.ingest(store, q.load(store))
    assert store.inbox.pending_count() == 0
    assert plane.wait_for_task_result(store, timeout_s=1) is True


@pytest.mark.slow
def test_ctrl_c_while_waiting_stops_the_tasks_and_names_the_kept_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during `holon run` (here: while it waits for its task's result)
    stops what the run started and says which agent was kept and how to
    finish or remove it; the temporary agent is not silently stranded."""
    model = _script(tmp_path, "sleep 300")

    def interrupted(store: object) -> bool:
        raise KeyboardInterrupt

    from holon_cli.runtime.tasks import recovery

    monkeypatch.setattr(recovery, "wait_for_task_result", interrupted)
    with pytest.raises(InterruptedError_) as exc:
        run_once("build it", model=model, workspace_root=str(tmp_path), catalog=default_catalog())
    err = exc.value
    assert err.exit_code == 130
    aid = err.message.split("agent ", 1)[1].split(" ", 1)[0]
    assert f"holon agent rm {aid}" in err.hint and f"holon turn --agent {aid}" in err.hint
    store = open_agent(aid)
    assert store.layout.home.is_dir(), "the agent is kept for inspection"
    assert plane.active_tasks(store) == [], "nothing the run started outlives it"
