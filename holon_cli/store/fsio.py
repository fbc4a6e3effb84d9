"""Atomic snapshot writes and versioned JSON snapshot reads."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from holon_cli.errors import CorruptStateError


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data``: readers see the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def write_snapshot(path: Path, obj: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(obj, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))


def read_snapshot(path: Path, *, max_version: int = 1) -> dict[str, Any] | None:
    """Read a versioned JSON snapshot; ``None`` when it does not exist."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptStateError(
            f"{path}: not valid JSON ({exc})",
            hint="restore the file from a backup or remove it; `holon home check` lists every problem",
            details={"path": str(path)},
        ) from None
    if not isinstance(obj, dict):
        raise CorruptStateError(f"{path}: expected a JSON object", details={"path": str(path)})
    v = obj.get("v", 1)
    if not isinstance(v, int) or v > max_version:
        raise CorruptStateError(
            f"{path}: format version {v!r} is newer than this holon understands (max {max_version})",
            hint="upgrade holon-cli",
            details={"path": str(path)},
        )
    return obj
