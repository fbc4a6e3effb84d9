"""One ledger line read as a record: the parse every ledger reader shares.

A line is one JSON object carrying an integer ``v`` (format version) no newer
than the reader understands, and, when the ledger has one, valid for its
record kind's schema check (``store/records.py``); anything else is
corruption, raised as ``CorruptStateError`` naming the file and line (or byte
offset). ``_complete`` reads a final line without its newline: a whole record
(some editors drop the final newline) or ``None`` (a write in progress or a
torn tail). ``Problem`` is one damaged line as ``holon home check`` reports it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from holon_cli.errors import CorruptStateError
from holon_cli.store.records import Validator

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject


class ProblemRecord(TypedDict):
    """A :class:`Problem` as JSON (``holon home check --json`` ``problems[]``)."""

    path: str
    line: int | None
    message: str


class Problem(NamedTuple):
    path: str
    line: int | None
    message: str

    def to_dict(self) -> ProblemRecord:
        return {"path": self.path, "line": self.line, "message": self.message}


def _corrupt(path: Path, line: int | None, offset: int, why: str) -> CorruptStateError:
    where = f"{path}:{line}" if line is not None else f"{path} (byte {offset})"
    return CorruptStateError(
        f"corrupt ledger record at {where}: {why}",
        hint=(
            "run `holon home check` for a full report; move the damaged line aside to a "
            "backup, then retry"
        ),
        details={"path": str(path), "line": line, "offset": offset, "reason": why},
    )


def line_start(fd: int, end: int) -> int:
    """The offset just after the last newline before ``end`` in ``fd`` (0:
    none), read backwards in 64 KiB chunks: where the last line begins."""
    pos = end
    while pos > 0:
        start = max(0, pos - 65536)
        idx = os.pread(fd, pos - start, start).rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0


def _complete(raw: bytes, max_version: int) -> JsonObject | None:
    """A final line without its newline that is nevertheless a whole record
    (a JSON object with an integer ``v`` we understand); else ``None``. A torn
    prefix of a record can never parse as a JSON object, so this is safe."""
    if not raw.strip():
        return None
    try:
        rec = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(rec, dict):
        return None
    v = rec.get("v")
    if not isinstance(v, int) or isinstance(v, bool) or v > max_version:
        return None
    return rec


def _parse(
    path: Path,
    raw: bytes,
    line: int | None,
    offset: int,
    max_version: int,
    validate: Validator | None = None,
) -> Any:
    """One line as a record, checked by ``validate`` (the ledger's record
    kind, ``store/records.py``): what it returns is that kind's type."""
    try:
        rec = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _corrupt(path, line, offset, f"not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(rec, dict):
        raise _corrupt(path, line, offset, "record is not a JSON object")
    v = rec.get("v")
    if not isinstance(v, int):
        raise _corrupt(path, line, offset, "record has no integer format version `v`")
    if v > max_version:
        where = f"{path}:{line}" if line is not None else f"{path} (byte {offset})"
        raise CorruptStateError(
            (
                f"{where}: record format v{v} is newer than this holon understands (max "
                f"v{max_version})"
            ),
            hint="upgrade holon-cli to read this home",
            details={
                "path": str(path),
                "line": line,
                "reason": (
                    f"record format v{v} is newer than this holon understands (max v{max_version})"
                ),
            },
        )
    if validate is not None:
        reason = validate(rec)
        if reason:
            raise _corrupt(path, line, offset, reason)
    return rec


def _checked(
    path: Path, line: int | None, offset: int, rec: JsonObject, validate: Validator | None
) -> Any:
    """A record read whole some other way (a last line without its newline,
    a segment's ``.last``) checked as :func:`_parse` checks a line."""
    if validate is not None:
        reason = validate(rec)
        if reason:
            raise _corrupt(path, line, offset, reason)
    return rec
