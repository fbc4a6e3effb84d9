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

One supervisor, many calls (:func:`serve`): a supervisor whose call ended
plainly (not promoted, not stopped, its caller still there) says so with one
byte (:data:`DONE`) instead of exiting, and waits for the caller's next call
(:data:`IDLE_S` at most, then it exits). The caller keeps it in a pool
(:func:`release`) and hands it the next call (its task directory and
environment, :func:`_take`) instead of forking again: a tool round then pays
neither the fork (about 1.5 ms of the caller's CPU for the page tables of a
60 MB process, plus the copy-on-write faults that follow on both sides) nor
a new supervisor's faults (about 1.5 ms more). It acknowledges a call
(:data:`TAKEN`) before it touches anything of it; a supervisor that went
away idle is found by the missing acknowledgement, and the call is forked
as before. It never serves a call after one whose record asked for a stop
(a ``task_stop`` signals the supervisor it read from the record: a late
signal must not reach the next call), nor with a stop signal pending; it
serves at most :data:`MAX_CALLS`, and none later than :data:`MAX_AGE_S`
after its fork (it holds a copy of every page its caller wrote since: in
``holon serve`` that grows with time). Everything a call opened is closed
before the next (:meth:`.supervisor.Supervisor.release`); the collector
stays off (see above), so what it leaves is freed by reference counts.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import select
import signal
import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli.runtime.tasks import procs

if TYPE_CHECKING:
    from holon_cli.runtime.tasks.supervisor import Supervisor

_EXIT_CRASH = 70
# what an idle supervisor says on its socket: its call ended (the record is
# final) and it waits for the next; it took the call just handed to it
DONE = b"d"
TAKEN = b"t"
# how long an idle supervisor waits for its caller's next call (a model's
# answer between two tool rounds takes seconds); how many calls it serves
IDLE_S = 60.0
MAX_CALLS = 256
# how long after its fork a supervisor is handed calls: it holds a copy of
# every page its caller wrote since (copy-on-write), which in ``holon
# serve`` grows with the time since the fork
MAX_AGE_S = 120.0
# how long the caller waits for an idle supervisor to take a call
TAKE_S = 2.0
_CALL_LEN = struct.Struct("!I")


@dataclass
class _Idle:
    pid: int
    sock: socket.socket
    born: float  # when it was forked (time.monotonic)


# idle supervisors of this process, newest last (threads of ``holon serve``
# share them: taking one and putting one back hold this lock)
_pool: list[_Idle] = []
_pool_lock = threading.Lock()
_at_exit = False
# when each supervisor this process forked was forked
_born: dict[int, float] = {}
# supervisors forked by this process that were promoted (or abandoned) and
# may still exit later: reaped without blocking at the next start, so a
# long-lived caller (``holon serve``) collects no zombies
_unreaped: set[int] = set()


def reap() -> None:
    """Collect the supervisors that were let go and have exited since, and
    those that left the pool on their own (idle for :data:`IDLE_S`)."""
    with _pool_lock:
        gone = [idle for idle in _pool if _exited(idle.pid)]
        for idle in gone:
            _pool.remove(idle)
    for idle in gone:
        idle.sock.close()
        _born.pop(idle.pid, None)
    for pid in list(_unreaped):
        if _exited(pid):
            _unreaped.discard(pid)


def _exited(pid: int) -> bool:
    """``pid`` (a child) has exited; it is collected."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


def start(task_dir: Path, env: dict[str, str]) -> tuple[int, socket.socket]:
    """Hand the foreground call in ``task_dir`` (its ``spec.json`` and
    ``task.json`` exist) to an idle supervisor of this process, or fork one.
    Returns its pid and the caller's end of the control socket. Raises
    ``OSError`` when it cannot fork."""
    from holon_cli.runtime.tasks import supervisor  # imported here, before the fork

    reap()
    task_dir = Path(os.path.abspath(task_dir))
    if supervisor.phase_hook is None:  # a test's hook reaches forked supervisors only
        taken = _take(task_dir, env)
        if taken is not None:
            return taken
    procs.prepare_parent_death_signal()
    procs.prepare_spawn_wrapper()
    return _fork((task_dir, env), _open_log(task_dir))


def _fork(call: tuple[Path, dict[str, str]], log: int) -> tuple[int, socket.socket]:
    """Fork a supervisor for ``call`` with ``log`` (closed here) on its fds
    1 and 2."""
    from holon_cli.runtime.tasks import supervisor

    try:
        ours, theirs = socket.socketpair()
    except OSError:
        os.close(log)
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
            _become_supervisor(theirs.fileno(), log, supervisor.STOP_SIGNALS)
            code = serve(call)
        except BaseException as exc:  # noqa: BLE001 - must never return into the caller
            try:
                os.write(2, f"supervisor: {type(exc).__name__}: {exc}\n".encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    theirs.close()
    os.close(log)
    _born[pid] = time.monotonic()
    return pid, ours


def _open_log(task_dir: Path) -> int:
    return os.open(
        task_dir / "supervisor.log",
        os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
        0o600,
    )


def _take(task_dir: Path, env: dict[str, str]) -> tuple[int, socket.socket] | None:
    """Hand the call to an idle supervisor, newest first; None when none
    takes it (those that went away are collected)."""
    call = json.dumps({"dir": str(task_dir), "env": env}).encode()
    while True:
        with _pool_lock:
            if not _pool:
                return None
            idle = _pool.pop()
        if time.monotonic() - idle.born > MAX_AGE_S:
            idle.sock.close()  # it exits on the closed socket
            collect(idle.pid, exited=False)
            continue
        try:
            idle.sock.sendall(_CALL_LEN.pack(len(call)) + call)
            if _read_byte(idle.sock, TAKE_S) == TAKEN:
                return idle.pid, idle.sock
        except OSError:
            pass
        # gone idle (it exits unread), or it does not answer: let it go
        idle.sock.close()
        collect(idle.pid, exited=False)


def _read_byte(sock: socket.socket, timeout_s: float) -> bytes:
    """One byte from the supervisor; b"" on EOF or at the timeout."""
    ready, _, _ = select.select([sock], [], [], timeout_s)
    if not ready:
        return b""
    try:
        return sock.recv(1)
    except OSError:
        return b""


def release(pid: int, sock: socket.socket) -> None:
    """The supervisor ``pid`` said :data:`DONE`: keep it for the next call.
    The first one kept registers :func:`_retire_at_exit`."""
    global _at_exit
    with _pool_lock:
        _pool.append(_Idle(pid, sock, _born.get(pid, time.monotonic())))
        if not _at_exit:
            atexit.register(_retire_at_exit)
            _at_exit = True


def _retire_at_exit() -> None:
    """This process ends: its idle supervisors exit with it and are
    collected (their CPU and their commands' then count as this process's
    children's, as a supervisor's did when each served one call)."""
    retire_idle(wait_s=1.0)


def retire_idle(wait_s: float = 0.0) -> list[int]:
    """Let every idle supervisor go (each exits on its closed socket),
    waiting up to ``wait_s`` to collect them; their pids. Tests call it
    between tests (a supervisor forked in one must not serve the next);
    nothing else needs to."""
    with _pool_lock:
        gone = list(_pool)
        _pool.clear()
    for idle in gone:
        idle.sock.close()
        collect(idle.pid, exited=False)
    pids = [idle.pid for idle in gone]
    # only these: a promoted task's supervisor (also let go) runs on
    end = time.monotonic() + wait_s
    while True:
        reap()
        if time.monotonic() >= end or not any(pid in _unreaped for pid in pids):
            return pids
        time.sleep(0.002)


def collect(pid: int, *, exited: bool) -> None:
    """The caller is done with supervisor ``pid``: reap it now when it has
    exited, else (promoted, or let go idle) at a later :func:`reap`."""
    _born.pop(pid, None)
    if exited:
        try:
            os.waitpid(pid, 0)
            return
        except ChildProcessError:
            return
    _unreaped.add(pid)


def _become_supervisor(control_fd: int, log_fd: int, blocked: tuple[int, ...]) -> None:
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
    # the stop signals stay blocked until the supervisor's handlers are in
    # (``supervisor.run``): a TaskStop that lands first is kept pending, not
    # handled by the default action (the supervisor killed, the call lost)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def wait_end(sock: socket.socket, timeout_s: float | None) -> bytes | None:
    """Wait until the supervisor on ``sock`` has ended its call: :data:`DONE`
    (it waits for the next), b"" (it exited), None at the timeout (``None``:
    no timeout)."""
    end = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left = None if end is None else max(0.0, end - time.monotonic())
        ready, _, _ = select.select([sock], [], [], left)
        if ready:
            try:
                data = sock.recv(4096)
            except OSError:  # reset: the peer is gone
                return b""
            if not data:
                return b""
            if DONE in data:
                return DONE
            continue
        if end is not None and time.monotonic() >= end:
            return None


# -- the supervisor's side (in the forked child) -------------------------------


def serve(call: tuple[Path, dict[str, str]]) -> int:
    """Supervise ``call`` (its task directory and environment), then, while
    each ends plainly, the caller's next ones (see the module's docstring)."""
    from holon_cli.runtime.tasks import supervisor

    code = 0
    served = 0
    next_call: tuple[Path, dict[str, str]] | None = call
    while next_call is not None:
        task_dir, env = next_call
        sup = supervisor.Supervisor(task_dir, env=env, forked=True)
        sup.control = True
        code = supervisor.run(sup)
        served += 1
        next_call = _await_call(sup) if served < MAX_CALLS else None
    return code


class _Stopped(Exception):
    """A stop signal reached an idle supervisor: it exits."""


# set by a stop signal while idle; the handler raises only while waiting
_idle_stop = {"signalled": False, "raise": False}


def _stopped_while_idle(_signum: int, _frame: object) -> None:
    _idle_stop["signalled"] = True
    if _idle_stop["raise"]:
        raise _Stopped


def _await_call(sup: Supervisor) -> tuple[Path, dict[str, str]] | None:
    """After ``sup``'s call: when it ended plainly, go idle (say
    :data:`DONE`), wait for the caller's next call and take it
    (:data:`TAKEN` said, fds 1 and 2 on its log, the stop signals blocked:
    the next :func:`.supervisor.run` lets them in once its handlers are
    set). None to exit: the call did not end plainly, EOF, :data:`IDLE_S`
    passed, or a stop signal came. A stop signal while idle, one sent late
    for the call just ended or one to this process, is never carried into
    the next call."""
    from holon_cli.runtime.tasks.supervisor import STOP_SIGNALS

    _idle_stop.update({"signalled": False, "raise": False})
    for s in STOP_SIGNALS:  # first: a stop that lands after the look below is seen
        signal.signal(s, _stopped_while_idle)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    if not sup.ended_plainly():
        return None
    sup.release()
    try:
        _idle_stop["raise"] = True
        if _idle_stop["signalled"]:
            return None
        os.write(0, DONE)
        ready, _, _ = select.select([0], [], [], IDLE_S)
        head = _read_exact(_CALL_LEN.size) if ready else None
        size = _CALL_LEN.unpack(head)[0] if head is not None else None
        body = _read_exact(size) if size is not None else None
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        _idle_stop["raise"] = False
    except (_Stopped, OSError):
        return None
    if body is None or _idle_stop["signalled"]:
        return None
    call = json.loads(body)
    task_dir = Path(call["dir"])
    log = _open_log(task_dir)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.write(0, TAKEN)
    return task_dir, dict(call["env"])


def _read_exact(n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        ready, _, _ = select.select([0], [], [], TAKE_S)
        if not ready:
            return None
        chunk = os.read(0, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf
