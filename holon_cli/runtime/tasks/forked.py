"""Starting a foreground command's supervisor by ``fork`` of the calling
process instead of a new interpreter.

Why: a ``python -S`` supervisor per ``ExecCommand`` cost about 90 ms of CPU
(interpreter start plus imports), paid by every command, even ``true``.
Forking the caller, which has the supervisor code imported already, costs
the caller under 1 ms; the whole short command (caller, supervisor, command)
then costs about 18 ms of CPU instead of 80-110 ms (figures in
benchmarks/README.md). The other design considered, running the command as
the turn's own child and handing it to a supervisor only at promotion, was
rejected without building it: the command could not carry a parent-death
signal (set by the command itself before exec, it would fire when the turn
exits after promotion), so a SIGKILLed turn would leave it running until the
next recovery pass, and the output cap would have to move into the turn.

How (:func:`start`): ``socketpair``, then one fork (not two: the
intermediate child's exit would put its after-fork work, about 2 ms, on the
caller's path; zombies are reaped instead, see :func:`collect` and
:func:`reap`). The child calls ``setsid`` (own session and process group: a
Ctrl-C in the terminal reaches the turn, not the command) and, before
anything else, puts its socket end on fd 0 and ``supervisor.log`` on fds 1
and 2 and closes every other inherited descriptor: the caller's lock files
(``flock`` locks follow the open file, so an inherited lock fd would keep the
agent locked after the turn), sockets and pipes. It disables the garbage
collector (no finalizer of a caller's object may run and close a reused fd
number; it also keeps copy-on-write faults down), resets signal handlers and
the wakeup fd, and runs only the supervisor loop of :mod:`.supervisor`,
which needs nothing but the standard library, the task record helpers and
``os`` calls. It never returns into the caller's stack: it ends with
``os._exit``.

Threads: a fork copies only the calling thread, so a lock another thread
held at that instant stays held in the child. ``holon turn`` has one thread;
``holon serve`` runs turns in threads next to its HTTP and watcher threads.
The forked supervisor therefore takes no lock of the caller's Python code:
CPython resets the import lock at fork, ``clock.now_iso`` takes none,
logging is not used. Whatever takes locks (admitting the ``task_result``
through the inbox) runs after the supervisor has ``exec``'d a fresh
interpreter: at promotion (``Supervisor.handoff``) or, when a promotion
raced the command's end, to report (``report`` mode). A promoted task is
thus never supervised by a copy of its caller's memory. (Python 3.12+ emits
a ``DeprecationWarning`` for ``os.fork`` in a multi-threaded process, ignored
by the default filters; this module is the careful use that warning asks
for, and a test holds a lock across the fork to prove the child needs none.)

Environment: the command gets the environment ``environment.command_env`` built
and so does the interpreter a hand-off ``exec``s. The forked supervisor's own
``/proc/<pid>/environ`` is the caller's initial environment, secrets included,
exactly like the caller's own, which a command running as the same user could
always read; the env rule is about what the command inherits.

The caller holds the other socket end: EOF on it means the supervisor has
exited (the record then says how the call ended, or that the supervisor was
killed); the supervisor reads EOF when the caller closes it (promotion) or
dies (SIGKILL: the command is stopped).
"""

from __future__ import annotations

import gc
import os
import select
import signal
import socket
import time
from pathlib import Path

from holon_cli.runtime.tasks import procs

_EXIT_CRASH = 70
# supervisors forked by this process that were promoted (or abandoned) and
# may still exit later: reaped without blocking at the next start, so a
# long-lived caller (``holon serve``) collects no zombies
_unreaped: set[int] = set()


def reap() -> None:
    for pid in list(_unreaped):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _unreaped.discard(pid)


def start(task_dir: Path, env: dict[str, str]) -> tuple[int, socket.socket]:
    """Fork the supervisor of the foreground call in ``task_dir`` (its
    ``spec.json`` and ``task.json`` exist). Returns its pid and the caller's
    end of the control socket. Raises ``OSError`` when it cannot fork."""
    from holon_cli.runtime.tasks import supervisor  # imported here, before the fork

    reap()
    procs.prepare_parent_death_signal()
    procs.prepare_spawn_wrapper()
    task_dir = Path(os.path.abspath(task_dir))
    ours, theirs = socket.socketpair()
    try:
        log = os.open(
            task_dir / "supervisor.log",
            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
            0o600,
        )
    except OSError:
        ours.close()
        theirs.close()
        raise
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        os.close(log)
        raise
    if pid == 0:  # pragma: no cover - runs in the child (covered by the tests' processes)
        code = _EXIT_CRASH
        try:
            os.setsid()
            _become_supervisor(theirs.fileno(), log)
            sup = supervisor.Supervisor(task_dir, env=env, forked=True)
            sup.control = True
            code = supervisor.run(sup)
        except BaseException as exc:  # noqa: BLE001 - must never return into the caller
            try:
                os.write(2, f"supervisor: {type(exc).__name__}: {exc}\n".encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    theirs.close()
    os.close(log)
    return pid, ours


def collect(pid: int, *, exited: bool) -> None:
    """The caller is done with supervisor ``pid``: reap it now when it has
    exited, else (promoted) at a later :func:`reap`."""
    if exited:
        try:
            os.waitpid(pid, 0)
            return
        except ChildProcessError:
            return
    _unreaped.add(pid)


def _become_supervisor(control_fd: int, log_fd: int) -> None:
    """Shed everything of the caller the supervisor must not hold."""
    gc.disable()
    os.dup2(control_fd, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.closerange(3, max(3, os.sysconf("SC_OPEN_MAX")))
    os.chdir("/")
    try:
        signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass
    for s in signal.valid_signals():
        if s in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            handler = signal.getsignal(s)
            if callable(handler) or s == signal.SIGCHLD:
                signal.signal(s, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def wait_eof(sock: socket.socket, timeout_s: float | None) -> bool:
    """Wait until the supervisor's end of ``sock`` is closed (it exited).
    True on EOF, False at the timeout. ``None``: no timeout."""
    end = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left = None if end is None else max(0.0, end - time.monotonic())
        ready, _, _ = select.select([sock], [], [], left)
        if ready:
            try:
                if not sock.recv(4096):
                    return True
            except OSError:  # reset: the peer is gone
                return True
            continue
        if end is not None and time.monotonic() >= end:
            return False
