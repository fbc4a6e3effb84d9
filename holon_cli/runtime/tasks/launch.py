"""Launching supervised commands: the task directory, the launch spec, the
supervisor process, and the foreground call's wait / promote / discard.

Invariants:
- the record exists (``starting``) before the supervisor is started, and
  ``stdin.fifo`` exists before the record can say ``running``;
- a foreground call stays tied to its caller through a socket (``owner``)
  until :func:`promote`; a detached task is promoted from the start and its
  first record goes to the task ledger;
- a failure to start the supervisor is recorded on the task (``failed``)
  and raised, never left ``starting``;
- a foreground call's supervisor is forked from this process, or is one
  forked earlier that waits for this process's next call (:mod:`.forked`:
  no interpreter start for a command that ends before its yield, no fork
  per command); a detached task's supervisor starts with ``python -S`` from
  this package's parent directory, so it runs exactly this code without
  site-packages start-up cost.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from holon_cli import clock
from holon_cli.errors import HolonError
from holon_cli.model import task as tm
from holon_cli.runtime import telemetry
from holon_cli.runtime.tasks import forked, procs, sandbox
from holon_cli.runtime.tasks.control import snapshot
from holon_cli.runtime.tasks.environment import command_env
from holon_cli.runtime.tasks.records import (
    _ledger,
    _ledger_record,
    outputs_root,
    read_task,
    tasks_root,
    update_task,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot, write_snapshot
from holon_cli.store.layout import home_root
from holon_cli.store.retention import DiskFull, free_bytes, min_free_bytes
from holon_cli.umask import user_umask

if TYPE_CHECKING:
    from holon_cli.model.task import CommandSpec, TaskLaunchSpec, TaskRecord, TaskSnapshot

DEFAULT_OUTPUT_CAP_BYTES = 64 * 1024 * 1024


@dataclass
class Launched:
    """A started supervisor. Foreground calls: ``control`` is the caller's end
    of the socket to the supervisor forked as ``pid`` (or handed the call
    while idle: :mod:`.forked`). Detached tasks: ``sup`` is its Popen."""

    task_id: str
    dir: Path
    sup: subprocess.Popen[bytes] | None
    control: socket.socket | None
    pid: int | None = None
    # the call has ended: the supervisor exited (b"") or waits for the
    # next call (forked.DONE); None while it runs
    ended: bytes | None = None
    abandoned: bool = False

    def close_control(self) -> None:
        """Let go of the supervisor (promoted, or its call has ended): one
        that waits for the next call goes back to this process's pool."""
        if self.control is None:
            return
        ctl, self.control = self.control, None
        if self.pid is None:
            ctl.close()
        elif self.ended == forked.DONE and not self.abandoned:
            forked.release(self.pid, ctl)
        else:
            ctl.close()
            forked.collect(self.pid, exited=self.ended == b"")

    def wait_exit(self, timeout_s: float | None) -> bool:
        """Wait for the call to end; False at the timeout."""
        if self.control is not None:
            if self.ended is None:
                self.ended = forked.wait_end(self.control, timeout_s)
            return self.ended is not None
        if self.sup is not None:
            try:
                self.sup.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return False
        return True

    def abandon(self, timeout_s: float = 5.0) -> None:
        """Tell the supervisor its caller is leaving (it stops the command
        unless promoted) and wait up to ``timeout_s`` for it to finish."""
        self.abandoned = True
        if self.control is not None:
            try:
                self.control.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        self.wait_exit(timeout_s)
        self.close_control()


def check_free_disk(store: AgentStore, config: Any) -> int:
    """The free-disk floor (``retention.min_free_bytes``); raises
    :class:`DiskFull` when the agent's disk is already below it."""
    floor = min_free_bytes(config)
    free = free_bytes(store.layout.runtime)
    if floor and free is not None and free < floor:
        raise DiskFull(
            f"only {free} bytes are free on the disk of {store.layout.runtime}, below "
            f"retention.min_free_bytes ({floor}): no new command is started",
            hint=(
                "free disk space (`holon home gc` drops history past its retention), or "
                "lower retention.min_free_bytes in config.yaml"
            ),
            details={"free_bytes": free, "min_free_bytes": floor},
        )
    return floor


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
    root: Path | None = None,
    anchor: Path | None = None,
) -> Launched:
    """Create the task directory and start its supervisor. ``detached`` tasks
    are promoted from the start; foreground ones stay tied to this process
    through a pipe until :func:`promote`. ``root`` (default ``cwd``) is the
    execution root a sandbox leaves writable; ``anchor``, the binding's
    workspace anchor (a linked worktree's repository: what its commits may
    write in the sandbox). Refused before anything is
    created when the root is the holon home or part of it
    (``forbidden_workspace``), the disk is below ``retention.min_free_bytes``
    or the configured sandbox is unavailable (fail closed)."""
    from holon_cli.runtime.workspace.guard import check_root

    exec_root = root or cwd
    # a binding recorded before the workspace check existed (each path once:
    # the root is most often the working directory)
    for p in dict.fromkeys((Path(exec_root), Path(cwd))):
        check_root(p, agent_home=store.layout.home, what="an execution root")
    # the trace continues into the command: TRACEPARENT names the current
    # span (the ExecCommand's execute_tool) when tracing is on
    env = telemetry.with_child_env(command_env(config, store.agent_id))
    floor = check_free_disk(store, config)
    wrapped = sandbox.wrap(
        argv,
        sandbox.policy(config, store.agent_id, env),
        root=exec_root,
        cwd=cwd,
        hidden=[home_root(), store.layout.runtime],
        env=env,
        tty=tty,
        anchor=anchor,
    )
    tid = clock.new_id("task")
    d = tasks_root(store) / tid
    d.mkdir(parents=True, exist_ok=False)
    now = clock.now_iso()
    spec = _launch_spec(
        tid,
        wrapped,
        cwd,
        tty=tty,
        accepts_input=accepts_input,
        detached=detached,
        kill_after_ms=kill_after_ms,
        output_cap=output_cap_bytes(config),
        floor=floor,
    )
    procs.put_record(d / "spec.json", spec, durable=detached)
    if accepts_input:
        os.mkfifo(d / "stdin.fifo", 0o600)  # before the record says running
    command = _command_spec(
        cmd, cwd, shell, login, tty=tty, accepts_input=accepts_input, output=d / "output.log"
    )
    rec = _task_record(
        store,
        tid,
        now,
        command,
        detached=detached,
        parent_message_id=parent_message_id,
        turn_id=turn_id,
    )
    procs.put_record(d / "task.json", rec, durable=detached)
    if not detached:
        try:
            pid, ctl = forked.start(d, env)
        except OSError as exc:
            _start_failed(d, now, exc)
        return Launched(tid, d, None, ctl, pid)
    sup = _start_supervisor(d, env, now)
    ident = procs.process_identity(sup.pid)
    update_task(d, lambda x: x.update({"supervisor": ident}))
    _ledger(store).append(_ledger_record(_record_at(d) or rec))
    return Launched(tid, d, sup, None)


def _launch_spec(
    tid: str,
    wrapped: sandbox.Wrapped,
    cwd: Path,
    *,
    tty: bool,
    accepts_input: bool,
    detached: bool,
    kill_after_ms: int | None,
    output_cap: int,
    floor: int,
) -> TaskLaunchSpec:
    """What the supervisor reads to start the command (``spec.json``)."""
    spec: TaskLaunchSpec = {
        "v": 1,
        "argv": wrapped.argv,
        "cwd": str(cwd),
        "tty": tty,
        "accepts_input": accepts_input,
        "mode": "detached" if detached else "foreground",
        "kill_after_ms": kill_after_ms,
        "output_cap_bytes": output_cap,
        "marker": tid,
        "min_free_bytes": floor,
        "umask": user_umask(),
        "holon_home": str(home_root()),
    }
    if wrapped.seccomp is not None and wrapped.seccomp_arg is not None:
        spec["seccomp"] = wrapped.seccomp.hex()
        spec["seccomp_arg"] = wrapped.seccomp_arg
    return spec


def _command_spec(
    cmd: str,
    cwd: Path,
    shell: str | None,
    login: bool,
    *,
    tty: bool,
    accepts_input: bool,
    output: Path,
) -> CommandSpec:
    """The command as the task record (and its recovery spec) describe it."""
    return {
        "cmd": cmd,
        "cmd_digest": tm.cmd_digest(cmd, str(cwd), shell, login, tty),
        "workdir": str(cwd),
        "shell": shell,
        "login": login,
        "tty": tty,
        "accepts_input": accepts_input,
        "output_path": str(output),
        "terminal_reentry": True,
    }


def _task_record(
    store: AgentStore,
    tid: str,
    now: str,
    command: CommandSpec,
    *,
    detached: bool,
    parent_message_id: str | None,
    turn_id: str | None,
) -> TaskRecord:
    """The new task's record, still ``starting``, owned by this process
    unless it is detached."""
    me = procs.process_identity(os.getpid())
    return {
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
        "summary": tm.summary_of(command["cmd"]),
        "command": command,
        "recovery": {
            "kind": tm.TASK_KIND,
            "summary": tm.summary_of(command["cmd"]),
            "spec": command,
            "trust": "trusted_system",
        },
        "owner": None if detached else me,
        # who is launching it: a record still "starting" is not lost while it lives
        "launcher": me,
        "supervisor": None,
        "result_message_id": None,
    }


def _start_supervisor(d: Path, env: dict[str, str], now: str) -> subprocess.Popen[bytes]:
    """Start a detached task's supervisor in its own session (logging to
    ``supervisor.log``); a failure to start marks the task failed."""
    import signal

    from holon_cli.runtime.tasks.supervisor import BOOT, STOP_SIGNALS, package_parent

    log = os.open(d / "supervisor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    # the supervisor starts with the stop signals blocked (a child inherits
    # the mask) until its handlers are in: a stop sent while its interpreter
    # starts is acted on, not the default action's death of the supervisor
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        return subprocess.Popen(
            # -S: no site-packages at start (their .pth hooks cost ~30 ms of CPU
            # per command); the supervisor loads them only to report a result
            [sys.executable, "-S", "-c", BOOT.format(path=package_parent()), str(d)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd="/",
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        _start_failed(d, now, exc)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        os.close(log)


def _start_failed(d: Path, now: str, exc: OSError) -> NoReturn:
    why = f"could not start the supervisor: {exc}"
    update_task(d, lambda x: x.update({"status": "failed", "error": why, "finished_at": now}))
    raise HolonError(
        why, hint="check the process limits (ulimit -u) and that Python is still installed"
    ) from None


def _record_at(d: Path) -> TaskRecord | None:
    return cast("TaskRecord | None", read_snapshot(d / "task.json"))


def wait_foreground(launched: Launched, timeout_s: float) -> TaskRecord | None:
    """Wait for the supervisor to finish; the final record, or None at the timeout."""
    try:
        if not launched.wait_exit(timeout_s):
            return None
    except BaseException:
        # Ctrl-C / SIGTERM-as-exception: the supervisor stops the command on EOF
        launched.abandon(5.0)
        raise
    launched.close_control()
    return _record_at(launched.dir)


def promote(store: AgentStore, launched: Launched) -> TaskRecord | None:
    """Turn a running foreground call into a task. None when it finished first."""
    promoted: TaskRecord | None = None
    with procs.flocked(launched.dir / "lock"):
        rec: TaskRecord = _record_at(launched.dir) or {}
        if not tm.is_terminal(rec.get("status")):
            rec["promoted"] = True
            rec["owner"] = None
            if not rec.get("supervisor") and launched.pid is not None:
                # the task can be stopped from now on: its supervisor must be
                # known even before it has started the command and said so
                # itself (a stop then found nobody to signal, recorded
                # `cancelled`, and the command started after it, for ever)
                ident = procs.process_identity(launched.pid)
                if ident["start_time"] is not None:  # else it has exited already
                    rec["supervisor"] = ident
            if rec.get("status") == "starting":
                rec["status"] = "running"
            rec["promoted_at"] = rec["updated_at"] = clock.now_iso()
            write_snapshot(launched.dir / "task.json", rec)
            promoted = rec
    if promoted is None:
        launched.wait_exit(None)
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


def run_task(
    store: AgentStore,
    cmd: str,
    *,
    workdir: Path,
    accepts_input: bool = False,
    tty: bool = False,
    config: Any = None,
    wait_start_s: float = 3.0,
) -> TaskSnapshot:
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
