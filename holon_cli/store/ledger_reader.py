"""Reading a ledger's open file (``store/ledger.py`` has the format).

``LedgerReader`` is the read side of one ledger handle over its open file
(the ``.jsonl`` appends go to): scanning its complete lines from an offset,
its last record, its last ``n`` records (read backwards once, then only what
was appended since), bounded previews of the last records (``tail_previews``
of large ones, through ``ledger_tail``), and the checks of what a killed
writer left (``ledger_read``). Its state is what it caches of the file: the
last record as of a size, the window of the last records, each keyed by the
file's size and inode, so a handle that reads every round pays for new
records only. Closed segments are ``LedgerHistory``'s
(``store/ledger_history.py``), appending is ``Ledger``'s.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from holon_cli.store import ledger_read
from holon_cli.store.ledger_lines import (
    Problem,
    _checked,
    _complete,
    _corrupt,
    _parse,
    line_start,
)
from holon_cli.store.ledger_segments import COPY_HEADER
from holon_cli.store.records import Validator

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject

# the record type of a ledger: what its record kind checks each line into
R = TypeVar("R", bound=Mapping[str, Any])

# a record longer than this is read as a preview by Ledger.tail_previews
PREVIEW_RECORD_BYTES = 64 * 1024
# the window of last records a handle keeps for tail()
TAIL_CACHE_RECORDS = 256


class LedgerReader(Generic[R]):
    """The reads of one ledger's open file, checked into ``R`` by
    ``validate`` (the ledger's record kind, ``store/records.py``)."""

    def __init__(self, path: Path, max_version: int, validate: Validator) -> None:
        self.path = path
        self.max_version = max_version
        # the record kind's schema check (store/records.py): a record that is
        # valid JSON with wrong fields is corruption, named by file and line
        self.validate = validate
        # the last record as of the file's size (the writer sets it too)
        self._cached_size = -1
        self._cached_last: R | None = None
        # (end offset, records, capacity, inode) of the last tail window
        self._tail_cache: tuple[int, list[R], int, int | None] | None = None

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def file_id(self) -> int | None:
        """The open file's inode (``None``: no open file): a closed segment or
        a replaced file changes it."""
        return self._file_id()

    def _file_id(self) -> int | None:
        try:
            return os.stat(self.path).st_ino
        except FileNotFoundError:
            return None

    def scan(self, offset: int = 0) -> Iterator[tuple[int, int, R]]:
        """Yield ``(line_no_or_0, end_offset, record)`` for complete lines from ``offset``.

        Line numbers are exact only when scanning from offset 0 (else 0).
        """
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        with f:
            f.seek(offset)
            pos = offset
            line_no = 0
            for raw in f:
                line_no += 1
                if raw == b"\n" and line_no == 1 and offset > 0:
                    # the newline the next append added after a record that
                    # lacked it (we already yielded that record up to here)
                    pos += 1
                    continue
                if not raw.endswith(b"\n"):
                    whole = _complete(raw, self.max_version)
                    if whole is not None:  # complete, only the newline is missing
                        yield (
                            (line_no if offset == 0 else 0),
                            pos + len(raw),
                            self._whole(whole, pos),
                        )
                    return  # else: torn tail or a write in progress, not a record yet
                start = pos
                pos += len(raw)
                if raw.strip() == b"":
                    raise _corrupt(self.path, line_no if offset == 0 else None, start, "empty line")
                rec = _parse(
                    self.path,
                    raw,
                    line_no if offset == 0 else None,
                    start,
                    self.max_version,
                    self.validate,
                )
                yield (line_no if offset == 0 else 0), pos, rec

    def read_from(self, offset: int = 0) -> tuple[list[R], int]:
        """All complete records after ``offset`` and the offset after the last one."""
        out: list[R] = []
        end = offset
        for _, end, rec in self.scan(offset):
            out.append(rec)
        return out, end

    def _parse_line(self, raw: bytes, offset: int) -> R:
        if not raw.strip():
            raise _corrupt(self.path, None, offset, "empty line")
        rec: R = _parse(self.path, raw, None, offset, self.max_version, self.validate)
        return rec

    def _whole(self, rec: JsonObject, offset: int = 0, path: Path | None = None) -> R:
        """A whole record read without its newline, checked like a line."""
        led_path = self.path if path is None else path
        check = self.validate if led_path == self.path else self._copy_validate
        out: R = _checked(led_path, None, offset, rec, check)
        return out

    def _copy_validate(self, rec: Any) -> str | None:
        """The record check for the copy of the closed tail: its capped header
        is no record of this ledger's kind."""
        if COPY_HEADER in rec or self.validate is None:
            return None
        return self.validate(rec)

    def _last_from_fd(self, fd: int, size: int) -> R | None:
        if size == self._cached_size:
            return self._cached_last
        if size == 0:
            return None
        end = size
        # file ends with "\n" here (tail repaired); find the previous newline
        pos = end - 1
        buf = b""
        while pos > 0:
            start = max(0, pos - 65536)
            chunk = os.pread(fd, pos - start, start)
            buf = chunk + buf
            idx = buf.rfind(b"\n", 0, len(buf))
            if idx >= 0:
                line = buf[idx + 1 :]
                rec: R = _parse(
                    self.path, line, None, start + idx + 1, self.max_version, self.validate
                )
                return rec
            pos = start
        first: R = _parse(self.path, buf, 1, 0, self.max_version, self.validate)
        return first

    def _last_open(self) -> R | None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                # a torn fragment is ignored; a complete record without its
                # newline is the last record
                last = line_start(fd, size)
                whole = _complete(os.pread(fd, size - last, last), self.max_version)
                if whole is not None:
                    return self._whole(whole, last)
                size = last  # the fragment is not a record
            self._cached_size = -1
            return self._last_from_fd(fd, size)
        finally:
            os.close(fd)

    def _tail_open(self, n: int) -> list[R]:
        """:meth:`tail` of the open file alone."""
        size = self.size()
        cache = self._tail_cache
        if cache is not None and n <= cache[2] and cache[0] <= size and cache[3] == self._file_id():
            end, recs, cap, fid = cache
            if size > end:
                new, end = self.read_from(end)
                recs.extend(new)
                if len(recs) > cap:
                    del recs[: len(recs) - cap]
                self._tail_cache = (end, recs, cap, fid)
            return recs[-n:]
        cap = max(n, TAIL_CACHE_RECORDS)
        recs, end = self._tail_read(cap)
        self._tail_cache = (end, recs, cap, self._file_id())
        return recs[-n:]

    def _tail_read(self, n: int) -> tuple[list[R], int]:
        return ledger_read.tail_read(self, n)

    def tail_with_offset(self, n: int) -> tuple[list[R], int]:
        """The last ``n`` complete records and the byte offset just after them
        (where a follower continues with :meth:`read_from`)."""
        return self._tail_read(max(1, n))

    def _previews(
        self, path: Path, n: int, max_record_bytes: int, text_chars: int, budget: int
    ) -> tuple[list[R], int]:
        from holon_cli.store.ledger_tail import preview_record, scan_tail

        out: list[R] = []
        lines, used = scan_tail(path, n, max_record_bytes, budget)
        for ln in lines:
            if not ln.terminated:  # the last bytes: a whole record, or torn
                whole = _complete(ln.raw, self.max_version) if ln.size == len(ln.raw) else None
                rec = None if whole is None else self._whole(whole, ln.offset, path)
            elif ln.size > len(ln.raw):
                head = preview_record(ln, text_chars)
                v = head.get("v") if head is not None else None
                if head is None or (isinstance(v, int) and v > self.max_version):
                    why = "not a JSON object" if head is None else f"record format v{v} is newer"
                    raise _corrupt(path, None, ln.offset, why)
                # the fields the head holds (the short ones come first), unchecked:
                # a preview is a part of a record, the rest of it was never read
                rec = cast(R, head)
            elif not ln.raw.strip():
                raise _corrupt(path, None, ln.offset, "empty line")
            else:
                check = self.validate if path == self.path else self._copy_validate
                rec = _parse(path, ln.raw, None, ln.offset, self.max_version, check)
            if rec is not None and COPY_HEADER not in rec:
                out.append(rec)
        return out, used

    def check(self) -> list[Problem]:
        """Validate every line; a torn tail is a note, not a problem
        (``ledger_read.check``)."""
        return ledger_read.check(self)

    def has_torn_tail(self) -> bool:
        return ledger_read.has_torn_tail(self)

    def complete_size(self) -> int:
        """The size without a torn last line (``ledger_read.complete_size``)."""
        return ledger_read.complete_size(self)

    def read_at(self, offset: int) -> R | None:
        """The complete record starting at byte ``offset``, else ``None``
        (``ledger_read.read_at``)."""
        return ledger_read.read_at(self, offset)
