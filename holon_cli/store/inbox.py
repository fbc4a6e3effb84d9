"""Maildir-style inbox: many writers, no lock.

``deliver`` writes the message to ``tmp/``, fsyncs it, renames it into
``new/`` and fsyncs the folder: once it returns, the message survives any
crash. Names sort in id order. Ingestion (under the agent lock, elsewhere)
validates the file, records the message in the queue ledger first (fsync'd,
carrying the whole envelope) and only then moves the file to ``cur/``; a
crash between the two is detected by id and never duplicates. ``cur/`` holds
the bodies of unfinished messages (the queue snapshot keeps only their
heads); a file leaves ``cur/`` when its message is settled. A file that fails
validation moves to ``quarantine/`` with a ``.reason`` note next to it.
Files a killed writer left in ``tmp/`` were never acknowledged; ingestion
sweeps them after an hour, or after a
minute when the writer's pid (the name's suffix) is gone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli.store.fsio import PRIVATE_FILE_MODE, deferred, dumps, fsync_dir, write_all
from holon_cli.store.locks import pid_alive
from holon_cli.store.wake import mark, unmark

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.typed_base import JsonObject


class Inbox:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / "tmp"
        self.new = root / "new"
        self.cur = root / "cur"
        self.quarantine_dir = root / "quarantine"
        # the agent folder whose wake marker a delivery holds (store/wake.py)
        self.wake_dir: str | None = None

    def ensure(self) -> None:
        for d in (self.tmp, self.new, self.cur):
            d.mkdir(parents=True, exist_ok=True)

    def deliver(self, message_id: str, envelope: Envelope) -> Path:
        wake_fd = -1 if self.wake_dir is None else mark(self.wake_dir)
        try:
            return self._deliver(message_id, envelope)
        finally:
            unmark(wake_fd)

    def _deliver(self, message_id: str, envelope: Envelope) -> Path:
        data = (dumps(envelope) + "\n").encode("utf-8")
        name = f"{message_id}.json"
        tmp = self.tmp / f"{name}.{os.getpid()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
        except FileNotFoundError:
            self.ensure()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
        try:
            write_all(fd, data)
            if not deferred(tmp):
                os.fsync(fd)
        finally:
            os.close(fd)
        dest = self.new / name
        os.rename(tmp, dest)
        fsync_dir(self.new)
        return dest

    def pending(self) -> list[Path]:
        """Delivered, not yet ingested, in id order."""
        try:
            names = [n for n in os.listdir(self.new) if n.endswith(".json")]
        except FileNotFoundError:
            return []
        names.sort()
        return [self.new / n for n in names]

    def pending_count(self) -> int:
        try:
            return sum(1 for n in os.listdir(self.new) if n.endswith(".json"))
        except FileNotFoundError:
            return 0

    @staticmethod
    def read(path: Path) -> JsonObject:
        with open(path, "rb") as f:
            data = f.read()
        try:
            obj = json.loads(data)
        except RecursionError:  # e.g. megabytes of `[`: damage, quarantined by ingest
            raise ValueError("inbox message is nested too deeply to be an envelope") from None
        if not isinstance(obj, dict):
            raise ValueError("inbox message is not a JSON object")
        return obj

    def archive(self, path: Path) -> None:
        """Retire an ingested message. The queue ledger already holds its
        envelope durably, so the file is removed rather than kept in ``cur/``:
        a long-lived agent's inbox must not grow without bound."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def sweep_tmp(self, max_age_s: float = 3600.0, dead_writer_age_s: float = 60.0) -> int:
        """Remove unacknowledged ``tmp/`` leftovers older than ``max_age_s``, or
        older than ``dead_writer_age_s`` when their writer's pid is gone."""
        import time

        removed = 0
        now = time.time()
        try:
            entries = list(os.scandir(self.tmp))
        except FileNotFoundError:
            return 0
        for e in entries:
            try:
                if not e.is_file(follow_symlinks=False):
                    continue
                age = now - e.stat(follow_symlinks=False).st_mtime
                pid = e.name.rpartition(".")[2]
                dead = pid.isdigit() and not pid_alive(int(pid))
                if age > max_age_s or (dead and age > dead_writer_age_s):
                    os.unlink(e.path)
                    removed += 1
            except FileNotFoundError:
                pass
        return removed

    def retain(self, path: Path) -> Path:
        """Move an ingested message from ``new/`` to ``cur/`` (its body stays
        readable there until the message is settled). The caller fsyncs
        ``cur/`` once per batch; a move lost in a crash is redone by id."""
        self.cur.mkdir(parents=True, exist_ok=True)
        dest = self.cur / path.name
        os.replace(path, dest)
        return dest

    def quarantine(self, path: Path, reason: str = "") -> Path:
        """Set a file that cannot be admitted aside, with the reason next to it."""
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        dest = self.quarantine_dir / path.name
        n = 1
        while dest.exists():
            dest = self.quarantine_dir / f"{path.name}.{n}"
            n += 1
        os.replace(path, dest)
        if reason:
            try:
                with open(str(dest) + ".reason", "w", encoding="utf-8") as f:
                    f.write(reason + "\n")
            except OSError:
                pass
        fsync_dir(self.quarantine_dir)
        return dest

    def quarantined(self) -> list[Path]:
        try:
            return sorted(
                p for p in self.quarantine_dir.iterdir() if not p.name.endswith(".reason")
            )
        except FileNotFoundError:
            return []
