"""The command supervisor: a small detached process (own session) that
runs a command, streams its output to files, enforces the output cap on
the write path, records how it ended and, for a promoted task, reports the
result to the agent exactly once. A forked one then takes its caller's
next command (:func:`.forked.serve`), one at a time.

How it starts (see :mod:`.forked` for why):

- ``ExecCommand`` / batch items (``foreground``): forked from the calling
  process, which has this module imported already (:func:`.forked.start`:
  fork + ``setsid``, every inherited descriptor closed). fd 0 is a socket
  whose other end the calling turn holds. EOF on it while the call is not
  promoted means the caller died: the command tree is stopped and the call
  recorded ``interrupted`` (crash-safety: a killed ``holon turn`` leaves
  nothing running). A caller that promotes the call writes ``promoted:
  true`` into the record before closing the socket; the forked supervisor
  then *hands off*: it ``exec``s a fresh ``python -S`` (same pid, same
  children, the command's pipes and files passed as inherited descriptors,
  its counters in ``handoff.json``) that supervises the task from then on
  and reports its result. So a command that ends before the yield never
  pays an interpreter start, and nothing long-lived runs in a copy of the
  caller (its memory, its other threads' locks).
- ``holon task run`` (``detached``): ``python -S -c ... <task_dir>``,
  promoted from the start.

The command gets its own session and process group, the parent-death
signal (SIGKILL when this supervisor dies) and the per-call marker; when
its leader exits, whatever it left running is stopped too.

Its parts: reading the output, its files, the cap and the free-disk breaker
in :mod:`.capture`; the input FIFO and its buffer in :mod:`.feed`; starting the
command on a pty or on pipes in :mod:`.spawn`; what a hand-off carries in
:mod:`.handoff`. This module keeps the record, the loop, the end and the
hand-off itself.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from holon_cli.runtime.tasks import handoff as handoff_state
from holon_cli.runtime.tasks import procs, spawn
from holon_cli.runtime.tasks.capture import Capture
from holon_cli.runtime.tasks.feed import InputFeed
from holon_cli.runtime.tasks.handoff import Proc

if TYPE_CHECKING:
    from holon_cli.model.task import TaskLaunchSpec, TaskRecord, TaskStatus

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# the fresh interpreter a supervisor execs into (resume / report) or that
# ``holon task run`` starts; ``{path}`` is this package's parent directory
BOOT = (
    "import sys; sys.path.insert(0, {path!r}); "
    "from holon_cli.runtime.tasks.supervisor import main; sys.exit(main())"
)

# the longest wait on the command between two looks (its exit and a stop
# wake the wait at once: a pidfd, the stop handler's wake pipe)
WAIT_S = 0.5

# Tests only: called with the name of each phase a stop can land in
# ("start": handlers installed, the command not started yet; "spawned": the
# command (bwrap setting up its sandbox) started but not yet recorded;
# "handoff": promoted, state saved, about to exec, stop signals blocked). A
# forked supervisor inherits what the test process set here.
phase_hook: Callable[[str], None] | None = None


def _phase(name: str) -> None:
    if phase_hook is not None:
        phase_hook(name)


# model.task.TERMINAL, without importing the model before the command starts
TERMINAL = ("completed", "failed", "cancelled", "interrupted")


def _nothing() -> None:
    pass


def stop_recorded(rec: TaskRecord) -> bool:
    """The record asks for the command to end: a stop was requested
    (``stop_requested_at``, written by ``task_stop`` under the task's lock
    before it signals anyone) or someone already closed it (a stop or a
    recovery that did not find this supervisor)."""
    return bool(rec.get("stop_requested_at")) or rec.get("status") in TERMINAL


def package_parent() -> str:
    return str(Path(__file__).resolve().parents[3])


def _now_iso() -> str:
    from holon_cli import clock

    return clock.now_iso()


class Supervisor:
    def __init__(
        self, task_dir: Path, *, env: dict[str, str] | None = None, forked: bool = False
    ) -> None:
        self.dir = task_dir
        # the command's environment (minus the marker); a forked supervisor
        # still has its caller's environment, secrets included
        self.env = dict(os.environ) if env is None else env
        self.forked = forked
        self.control = False
        self.spec: TaskLaunchSpec = json.loads((task_dir / "spec.json").read_text())
        self.stop_reason: str | None = None
        self.stop_grace = 1.0
        # the output files, the cap and the free-disk breaker
        # (retention.min_free_bytes; 0: off)
        self.capture = Capture(
            task_dir,
            cap=int(self.spec.get("output_cap_bytes") or 0),
            floor=int(self.spec.get("min_free_bytes") or 0),
            on_cap=lambda: self.request_stop("output_limit", 1.0),
        )
        # the input FIFO and the command's input end (terminal or stdin pipe)
        self.feed = InputFeed()
        self.proc: Proc | None = None
        self.pgid: int | None = None
        self.marker: str = self.spec["marker"]
        self.start_ticks: int | None = None
        # command output fd -> the per-stream file it is copied to (None: pty)
        self.streams: dict[int, int | None] = {}
        self.background_killed = False
        self.returncode = 0
        # the caller closed its end of the control socket (promoted or gone)
        self.caller_left = False
        # the record as the end wrote it (:meth:`finalize`)
        self.final: TaskRecord | None = None
        # written to by request_stop so a stop signal wakes the loop's select
        # (PEP 475 retries an interrupted select with its full timeout)
        self._wake_w: int | None = None

    # -- record ----------------------------------------------------------
    def update(self, fn: Callable[[TaskRecord], object]) -> TaskRecord:
        with procs.flocked(self.dir / "lock"):
            rec = self._read_unlocked()
            fn(rec)
            rec["updated_at"] = _now_iso()
            procs.put_record(self.dir / "task.json", rec, durable=bool(rec.get("promoted")))
            return rec

    def read(self) -> TaskRecord:
        with procs.flocked(self.dir / "lock"):
            return self._read_unlocked()

    def peek(self) -> TaskRecord:
        """The record without its lock (replaced atomically, so whole): a
        look before the command starts; what counts is re-read under the
        lock once it has (:meth:`_mark_running`)."""
        return self._read_unlocked()

    def _read_unlocked(self) -> TaskRecord:
        from holon_cli.store.fsio import read_snapshot

        return cast("TaskRecord", read_snapshot(self.dir / "task.json") or {})

    def request_stop(self, reason: str, grace: float) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stop_grace = grace
        if self._wake_w is not None:
            try:
                os.write(self._wake_w, b"\0")
            except OSError:
                pass  # full (a wake-up is already pending) or closed

    # -- run ---------------------------------------------------------------
    def spawn(self) -> bool:
        """Start the command (on a pty or on pipes); False when it could not
        be started (the record then says ``failed`` and is reported)."""
        spec = self.spec
        argv = list(spec["argv"])
        env = dict(self.env)
        env[procs.MARKER_VAR] = self.marker
        self.capture.open()
        procs.prepare_parent_death_signal()
        if spec.get("accepts_input"):
            self.feed.open_fifo(self.dir)
        fds = spawn.seccomp_fds(spec, argv)
        try:
            if spec.get("tty"):
                self.proc, master = spawn.start_on_pty(spec, argv, env, fds)
                self.feed.master = master
                self.streams[master] = None
            else:
                self.capture.open_streams()
                proc = spawn.start_on_pipes(spec, argv, env, fds)
                self.proc = proc
                if proc.stdin is not None:
                    self.feed.stdin_w = proc.stdin.fileno()
                assert proc.stdout is not None and proc.stderr is not None
                self.streams[proc.stdout.fileno()] = self.capture.stdout_fd
                self.streams[proc.stderr.fileno()] = self.capture.stderr_fd
        except OSError as exc:
            self._spawn_failed(exc, argv)
            return False
        finally:
            for fd in fds:
                os.close(fd)
        _phase("spawned")
        self._mark_running()
        return True

    def _spawn_failed(self, exc: OSError, argv: list[str]) -> None:
        err = f"{exc.strerror or exc} ({argv[0]}, cwd {self.spec['cwd']})"
        code = exc.errno

        def failed(r: TaskRecord) -> None:
            r.update(
                {
                    "status": "failed",
                    "error": err,
                    "errno": code,
                    "finished_at": _now_iso(),
                    "exit_status": None,
                    "supervisor": procs.process_identity(os.getpid()),
                }
            )

        rec = self.update(failed)
        self.finish_reporting(rec)

    def _mark_running(self) -> None:
        assert self.proc is not None
        self.pgid = self.proc.pid
        ident = procs.process_identity(self.proc.pid)
        self.start_ticks = ident["start_time"]
        me = procs.process_identity(os.getpid())
        stop = False

        def running(r: TaskRecord) -> None:
            nonlocal stop
            # under the lock: a stop recorded before this saw no process to
            # signal or kill (or no supervisor): it is acted on here
            stop = stop_recorded(r)
            if r.get("status") in ("starting", None):
                r["status"] = "running"
            r["process"] = {**ident, "pgid": self.pgid, "marker": self.marker}
            r["supervisor"] = me
            r["started_at"] = _now_iso()

        self.update(running)
        if stop:
            self.request_stop("stop_requested", 5.0)

    def cancel_unstarted(self) -> None:
        """A stop came before the command was started: it never is. The
        record says ``cancelled`` (or keeps the end someone else recorded),
        with an empty output, and the task reports like any other."""
        self.capture.open_empty()
        me = procs.process_identity(os.getpid())

        def cancelled(r: TaskRecord) -> None:
            if r.get("status") not in TERMINAL:
                r["status"] = "cancelled"
                r["finished_at"] = _now_iso()
            r["stop_reason"] = r.get("stop_reason") or "stop_requested"
            r["exit_status"] = None
            r["output_bytes"] = 0
            r["supervisor"] = me

        rec = self.update(cancelled)
        self.finish_reporting(rec)

    def loop(self) -> None:
        """Supervise until the command ends or a stop is requested. A forked
        supervisor whose call gets promoted hands off from here (``exec``)."""
        assert self.proc is not None
        proc = self.proc
        sel = selectors.DefaultSelector()
        streams = self.streams
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ, "out")
        if self.control:
            sel.register(0, selectors.EVENT_READ, "control")
        feed = self.feed
        fifo = feed.fifo
        if fifo is not None:
            sel.register(fifo, selectors.EVENT_READ, "input")
        pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(proc.pid)
                sel.register(pidfd, selectors.EVENT_READ, "exit")
            except OSError:
                pidfd = None
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._wake_w = wake_w
        sel.register(wake_r, selectors.EVENT_READ, "wake")
        kill_after = self.spec.get("kill_after_ms")
        deadline = time.monotonic() + kill_after / 1000 if kill_after else None
        while True:
            if self.stop_reason is not None:
                break
            if proc.poll() is not None:
                break
            feed.flush()
            feed.throttle(sel)
            timeout = 0.05 if pidfd is None else WAIT_S
            if feed.pending:
                timeout = 0.02
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.request_stop("timeout", 1.0)
                    continue
                timeout = min(timeout, left)
            for key, _ in sel.select(timeout):
                what = key.data
                fd = int(key.fd)
                if what == "out":
                    if not self.capture.pump(fd, streams[fd]):
                        sel.unregister(fd)
                elif what == "control":
                    try:
                        data = os.read(0, 4096)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(0)
                        self.caller_left = True
                        if not self.read().get("promoted"):
                            self.request_stop("owner_gone", 1.0)
                        elif self.forked:
                            self.handoff()  # returns only when the exec failed
                elif what == "input":
                    feed.forward()
                elif what == "exit":
                    sel.unregister(fd)
                elif what == "wake":
                    try:
                        os.read(fd, 512)
                    except OSError:
                        pass
        self._wake_w = None
        sel.unregister(wake_r)
        os.close(wake_w)
        os.close(wake_r)
        # the leader exited or a stop was requested: stop the rest of the tree
        grace = self.stop_grace if self.stop_reason else 0.2
        self.background_killed = procs.stop_tree(
            self.pgid, self.marker, grace_s=grace, reap=proc.poll, since=self.start_ticks
        )
        rc = proc.wait()
        self.capture.drain(sel, streams)
        self.returncode = rc
        sel.close()
        for extra in (fifo, pidfd):
            if extra is not None:
                os.close(extra)

    # -- end ---------------------------------------------------------------
    def status_for(self, rc: int) -> TaskStatus:
        if self.stop_reason == "stop_requested":
            return "cancelled"
        if self.stop_reason == "owner_gone":
            return "interrupted"
        if self.stop_reason == "output_limit":
            return "failed"
        if self.stop_reason == "timeout":
            return "completed"  # a foreground batch item: the receipt says timed_out
        return "completed" if rc == 0 else "failed"

    def finalize(self) -> None:
        rc = self.returncode
        status = self.status_for(rc)
        sig = None
        if rc < 0:
            try:
                sig = signal.Signals(-rc).name
            except ValueError:
                sig = f"signal {-rc}"

        def done(r: TaskRecord) -> None:
            from holon_cli.model.task import merge_status

            # under the record's lock, so a promotion cannot slip in between:
            # a task's output is durable before its record says it ended (a
            # foreground call's files die with it: no fsync)
            self.capture.close(durable=bool(r.get("promoted")))
            r["status"] = merge_status(r.get("status"), status)
            r["exit_status"] = rc if rc >= 0 else 128 - rc
            r["signal"] = sig
            r["stop_reason"] = r.get("stop_reason") or self.stop_reason
            r["timed_out"] = self.stop_reason == "timeout"
            r["background_killed"] = bool(self.background_killed) and self.stop_reason is None
            r["output_bytes"] = self.capture.written
            r["output_capped"] = self.capture.cap_hit
            r["finished_at"] = _now_iso()

        rec = self.final = self.update(done)
        self.finish_reporting(rec)

    def ended_plainly(self) -> bool:
        """The call ran to its end with its caller still there, unpromoted,
        and nobody asked for a stop: its forked supervisor may take the
        caller's next call (:func:`.forked.serve`)."""
        rec = self.final
        return (
            rec is not None
            and self.control
            and not self.caller_left
            and self.stop_reason not in ("stop_requested", "owner_gone")
            and not rec.get("promoted")
            and not rec.get("stop_requested_at")
        )

    def release(self) -> None:
        """Close what the ended call still holds (the command's pipes, its
        terminal), break the capture's cycle back to this object: a forked
        supervisor takes its next call without the cycle collector."""
        for f in (getattr(self.proc, n, None) for n in ("stdin", "stdout", "stderr")):
            if f is not None:
                f.close()
        if self.feed.master is not None:
            os.close(self.feed.master)
            self.feed.master = None
        self.capture.on_cap = _nothing
        self.proc = None

    def finish_reporting(self, rec: TaskRecord) -> None:
        if not rec.get("promoted"):
            return
        if self.forked:
            # admission runs holon code that may take locks another thread of
            # the caller held at fork time: report from a fresh interpreter
            self._exec("report")
        report(self.dir, rec)

    # -- hand-off ------------------------------------------------------------
    def _exec(self, mode: str) -> None:
        """Replace this (forked) process by a fresh ``python -S`` running
        :func:`main` in ``mode``; same pid, same children, inherited fds.
        Stop signals stay blocked across the exec (pending ones are kept), so
        a TaskStop in the gap is handled by the new image. Returns only when
        the exec failed."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        boot = BOOT.format(path=package_parent())
        try:
            os.execve(
                sys.executable,
                [sys.executable, "-S", "-c", boot, str(self.dir), mode],
                self.env,
            )
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            os.write(2, f"supervisor: exec for {mode} failed, carrying on here: {exc}\n".encode())
            self.forked = False

    def _fds(self) -> list[int]:
        own = (*self.capture.fds(), *self.feed.fds())
        return sorted({fd for fd in (*own, *self.streams) if fd is not None})

    def handoff(self) -> None:
        """The call was promoted: carry on in a fresh interpreter (a task may
        run for hours; it should not do so in a copy of its caller's memory,
        nor report through locks another thread of the caller may hold).
        Returns when there is nothing to hand off or the exec failed."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            return  # it ended meanwhile: the loop finalizes at once
        # Block the stop signals BEFORE saving: a TaskStop that arrives from
        # here on stays pending for the new image; one that arrived earlier
        # has run its handler by the time save() starts (Python runs pending
        # handlers on the next call), so the saved state carries it. Saving
        # first lost a stop landing between the save and the exec: TaskStop
        # then waited its whole limit and stopped the tree itself.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            handoff_state.save(self)
            fds = self._fds()
            for fd in fds:
                os.set_inheritable(fd, True)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)  # the control socket: its peer is gone
            os.close(null)
            _phase("handoff")
            self._exec("resume")
            for fd in fds:
                os.set_inheritable(fd, False)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # only if the exec failed

    def restore(self) -> None:
        """The other half of :meth:`handoff`, in the fresh interpreter."""
        handoff_state.load(self)
        for fd in self._fds():
            os.set_inheritable(fd, False)

    def on_signal(self, signum: int, _frame: Any) -> None:
        # TaskStop / `holon task stop` signal the supervisor: stop the tree
        # (TERM, KILL after 5 s) and record `cancelled`
        self.request_stop("stop_requested", 5.0)


def report(task_dir: Path, rec: TaskRecord | None = None) -> None:
    """Report a promoted task's ONE result (loads site-packages first when
    this interpreter started with ``-S``: admission needs them)."""
    if sys.flags.no_site:
        import site

        site.main()
    try:  # the launcher's home, whatever the command's environment names
        home = json.loads((task_dir / "spec.json").read_text()).get("holon_home")
    except (OSError, ValueError):
        home = None
    if isinstance(home, str) and home:
        os.environ["HOLON_HOME"] = home
    from holon_cli.runtime.tasks.records import report_terminal

    report_terminal(task_dir, rec)


def _take_stop_signals(sup: Supervisor) -> None:
    """Install the stop handlers, then let the stop signals in: they are
    blocked from the start (a forked supervisor's, ``holon task run``'s, and
    across a hand-off's exec), so one sent before is handled now, not by the
    default action (which would kill this supervisor, not its command)."""
    for s in STOP_SIGNALS:
        signal.signal(s, sup.on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def run(sup: Supervisor) -> int:
    """Start the command and supervise it to the end; a stop requested
    before the start (signalled, or recorded by a ``task_stop`` that did not
    know this supervisor yet) starts nothing."""
    _take_stop_signals(sup)
    _phase("start")
    if sup.stop_reason is not None or stop_recorded(sup.peek()):
        sup.cancel_unstarted()
        return 0
    if not sup.spawn():
        return 0
    sup.loop()
    sup.finalize()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -S -c BOOT <task_dir> [run|resume|report]``."""
    args = sys.argv[1:] if argv is None else argv
    task_dir = Path(args[0])
    mode = args[1] if len(args) > 1 else "run"
    if mode == "report":
        report(task_dir)
        return 0
    sup = Supervisor(task_dir)
    if mode == "resume":
        sup.restore()
        _take_stop_signals(sup)
        if stop_recorded(sup.read()):
            sup.request_stop("stop_requested", 5.0)
        sup.loop()
        sup.finalize()
        return 0
    sup.control = sup.spec.get("mode") == "foreground"
    return run(sup)


if __name__ == "__main__":
    raise SystemExit(main())
