"""The work-item archive file (``state/work_items.archive.jsonl``): its
format, its fold, and its two writes. :mod:`holon_cli.store.workitem_index`
says what it is for and when each write happens.

Format: a header line ``{"v": 1, "kind": "archive", "generation": ID}``,
then one line per change that reached the archive: ``{"v": 1, "kind":
"item"|"report"|"wait", "rec": {...}}`` (a work item record, a delivery
summary, a waiting intent: the ledgers' records as they are). The newest
line for an id wins; a report wins over an older ``created_at`` only.

The index names the generation and how many bytes of the file it covers;
readers read only those bytes (what a checkpoint killed before its head was
written left after them is cut by the next checkpoint). A rewrite is a new
file with a new generation, renamed into place (a snapshot write).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from holon_cli import clock
from holon_cli.errors import CorruptStateError
from holon_cli.model import workitem as wm
from holon_cli.model.workitem import WaitingIntentRecord, WorkItemRecord
from holon_cli.store.fsio import PRIVATE_FILE_MODE, atomic_write_bytes, deferred, dumps

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject

ARCHIVE_VERSION = 1
ARCHIVE_NAME = "work_items.archive.jsonl"
_HEADER_MAX = 4096  # the header line is far shorter


def report_fields(rec: Mapping[str, Any]) -> dict[str, object]:
    return {k: rec.get(k) for k in ("id", "text", "created_at", "source", "turn_id")}


def newer_report(prev: Mapping[str, Any] | None, rec: Mapping[str, Any]) -> bool:
    return prev is None or str(rec.get("created_at", "")) >= str(prev.get("created_at", ""))


class Archive:
    """The archive's fold (read-only once built): items, reports, waits."""

    def __init__(self, generation: str | None = None, size: int = 0, inode: int | None = None):
        self.generation = generation
        self.size = size  # bytes read (the header included)
        self.inode = inode
        self.items: dict[str, WorkItemRecord] = {}
        self.reports: dict[str, dict[str, object]] = {}
        self.waits: dict[str, WaitingIntentRecord] = {}

    def extended(self) -> Archive:
        out = Archive(self.generation, self.size, self.inode)
        out.items, out.reports, out.waits = dict(self.items), dict(self.reports), dict(self.waits)
        return out

    def apply(self, kind: str, rec: Mapping[str, Any]) -> None:
        if kind == "item":
            v = rec.get("v", 1)
            if not isinstance(v, int) or v > wm.WORK_ITEM_RECORD_VERSION:
                wm.upgrade_record(rec, where=f"work item archive ({ARCHIVE_NAME})")  # raises
            # written from folded (upgraded) records: every field is there
            self.items[rec["id"]] = cast(WorkItemRecord, rec)
        elif kind == "report":
            wid = rec["work_item_id"]
            if newer_report(self.reports.get(wid), rec):
                self.reports[wid] = report_fields(rec)
        elif kind == "wait":
            self.waits[rec["id"]] = cast(WaitingIntentRecord, dict(rec))


def _archive_problem(path: Path, line: int | None, why: str) -> CorruptStateError:
    where = f"{path}:{line}" if line is not None else str(path)
    return CorruptStateError(
        f"{where}: {why}",
        hint="`holon home check --repair` rebuilds the work item index and its archive from "
        "the ledgers (keeping the damaged file aside)",
        details={"path": str(path), **({"line": line} if line is not None else {})},
    )


def _checked(path: Path, lineno: int | None, obj: Any) -> tuple[str, JsonObject]:
    """One parsed archive line, checked: its kind and its record."""
    from holon_cli.store.records import (
        ARCHIVED_REPORT,
        WAITING_INTENT,
        WORK_ITEM_LINE,
        RecordKind,
    )

    if not isinstance(obj, dict):
        raise _archive_problem(path, lineno, "expected a JSON object")
    v = obj.get("v")
    if not isinstance(v, int) or isinstance(v, bool):
        raise _archive_problem(path, lineno, "no integer format version `v`")
    if v > ARCHIVE_VERSION:
        raise CorruptStateError(
            f"{path}: format version {v} is newer than this holon understands "
            f"(max {ARCHIVE_VERSION})",
            hint="upgrade holon-cli",
            details={"path": str(path)},
        )
    kind, rec = str(obj.get("kind")), obj.get("rec")
    check: dict[str, RecordKind[Any]] = {
        "item": WORK_ITEM_LINE,
        "report": ARCHIVED_REPORT,
        "wait": WAITING_INTENT,
    }
    if kind not in check or not isinstance(rec, dict):
        raise _archive_problem(path, lineno, "expected `kind` item|report|wait and a `rec` object")
    reason = check[kind](rec)  # a waiting intent's `work_item_id` is required by its type
    if reason:
        raise _archive_problem(path, lineno, reason)
    return kind, rec


_DECODER = json.JSONDecoder()
_CHUNK_CHARS = 256 * 1024  # about this much text parsed as one JSON array at a time


def _parse_body(path: Path, text: str, first: int | None) -> list[tuple[int | None, Any]]:
    """The lines of ``text`` (each ending in a newline) parsed, with their
    line numbers (``first``: the first one's; None: unknown). Whole lines go
    to the C parser about 256 KiB at a time, as one JSON array each (a call
    per line cost a third more than the v1 snapshot's one document; one
    array of the whole file, another copy of it in memory); a chunk that
    does not parse is read again line by line, to name the damaged line."""
    out: list[tuple[int | None, Any]] = []
    pos, end, i = 0, len(text), 0
    while pos < end:
        stop = text.find("\n", min(end - 1, pos + _CHUNK_CHARS)) + 1 or end
        chunk = text[pos:stop]
        n = chunk.count("\n")
        try:
            got = json.loads("[" + chunk[:-1].replace("\n", ",") + "]")
        except ValueError:
            got = None
        if isinstance(got, list) and len(got) == n:
            if first is None:
                out.extend((None, obj) for obj in got)
            else:
                out.extend(zip(range(first + i, first + i + n), got, strict=True))
        else:
            out.extend(_parse_lines(path, chunk, None if first is None else first + i))
        pos, i = stop, i + n
    return out


def _parse_lines(path: Path, text: str, first: int | None) -> list[tuple[int | None, Any]]:
    """Line by line, naming the first line that is not one JSON value."""
    out: list[tuple[int | None, Any]] = []
    pos, end, i = 0, len(text), 0
    while pos < end:
        lineno = None if first is None else first + i
        try:
            obj, stop = _DECODER.raw_decode(text, pos)
        except ValueError as exc:
            raise _archive_problem(path, lineno, f"not valid JSON ({exc})") from None
        if stop >= end or text[stop] != "\n":
            raise _archive_problem(path, lineno, "more than one JSON value on the line")
        out.append((lineno, obj))
        pos, i = stop + 1, i + 1
    return out


def _header_of(first: bytes) -> JsonObject | str:
    try:
        obj = json.loads(first)
    except (ValueError, UnicodeDecodeError):
        return "its first line is not the archive's header"
    if (
        not isinstance(obj, dict)
        or obj.get("kind") != "archive"
        or not isinstance(obj.get("generation"), str)
    ):
        return "its first line is not the archive's header"
    v = obj.get("v")
    if not isinstance(v, int) or v > ARCHIVE_VERSION:
        return f"format version {v!r} is newer than this holon understands (max {ARCHIVE_VERSION})"
    return obj


def read_header(path: Path) -> JsonObject | str | None:
    """The archive's header (``None``: no file), or why it cannot be read."""
    try:
        with open(path, "rb") as f:
            first = f.readline(_HEADER_MAX)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not first.endswith(b"\n"):
        return "its first line is not the archive's header"
    return _header_of(first)


def read_archive(path: Path, generation: str, size: int, base: Archive | None = None) -> Archive:
    """The archive's first ``size`` bytes folded (``base``: the fold of a
    prefix of the same file, extended by what follows it). Raises
    ``CorruptStateError`` naming file and line on damage."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _archive_problem(path, None, "missing (the work item index names it)") from None
    except OSError as exc:
        raise _archive_problem(path, None, f"cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if st.st_size < size:
            raise _archive_problem(
                path, None, f"holds {st.st_size} bytes, the work item index covers {size}: cut"
            )
        if base is not None and (
            base.generation != generation or base.inode != st.st_ino or base.size > size
        ):
            base = None
        start = base.size if base is not None else 0
        data = os.pread(fd, size - start, start) if size > start else b""
    finally:
        os.close(fd)
    if len(data) != size - start or (data and not data.endswith(b"\n")):
        raise _archive_problem(path, None, f"shorter than the {size} bytes the index covers")
    if base is None:
        nl = data.find(b"\n")
        head = _header_of(data[:nl]) if nl > 0 else "empty"
        if not isinstance(head, dict) or head.get("generation") != generation:
            why = head if isinstance(head, str) else "another generation than the index names"
            raise _archive_problem(path, 1, why)
        out = Archive(generation, 0, st.st_ino)
        skip, first = nl + 1, 2
    else:  # what was appended after the prefix already read (line numbers unknown)
        out = base.extended()
        skip, first = 0, None
    try:
        text = str(memoryview(data)[skip:], "utf-8")
    except UnicodeDecodeError as exc:
        raise _archive_problem(path, None, f"not UTF-8 ({exc})") from None
    del data
    from holon_cli.store.records import WORK_ITEM_LINE

    items = out.items
    for lineno, obj in _parse_body(path, text, first):
        # the common line (a current item record, well formed) without a call
        # per line; anything else is checked, and named, by _checked
        rec = obj.get("rec") if type(obj) is dict else None
        if (
            type(rec) is dict
            and obj.get("v") == ARCHIVE_VERSION
            and obj.get("kind") == "item"
            and rec.get("v", 1) == wm.WORK_ITEM_RECORD_VERSION
            and WORK_ITEM_LINE(rec) is None
        ):
            items[rec["id"]] = cast(WorkItemRecord, rec)
            continue
        kind, rec = _checked(path, lineno, obj)
        out.apply(kind, rec)
    out.size, out.inode = size, st.st_ino
    return out


def entries(
    items: Mapping[str, Any],
    reports: Mapping[str, Mapping[str, Any]],
    waits: Mapping[str, Mapping[str, Any]],
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The archive lines of these items, their reports (keyed by item) and
    waits: ``(kind, record)``."""
    for rec in items.values():
        yield "item", rec
    for wid, rep in reports.items():
        yield "report", {**rep, "work_item_id": wid}
    for w in waits.values():
        yield "wait", w


def encode(lines: Iterable[tuple[str, Mapping[str, Any]]]) -> tuple[bytes, int]:
    """``lines`` as archive bytes (each ending in a newline) and their count."""
    parts = [dumps({"v": ARCHIVE_VERSION, "kind": kind, "rec": rec}) for kind, rec in lines]
    payload = ("\n".join(parts) + "\n").encode("utf-8", "surrogateescape") if parts else b""
    return payload, len(parts)


# path -> the archive fold read last (reused and extended while its
# generation and file stay the same: what a checkpoint appends is read once)
_ARCHIVES: dict[str, Archive] = {}


def append_archive(path: Path, generation: str, covered: int, payload: bytes) -> int:
    """Cut the archive back to ``covered`` (what an interrupted checkpoint
    left after it), append ``payload``, fsync; return the new length."""
    head = read_header(path)
    if not isinstance(head, dict) or head.get("generation") != generation:
        raise CorruptStateError(
            f"{path}: not the archive the work item index continues",
            hint="`holon home check --repair` rebuilds the index and its archive",
            details={"path": str(path)},
        )
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        if os.fstat(fd).st_size < covered:
            raise _archive_problem(path, None, f"shorter than the {covered} bytes the index covers")
        os.ftruncate(fd, covered)
        view = memoryview(payload)
        at = covered
        while view:
            n = os.pwrite(fd, view, at)
            view, at = view[n:], at + n
        if not deferred(path):
            os.fsync(fd)
    finally:
        os.close(fd)
    return covered + len(payload)


def new_archive(path: Path, payload: bytes) -> tuple[str, int]:
    """A whole new archive (a new generation) renamed into place."""
    generation = clock.new_id("wia")
    header = dumps({"v": ARCHIVE_VERSION, "kind": "archive", "generation": generation})
    data = header.encode() + b"\n" + payload
    atomic_write_bytes(path, data, new_mode=PRIVATE_FILE_MODE)
    return generation, len(data)
