"""File locks: ``flock`` on a lock file next to what it guards.

A lock is released by closing its fd (and by the kernel when its holder
dies, so no lock outlives a crash); lock files are never deleted. Python
opens fds non-inheritable, so child processes never hold our locks. These
are the same locks ``filelock.UnixFileLock`` takes (flock on the same path),
without its import: about 13 ms, paid by every ``holon run``, ``turn`` and
``tick`` before (issue 12).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from holon_cli.errors import BusyError


def pid_alive(pid: object, start_time: int | None = None) -> bool:
    """The one pid-liveness probe: True while a process with this pid exists
    and is not a zombie (ours or another user's). Given ``start_time`` (clock
    ticks since boot, ``/proc/<pid>/stat`` field 22, as
    :func:`proc_stat` reads it), only while it is that same process, not a
    later one that reuses the pid. Anything that is not a positive int (a
    missing or damaged field) is not alive. Without ``/proc`` the signal
    probe alone says."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        pass  # another user's process: it exists
    fields = proc_stat(pid)
    if fields is None:
        return not _has_proc()  # gone since the probe, or no /proc to ask
    if fields[0] in (b"Z", b"X"):
        return False
    if start_time is None:
        return True
    try:
        return int(fields[19]) == int(start_time)
    except (IndexError, ValueError):
        return False


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` is
    the state, field 3; ``[19]`` the start time, field 22); ``None`` when it
    cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def _has_proc() -> bool:
    return os.path.exists("/proc/self/stat")


def _open_lock_file(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def _try_flock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextmanager
def locked(
    path: Path, *, timeout: float = 30.0, what: str = "resource", poll: float = 0.005
) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the block; wait up to
    ``timeout`` seconds (``0``: one try), then raise ``BusyError`` (exit 75)."""
    fd = _open_lock_file(path)
    try:
        if not _try_flock(fd):
            import time

            deadline = time.monotonic() + timeout
            while not _try_flock(fd):
                if time.monotonic() >= deadline:
                    raise BusyError(
                        f"{what} is locked by another process ({path})",
                        hint="retry in a moment; flock locks are released when their holder "
                        "exits, so a lock is never left behind by a dead process",
                    )
                time.sleep(poll)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class HeldLock:
    """A lock held across a long operation (e.g. a turn); ``try_acquire`` never waits."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        self._fd: int | None = None

    def try_acquire(self) -> None:
        if self._fd is not None:
            return  # already ours
        fd = _open_lock_file(self.path)
        if not _try_flock(fd):
            os.close(fd)
            raise BusyError(
                f"{self.what} is already running in another process",
                hint="retry later (exit 75 means busy)",
                details={"lock": str(self.path)},
            )
        self._fd = fd

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> HeldLock:
        self.try_acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
