"""Process plumbing shared by foreground commands and background tasks.

Owns: process identity (pid + start time, so a recycled pid is never
mistaken for the original), the parent-death signal, the per-call
environment marker and the "stop everything this call started" routine.
(The environment a command gets is :mod:`.environment`'s.)

Invariants:

- Every command carries ``HOLON_EXEC_MARKER=<id>`` in its environment; a
  descendant that leaves the process group (``setsid``) is still found by
  scanning ``/proc/*/environ`` for the marker, unless it also rewrote its
  environment. That is the documented limit of the guarantee.
- Standard library only: the task supervisor imports this module at start-up.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli.store.locks import pid_alive

if TYPE_CHECKING:
    from holon_cli.model.task import ProcessIdentity, TaskProcess

MARKER_VAR = "HOLON_EXEC_MARKER"
PR_SET_PDEATHSIG = 1
# the most pids a second this module assumes a machine hands out (a fork
# storm reaches a few tens of thousands): see pid_floor
FORKS_PER_S = 100_000
# how long the first look of a stop (:func:`stop_tree`) may take for its
# pid floor to hold (one scan takes about a millisecond)
FIRST_LOOK_S = 0.05


def runtime_setting(config: Any, key: str, default: Any = None) -> Any:
    """``runtime.<key>`` from a config given as a dict or as an object with a
    ``runtime`` attribute (mapping or object)."""
    if config is None:
        return default
    rt = config.get("runtime") if isinstance(config, Mapping) else getattr(config, "runtime", None)
    if rt is None:
        return default
    value = rt.get(key) if isinstance(rt, Mapping) else getattr(rt, key, None)
    return default if value is None else value


# ------------------------------------------------------------------ identity


def proc_start_time(pid: int) -> int | None:
    """The process start time in clock ticks since boot (``/proc/<pid>/stat``
    field 22); ``None`` when the process does not exist (or is a zombie)."""
    fields = _stat_fields(str(pid))
    # fields[0] is field 3 (state); starttime is field 22
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def process_identity(pid: int) -> ProcessIdentity:
    return {"pid": pid, "start_time": proc_start_time(pid)}


def identity_alive(ident: ProcessIdentity | TaskProcess | None) -> bool:
    """A recorded identity is alive: that pid, started at that time
    (:func:`holon_cli.store.locks.pid_alive`; None: not alive)."""
    return ident is not None and pid_alive(ident.get("pid"), ident.get("start_time"))


# ----------------------------------------------------------- child set-up


_prctl: Any = None


def prepare_parent_death_signal() -> None:
    """Load ``prctl`` once, in the parent: the child between fork and exec
    then only calls it (importing ctypes there cost a few ms per command)."""
    global _prctl
    if _prctl is None:
        try:
            import ctypes

            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _prctl = False


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies
    (Linux ``prctl(PR_SET_PDEATHSIG)``; a no-op elsewhere). Call it in the
    child between fork and exec."""
    if _prctl is None:
        prepare_parent_death_signal()
    if _prctl:
        _prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


_SETPRIV_PATHS = ("/usr/bin/setpriv", "/bin/setpriv")
_wrapper: list[str] | None = None


def prepare_spawn_wrapper() -> None:
    """Find, once per process, a ``setpriv`` that supports ``--pdeathsig``.

    With it a command is started as ``setpriv --pdeathsig KILL -- argv``
    without a ``preexec_fn``, so ``subprocess`` can use ``vfork``: about
    0.5 ms instead of 4-5 ms for a fork of a 30 MB process plus Python's
    after-fork work. The parent-death signal then takes effect a moment later
    (when setpriv runs, before it execs the command); a supervisor killed in
    that gap leaves the command to recovery (marker scan at the next turn or
    tick). Without setpriv: ``preexec_fn``, as before."""
    global _wrapper
    if _wrapper is not None:
        return
    _wrapper = []
    for path in _SETPRIV_PATHS:
        if not os.access(path, os.X_OK):
            continue
        import subprocess

        try:
            ok = (
                subprocess.run(
                    [path, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", ":"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=5,
                ).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            _wrapper = [path, "--pdeathsig", "KILL", "--"]
        return


def pdeathsig_argv(argv: list[str], env: Mapping[str, str]) -> list[str] | None:
    """``argv`` behind the ``setpriv`` wrapper, or None (then use
    :func:`set_parent_death_signal` as ``preexec_fn``). None too when
    ``argv[0]`` does not resolve to an executable file, so that a command
    that cannot start still fails in ``Popen`` with the OS error."""
    prepare_spawn_wrapper()
    if not _wrapper:
        return None
    exe = argv[0]
    if os.sep not in exe:
        import shutil

        found = shutil.which(exe, path=env.get("PATH", os.defpath))
        if found is None:
            return None
        exe = found
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        return None
    return [*_wrapper, exe, *argv[1:]]


# ------------------------------------------------------------- discovery


def _read_proc(pid: str, name: str) -> bytes | None:
    # os.open/os.read, not Path.read_text: a scan reads every process's stat,
    # after every command, so this is on the hot path
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 65536)
        if name == "stat" or len(data) < 65536:
            return data  # one read: stat is far shorter
        chunks = [data]
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat_fields(pid: str) -> list[bytes] | None:
    stat = _read_proc(pid, "stat")
    if stat is None:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def _read_small(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def pid_floor(pgid: int | None, since: int | None, *, within_s: float = 0.0) -> int:
    """The lowest pid a process of the tree led by ``pgid`` (started at
    ``since``, clock ticks since boot) can have for the next ``within_s``:
    the leader's own, while pids cannot have wrapped since it started (the
    newest pid handed out is above it, and too little time has passed for a
    whole round of ``pid_max`` at :data:`FORKS_PER_S`). Else 0: every pid
    is read. A scan then skips the machine's older processes, a stat read
    each, after every command (a desktop runs hundreds)."""
    if not pgid or since is None:
        return 0
    last = _newest_pid()
    if last is None:
        return 0
    words = [(_read_small(f) or b"").split() for f in ("/proc/sys/kernel/pid_max", "/proc/uptime")]
    try:
        pid_max, up = int(words[0][0]), float(words[1][0])
    except (IndexError, ValueError):
        return 0
    elapsed = up - since / os.sysconf("SC_CLK_TCK") + within_s
    if last < pgid or not 0 <= elapsed < pid_max / FORKS_PER_S:
        return 0
    return pgid


def live_members(
    pgid: int | None, marker: str | None, since: int | None = None, floor: int = 0
) -> set[int]:
    """Live (non-zombie) pids in process group ``pgid`` or carrying ``marker``.
    ``since`` (a start time in clock ticks): only processes started at or after
    it can carry the marker, so older ones are not read (a scan stays cheap).
    ``floor`` (:func:`pid_floor`): lower pids are not read at all."""
    return _scan(pgid, marker, since, floor)[0]


def _scan(
    pgid: int | None, marker: str | None, since: int | None, floor: int
) -> tuple[set[int], bool]:
    """:func:`live_members`, and whether the scan is sure to have seen every
    member: no process was created on the machine while it ran (the newest
    pid is the same before and after: a fork during a scan can put a child
    past the listing while its parent exits before being read, as a daemon
    does), and every candidate for the marker showed its environment (a
    process caught mid-``exec`` shows none for a moment)."""
    found: set[int] = set()
    if not os.path.isdir("/proc"):
        if pgid:
            try:
                os.killpg(pgid, 0)
                found.add(pgid)
            except (ProcessLookupError, PermissionError):
                pass
        return found, True
    needle = f"{MARKER_VAR}={marker}\0".encode() if marker else None
    group = str(pgid).encode() if pgid else None
    me = str(os.getpid())
    newest = _newest_pid()
    sure = newest is not None
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == me or (floor and int(name) < floor):
            continue
        fields = _stat_fields(name)
        if not fields or fields[0] in (b"Z", b"X"):
            continue
        if group is not None and len(fields) >= 3 and fields[2] == group:
            found.add(int(name))
            continue
        if needle is not None:
            try:
                if since is not None and int(fields[19]) < since:
                    continue
                if int(fields[6]) & _PF_KTHREAD:
                    continue  # a kernel thread has no environment to carry it
            except (IndexError, ValueError):
                pass
            env = _read_proc(name, "environ")
            if not env:
                sure = False  # mid-exec, gone, or not ours to read
            elif needle in env + b"\0":
                found.add(int(name))
    return found, sure and _newest_pid() == newest


# the flag of a kernel thread in /proc/<pid>/stat's ``flags`` (PF_KTHREAD)
_PF_KTHREAD = 0x00200000


def _newest_pid() -> int | None:
    """The pid the kernel handed out last (``/proc/loadavg``'s last field)."""
    words = (_read_small("/proc/loadavg") or b"").split()
    try:
        return int(words[-1])
    except (IndexError, ValueError):
        return None


def _namespace_init(pid: int) -> bool:
    """``pid`` is pid 1 of a pid namespace below ours (``NSpid: <ours> ... 1``)."""
    status = _read_proc(str(pid), "status")
    for line in (status or b"").split(b"\n"):
        if line.startswith(b"NSpid:"):
            ids = line.split()[1:]
            return len(ids) > 1 and ids[-1] == b"1"
    return False


def _signal_all(pgid: int | None, pids: set[int], sig: int) -> None:
    if pgid:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_tree(
    pgid: int | None,
    marker: str | None,
    *,
    grace_s: float = 1.0,
    reap: Any = None,
    since: int | None = None,
) -> bool:
    """SIGTERM the group and every marked process, SIGKILL what is left after
    ``grace_s``. ``reap`` (optional) is called while waiting so a leader that
    is our own child does not linger as a zombie. Returns True when anything
    was still alive to be signalled.

    The init of a sandbox's pid namespace (bwrap's, pid 1 inside) ignores a
    SIGTERM from outside (it has no handler): once it is all that is left it
    gets SIGKILL at once rather than after the grace (that kills nothing
    else: the processes inside it are gone, or would be with it). It usually
    dies with bwrap's outer process; not when the stop lands while the
    sandbox is still being set up."""
    # the first look's floor holds for that look only (FIRST_LOOK_S): on a
    # machine with pid_max 32768 a floor good for the whole grace is never
    # given, and every process on the machine was read after every command
    look_end = time.monotonic() + FIRST_LOOK_S
    pids, sure = _scan(pgid, marker, since, pid_floor(pgid, since, within_s=FIRST_LOOK_S))
    if not pids and sure and time.monotonic() < look_end:
        return False  # the common end of a command: nothing was left
    floor = pid_floor(pgid, since, within_s=grace_s + 1.0)
    # nothing found is looked for once more unless the scan was sure (see
    # ``_scan``) within its floor's time: a marked process caught between
    # two execs (``setsid cmd &``: sh, then setsid, then cmd) shows no
    # environment for that moment, and a command's tree is scanned only here
    if not pids:
        pids = live_members(pgid, marker, since, floor)
    if not pids:
        return False
    _signal_all(pgid, pids, signal.SIGTERM)
    termed = set(pids)
    deadline = time.monotonic() + grace_s
    empty = 0
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        left = live_members(pgid, marker, since, floor)
        if not left:
            # a scan of /proc misses a child forked while it ran by a parent
            # that exited before its own entry was read (a shell's TERM trap:
            # `cmd &`, then exit): the tree is gone once the next scan, which
            # sees every child forked during this one, is empty too
            empty += 1
            if empty == 2:
                return True
            continue
        empty = 0
        # what appeared since (a fork in flight; a sandbox's command, which
        # bwrap starts after its outer process got the TERM) gets its TERM
        # too: left alone it kept the stop waiting for the whole grace
        _signal_all(None, left - termed, signal.SIGTERM)
        termed |= left
        if all(_namespace_init(pid) for pid in left):
            _signal_all(None, left, signal.SIGKILL)
        time.sleep(0.02)
    empty = 0
    for _ in range(5):
        left = live_members(pgid, marker, since, floor)
        if not left:
            empty += 1
            if empty == 2:  # as above: two empty scans in a row
                break
            continue
        empty = 0
        _signal_all(pgid, left, signal.SIGKILL)
        time.sleep(0.02)
        if reap is not None:
            reap()
    return True


# ------------------------------------------------------------------ locks


@contextmanager
def flocked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (released by closing; never inherited).
    Its folder (a task's) must exist: ``FileNotFoundError`` when it is gone
    (the agent or the home was removed meanwhile), never made again, so a
    supervisor outliving a removed home does not bring back a shell of it
    that blocks creating the agent anew."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def put_record(path: Path, obj: Mapping[str, Any], *, durable: bool) -> None:
    """Replace a task file atomically; fsync'd only when ``durable``.

    A foreground call's files need no fsync: they only matter while the
    processes that use them are alive, and a machine crash ends those too
    (each fsync costs ~10 ms on a busy disk, several per command)."""
    if durable:
        from holon_cli.store.fsio import write_snapshot

        write_snapshot(path, obj)
        return
    tmp = path.parent / f".{path.name}.tmp.{os.getpid()}"
    # compact: indent= would force the pure-Python encoder (hot path)
    tmp.write_text(json.dumps(obj, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
