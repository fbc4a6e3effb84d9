"""``holon daemon logs`` (``--follow``): the daemon's log, its tail and the
recorded start-up and shut-down failures (:mod:`holon_cli.serve.daemon`
writes them)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from holon_cli.serve.daemon import failure_path, failures_by_phase, log_path, meta_path
from holon_cli.store.fsio import read_snapshot

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject


class DaemonLogs(TypedDict):
    """``holon daemon logs --json``: where the files are, the last failures
    and the log's last lines."""

    log_path: str
    daemon_json: str
    last_failure_path: str
    last_failure: JsonObject | None
    startup_failure: JsonObject | None
    shutdown_failure: JsonObject | None
    lines: list[str]


def follow_log(
    poll_s: float = 0.2,
    *,
    stop: Callable[[], bool] = lambda: False,
    start: tuple[int, int] | None = None,
) -> Iterator[str]:
    """The daemon log's lines as they are appended, from ``start`` (the
    (inode, offset) where :func:`logs_with_position` stopped reading, so no line
    logged in between is lost) or else from its current end (``logs --follow``).
    The file is read through an open descriptor: at a rotation (the file
    replaced) the old file is read to its end before the new one is read
    from its start, however late the next poll comes; a file cut short is
    read again from its start. Runs until ``stop()`` or Ctrl-C."""
    path = log_path()
    ino: int | None = None
    pos = 0
    if start is not None:
        ino, pos = start
    else:
        try:
            st = path.stat()
            ino, pos = st.st_ino, st.st_size
        except FileNotFoundError:
            pass
    reader = _LogReader(path, ino, pos)
    try:
        while not stop():
            lines = reader.poll()
            if lines is None:
                time.sleep(poll_s)
                continue
            yield from lines
    finally:
        reader.close()


class _LogReader:
    """One followed log file: new complete lines per :meth:`poll`."""

    def __init__(self, path: Path, ino: int | None, pos: int) -> None:
        self.path = path
        self.ino = ino  # the file the offset belongs to (None: whatever appears)
        self.pos = pos
        self.buf = b""
        self.f: Any = None

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = None

    def _open(self) -> bool:
        """Open the file the offset belongs to: the log, or (rotated before
        we got to it) its previous generation; else the log from its start."""
        for cand in (self.path, self.path.with_suffix(".log.1")):
            try:
                f = open(cand, "rb")  # noqa: SIM115 - held across polls, closed by close()
            except FileNotFoundError:
                continue
            if os.fstat(f.fileno()).st_ino == self.ino:
                self.f = f
                return True
            f.close()
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - held across polls, closed by close()
        except FileNotFoundError:
            return False
        self.ino, self.pos, self.buf = os.fstat(f.fileno()).st_ino, 0, b""
        self.f = f
        return True

    def poll(self) -> list[str] | None:
        """New complete lines, or None when there is nothing new."""
        if self.f is None and not self._open():
            return None
        size = os.fstat(self.f.fileno()).st_size
        if size < self.pos:  # cut short: read it again from its start
            self.pos, self.buf = 0, b""
        if size > self.pos:
            self.f.seek(self.pos)
            chunk = self.f.read(size - self.pos)
            self.pos += len(chunk)
            *complete, self.buf = (self.buf + chunk).split(b"\n")
            return [line.decode("utf-8", errors="replace") for line in complete] or None
        try:
            replaced = self.path.stat().st_ino != self.ino
        except FileNotFoundError:
            replaced = False  # rotated, the new file not there yet: keep reading this one
        if not replaced:
            return None
        # the old file is read to its end: a last line without its newline is
        # still a line; then the new file from its start
        rest = [self.buf.decode("utf-8", errors="replace")] if self.buf else []
        self.close()
        self.ino, self.pos, self.buf = None, 0, b""
        return rest or None


def logs(tail: int = 50) -> DaemonLogs:
    return logs_with_position(tail)[0]


def logs_with_position(tail: int = 50) -> tuple[DaemonLogs, tuple[int, int]]:
    """:func:`logs` and where its read of the log stopped (inode, offset), for
    :func:`follow_log` to continue from (no log yet: any file that appears is
    read from its start)."""
    lines: list[str] = []
    position = (-1, 0)
    try:
        with open(log_path(), "rb") as f:
            data = f.read()
            position = (os.fstat(f.fileno()).st_ino, len(data))
        text = data.decode("utf-8", errors="replace")
        lines = text.splitlines()[-tail:] if tail else []
    except FileNotFoundError:
        pass
    failure: JsonObject | None = read_snapshot(failure_path()) if failure_path().exists() else None
    if isinstance(failure, dict):
        failure = {k: v for k, v in failure.items() if k != "phases"}
    phases = failures_by_phase()
    return {
        "log_path": str(log_path()),
        "daemon_json": str(meta_path()),
        "last_failure_path": str(failure_path()),
        "last_failure": failure,
        "startup_failure": _summary(phases.get("startup")),
        "shutdown_failure": _summary(phases.get("shutdown")),
        "lines": lines,
    }, position


def _summary(rec: JsonObject | None) -> JsonObject | None:
    if not rec:
        return None
    return {k: rec.get(k) for k in ("occurred_at", "summary", "phase", "detail_hint")}
