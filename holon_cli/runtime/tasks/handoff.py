"""What a forked supervisor passes to the fresh interpreter it ``exec``s at
promotion (:meth:`.supervisor.Supervisor.handoff`): the command's pid (still
this process's child after the exec), its process group and start time, the
output counters (so the cap counts what was written before), a requested
stop, input not yet delivered, and the numbers of the inherited descriptors
(output files, the command's pipes or terminal, the input FIFO).

The state goes through ``handoff.json`` in the task directory, written just
before the exec and removed by the new image once read. Standard library
only (the resumed supervisor starts with ``python -S``).
"""

from __future__ import annotations

import base64
import json
import os
import signal
from typing import TYPE_CHECKING, Protocol

from holon_cli.runtime.tasks import procs

if TYPE_CHECKING:
    from pathlib import Path

    from holon_cli.runtime.tasks.capture import Capture
    from holon_cli.runtime.tasks.feed import InputFeed

HANDOFF_FILE = "handoff.json"
# the inherited descriptors: of the output (Capture), of the input (InputFeed)
_OUTPUT_FDS = ("out_fd", "stdout_fd", "stderr_fd")
_INPUT_FDS = ("master", "stdin_w", "fifo")


class Proc(Protocol):
    """The supervised command: a ``Popen`` before a hand-off, a :class:`_Child` after."""

    pid: int

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...


class Carried(Protocol):
    """What a hand-off carries of a supervisor
    (:class:`~holon_cli.runtime.tasks.supervisor.Supervisor` is one)."""

    dir: Path
    proc: Proc | None
    pgid: int | None
    start_ticks: int | None
    stop_reason: str | None
    stop_grace: float
    streams: dict[int, int | None]
    capture: Capture
    feed: InputFeed


class _Child:
    """The command after a hand-off: still this process's child (``exec``
    keeps children), but no longer a ``Popen``. Same return codes as Popen
    (negative for a signal)."""

    def __init__(self, pid: int, returncode: int | None = None) -> None:
        self.pid = pid
        self.returncode = returncode

    def _reap(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere: should not happen
                self.returncode = -int(signal.SIGKILL)
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self) -> int:
        rc = self._reap(0)
        assert rc is not None
        return rc


def save(sup: Carried) -> None:
    assert sup.proc is not None
    state: dict[str, object] = {
        "v": 1,
        "pid": sup.proc.pid,
        "pgid": sup.pgid,
        "start_ticks": sup.start_ticks,
        "written": sup.capture.written,
        "cap_hit": sup.capture.cap_hit,
        "stop_reason": sup.stop_reason,
        "stop_grace": sup.stop_grace,
        "streams": [[fd, dest] for fd, dest in sup.streams.items()],
        "pending_in": base64.b64encode(bytes(sup.feed.pending)).decode("ascii"),
    }
    for name in _OUTPUT_FDS:
        state[name] = getattr(sup.capture, name)
    for name in _INPUT_FDS:
        state[name] = getattr(sup.feed, name)
    procs.put_record(sup.dir / HANDOFF_FILE, state, durable=False)


def load(sup: Carried) -> None:
    path = sup.dir / HANDOFF_FILE
    st = json.loads(path.read_text())
    sup.proc = _Child(int(st["pid"]))
    sup.pgid = st["pgid"]
    sup.start_ticks = st["start_ticks"]
    sup.capture.written = int(st["written"])
    sup.capture.cap_hit = bool(st["cap_hit"])
    sup.stop_reason = st["stop_reason"]
    sup.stop_grace = float(st["stop_grace"])
    sup.streams = {int(fd): dest for fd, dest in st["streams"]}
    sup.feed.pending = bytearray(base64.b64decode(st["pending_in"]))
    for name in _OUTPUT_FDS:
        setattr(sup.capture, name, st[name])
    for name in _INPUT_FDS:
        setattr(sup.feed, name, st[name])
    path.unlink(missing_ok=True)
