"""Reads of a ledger's lines: by key cursor, of the open file's tail, at an
offset, and the full scans for damaged lines.

``records_after`` serves followers (``holon tail --follow``, the console's event
stream, resumption after a restart): the records whose integer key (say
``event_seq``) is above a cursor, found by reading the open file backwards
from one snapshot of its size, then the closed segments from the one where
the cursor falls (a segment's first line says where it starts; the newest
closed record, ``<stem>.last``, says whether any is newer). ``tail_read``
reads the open file's last records backwards in chunks; ``read_at`` the
record at a byte offset; ``has_torn_tail`` and ``complete_size`` what a
killed writer left. ``records_skipping_damaged`` (read-only views) and
``check`` (``holon home check``) read every line, reporting damaged ones as
``Problem``s instead of raising. Each is a function of the ``Ledger``
(``store/ledger.py``) it reads, which delegates to it (the cursor and tail
reads parse the open file's lines through ``Ledger._parse_line``); ``Reader``
is what they use of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from holon_cli.errors import CorruptStateError
from holon_cli.store.ledger_lines import Problem, _checked, _complete, _corrupt, _parse
from holon_cli.store.ledger_segments import _int, last_path, open_segment
from holon_cli.store.records import Validator

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject

R = TypeVar("R", bound=Mapping[str, Any])


class Reader(Protocol[R]):
    """What these reads use of a ``Ledger``."""

    path: Path
    max_version: int
    validate: Validator

    @property
    def segments_dir(self) -> Path: ...

    def closed_segments(self) -> list[Path]: ...

    def _closed_records(self, seg: Path) -> list[R]: ...

    def _parse_line(self, raw: bytes, offset: int) -> R: ...

    def _last_open(self) -> R | None: ...


def records_after(
    led: Reader[R], key: str, since: int, limit: int | None = None
) -> tuple[list[R], int]:
    """The complete records whose integer ``key`` is greater than ``since``
    (at most ``limit``, oldest first) and the byte offset just after the last
    one returned (or after everything read), where a follower continues
    with ``Ledger.read_from``.

    One snapshot of the file: its size is taken once and every byte read
    lies before it, so an append racing this read is either wholly inside
    the snapshot or wholly after it (the next call returns it): a record is
    never skipped and never returned twice. ``key`` must increase along the
    file (``event_seq`` does; gaps are allowed): the read goes backwards
    from the end only until it meets a record at or below ``since``."""
    try:
        fd = os.open(led.path, os.O_RDONLY)
    except FileNotFoundError:
        fd = -1
    try:
        size = os.fstat(fd).st_size if fd >= 0 else 0
        lines, offset = _lines_after(led, fd, size, key, since) if size else ([], 0)
    finally:
        if fd >= 0:
            os.close(fd)
    out: list[R] = []
    if offset == 0:  # the open file starts after ``since``: history may be older
        out = _closed_after(led, key, since, limit)
    for raw in lines:
        if limit is not None and len(out) >= limit:
            break
        rec = led._parse_line(raw, offset)
        offset = min(offset + len(raw) + 1, size)
        seq = rec.get(key)
        if isinstance(seq, int) and seq > since:
            out.append(rec)
    if limit is not None and len(out) > limit:
        # cut inside the closed segments: the offset means nothing then
        # (callers with a limit page by ``key``, not by offset)
        return out[:limit], 0
    return out, offset


def _closed_after(led: Reader[R], key: str, since: int, limit: int | None = None) -> list[R]:
    """Records of the closed segments whose ``key`` exceeds ``since``,
    oldest first (at most ``limit``). Only the first line of a segment is
    read to find where ``since`` falls; then whole segments from there."""
    try:  # the newest closed record: nothing closed is newer than ``since``?
        last = _complete(last_path(led.segments_dir, led.path.stem).read_bytes(), 1 << 30)
    except FileNotFoundError:
        last = None
    if last is not None and _int(last.get(key)) <= since:
        return []
    segs = led.closed_segments()
    start = 0
    for i in range(len(segs) - 1, -1, -1):
        first = _first_key(led, segs[i], key)
        if first is not None and first <= since:
            start = i
            break
    out: list[R] = []
    for seg in segs[start:]:
        out.extend(r for r in led._closed_records(seg) if _int(r.get(key)) > since)
        if limit is not None and len(out) > limit:
            break
    return out


def _first_key(led: Reader[Any], seg: Path, key: str) -> int | None:
    with open_segment(seg) as f:
        raw = f.readline()
    if not raw.strip():
        return None
    try:
        return _key_of(led, raw.rstrip(b"\n"), 0, key)
    except CorruptStateError:
        return None


def _key_of(led: Reader[Any], raw: bytes, offset: int, key: str) -> int | None:
    """``key`` of the record on this line. Our own records put it among the
    first keys (``{"v":1,"event_seq":12,...``): read the digits there
    without parsing the line; anything else is parsed."""
    needle = b'"' + key.encode() + b'":'
    at = raw.find(needle, 0, 48)
    if at > 0 and raw[at - 1 : at] in (b"{", b","):
        start = at + len(needle)
        end = start
        while end < len(raw) and 48 <= raw[end] <= 57:
            end += 1
        if end > start and raw[end : end + 1] in (b",", b"}"):
            return int(raw[start:end])
    seq = led._parse_line(raw, offset).get(key)
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _lines_after(
    led: Reader[Any], fd: int, size: int, key: str, since: int
) -> tuple[list[bytes], int]:
    """The whole lines among the file's first ``size`` bytes from the first
    whose ``key`` exceeds ``since``, and the offset where they start (read
    backwards in chunks). A last line without its newline is kept only when
    it is a complete record (else it is a write in progress)."""
    pos, buf = size, b""
    while pos > 0:
        start = max(0, pos - 65536)
        buf = os.pread(fd, pos - start, start) + buf
        pos = start
        first = 0 if pos == 0 else buf.find(b"\n") + 1
        end = buf.find(b"\n", first)
        if pos > 0 and (first == 0 or end < 0):
            continue  # no whole line in the buffer yet
        seq = _key_of(led, buf[first:end], pos + first, key) if end >= 0 else None
        if seq is not None and seq <= since:
            break  # every record after ``since`` is in the buffer
    first = 0 if pos == 0 else buf.find(b"\n") + 1
    lines = buf[first:].split(b"\n")
    tail = lines.pop()  # "" after the final newline, or a fragment
    if tail and _complete(tail, led.max_version) is not None:
        lines.append(tail)
    offset, skip = pos + first, 0
    for raw in lines:  # drop the records at or below ``since``
        seq = _key_of(led, raw, offset, key)
        if seq is not None and seq > since:
            break
        offset += len(raw) + 1
        skip += 1
    return lines[skip:], min(offset, size)


def records_skipping_damaged(led: Reader[R]) -> tuple[list[R], list[Problem]]:
    """Every complete record, damaged lines left out and reported with their
    line numbers (read-only views: ``holon tail``). A full scan: callers use
    it only after the fast path met a damaged line."""
    out: list[R] = []
    problems: list[Problem] = []
    for seg in led.closed_segments():
        try:
            with open_segment(seg) as sf:
                _lines_skipping_damaged(led, seg, sf, out, problems)
        except CorruptStateError as exc:  # a cut or corrupt .gz: what was read is kept
            problems.append(Problem(str(seg), None, str(exc.details.get("reason") or exc)))
    try:
        f = open(led.path, "rb")
    except FileNotFoundError:
        return out, problems
    with f:
        _lines_skipping_damaged(led, led.path, f, out, problems)
    return out, problems


def _lines_skipping_damaged(
    led: Reader[R], path: Path, f: Any, out: list[R], problems: list[Problem]
) -> None:
    line_no = 0
    for line_no, raw in enumerate(f, 1):
        if not raw.endswith(b"\n"):
            if path != led.path:  # a closed segment never grows: its end was cut
                last = _complete(raw, led.max_version)
                if last is None:
                    problems.append(Problem(str(path), line_no, "the last line is cut short"))
                else:
                    try:
                        out.append(_checked(path, line_no, 0, last, led.validate))
                    except CorruptStateError as exc:
                        problems.append(Problem(str(path), line_no, exc.message))
            break  # torn tail: normal, not a record yet
        try:
            if raw.strip() == b"":
                raise _corrupt(path, line_no, 0, "empty line")
            out.append(_parse(path, raw, line_no, 0, led.max_version, led.validate))
        except CorruptStateError as exc:
            reason = str(exc.details.get("reason") or exc.message)
            if "newer than this holon understands" in reason:
                raise  # not damage: this holon is too old to read the home
            problems.append(Problem(str(path), line_no, reason))
    if line_no == 0 and path != led.path:
        problems.append(Problem(str(path), None, "closed segment holds no record"))


def check(led: Reader[Any]) -> list[Problem]:
    """Validate every line; a torn tail is reported as a note, not a problem."""
    problems: list[Problem] = []
    try:
        f = open(led.path, "rb")
    except FileNotFoundError:
        return problems
    with f:
        for line_no, raw in enumerate(f, 1):
            if not raw.endswith(b"\n") and _complete(raw, led.max_version) is None:
                break  # torn tail: normal, repaired on next append
            try:
                if raw.strip() == b"":
                    raise _corrupt(led.path, line_no, 0, "empty line")
                _parse(led.path, raw, line_no, 0, led.max_version, led.validate)
            except CorruptStateError as exc:
                # path and line are in the Problem itself; keep the message short
                problems.append(
                    Problem(str(led.path), line_no, str(exc.details.get("reason") or exc.message))
                )
    return problems


def tail_read(led: Reader[R], n: int) -> tuple[list[R], int]:
    """The last ``n`` complete records and the offset just after them."""
    try:
        fd = os.open(led.path, os.O_RDONLY)
    except FileNotFoundError:
        return [], 0
    try:
        size = os.fstat(fd).st_size
        chunks: list[bytes] = []  # newest first; joined once (1 MB lines: no
        newlines = 0  # quadratic re-copying nor re-counting of the buffer)
        pos = size
        while pos > 0 and newlines <= n:
            start = max(0, pos - 65536)
            chunk = os.pread(fd, pos - start, start)
            chunks.append(chunk)
            newlines += chunk.count(b"\n")
            pos = start
        buf = b"".join(reversed(chunks))
    finally:
        os.close(fd)
    lines = buf.split(b"\n")
    last_frag = lines.pop()  # after the final newline: "" or a torn fragment
    if last_frag and _complete(last_frag, led.max_version) is not None:
        lines.append(last_frag)  # a complete record that only lacks its newline
    offset = pos
    if pos > 0:
        offset += len(lines[0]) + 1
        lines = lines[1:]  # first may be partial
    for ln in lines[:-n]:
        offset += len(ln) + 1
    out: list[R] = []
    for ln in lines[-n:]:
        out.append(led._parse_line(ln, offset))  # ledger.py's parse, as before
        offset += len(ln) + 1
    return out, offset


def has_torn_tail(led: Reader[Any]) -> bool:
    try:
        with open(led.path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return False
    except FileNotFoundError:
        return False
    try:
        last = led._last_open()
    except CorruptStateError:  # a whole last record of the wrong shape: not torn
        return not _last_line_complete(led)
    return last is None or not _last_line_complete(led)


def _last_line_complete(led: Reader[Any]) -> bool:
    with open(led.path, "rb") as f:
        data = f.read()
    return _complete(data[data.rfind(b"\n") + 1 :], led.max_version) is not None


def complete_size(led: Reader[Any]) -> int:
    """The file's size without a torn last line (what the last complete
    append left; compare with the mark)."""
    try:
        data_size = led.path.stat().st_size
    except FileNotFoundError:
        return 0
    if data_size == 0:
        return 0
    with open(led.path, "rb") as f:
        f.seek(max(0, data_size - 65536))
        chunk = f.read()
        if chunk.endswith(b"\n"):
            return data_size
        nl = chunk.rfind(b"\n")
        if nl < 0 and data_size > len(chunk):
            f.seek(0)
            whole = f.read()
            nl_whole = whole.rfind(b"\n")
            frag, keep = whole[nl_whole + 1 :], nl_whole + 1
        else:
            frag = chunk[nl + 1 :]
            keep = data_size - len(frag)
    return data_size if _complete(frag, led.max_version) is not None else keep


def read_at(led: Reader[R], offset: int) -> R | None:
    """The complete record starting at byte ``offset`` (``None`` if there is
    none: past the end, not the start of a line, torn)."""
    try:
        f = open(led.path, "rb")
    except FileNotFoundError:
        return None
    with f:
        if offset > 0:
            f.seek(offset - 1)
            if f.read(1) != b"\n":
                return None
        raw = f.readline()
    if not raw:
        return None
    try:
        if not raw.endswith(b"\n"):
            whole = _complete(raw, led.max_version)
            return None if whole is None else _typed(led, whole, offset)
        rec: R = _parse(led.path, raw, None, offset, led.max_version, led.validate)
        return rec
    except CorruptStateError:
        return None


def _typed(led: Reader[R], whole: JsonObject, offset: int) -> R:
    rec: R = _checked(led.path, None, offset, whole, led.validate)
    return rec
