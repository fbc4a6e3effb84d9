"""Records that live as long as their owner: a small JSON file per record,
``flock``-ed by the process that wrote it for as long as the record holds.

The kernel releases a ``flock`` when its holder dies, however it dies
(SIGKILL included), so a record whose file nobody holds any more belongs to
a dead process: :func:`live_records` removes it and does not return it. A
record older than its ``lease_s`` is ignored (and removed) even when held:
a hung owner cannot hold one for ever.

Used by the budget plane for request reservations and ``holon run`` bounds.
The files are only ever written once (before anyone may read them: callers
create and scan under one lock, ``runtime/budgets``), so a reader never sees
half a record. Each owner holds its own open file description: two threads
of one process (a ``serve``) see each other's records as held.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli.store.fsio import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, write_all

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject

SUFFIX = ".json"


class HeldRecord:
    """A record this process holds; :meth:`release` (or the process's end)
    drops it."""

    def __init__(self, path: Path, fd: int, data: Mapping[str, object]) -> None:
        self.path = path
        self.fd: int | None = fd
        self.data = data

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.close(fd)

    @property
    def held(self) -> bool:
        return self.fd is not None


def private_dir(folder: Path) -> None:
    """``folder`` and any missing parent made 0700 whatever the umask."""
    missing: list[Path] = []
    p = folder
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # another process made it first
        os.chmod(d, PRIVATE_DIR_MODE)


def hold(folder: Path, name: str, data: Mapping[str, object]) -> HeldRecord:
    """Write ``folder/<name>.json`` and hold it (0600, never inherited)."""
    path = folder / f"{name}{SUFFIX}"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    except FileNotFoundError:
        private_dir(folder)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        write_all(fd, json.dumps(data, separators=(",", ":")).encode())
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        raise
    return HeldRecord(path, fd, data)


def live_records(
    folder: Path,
    *,
    now: float,
    lease_s: float | None,
    keep_orphan: Callable[[JsonObject], bool] | None = None,
) -> list[JsonObject]:
    """The records of ``folder`` whose owner still holds them and whose
    ``at`` is within ``lease_s`` of ``now`` (None: no lease), and those
    ``keep_orphan`` keeps after their owner died; the others are removed."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    out: list[JsonObject] = []
    for name in sorted(names):
        if not name.endswith(SUFFIX):
            continue
        path = folder / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # released meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                held = True
            else:
                held = False  # nobody holds it: its owner is gone
            rec = _read(fd)
            at = rec.get("at") if rec is not None else None
            fresh = isinstance(at, (int, float)) and (lease_s is None or now - float(at) <= lease_s)
            if rec is not None and fresh and (held or (keep_orphan and keep_orphan(rec))):
                out.append(rec)
            else:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
        finally:
            os.close(fd)
    return out


def _read(fd: int) -> JsonObject | None:
    chunks: list[bytes] = []
    while True:
        got = os.read(fd, 65536)
        if not got:
            break
        chunks.append(got)
    try:
        rec = json.loads(b"".join(chunks))
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None
