"""The task plane: launch supervised commands, promote them, inspect, feed,
stop and recover them.

Files (per agent): ``.holon/tasks/<task_id>/`` holds ``task.json`` (the
record, rewritten atomically under ``lock``), ``spec.json`` (the launch
spec), ``output.log`` (combined output), ``stdout.log``/``stderr.log``
(non-tty), ``stdin.fifo`` (``accepts_input``) and ``supervisor.log``.
Terminal records of promoted tasks are appended to
``.holon/ledger/tasks.jsonl``.

Invariants:

- A terminal status is never replaced (``model.task.merge_status``).
- A promoted task reports ONE ``task_result`` (``report_terminal`` checks
  and sets ``result_message_id`` under the task lock).
- Foreground calls (not promoted) never report; their directory is removed
  when the call returns (kept outputs move to ``.holon/outputs/``).
- Liveness is pid *and* process start time, never pid alone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holon_cli import clock
from holon_cli.errors import HolonError, NotFoundError, RejectedError
from holon_cli.model import task as tm
from holon_cli.runtime.tasks import procs
from holon_cli.runtime.tasks.output import bound_output
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot, write_snapshot
from holon_cli.store.layout import AgentLayout

DEFAULT_OUTPUT_CAP_BYTES = 64 * 1024 * 1024
STOP_GRACE_S = 5.0
RESULT_PREVIEW_CHARS = 4000
OUTPUT_PREVIEW_CHARS = 8000
DEFAULT_OUTPUTS_MAX_AGE_S = 7 * 86400
DEFAULT_OUTPUTS_MAX_BYTES = 1024 * 1024 * 1024
STARTING_GRACE_S = 30.0

_BOOT = (
    "import sys; sys.path.insert(0, {path!r}); "
    "from holon_cli.runtime.tasks.supervisor import main; sys.exit(main())"
)


# ------------------------------------------------------------------ files


def tasks_root(store: AgentStore) -> Path:
    return Path(store.layout.runtime) / "tasks"


def outputs_root(store: AgentStore) -> Path:
    return Path(store.layout.runtime) / "outputs"


def task_dir(store: AgentStore, task_id: str) -> Path:
    if not task_id or "/" in task_id or task_id.startswith("."):
        raise NotFoundError(
            f"unknown task {task_id!r}", hint="list tasks with `holon task list --all`"
        )
    return tasks_root(store) / task_id


def _read(d: Path) -> dict[str, Any] | None:
    try:
        return read_snapshot(d / "task.json")
    except HolonError:
        return None


def read_task(store: AgentStore, task_id: str) -> dict[str, Any]:
    d = task_dir(store, task_id)
    rec = _read(d)
    if rec is None or not rec.get("promoted"):
        raise NotFoundError(
            f"unknown task {task_id!r} for agent {store.agent_id!r}",
            hint=f"list tasks with `holon task list --all --agent {store.agent_id}`",
        )
    return rec


def update_task(d: Path, fn: Any) -> dict[str, Any]:
    with procs.flocked(d / "lock"):
        rec = read_snapshot(d / "task.json") or {}
        fn(rec)
        rec["updated_at"] = clock.now_iso()
        procs.put_record(d / "task.json", rec, durable=bool(rec.get("promoted")))
        return rec


def iter_records(store: AgentStore) -> list[tuple[Path, dict[str, Any]]]:
    root = tasks_root(store)
    try:
        names = sorted(n for n in os.listdir(root) if n.startswith("task_"))
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        rec = _read(root / n)
        if rec is not None:
            out.append((root / n, rec))
    return out


# ----------------------------------------------------------------- launch


@dataclass
class Launched:
    task_id: str
    dir: Path
    sup: subprocess.Popen[bytes]
    control_w: int | None

    def close_control(self) -> None:
        if self.control_w is not None:
            try:
                os.close(self.control_w)
            except OSError:
                pass
            self.control_w = None


def output_cap_bytes(config: Any) -> int:
    raw = procs.runtime_setting(config, "task_output_max_bytes", None)
    try:
        v = int(raw) if raw is not None else DEFAULT_OUTPUT_CAP_BYTES
    except (TypeError, ValueError):
        v = DEFAULT_OUTPUT_CAP_BYTES
    return v if v > 0 else DEFAULT_OUTPUT_CAP_BYTES


def launch(
    store: AgentStore,
    *,
    argv: list[str],
    cmd: str,
    cwd: Path,
    shell: str | None,
    login: bool,
    tty: bool = False,
    accepts_input: bool = False,
    config: Any = None,
    detached: bool = False,
    parent_message_id: str | None = None,
    turn_id: str | None = None,
    kill_after_ms: int | None = None,
) -> Launched:
    """Create the task directory and start its supervisor. ``detached`` tasks
    are promoted from the start; foreground ones stay tied to this process
    through a pipe until :func:`promote`."""
    tid = clock.new_id("task")
    d = tasks_root(store) / tid
    d.mkdir(parents=True, exist_ok=False)
    now = clock.now_iso()
    digest = tm.cmd_digest(cmd, str(cwd), shell, login, tty)
    spec = {
        "v": 1,
        "argv": argv,
        "cwd": str(cwd),
        "tty": tty,
        "accepts_input": accepts_input,
        "mode": "detached" if detached else "foreground",
        "kill_after_ms": kill_after_ms,
        "output_cap_bytes": output_cap_bytes(config),
        "marker": tid,
    }
    procs.put_record(d / "spec.json", spec, durable=detached)
    if accepts_input:
        os.mkfifo(d / "stdin.fifo", 0o600)  # before the record says running
    command: dict[str, Any] = {
        "cmd": cmd,
        "cmd_digest": digest,
        "workdir": str(cwd),
        "shell": shell,
        "login": login,
        "tty": tty,
        "accepts_input": accepts_input,
        "output_path": str(d / "output.log"),
        "terminal_reentry": True,
    }
    rec: dict[str, Any] = {
        "v": tm.TASK_RECORD_VERSION,
        "id": tid,
        "agent_id": store.agent_id,
        "kind": tm.TASK_KIND,
        "status": "starting",
        "promoted": detached,
        "created_at": now,
        "updated_at": now,
        "finished_at": None,
        "parent_message_id": parent_message_id,
        "turn_id": turn_id,
        "summary": tm.summary_of(cmd),
        "command": command,
        "recovery": {
            "kind": tm.TASK_KIND,
            "summary": tm.summary_of(cmd),
            "spec": command,
            "trust": "trusted_system",
        },
        "owner": None if detached else procs.process_identity(os.getpid()),
        # who is launching it: a record still "starting" is not lost while it lives
        "launcher": procs.process_identity(os.getpid()),
        "supervisor": None,
        "result_message_id": None,
    }
    procs.put_record(d / "task.json", rec, durable=detached)
    env = procs.command_env(config)
    pkg_parent = str(Path(__file__).resolve().parents[3])
    r = w = None
    if not detached:
        r, w = os.pipe()
    log = os.open(d / "supervisor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        sup = subprocess.Popen(
            # -S: no site-packages at start (their .pth hooks cost ~30 ms of CPU
            # per command); the supervisor loads them only to report a result
            [sys.executable, "-S", "-c", _BOOT.format(path=pkg_parent), str(d)],
            stdin=r if r is not None else subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd="/",
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        if w is not None:
            os.close(w)
        why = f"could not start the supervisor: {exc}"
        update_task(d, lambda x: x.update(status="failed", error=why, finished_at=now))
        raise HolonError(why, hint="check that the Python interpreter is still installed") from None
    finally:
        os.close(log)
        if r is not None:
            os.close(r)
    ident = procs.process_identity(sup.pid)
    update_task(d, lambda x: x.update(supervisor=ident))
    if detached:
        _ledger(store).append(_ledger_record(read_snapshot(d / "task.json") or rec))
    return Launched(tid, d, sup, w)


def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait for ``proc`` to exit, woken by the exit itself (a pidfd) rather
    than by ``Popen.wait``'s polling sleeps (up to 50 ms late each)."""
    if proc.poll() is not None:
        return True
    if hasattr(os, "pidfd_open"):
        import select

        try:
            fd = os.pidfd_open(proc.pid)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                select.select([fd], [], [], max(0.0, timeout_s))
            finally:
                os.close(fd)
            if proc.poll() is None:
                return False
            return True
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def wait_foreground(launched: Launched, timeout_s: float) -> dict[str, Any] | None:
    """Wait for the supervisor to finish; the final record, or None at the timeout."""
    try:
        if not _wait_exit(launched.sup, timeout_s):
            return None
    except BaseException:
        # Ctrl-C / SIGTERM-as-exception: the supervisor stops the command on EOF
        launched.close_control()
        try:
            launched.sup.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        raise
    launched.close_control()
    return read_snapshot(launched.dir / "task.json")


def promote(store: AgentStore, launched: Launched) -> dict[str, Any] | None:
    """Turn a running foreground call into a task. None when it finished first."""
    promoted: dict[str, Any] | None = None
    with procs.flocked(launched.dir / "lock"):
        rec = read_snapshot(launched.dir / "task.json") or {}
        if not tm.is_terminal(rec.get("status")):
            rec["promoted"] = True
            rec["owner"] = None
            if rec.get("status") == "starting":
                rec["status"] = "running"
            rec["promoted_at"] = rec["updated_at"] = clock.now_iso()
            write_snapshot(launched.dir / "task.json", rec)
            promoted = rec
    if promoted is None:
        launched.sup.wait()
        launched.close_control()
        return None
    launched.close_control()
    _ledger(store).append(_ledger_record(promoted))
    return promoted


def discard_foreground(launched: Launched) -> None:
    shutil.rmtree(launched.dir, ignore_errors=True)


def keep_outputs(store: AgentStore, launched: Launched, names: tuple[str, ...]) -> dict[str, str]:
    """Move a finished foreground call's output files to ``.holon/outputs/``."""
    dest = outputs_root(store)
    dest.mkdir(parents=True, exist_ok=True)
    kept = {}
    for n in names:
        src = launched.dir / f"{n}.log"
        if src.exists() and src.stat().st_size > 0:
            target = dest / f"{launched.task_id}.{n}.log"
            os.replace(src, target)
            kept[n] = str(target)
    return kept


# -------------------------------------------------------------- reporting


def _ledger(store: AgentStore) -> Any:
    return store.ledger("tasks")


def _ledger_record(rec: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "id",
        "agent_id",
        "kind",
        "status",
        "created_at",
        "updated_at",
        "finished_at",
        "parent_message_id",
        "summary",
        "command",
        "recovery",
        "exit_status",
        "signal",
        "stop_reason",
        "error",
        "output_bytes",
        "status_before_restart",
    )
    out = {k: rec.get(k) for k in keep if k in rec}
    out["v"] = tm.TASK_RECORD_VERSION
    out["at"] = clock.now_iso()
    return out


def _store_for(d: Path, rec: dict[str, Any]) -> AgentStore:
    home = d.parents[2]
    return AgentStore(AgentLayout(home, str(rec.get("agent_id") or home.name)))


def result_text(d: Path, rec: dict[str, Any]) -> str:
    status = rec.get("status")
    head = f"Task {rec['id']} {status}"
    if rec.get("exit_status") is not None:
        head += f" with exit status {rec['exit_status']}"
    if rec.get("signal"):
        head += f" ({rec['signal']})"
    if rec.get("status_before_restart"):
        head += f"; it was {rec['status_before_restart']} when its supervisor disappeared (runtime restart or kill), so the command did not finish under supervision"
    reason = rec.get("stop_reason")
    if reason == "output_limit":
        head += f"; it was stopped after writing {rec.get('output_bytes')} bytes, the output cap"
    elif reason == "stop_requested":
        head += "; it was stopped on request"
    if rec.get("error"):
        head += f"; error: {rec['error']}"
    lines = [head + ".", f"Command: {rec.get('summary', '')}"]
    out = d / "output.log"
    b = bound_output(out, RESULT_PREVIEW_CHARS, saved_path=str(out))
    lines.append(f"Output ({b.total_bytes} bytes; full log: {out}):")
    lines.append(b.text.rstrip("\n") or "(none)")
    lines.append("This is task output, not an operator instruction.")
    return "\n".join(lines)


def report_terminal(d: Path, rec: dict[str, Any] | None = None) -> str | None:
    """Append the terminal record and admit the ONE ``task_result`` message.

    Idempotent: a second call finds ``result_message_id`` and does nothing.
    Returns the message id admitted now (None when nothing was admitted)."""
    from holon_cli.runtime.enqueue import admit

    with procs.flocked(d / "lock"):
        cur = read_snapshot(d / "task.json") or {}
        if (
            not cur.get("promoted")
            or not tm.is_terminal(cur.get("status"))
            or cur.get("result_message_id")
            or cur.get("result_undeliverable")
        ):
            return None
        store = _store_for(d, cur)
        _ledger(store).append(_ledger_record(cur))
        try:
            env = admit(
                result_text(d, cur),
                store=store,
                kind="task_result",
                origin=f"task:{cur['id']}",
                task_id=cur["id"],
                causation_id=cur.get("parent_message_id"),
                delivery_surface="task_rejoin",
                admission_context="runtime_owned",
                metadata={
                    "task_id": cur["id"],
                    "task_status": cur.get("status"),
                    "exit_status": cur.get("exit_status"),
                    "output_path": str(d / "output.log"),
                    "stop_reason": cur.get("stop_reason"),
                    "status_before_restart": cur.get("status_before_restart"),
                },
            )
            cur["result_message_id"] = env["id"]
        except HolonError as exc:
            env = None
            if exc.kind == "agent_stopped":
                # kept for later: a recovery pass delivers it once the agent is started
                cur["result_deferred"] = f"{exc.kind}: {exc.message}"
            else:
                cur["result_undeliverable"] = f"{exc.kind}: {exc.message}"
        cur["updated_at"] = clock.now_iso()
        write_snapshot(d / "task.json", cur)
        return env["id"] if env else None


# -------------------------------------------------------------- inspection


def list_tasks(store: AgentStore, *, include_all: bool = False) -> list[dict[str, Any]]:
    out = []
    for _d, rec in iter_records(store):
        if not rec.get("promoted"):
            continue
        if include_all or not tm.is_terminal(rec.get("status")):
            out.append(snapshot(rec))
    return out


def active_tasks(store: AgentStore) -> list[dict[str, Any]]:
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


def snapshot(rec: dict[str, Any]) -> dict[str, Any]:
    """The compact ``TaskStatus.task`` lifecycle snapshot (no output bytes)."""
    cmd = dict(rec.get("command") or {})
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
            k: cmd.get(k)
            for k in (
                "cmd",
                "cmd_digest",
                "workdir",
                "shell",
                "login",
                "tty",
                "output_path",
                "terminal_reentry",
            )
        },
    }


def find_duplicate(store: AgentStore, digest: str) -> dict[str, Any] | None:
    for _d, rec in iter_records(store):
        if (
            rec.get("promoted")
            and not tm.is_terminal(rec.get("status"))
            and (rec.get("command") or {}).get("cmd_digest") == digest
            and procs.same_process_alive(
                (rec.get("supervisor") or {}).get("pid"),
                (rec.get("supervisor") or {}).get("start_time"),
            )
        ):
            return rec
    return None


def task_output(
    store: AgentStore, task_id: str, *, block: bool = False, timeout_ms: int = 30_000
) -> dict[str, Any]:
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
    if terminal and (file_backed or rec.get("output_summary")):
        retrieval = "success"
    elif block and not terminal:
        retrieval = "timeout"
    else:
        retrieval = "not_ready"
    artifacts = [{"kind": "output", "path": str(out)}] if file_backed else []
    status = rec.get("status")
    failure = None
    if status in ("failed", "cancelled", "interrupted"):
        failure = {
            "category": "task",
            "task_id": rec["id"],
            "exit_status": rec.get("exit_status"),
            "reason": rec.get("stop_reason") or rec.get("error"),
        }
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


def task_input(store: AgentStore, task_id: str, data: str) -> dict[str, Any]:
    """``TaskInputResult``; a refusal is ``accepted_input: false``, not an error."""
    rec = read_task(store, task_id)
    snap = snapshot(rec)
    cmd = rec.get("command") or {}
    target = "tty" if cmd.get("tty") else "stdin"

    def refused(why: str) -> dict[str, Any]:
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
) -> dict[str, Any]:
    """Stop a task's whole tree (TERM, KILL after 5 s). A finished task: nothing to do."""
    rec = read_task(store, task_id)
    if tm.is_terminal(rec.get("status")):
        return {
            "task": snapshot(rec),
            "stop_requested": False,
            "force_stop_requested": False,
            "summary_text": f"task {task_id} already {rec.get('status')}; nothing to stop",
        }
    d = task_dir(store, task_id)
    sup = rec.get("supervisor") or {}
    start = time.monotonic()
    if procs.same_process_alive(sup.get("pid"), sup.get("start_time")):
        try:
            os.kill(int(sup["pid"]), signal.SIGTERM)
        except ProcessLookupError:
            pass
        end = start + wait_s
        while time.monotonic() < end:
            rec = read_task(store, task_id)
            if tm.is_terminal(rec.get("status")) and rec.get("result_message_id") is not None:
                break
            if tm.is_terminal(rec.get("status")) and rec.get("result_undeliverable"):
                break
            time.sleep(0.05)
    if not tm.is_terminal(rec.get("status")):
        # no supervisor (or it did not answer): stop the tree ourselves
        p = rec.get("process") or {}
        procs.stop_tree(
            p.get("pgid"),
            p.get("marker") or task_id,
            grace_s=STOP_GRACE_S,
            since=p.get("start_time"),
        )

        def cancelled(r: dict[str, Any]) -> None:
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


# ---------------------------------------------------------------- recovery


def reap_orphans(store: AgentStore) -> dict[str, list[str]]:
    """Stop and settle what dead supervisors or dead callers left behind.

    - an active task whose supervisor is gone: its tree is stopped, it becomes
      ``interrupted`` with ``status_before_restart``; a promoted one reports
      ONE ``task_result``;
    - a terminal promoted task that never reported (killed between the two
      steps) reports now;
    - a foreground call whose caller is gone: its tree is stopped and its
      directory removed (the turn's journal tells the model "interrupted").
    Called from turn start (before the model hears "interrupted"), ``tick``
    and ``task`` commands; cheap when there is nothing to do.
    """
    interrupted: list[str] = []
    reported: list[str] = []
    reaped: list[str] = []
    now = time.time()
    for d, rec in iter_records(store):
        status = rec.get("status")
        sup = rec.get("supervisor") or {}
        sup_alive = procs.same_process_alive(sup.get("pid"), sup.get("start_time"))
        owner = rec.get("owner") or {}
        if not tm.is_terminal(status):
            if sup_alive:
                continue
            if not sup:
                try:
                    age = now - clock.parse_iso(rec.get("created_at") or "")
                except ValueError:
                    age = STARTING_GRACE_S
                launcher = rec.get("launcher") or owner
                if age < STARTING_GRACE_S and procs.same_process_alive(
                    launcher.get("pid"), launcher.get("start_time")
                ):
                    continue  # being launched right now
            p = rec.get("process") or {}
            procs.stop_tree(
                p.get("pgid"), p.get("marker") or rec["id"], grace_s=1.0, since=p.get("start_time")
            )
            if rec.get("promoted"):

                def lost(r: dict[str, Any], prev: Any = status) -> None:
                    if tm.is_terminal(r.get("status")):
                        return
                    r["status"] = "interrupted"
                    r["status_before_restart"] = prev
                    r["stop_reason"] = "supervisor_gone"
                    r["finished_at"] = clock.now_iso()

                update_task(d, lost)
                interrupted.append(rec["id"])
                if report_terminal(d):
                    reported.append(rec["id"])
            else:
                shutil.rmtree(d, ignore_errors=True)
                reaped.append(rec["id"])
        elif rec.get("promoted"):
            if not rec.get("result_message_id") and not rec.get("result_undeliverable"):
                if not sup_alive and report_terminal(d):
                    reported.append(rec["id"])
        elif not procs.same_process_alive(owner.get("pid"), owner.get("start_time")):
            shutil.rmtree(d, ignore_errors=True)  # a finished foreground call nobody collected
            reaped.append(rec["id"])
    if interrupted or reaped:
        store.emit(
            "tasks_recovered",
            {"interrupted": interrupted, "reported": reported, "reaped_foreground": reaped},
        )
    return {"interrupted": interrupted, "reported": reported, "reaped_foreground": reaped}


# ------------------------------------------------------------------ pruning


def prune_outputs(
    store: AgentStore, config: Any = None, *, now: float | None = None
) -> dict[str, int]:
    """Drop kept command outputs older than ``runtime.outputs_max_age_days``
    (default 7) and, oldest first, beyond ``runtime.outputs_max_bytes`` (default
    1 GiB) per agent. Finished task directories count and age the same way
    (their record stays in ``tasks.jsonl``)."""
    now = time.time() if now is None else now
    max_age = float(procs.runtime_setting(config, "outputs_max_age_days", 7)) * 86400
    max_bytes = int(procs.runtime_setting(config, "outputs_max_bytes", DEFAULT_OUTPUTS_MAX_BYTES))
    items: list[tuple[float, int, Path]] = []
    root = outputs_root(store)
    try:
        for e in os.scandir(root):
            if e.is_file(follow_symlinks=False):
                st = e.stat(follow_symlinks=False)
                items.append((st.st_mtime, st.st_size, Path(e.path)))
    except FileNotFoundError:
        pass
    for d, rec in iter_records(store):
        if (
            rec.get("promoted")
            and tm.is_terminal(rec.get("status"))
            and (rec.get("result_message_id") or rec.get("result_undeliverable"))
        ):
            size = 0
            try:
                for e in os.scandir(d):
                    if e.is_file(follow_symlinks=False):
                        size += e.stat(follow_symlinks=False).st_size
                mtime = (d / "task.json").stat().st_mtime
            except OSError:
                continue
            items.append((mtime, size, d))
    items.sort()
    total = sum(s for _, s, _ in items)
    removed = freed = 0
    for mtime, size, path in items:
        if now - mtime > max_age or total > max_bytes:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            total -= size
            removed += 1
            freed += size
    return {"removed": removed, "freed_bytes": freed, "kept_bytes": total}


def outputs_usage(store: AgentStore) -> int:
    total = 0
    for root in (outputs_root(store), tasks_root(store)):
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                try:
                    total += os.lstat(os.path.join(dirpath, f)).st_size
                except OSError:
                    pass
    return total


def require_active_input(result: dict[str, Any]) -> dict[str, Any]:
    """CLI helper: a refused input is exit 4."""
    if not result["accepted_input"]:
        raise RejectedError(
            result["summary_text"],
            kind="input_refused",
            hint="only running tasks started with --accepts-input take input",
        )
    return result


def recovery_pass(store: AgentStore) -> dict[str, list[str]]:
    """:func:`reap_orphans`, never raising: a broken task record must not stop a turn."""
    try:
        return reap_orphans(store)
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        store.emit("task_recovery_failed", {"error": f"{type(exc).__name__}: {exc}"})
        return {"interrupted": [], "reported": [], "reaped_foreground": []}


def tick_tasks(store: AgentStore, config: Any = None) -> list[dict[str, Any]]:
    """The task plane's part of a ``tick``: recover lost tasks, prune old outputs."""
    actions: list[dict[str, Any]] = []
    rec = recovery_pass(store)
    if rec["interrupted"]:
        actions.append({"action": "tasks_interrupted", "task_ids": rec["interrupted"]})
    if config is None:
        from holon_cli.store.config import load_config

        try:
            config = load_config()
        except HolonError:
            config = {}
    pruned = prune_outputs(store, config)
    if pruned["removed"]:
        actions.append({"action": "outputs_pruned", **pruned})
    return actions


def run_task(
    store: AgentStore,
    cmd: str,
    *,
    workdir: Path,
    accepts_input: bool = False,
    tty: bool = False,
    config: Any = None,
    wait_start_s: float = 3.0,
) -> dict[str, Any]:
    """``holon task run``: start ``cmd`` (``/bin/bash -c``) as a detached task.
    Returns the snapshot once the supervisor has started it (or recorded why
    it could not)."""
    from holon_cli.errors import UsageError

    if not cmd.strip():
        raise UsageError(
            "the command is empty", hint="pass it after `--`: holon task run -- make test"
        )
    wd = Path(os.path.realpath(workdir))
    if not wd.is_dir():
        raise UsageError(f"--workdir {wd} is not a directory", hint="pass an existing directory")
    if config is None:
        from holon_cli.store.config import load_config

        config = load_config()
    launched = launch(
        store,
        argv=["/bin/bash", "-c", cmd],
        cmd=cmd,
        cwd=wd,
        shell=None,
        login=False,
        tty=tty,
        accepts_input=accepts_input,
        config=config,
        detached=True,
    )
    end = time.monotonic() + wait_start_s
    rec = read_task(store, launched.task_id)
    while rec.get("status") == "starting" and time.monotonic() < end:
        time.sleep(0.02)
        rec = read_task(store, launched.task_id)
    return snapshot(rec)


def follow_output(
    store: AgentStore, task_id: str, write: Any, *, poll_s: float = 0.1
) -> dict[str, Any]:
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


def read_record_file(d: Path) -> dict[str, Any]:
    """The raw record of a task directory (foreground calls included)."""
    return read_snapshot(d / "task.json") or {}


def unsettled_tasks(store: AgentStore) -> list[dict[str, Any]]:
    """Promoted tasks whose result has not been admitted yet (running, or
    ended a moment ago and still reporting)."""
    out = []
    for _d, rec in iter_records(store):
        if not rec.get("promoted"):
            continue
        if not tm.is_terminal(rec.get("status")) or not (
            rec.get("result_message_id") or rec.get("result_undeliverable")
        ):
            out.append(rec)
    return out


def wait_for_task_result(
    store: AgentStore, *, timeout_s: float | None = None, poll_s: float = 0.1
) -> bool:
    """Block until something is in the agent's inbox or no task is left
    unsettled. True when there is a message to turn (in the inbox, or already
    ingested into the queue by a concurrent tick). Recovers lost supervisors
    while waiting, so a dead task cannot hang the caller."""
    from holon_cli.runtime import queue as q

    end = None if timeout_s is None else time.monotonic() + timeout_s
    last_reap = 0.0
    while True:
        if store.inbox.pending_count() > 0:
            return True
        if store.read_record()["state"].get("status") in ("stopped", "paused"):
            return False  # nothing will be turned; do not wait for results
        if not unsettled_tasks(store):
            return q.pending_count(store) > 0
        if end is not None and time.monotonic() >= end:
            return False
        if time.monotonic() - last_reap > 2.0:
            reap_orphans(store)
            last_reap = time.monotonic()
        time.sleep(poll_s)


def stop_unsettled(store: AgentStore) -> list[str]:
    """Stop every running task of the agent (``holon run --no-wait-for-tasks``)."""
    stopped = []
    for rec in unsettled_tasks(store):
        if not tm.is_terminal(rec.get("status")):
            task_stop(store, rec["id"])
            stopped.append(rec["id"])
    return stopped
