"""Inspecting and steering running tasks: list and snapshot, output and its
readiness, input, stop.

Invariants:
- a task's public snapshot never carries output bytes; output comes from
  ``output.log`` through bounded previews (:mod:`.output`);
- readiness follows the spec: ``success`` only for a terminal task with
  output, ``timeout`` for a blocking read that ran out, else ``not_ready``;
- a refused input is a result (``accepted_input: false``), not an error;
  the CLI turns it into exit 4 (:func:`require_active_input`);
- stopping signals the supervisor first; if it is gone or does not answer,
  the whole tree is stopped here and the task reports its ONE result;
- liveness is pid *and* process start time, never pid alone.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.errors import RejectedError
from holon_cli.model import task as tm
from holon_cli.runtime.tasks import procs
from holon_cli.runtime.tasks.output import bound_output
from holon_cli.runtime.tasks.records import (
    iter_records,
    read_task,
    report_terminal,
    task_dir,
    update_task,
)
from holon_cli.runtime.tasks.recovery import reap_orphans, unsettled_tasks
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.task import (
        ActiveTask,
        CommandSpec,
        ProcessIdentity,
        RetrievalStatus,
        TaskInputResult,
        TaskOutputResult,
        TaskProcess,
        TaskRecord,
        TaskSnapshot,
        TaskStopResult,
    )

STOP_GRACE_S = 5.0
OUTPUT_PREVIEW_CHARS = 8000


def list_tasks(store: AgentStore, *, include_all: bool = False) -> list[TaskSnapshot]:
    out = []
    for _d, rec in iter_records(store):
        if not rec.get("promoted"):
            continue
        if include_all or not tm.is_terminal(rec.get("status")):
            out.append(snapshot(rec))
    return out


def active_tasks(store: AgentStore) -> list[ActiveTask]:
    return [
        {
            "task_id": s["task_id"],
            "task_kind": s["kind"],
            "status": s["status"],
            "summary": s["summary"],
        }
        for s in list_tasks(store)
        if not tm.is_terminal(s["status"])
    ]


def snapshot(rec: TaskRecord) -> TaskSnapshot:
    """The compact ``TaskStatus.task`` lifecycle snapshot (no output bytes)."""
    cmd: CommandSpec = rec.get("command") or {}
    accepts = bool(cmd.get("accepts_input"))
    active = not tm.is_terminal(rec.get("status"))
    return {
        "task_id": rec["id"],
        "kind": rec.get("kind", tm.TASK_KIND),
        "status": tm.public_status(rec.get("status")),
        "summary": rec.get("summary", ""),
        "cmd_preview": rec.get("summary", ""),
        "agent_id": rec.get("agent_id"),
        "created_at": rec.get("created_at"),
        "updated_at": rec.get("updated_at"),
        "finished_at": rec.get("finished_at"),
        "exit_status": rec.get("exit_status"),
        "signal": rec.get("signal"),
        "stop_reason": rec.get("stop_reason"),
        "error": rec.get("error"),
        "status_before_restart": rec.get("status_before_restart"),
        "parent_message_id": rec.get("parent_message_id"),
        "accepts_input": accepts and active,
        "input_target": ("tty" if cmd.get("tty") else "stdin") if accepts and active else None,
        "command": {
            "cmd": cmd.get("cmd"),
            "cmd_digest": cmd.get("cmd_digest"),
            "workdir": cmd.get("workdir"),
            "shell": cmd.get("shell"),
            "login": cmd.get("login"),
            "tty": cmd.get("tty"),
            "output_path": cmd.get("output_path"),
            "terminal_reentry": cmd.get("terminal_reentry"),
        },
    }


def find_duplicate(store: AgentStore, digest: str) -> TaskRecord | None:
    for _d, rec in iter_records(store):
        if (
            rec.get("promoted")
            and not tm.is_child_task(rec)
            and not tm.is_terminal(rec.get("status"))
            and (rec.get("command") or {}).get("cmd_digest") == digest
            and procs.identity_alive(rec.get("supervisor"))
        ):
            return rec
    return None


def task_output(
    store: AgentStore, task_id: str, *, block: bool = False, timeout_ms: int = 30_000
) -> TaskOutputResult:
    """``TaskOutputResult {retrieval_status, task}`` (readiness rules of the spec)."""
    rec = read_task(store, task_id)
    if block and not tm.is_terminal(rec.get("status")):
        end = time.monotonic() + max(0, timeout_ms) / 1000
        while time.monotonic() < end and not tm.is_terminal(rec.get("status")):
            time.sleep(0.05)
            reap_orphans(store)
            rec = read_task(store, task_id)
    d = task_dir(store, task_id)
    out = d / "output.log"
    b = bound_output(out, OUTPUT_PREVIEW_CHARS, saved_path=str(out))
    terminal = tm.is_terminal(rec.get("status"))
    file_backed = out.exists()
    retrieval: RetrievalStatus
    if terminal and (file_backed or rec.get("output_summary")):
        retrieval = "success"
    elif block and not terminal:
        retrieval = "timeout"
    else:
        retrieval = "not_ready"
    artifacts = [{"kind": "output", "path": str(out)}] if file_backed else []
    status = rec.get("status")
    failure = tm.failure_artifact(rec)
    result_summary = None
    if terminal:
        result_summary = f"{status}" + (
            f", exit status {rec['exit_status']}" if rec.get("exit_status") is not None else ""
        )
    return {
        "retrieval_status": retrieval,
        "task": {
            "task_id": rec["id"],
            "kind": rec.get("kind", tm.TASK_KIND),
            "status": tm.public_status(status),
            "summary": rec.get("summary", ""),
            "output_preview": b.text,
            "output_truncated": b.truncated,
            "output_bytes": b.total_bytes,
            "artifacts": artifacts,
            "output_artifact": 0 if artifacts else None,
            "result_summary": result_summary,
            "exit_status": rec.get("exit_status"),
            "failure_artifact": failure,
            "child_supervision": None,
        },
    }


def task_input(store: AgentStore, task_id: str, data: str) -> TaskInputResult:
    """``TaskInputResult``; a refusal is ``accepted_input: false``, not an error."""
    rec = read_task(store, task_id)
    snap = snapshot(rec)
    cmd = rec.get("command") or {}
    target = "tty" if cmd.get("tty") else "stdin"

    def refused(why: str) -> TaskInputResult:
        return {
            "task": snap,
            "accepted_input": False,
            "input_target": target,
            "bytes_written": 0,
            "summary_text": why,
        }

    if not cmd.get("accepts_input"):
        return refused(f"task {task_id} was not started with accepts_input; it takes no input")
    if tm.is_terminal(rec.get("status")):
        return refused(f"task {task_id} is {rec.get('status')}; it takes no more input")
    fifo = task_dir(store, task_id) / "stdin.fifo"
    payload = data.encode("utf-8")
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return refused(f"task {task_id} is not reading input (its supervisor is not running)")
    written = 0
    try:
        view = memoryview(payload)
        end = time.monotonic() + 5
        while view and time.monotonic() < end:
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            written += n
            view = view[n:]
    finally:
        os.close(fd)
    return {
        "task": snap,
        "accepted_input": written == len(payload),
        "input_target": target,
        "bytes_written": written,
        "summary_text": f"wrote {written} bytes to the task's {target}",
    }


def task_stop(
    store: AgentStore, task_id: str, *, wait_s: float = STOP_GRACE_S + 3
) -> TaskStopResult:
    """Stop a task's whole tree (TERM, KILL after 5 s). A finished task: nothing to do.

    The stop is recorded first (``stop_requested_at``, under the task's lock),
    then the supervisor is signalled. The record is what makes a stop at any
    moment stick: a supervisor that has not started the command yet starts
    nothing, one that is starting it stops it as soon as it records it
    (:mod:`.supervisor` reads the record under the same lock), and a resumed
    one after a hand-off acts on it too; the signal only wakes it. A record
    without a supervisor yet (``holon task run`` between its start and the
    launcher recording it) is waited on while its launcher lives. Only when
    the supervisor is gone (or does not answer within ``wait_s``) is the tree
    stopped here and the task closed and reported from here."""
    rec = read_task(store, task_id)
    if tm.is_terminal(rec.get("status")):
        return _nothing_to_stop(rec)
    d = task_dir(store, task_id)
    start = time.monotonic()

    def requested(r: TaskRecord) -> None:
        if not tm.is_terminal(r.get("status")):
            r["stop_requested_at"] = r.get("stop_requested_at") or clock.now_iso()

    rec = update_task(d, requested)
    if tm.is_terminal(rec.get("status")) and not rec.get("stop_requested_at"):
        return _nothing_to_stop(rec)  # it ended meanwhile
    rec = _signal_and_wait(store, task_id, rec, start + wait_s)
    if not tm.is_terminal(rec.get("status")):
        # no supervisor (or it did not answer): stop the tree ourselves
        p: TaskProcess = rec.get("process") or {}
        procs.stop_tree(
            p.get("pgid"),
            p.get("marker") or task_id,
            grace_s=STOP_GRACE_S,
            since=p.get("start_time"),
        )

        def cancelled(r: TaskRecord) -> None:
            r["status"] = tm.merge_status(r.get("status"), "cancelled")
            r["stop_reason"] = r.get("stop_reason") or "stop_requested"
            r["finished_at"] = r.get("finished_at") or clock.now_iso()

        update_task(d, cancelled)
        report_terminal(d)
        rec = read_task(store, task_id)
    elapsed = time.monotonic() - start
    return {
        "task": snapshot(rec),
        "stop_requested": True,
        "force_stop_requested": elapsed >= STOP_GRACE_S,
        "summary_text": f"task {task_id} {rec.get('status')}",
    }


def _nothing_to_stop(rec: TaskRecord) -> TaskStopResult:
    return {
        "task": snapshot(rec),
        "stop_requested": False,
        "force_stop_requested": False,
        "summary_text": f"task {rec['id']} already {rec.get('status')}; nothing to stop",
    }


def _signal_and_wait(store: AgentStore, task_id: str, rec: TaskRecord, end: float) -> TaskRecord:
    """Signal the task's supervisor (once it is known) and wait, until
    ``end`` at most, for it to close the record and settle the result.
    Returns early when nobody is left to act on the stop: the supervisor is
    gone, or none was ever recorded and its launcher is gone."""
    signalled: ProcessIdentity | None = None
    while True:
        sup = rec.get("supervisor")
        sup_alive = procs.identity_alive(sup)
        if tm.is_terminal(rec.get("status")):
            if _result_settled(rec) or not sup_alive:
                return rec
        elif sup:
            if not sup_alive:
                return rec
            if signalled != sup:
                try:
                    os.kill(int(sup["pid"]), signal.SIGTERM)
                except ProcessLookupError:
                    pass
                signalled = sup
        elif not procs.identity_alive(rec.get("launcher")):
            return rec
        if time.monotonic() >= end:
            return rec
        time.sleep(0.02 if signalled is None else 0.05)
        rec = read_task(store, task_id)


def require_active_input(result: TaskInputResult) -> TaskInputResult:
    """CLI helper: a refused input is exit 4."""
    if not result["accepted_input"]:
        raise RejectedError(
            result["summary_text"],
            kind="input_refused",
            hint="only running tasks started with --accepts-input take input",
        )
    return result


def follow_output(
    store: AgentStore, task_id: str, write: Any, *, poll_s: float = 0.1
) -> TaskRecord:
    """Stream ``output.log`` to ``write(bytes)`` until the task is terminal and
    everything it wrote has been passed on. Returns the final record."""
    rec = read_task(store, task_id)
    path = task_dir(store, task_id) / "output.log"
    pos = 0
    while True:
        try:
            with open(path, "rb") as fh:
                fh.seek(pos)
                while chunk := fh.read(1 << 16):
                    write(chunk)
                    pos += len(chunk)
        except FileNotFoundError:
            pass
        if tm.is_terminal(rec.get("status")):
            try:
                if path.stat().st_size <= pos:
                    return rec
            except FileNotFoundError:
                return rec
            continue
        time.sleep(poll_s)
        reap_orphans(store)
        rec = read_task(store, task_id)


def stop_unsettled(store: AgentStore) -> list[str]:
    """Stop every running task of the agent (``holon run --no-wait-for-tasks``)."""
    stopped = []
    for rec in unsettled_tasks(store):
        if tm.is_child_task(rec):
            continue  # child handles stop through runtime/children (recursively)
        if not tm.is_terminal(rec.get("status")):
            task_stop(store, rec["id"])
            stopped.append(rec["id"])
    return stopped


def _result_settled(rec: TaskRecord) -> bool:
    """The supervisor is done with the task's ``task_result``: admitted, or
    undeliverable, or deferred until a stopped agent is started again."""
    return (
        rec.get("result_message_id") is not None
        or bool(rec.get("result_undeliverable"))
        or bool(rec.get("result_deferred"))
    )
