"""File locks (flock via filelock).

A lock is released by closing it; lock files are never deleted. Python opens
fds non-inheritable, so child processes never hold our locks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from holon_cli.errors import BusyError


def pid_alive(pid: object) -> bool:
    """True while a process with this pid exists (ours or another user's).
    Anything that is not a positive int (a missing or damaged field) is not alive."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def _lock(path: Path):  # type: ignore[no-untyped-def]
    from filelock import UnixFileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    return UnixFileLock(str(path), is_singleton=False)


@contextmanager
def locked(path: Path, *, timeout: float = 30.0, what: str = "resource") -> Iterator[None]:
    """Hold the lock at ``path`` for the block; wait up to ``timeout`` seconds."""
    from filelock import Timeout

    lk = _lock(path)
    try:
        lk.acquire(timeout=timeout)
    except Timeout:
        raise BusyError(
            f"{what} is locked by another process ({path})",
            hint="retry in a moment; if no holon process is running, the lock is stale only if the "
            "holder died (flock locks release on exit)",
        ) from None
    try:
        yield
    finally:
        lk.release()


class HeldLock:
    """A lock held across a long operation (e.g. a turn); ``try_acquire`` never waits."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        self._lk = _lock(path)

    def try_acquire(self) -> None:
        from filelock import Timeout

        try:
            self._lk.acquire(timeout=0)
        except Timeout:
            raise BusyError(
                f"{self.what} is already running in another process",
                hint="retry later (exit 75 means busy)",
                details={"lock": str(self.path)},
            ) from None

    def release(self) -> None:
        if self._lk.is_locked:
            self._lk.release()

    def __enter__(self) -> HeldLock:
        self.try_acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
