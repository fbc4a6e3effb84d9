"""A stop at any moment of a command task's life ends its whole tree, and
the record says so truthfully, with and without the sandbox.

The bug: a ``task_stop`` that landed right after a promotion, before the
forked supervisor had started the command and recorded itself, found no
supervisor to signal and no process to kill, recorded ``cancelled``, and the
supervisor then started the command (and handed off) with nobody ever
stopping it. Each phase a stop can land in is reached deterministically here
through ``supervisor.phase_hook`` (the forked supervisor inherits it): the
supervisor is held at the phase, the stop is requested, then it is let go.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from holon_cli.model import task as tm
from holon_cli.providers.base import ToolCall
from holon_cli.runtime.tasks import plane as tasks
from holon_cli.runtime.tasks import procs, sandbox, supervisor
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.base import ToolContext, ToolResult, execute
from holon_cli.tools.catalog import registry

pytestmark = pytest.mark.usefixtures("reap_test_tasks")


def _bwrap_usable() -> bool:
    return sandbox.policy({"execution": {"sandbox": "bwrap", "network": "off"}}).usable


BWRAP = pytest.param(
    "bwrap",
    marks=pytest.mark.skipif(not _bwrap_usable(), reason="bubblewrap cannot run here"),
)
SANDBOXES = [BWRAP, "none"]


def run(c: ToolContext, **arguments: Any) -> ToolResult:
    tool = registry()["ExecCommand"]
    return execute(tool, c, ToolCall(id="call_1", name="ExecCommand", arguments=arguments))


def boxed(ctx: ToolContext, backend: str) -> ToolContext:
    return dataclasses.replace(ctx, config={"execution": {"sandbox": backend, "network": "off"}})


def tree_cmd() -> str:
    """A background child, a ``setsid`` escapee and the leader, with
    durations nothing else on the machine uses."""
    a = 100_000 + secrets.randbelow(800_000)
    return f"(sleep {a} &); setsid sleep {a + 1} & sleep {a + 2}"


def hold_at(phase: str, gate: Path) -> Callable[[str], None]:
    """A phase hook that holds the supervisor at ``phase`` until ``gate/go``.
    Without it (the test failed before, see :func:`gate`) the held
    supervisor exits there, starting nothing: a supervisor the record may
    not name yet must not go on once the test's teardown has reaped."""

    def hook(name: str) -> None:
        if name != phase:
            return
        (gate / "reached").touch()
        end = time.monotonic() + 60
        while not (gate / "go").exists():
            if (gate / "abort").exists() or time.monotonic() > end:
                os._exit(70)
            time.sleep(0.01)

    return hook


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    g = tmp_path / "gate"
    g.mkdir()
    yield g
    if not (g / "go").exists():
        (g / "abort").touch()
        time.sleep(0.2)  # polled every 10 ms


def wait_for(cond: Callable[[], object], within: float, what: str) -> None:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def signal_pending(pid: int, sig: int) -> bool:
    """``sig`` is pending (blocked) on process ``pid`` (thread or process set)."""
    bit = 1 << (sig - 1)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & bit:
            return True
    return False


def assert_all_gone(store: AgentStore, tid: str, within: float = 10.0) -> dict[str, Any]:
    """Nothing the task started is alive (found by its marker and group, as
    stop_tree finds them), its supervisor has exited and the record is closed
    as cancelled with ONE result."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        rec = tasks.read_task(store, tid)
        p = rec.get("process") or {}
        left = procs.live_members(p.get("pgid"), tid, p.get("start_time"))
        sup_alive = procs.identity_alive(rec.get("supervisor"))
        settled = rec.get("result_message_id") or rec.get("result_undeliverable")
        if not left and not sup_alive and tm.is_terminal(rec.get("status")) and settled:
            break
        time.sleep(0.05)
    assert not left, f"still running: {sorted(left)}"
    assert not sup_alive, f"supervisor still running: {rec.get('supervisor')}"
    assert rec["status"] == "cancelled", rec
    assert rec["stop_reason"] == "stop_requested", rec
    assert rec.get("stop_requested_at")
    if rec.get("started_at"):
        assert str(rec["finished_at"]) >= rec["started_at"], rec  # the record tells the order
    msgs = (store.inbox.read(q) for q in store.inbox.pending())
    results = [m for m in msgs if m.get("kind") == "task_result" and m.get("task_id") == tid]
    assert len(results) == 1, results
    return dict(rec)


@pytest.mark.slow
@pytest.mark.parametrize("backend", SANDBOXES)
@pytest.mark.parametrize("phase", ["start", "spawned", "handoff"])
def test_a_stop_in_each_phase_ends_the_whole_tree(
    ctx: ToolContext,
    gate: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    phase: str,
) -> None:
    """``start``: promoted, the command not started yet (the reported bug);
    ``spawned``: the command (bwrap setting up its sandbox) started but not
    yet recorded; ``handoff``: promoted, state saved, about to exec a fresh
    interpreter with the stop signals blocked."""
    monkeypatch.setattr(supervisor, "phase_hook", hold_at(phase, gate))
    c = boxed(ctx, backend)
    r = run(c, cmd=tree_cmd(), yield_time_ms=100)
    assert r.ok and r.data["disposition"] == "promoted_to_task", r.content
    tid = str(r.data["task_handle"]["task_id"])
    wait_for((gate / "reached").exists, 20, f"the supervisor to reach {phase!r}")
    rec = tasks.read_task(c.store, tid)
    # promotion recorded the supervisor: the stop has someone to signal
    sup = rec["supervisor"]
    assert sup and procs.identity_alive(sup)
    stopped: dict[str, Any] = {}
    stopper = threading.Thread(
        target=lambda: stopped.update(tasks.task_stop(c.store, tid, wait_s=30))
    )
    stopper.start()
    try:
        wait_for(
            lambda: tasks.read_task(c.store, tid).get("stop_requested_at"), 20, "the stop record"
        )
        if phase == "handoff":  # blocked across the exec: the TERM stays pending for the new image
            wait_for(lambda: signal_pending(sup["pid"], 15), 20, "a pending SIGTERM")
        else:
            time.sleep(0.2)  # the TERM follows the record at once (handled either way)
    finally:
        (gate / "go").touch()
        stopper.join(60)
    assert stopped["task"]["status"] == "cancelled", stopped
    final = assert_all_gone(c.store, tid)
    log = (tasks.task_dir(c.store, tid) / "supervisor.log").read_text()
    assert "Traceback" not in log and "supervisor:" not in log, log
    if phase == "start":  # never started: no process, an empty output
        assert "process" not in final and "started_at" not in final, final
        assert final["exit_status"] is None
        assert (tasks.task_dir(c.store, tid) / "output.log").read_bytes() == b""
    else:
        assert final["process"]["pid"] > 0


@pytest.mark.parametrize("backend", SANDBOXES)
def test_a_stop_recorded_without_a_signal_is_still_acted_on(
    ctx: ToolContext, gate: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """The record alone stops it: a stop written while the supervisor was
    not known (no signal sent at all) ends the command the supervisor starts
    next, and the record says cancelled."""
    monkeypatch.setattr(supervisor, "phase_hook", hold_at("spawned", gate))
    c = boxed(ctx, backend)
    r = run(c, cmd=tree_cmd(), yield_time_ms=100)
    tid = str(r.data["task_handle"]["task_id"])
    wait_for((gate / "reached").exists, 20, "the supervisor to start the command")
    d = tasks.task_dir(c.store, tid)
    tasks.update_task(d, lambda x: x.update({"stop_requested_at": "2026-01-01T00:00:00Z"}))
    (gate / "go").touch()
    rec = assert_all_gone(c.store, tid, within=20)
    assert rec["process"]["pid"] > 0


def test_a_detached_task_stopped_while_its_supervisor_starts(ctx: ToolContext, root: Path) -> None:
    """``holon task run``'s supervisor is a fresh interpreter: a stop sent
    while it starts waits (blocked) for its handlers and starts nothing."""
    from holon_cli.runtime.tasks.launch import launch

    c = boxed(ctx, "none")
    launched = launch(
        c.store,
        argv=["/bin/bash", "-c", tree_cmd()],
        cmd="tree",
        cwd=root,
        shell=None,
        login=False,
        config=c.config,
        detached=True,
    )
    t0 = time.monotonic()
    res = tasks.task_stop(c.store, launched.task_id, wait_s=30)
    took = time.monotonic() - t0
    assert res["task"]["status"] == "cancelled"
    assert took < 20, took  # acted on by the supervisor, not at the limit
    rec = assert_all_gone(c.store, launched.task_id)
    assert "Traceback" not in (launched.dir / "supervisor.log").read_text()
    # the supervisor exited normally, not by the default action of SIGTERM
    assert launched.sup is not None and launched.sup.wait(10) == 0
    assert "process" not in rec or rec["process"]["pid"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("backend", SANDBOXES)
def test_stops_at_random_moments_never_leave_a_tree(ctx: ToolContext, backend: str) -> None:
    """Bounded repeat without hooks: promotion after 5-150 ms (often before
    the command has started under load), the stop at once or a little later."""
    c = boxed(ctx, backend)
    for i in range(12):
        r = run(c, cmd=tree_cmd(), yield_time_ms=5 + (i * 13) % 150)
        assert r.ok and r.data["disposition"] == "promoted_to_task", r.content
        tid = str(r.data["task_handle"]["task_id"])
        time.sleep((i % 4) * 0.03)
        res = tasks.task_stop(c.store, tid, wait_s=30)
        assert res["task"]["status"] == "cancelled", res
        assert_all_gone(c.store, tid)


def test_terminal_statuses_match_the_model() -> None:
    # the supervisor keeps its own copy (no model import before the command starts)
    assert set(supervisor.TERMINAL) == set(tm.TERMINAL)
    assert supervisor.stop_recorded({"status": "running", "stop_requested_at": "x"})
    assert supervisor.stop_recorded({"status": "cancelled"})
    assert not supervisor.stop_recorded({"status": "running"})
    assert os.path.isdir("/proc")
