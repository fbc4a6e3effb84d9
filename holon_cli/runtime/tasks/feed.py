"""A supervised command's input: what ``TaskInput`` writes into the task's
``stdin.fifo`` goes on to the command's stdin pipe (or its terminal) without
ever blocking the supervisor; what the command does not read yet waits in a
bounded buffer, and the FIFO is not read while that buffer is full (the
writer then waits).

The buffer and the descriptors survive a hand-off (:mod:`.handoff`).
Standard library only (the supervisor starts with ``python -S``).
"""

from __future__ import annotations

import os
import selectors
from pathlib import Path

from holon_cli.runtime.tasks.capture import READ_CHUNK

INPUT_BUFFER = 1024 * 1024


class InputFeed:
    """The FIFO (``fifo``), the command's input end (``master``: its
    terminal; ``stdin_w``: its stdin pipe) and the bytes on their way."""

    def __init__(self) -> None:
        self.fifo: int | None = None
        self.master: int | None = None
        self.stdin_w: int | None = None
        self.pending = bytearray()

    def open_fifo(self, task_dir: Path) -> None:
        """Open ``stdin.fifo`` (made when missing); done before the record
        says "running", so input is never refused early."""
        path = task_dir / "stdin.fifo"
        try:
            os.mkfifo(path, 0o600)
        except FileExistsError:
            pass
        self.fifo = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)

    def fds(self) -> tuple[int | None, ...]:
        return (self.master, self.stdin_w, self.fifo)

    def forward(self) -> None:
        """Move what the FIFO holds towards the command (what it does not
        read yet waits in ``pending``)."""
        if self.fifo is None:
            return
        try:
            data = os.read(self.fifo, READ_CHUNK)
        except BlockingIOError:
            return
        if data:
            self.pending += data
            self.flush()

    def flush(self) -> None:
        target = self.master if self.master is not None else self.stdin_w
        if not self.pending or target is None:
            return
        try:
            n = os.write(target, self.pending)
            del self.pending[:n]
        except BlockingIOError:
            pass
        except OSError:  # the command closed its input: nothing more can be delivered
            self.pending.clear()

    def throttle(self, sel: selectors.BaseSelector) -> None:
        """Stop reading the FIFO while the buffer is full (TaskInput then waits)."""
        fifo = self.fifo
        if fifo is None:
            return
        registered = fifo in sel.get_map()
        if registered and len(self.pending) >= INPUT_BUFFER:
            sel.unregister(fifo)
        elif not registered and len(self.pending) < INPUT_BUFFER:
            sel.register(fifo, selectors.EVENT_READ, "input")
