"""A supervised command's output on its way to disk: read from its pipes
(or terminal) without blocking, copied to its files (``output.log``, the
combined stream the previews read; ``stdout.log`` / ``stderr.log`` on
pipes), with the output cap enforced on the write path and the free-disk
breaker (``retention.min_free_bytes``).

The counters survive a hand-off (:mod:`.handoff`), so the cap counts what
was written before the exec. Standard library only (the supervisor starts
with ``python -S``).
"""

from __future__ import annotations

import errno
import os
import selectors
import time
from collections.abc import Callable
from pathlib import Path

READ_CHUNK = 65536
# how long the output left in the pipes is read once the command has ended
DRAIN_S = 1.0
# output bytes between two free-disk checks
DISK_CHECK_BYTES = 256 * 1024
# what a task's output may grow to when its spec names no cap
DEFAULT_CAP = 64 * 1024 * 1024

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


class Capture:
    """The output files and their counters. ``on_cap`` is called once, when
    the cap is reached (the supervisor then stops the command)."""

    def __init__(self, task_dir: Path, *, cap: int, floor: int, on_cap: Callable[[], None]) -> None:
        self.dir = task_dir
        self.cap = cap or DEFAULT_CAP
        # the free-disk breaker's floor (0: off)
        self.floor = floor
        self.on_cap = on_cap
        self.written = 0
        self.cap_hit = False
        self.next_disk_check = 0
        self.stopped = False
        self.out_fd: int | None = None
        self.stdout_fd: int | None = None
        self.stderr_fd: int | None = None

    def open(self) -> None:
        """Create ``output.log``, truncated."""
        self.out_fd = os.open(self.dir / "output.log", _FLAGS, 0o600)

    def open_streams(self) -> None:
        """Create ``stdout.log`` and ``stderr.log`` (a command on pipes)."""
        self.stdout_fd = os.open(self.dir / "stdout.log", _FLAGS, 0o600)
        self.stderr_fd = os.open(self.dir / "stderr.log", _FLAGS, 0o600)

    def open_empty(self) -> None:
        """An empty ``output.log`` for a command that never started (kept
        as it is when one exists)."""
        os.close(os.open(self.dir / "output.log", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))

    def fds(self) -> tuple[int | None, ...]:
        return (self.out_fd, self.stdout_fd, self.stderr_fd)

    def pump(self, fd: int, dest: int | None) -> bool:
        """Copy what the command's output ``fd`` holds now to ``dest`` (its
        stream's file; None on a pty); False once it is closed."""
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return True
        except OSError as exc:
            if exc.errno == errno.EIO:  # pty: every slave end is closed
                return False
            raise
        if not data:
            return False
        self.write(data, dest)
        return True

    def drain(self, sel: selectors.BaseSelector, streams: dict[int, int | None]) -> None:
        """The command has ended: copy what its outputs (``streams``, those
        still registered in ``sel``) hold, for at most :data:`DRAIN_S`."""
        end = time.monotonic() + DRAIN_S
        live = [fd for fd in streams if fd in sel.get_map()]
        while live and time.monotonic() < end:
            for key, _ in sel.select(0.05):
                fd = int(key.fd)
                if key.data == "out" and not self.pump(fd, streams[fd]):
                    sel.unregister(fd)
            live = [fd for fd in streams if fd in sel.get_map()]

    def write(self, data: bytes, stream_fd: int | None) -> None:
        """Copy ``data`` to ``output.log`` and to its stream's file
        (``stream_fd``; None on a pty), up to the cap."""
        if self.disk_low():
            return
        room = self.cap - self.written
        if room <= 0:
            self._hit_cap()
            return
        if len(data) > room:
            data = data[:room]
            self._hit_cap()
        self.written += len(data)
        for fd in (self.out_fd, stream_fd):
            if fd is None:
                continue
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]

    def _hit_cap(self) -> None:
        if not self.cap_hit:
            self.cap_hit = True
            self.on_cap()

    def disk_low(self) -> bool:
        """The free-disk breaker: checked at start and every
        ``DISK_CHECK_BYTES`` of output; below ``min_free_bytes`` capture stops
        for good (one note in the output, the command keeps running and its
        output is drained and dropped)."""
        if self.stopped:
            return True
        if not self.floor or self.written < self.next_disk_check:
            return False
        self.next_disk_check = self.written + DISK_CHECK_BYTES
        try:
            st = os.statvfs(self.dir)
        except OSError:
            return False
        free = st.f_bavail * st.f_frsize
        if free >= self.floor:
            return False
        self.stopped = True
        note = (
            f"\n[holon: output capture stopped: {free} bytes free on disk, below "
            f"retention.min_free_bytes ({self.floor}); the command keeps running, its further "
            "output is dropped. Free disk space (`holon home gc`).]\n"
        ).encode()
        for fd in (self.out_fd, self.stderr_fd):  # stderr: what the model's preview shows
            if fd is not None:
                try:
                    os.write(fd, note)
                except OSError:
                    pass
        return True

    def close(self, *, durable: bool) -> None:
        """Close the files; ``durable``: fsync them first (a task's output is
        on disk before its record says it ended; a foreground call's files
        die with it)."""
        for fd in self.fds():
            if fd is not None:
                if durable:
                    os.fsync(fd)
                os.close(fd)
