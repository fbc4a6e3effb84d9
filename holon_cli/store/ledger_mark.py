"""A ledger's mark sidecar (``events.mark`` next to ``events.jsonl``).

One fixed-width line of ``MARK_WIDTH`` bytes, overwritten in place (one
``pwrite``) under the ledger's lock by every append: the size the file had
after it and, for a ledger numbered by a sequence key, the highest number
ever written (``high_water``). The sidecar is not fsync'd but when it is
created. ``store/ledger.py`` says what the mark is for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from holon_cli.store.fsio import PRIVATE_FILE_MODE, deferred, fsync_dir

# the sidecar is one line of this many bytes, overwritten in place
MARK_WIDTH = 80


def mark_path_of(path: Path) -> Path:
    return path.with_name(path.stem + ".mark")


def read_mark(path: Path) -> dict[str, int] | str | None:
    """A ledger's mark (``{"size": N}`` plus ``"high_water"`` for a numbered
    ledger), ``None`` when there is none, or a string saying why it cannot be
    read (damage: ``home check`` reports it, ``--repair`` rewrites it)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return parse_mark(raw)


def parse_mark(raw: bytes) -> dict[str, int] | str:
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return "not valid JSON"
    if not isinstance(obj, dict):
        return "not a JSON object"
    out: dict[str, int] = {}
    for key in ("size", "high_water"):
        v = obj.get(key)
        if v is None and key == "high_water":
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return f"no non-negative integer `{key}`"
        out[key] = v
    return out


def _mark_bytes(size: int, high_water: int | None) -> bytes:
    obj: dict[str, int] = {"v": 1, "size": int(size)}
    if high_water is not None:
        obj["high_water"] = int(high_water)
    return json.dumps(obj).encode().ljust(MARK_WIDTH - 1) + b"\n"


def open_mark(path: Path) -> tuple[int, bool]:
    """The mark's fd (read-write, created when missing) and whether it was new."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    return fd, os.fstat(fd).st_size == 0


def put_mark(fd: int, path: Path, created: bool, size: int, high_water: int | None) -> None:
    """Overwrite the mark in place with one fixed-width line (one ``pwrite``:
    a reader sees the old or the new line, never a mix)."""
    data = _mark_bytes(size, high_water)
    os.pwrite(fd, data, 0)
    if created:
        if not deferred(path):
            os.fsync(fd)
            fsync_dir(path.parent)
    elif os.fstat(fd).st_size > len(data):
        os.ftruncate(fd, len(data))


def write_mark(path: Path, size: int, high_water: int | None = None) -> None:
    fd, created = open_mark(path)
    try:
        put_mark(fd, path, created, size, high_water)
    finally:
        os.close(fd)
