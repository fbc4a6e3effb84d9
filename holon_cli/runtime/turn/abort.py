"""Operator abort of the running turn (``holon agent abort``, ``POST
/control/agents/{id}/abort``; control-plane RFC "Agent Plane").

The turn runs in another process (``holon turn``, ``holon run`` or a serve
thread), so the request travels through a file: :func:`request_abort` writes
``state/abort_request.json`` naming the run (the turn id) and pauses the
agent; the turn waits for each provider call and each tool call on a worker
thread and looks at that file every :data:`POLL_S` while it waits
(:class:`AbortWatch`). No signal is sent: a recorded pid may have been reused,
and under serve the turn is one thread among many.

When the turn sees a request for its own run it stops waiting: a command the
current tool call started (an ``ExecCommand`` still in its yield window) is
stopped, the provider call is left to end on its own (its answer is
dropped), and the turn settles ``aborted`` with reason ``operator_aborted``.
Calls of earlier rounds (promoted background tasks) are not touched. A
request for another run is stale and ignored; a new turn removes it.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from holon_cli import clock
from holon_cli.errors import HolonError, RejectedError
from holon_cli.model.agent import lifecycle_hint
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot, write_snapshot
from holon_cli.store.locks import pid_alive

if TYPE_CHECKING:
    from holon_cli.model.events import TurnAbortRequestedData

POLL_S = 0.05
# after the abort is seen: how long the tool call gets to return once its
# command is stopped (its result is dropped either way)
TOOL_GRACE_S = 1.0
ABORT_REASON = "operator_aborted"
ABORT_WAIT_S = 10.0  # how long `holon agent abort` waits for the turn to end
REQUEST_VERSION = 1

T = TypeVar("T")


class TurnAborted(Exception):
    """Raised inside the turn when the operator aborted it."""


def request_path(store: AgentStore) -> Any:
    return store.layout.state_dir / "abort_request.json"


def running_run(store: AgentStore) -> str | None:
    """The id of the turn running now, or None. A run marker whose process is
    gone (a killed turn) is not running."""
    st = store.read_record()["state"]
    run_id = st.get("current_run_id")
    pid = st.get("current_run_pid")
    if not run_id or not isinstance(pid, int) or not pid_alive(pid):
        return None
    return str(run_id)


def request_abort(store: AgentStore, run_id: str | None = None) -> dict[str, object]:
    """Ask the running turn to abort and pause the agent. ``run_id``: abort
    only if that is the running turn (else RejectedError, exit 4). Nothing
    running and no ``run_id``: ``{"running": False}``, nothing changed."""
    current = running_run(store)
    if run_id is not None and run_id != current:
        raise RejectedError(
            f"run {run_id!r} is not running on agent {store.agent_id!r} "
            + (f"(the running turn is {current})" if current else "(no turn is running)"),
            hint=f"check `holon agent status {store.agent_id}` for current_run_id",
            kind="stale_run_id",
            details={"run_id": run_id, "current_run_id": current},
        )
    out: dict[str, object] = {
        "agent_id": store.agent_id,
        "run_id": current,
        "running": bool(current),
    }
    if current is None:
        return out

    def pause(st: Any) -> None:
        out["previous"] = st["status"]
        if st["status"] != "stopped":
            st["status"] = "paused"

    # paused first: the turn, once it sees the request, settles into a held
    # status and no scheduler starts the next message meanwhile
    rec = store.update_state(pause, reason=ABORT_REASON, turn_id=current)
    status = rec["state"]["status"]
    out["status"] = status
    out["lifecycle_hint"] = lifecycle_hint(status)
    write_snapshot(
        request_path(store),
        {"v": REQUEST_VERSION, "run_id": current, "requested_at": clock.now_iso()},
    )
    requested: TurnAbortRequestedData = {"run_id": current}
    store.emit("turn_abort_requested", requested, turn_id=current)
    return out


def wait_for_end(store: AgentStore, run_id: str, timeout_s: float) -> dict[str, object] | None:
    """Wait until run ``run_id`` is no longer running; return its
    ``turn_terminal`` event data (None: still running at the timeout, or it
    ended without a terminal record)."""
    end = time.monotonic() + timeout_s
    while running_run(store) == run_id and time.monotonic() < end:
        time.sleep(POLL_S)
    if running_run(store) == run_id:
        return None
    for ev in reversed(store.events.tail(200)):
        if ev.get("kind") == "turn_terminal" and ev.get("turn_id") == run_id:
            data = ev.get("data") or {}
            return {"message_id": ev.get("message_id"), **data}
    return None


# an idle call thread waits this long for the next call, then ends
WORKER_IDLE_S = 30.0
_idle_workers: list[_Worker] = []
_idle_lock = threading.Lock()


class _Worker:
    """A thread that runs the turn's calls one after another (starting a
    thread per provider call and per tool call cost ~0.1 ms of CPU each).
    One whose call was given up on (an abort) finishes it before it takes
    another; idle for :data:`WORKER_IDLE_S`, it ends."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._job: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def give(self, job: Callable[[], None]) -> None:
        self._job = job
        self._ready.set()

    def _loop(self) -> None:
        while True:
            if not self._ready.wait(WORKER_IDLE_S):
                with _idle_lock:
                    if self in _idle_workers:  # not taken meanwhile: end
                        _idle_workers.remove(self)
                        return
                continue  # taken just now: its call is on the way
            self._ready.clear()
            job, self._job = self._job, None
            if job is not None:
                job()
            with _idle_lock:
                _idle_workers.append(self)


def idle_call_threads() -> int:
    """How many call threads wait for a call (the fast exit ends the
    process with them: they hold nothing)."""
    with _idle_lock:
        return len(_idle_workers)


def _worker(name: str) -> _Worker:
    """An idle call thread (named ``name`` for this call), or a new one."""
    with _idle_lock:
        w = _idle_workers.pop() if _idle_workers else _Worker()
    w._thread.name = name
    return w


class AbortWatch:
    """The turn's side: runs blocking calls on a worker thread and gives up
    on them when an abort for ``run_id`` is requested."""

    def __init__(self, store: AgentStore, run_id: str, *, poll_s: float = POLL_S) -> None:
        self.path = request_path(store)
        self.run_id = run_id
        self.poll_s = poll_s
        self.aborted = False
        self._seen: tuple[int, int] | None = None

    def clear_stale(self) -> None:
        """At turn start: a request for another run is left over."""
        rec = self._read()
        if rec is not None and rec.get("run_id") != self.run_id:
            self.path.unlink(missing_ok=True)

    def clear(self) -> None:
        """After the turn settled: its request is done."""
        rec = self._read()
        if rec is not None and rec.get("run_id") == self.run_id:
            self.path.unlink(missing_ok=True)

    def _read(self) -> Mapping[str, object] | None:
        try:
            return read_snapshot(self.path)
        except HolonError:
            return None  # a damaged request is no request

    def requested(self) -> bool:
        if self.aborted:
            return True
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        key = (st.st_ino, st.st_mtime_ns)
        if key == self._seen:
            return False
        self._seen = key
        rec = self._read()
        self.aborted = rec is not None and rec.get("run_id") == self.run_id
        return self.aborted

    def call(self, fn: Callable[[], T], on_abort: Callable[[], None] | None = None) -> T:
        """``fn()`` on a worker thread; raises :class:`TurnAborted` when an
        abort arrives before the call returns (``on_abort`` runs, then the
        call gets :data:`TOOL_GRACE_S` to return if it has one; its result is
        dropped), whether it is seen while waiting or right after."""
        if self.requested():
            raise TurnAborted
        box: dict[str, T] = {}
        failed: list[BaseException] = []
        done = threading.Event()
        # the call sees this thread's context variables (the current trace span)
        run_in = contextvars.copy_context().run

        def work() -> None:
            try:
                box["value"] = run_in(fn)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the turn's thread
                failed.append(exc)
            finally:
                done.set()

        _worker(f"holon-call-{self.run_id}").give(work)
        try:
            while not done.wait(self.poll_s):
                if self.requested():
                    if on_abort is not None:
                        on_abort()
                        done.wait(TOOL_GRACE_S)
                    raise TurnAborted
        except KeyboardInterrupt:
            # Ctrl-C reaches this thread, not the call's: its command goes
            # too, as it did when the call ran here
            if on_abort is not None:
                on_abort()
            raise
        if self.requested():
            # asked for while the call ran, and it returned before the next
            # look: the same abort as one seen mid-call (the result is
            # dropped), not one seen at the next round after recording this
            # call's result, which depended on the thread's scheduling
            if on_abort is not None:
                on_abort()
            raise TurnAborted
        if failed:
            raise failed[0]
        return box["value"]


def stop_call_commands(store: AgentStore, turn_id: str) -> list[str]:
    """Stop the commands the running tool call started: this turn's tasks
    that are neither promoted nor finished (an ``ExecCommand`` in its yield
    window; a call of an earlier round has ended or been promoted by now).
    Promoted background tasks are left running."""
    from holon_cli.model import task as tm
    from holon_cli.runtime.tasks import procs
    from holon_cli.runtime.tasks.records import iter_records

    stopped = []
    for _d, rec in iter_records(store):
        if rec.get("turn_id") != turn_id or rec.get("promoted"):
            continue
        if tm.is_terminal(rec.get("status")):
            continue
        p = rec.get("process") or {}
        procs.stop_tree(
            p.get("pgid"), p.get("marker") or rec["id"], grace_s=0.5, since=p.get("start_time")
        )
        stopped.append(rec["id"])
    return stopped


def abort_agent(
    agent_id: str, run_id: str | None = None, *, wait_s: float = 0.0
) -> dict[str, object]:
    """``holon agent abort``: request the abort, then wait up to ``wait_s`` for
    the turn to end and report how it ended (``outcome``: ``aborted``, or
    the status it reached first, or ``still_running``)."""
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(agent_id, create_default=False)
    out = request_abort(store, run_id)
    running = out["run_id"]
    if not out["running"] or not isinstance(running, str) or wait_s <= 0:
        return out
    terminal = wait_for_end(store, running, wait_s)
    if terminal is None:
        out["outcome"] = "still_running" if running_run(store) == running else "unknown"
    else:
        out["message_id"] = terminal.get("message_id")
        aborted = terminal.get("reason") == ABORT_REASON
        out["outcome"] = "aborted" if aborted else str(terminal.get("status"))
    return out
