"""Append-only JSONL ledgers.

Each record is one line of UTF-8 JSON carrying ``v`` (format version). An
append serializes the whole record, takes the ledger's lock, cuts off a torn
tail left by a killed writer, issues exactly one ``os.write``, checks the
count and fsyncs before returning: when ``append`` returns, the record is
durable. Readers never lock: a last line without its newline is a write in
progress (or a torn tail) and is ignored, unless it parses as a complete
record (some editors drop the final newline): then it is a record, and the
next append adds the missing newline instead of cutting it off. Any other
unreadable line is corruption, reported with the file and line.

Every ledger keeps a mark in a sidecar (``events.mark`` next to
``events.jsonl``), rewritten in place under the ledger's lock by every append:
the size the file had after it and, for a ledger numbered by a sequence key
(``events``: ``event_seq``), the highest number written. A file shorter than
its mark was cut, emptied or replaced by an older copy (``holon home check``
says so; a torn tail left by a killed writer makes a file *longer*), and a
number once written is never handed out again (the numbers then jump;
clients resuming from their last id skip nothing new). The sidecar is not
fsync'd: a killed process loses nothing the kernel holds, and the ledger
itself stays the truth for everything it still has.

Segments (``events`` and ``transcript``: ``Ledger.segment_bytes`` set): an
append that finds the open file at or over ``segment_bytes`` first closes it
(under the same lock: the mark is reset to size 0, keeping its high-water
number, *then* the file is renamed to ``segments/<stem>.<NNNNNNNN>.jsonl``,
numbered upwards); ``close_segment`` does the same on demand (``holon home
gc``). A closed segment is then compressed to ``.jsonl.gz`` (temp file,
fsync, rename, the plain file removed last, its mtime kept: the time of its
last record), so a kill anywhere leaves a readable plain segment or a
complete ``.gz`` (both: the ``.gz`` wins and gc removes the plain one).
Readers that need history (``records``, ``records_after``, ``tail`` of more
records than the open file holds, ``records_skipping_damaged``) read closed
segments oldest first, then the open file. Retention drops whole closed
segments only (``store/retention.py``) and records what it dropped in
``segments/<stem>.trimmed`` so readers can say where history starts.

The pieces live beside this module, each named in its own docstring:
``ledger_lines`` (parsing one line), ``ledger_mark`` (the sidecar),
``ledger_segments`` (closed segments on disk), ``ledger_read`` (reads by key
cursor, of the open file's tail, at an offset; the damaged-line scans) and
``ledger_tail`` (bounded tail previews); their public names are importable
from here too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar, cast, overload

from holon_cli.errors import CorruptStateError
from holon_cli.store import ledger_read
from holon_cli.store.fsio import PRIVATE_FILE_MODE, deferred, dumps, fsync_dir, fsync_file
from holon_cli.store.ledger_lines import Problem, _checked, _complete, _corrupt, _parse
from holon_cli.store.ledger_mark import (
    MARK_WIDTH,
    mark_path_of,
    open_mark,
    parse_mark,
    put_mark,
    read_mark,
    write_mark,
)
from holon_cli.store.ledger_segments import (
    Trimmed,
    _whole_tail,
    closed_segments,
    compress_segment,
    iter_segment,
    last_path,
    next_segment_number,
    open_segment,
    read_trimmed,
    segment_number,
    segment_path,
    tail_path,
    trimmed_path,
    write_trimmed,
)
from holon_cli.store.locks import locked
from holon_cli.store.records import ANY_RECORD, RecordKind, Validator
from holon_cli.store.wake import mark, unmark

# the record type of a ledger: what its record kind checks each line into
R = TypeVar("R", bound=Mapping[str, Any])

# this module's public names, and those of the pieces, importable from here as before
__all__ = ["COPY_HEADER", "LEDGER_VERSION", "PREVIEW_RECORD_BYTES", "SEGMENTS_DIR", "SEGMENT_BYTES"]
__all__ += ["TAIL_CACHE_RECORDS", "TAIL_COPY_BYTES", "Ledger"]
__all__ += ["MARK_WIDTH", "Problem", "mark_path_of", "open_mark", "parse_mark", "put_mark"]
__all__ += ["read_mark", "write_mark", "closed_segments", "compress_segment", "iter_segment"]
__all__ += ["last_path", "next_segment_number", "open_segment", "read_trimmed", "segment_number"]
__all__ += ["tail_path", "trimmed_path", "write_trimmed", "Trimmed"]

LEDGER_VERSION = 1
TAIL_CACHE_RECORDS = 256
# a record longer than this is read as a preview by Ledger.tail_previews
PREVIEW_RECORD_BYTES = 64 * 1024
# the copy of the closed tail holds at most this many bytes (1 MB records:
# fewer than TAIL_CACHE_RECORDS); a capped copy starts with a header line
# holding COPY_HEADER, and a longer tail() reads the segments themselves
TAIL_COPY_BYTES = 4 * 1024 * 1024
COPY_HEADER = "tail_copy_capped"
# an open segment this big is closed by the next append (segmented ledgers)
SEGMENT_BYTES = 8 * 1024 * 1024
SEGMENTS_DIR = "segments"


class Ledger(Generic[R]):
    """One JSONL ledger whose records are of type ``R``: every line read is
    checked into it by ``validate``, the ledger's record kind
    (``store/records.py``); a ledger without one holds any JSON objects."""

    @overload
    def __init__(
        self: Ledger[dict[str, Any]],
        path: Path,
        lock_path: Path,
        *,
        max_version: int = ...,
        validate: None = None,
        seq_key: str | None = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        path: Path,
        lock_path: Path,
        *,
        max_version: int = ...,
        validate: RecordKind[R],
        seq_key: str | None = ...,
    ) -> None: ...
    def __init__(
        self,
        path: Path,
        lock_path: Path,
        *,
        max_version: int = LEDGER_VERSION,
        validate: RecordKind[Any] | None = None,
        seq_key: str | None = None,
    ) -> None:
        self.path = path
        # the record field numbered from a high-water mark kept in mark_path
        self.seq_key = seq_key
        self.mark_path = mark_path_of(path)
        self.lock_path = lock_path
        self.max_version = max_version
        # the record kind's schema check (store/records.py): a record that is
        # valid JSON with wrong fields is corruption, named by file and line
        self.validate: Validator = validate if validate is not None else ANY_RECORD
        self._cached_size = -1
        self._cached_last: R | None = None
        # byte offset where the last record this handle appended starts
        self.last_append_offset = 0
        # the agent folder whose wake marker an append holds (store/wake.py):
        # set by AgentStore for ledgers whose records a tick acts on
        self.wake_dir: str | None = None
        # (end offset, records, capacity, inode) of the last tail window
        self._tail_cache: tuple[int, list[R], int, int | None] | None = None
        # when set, appends skip their fsync until sync() (a caller batching
        # several appends into one durable step, e.g. one turn round)
        self.defer_sync = False
        self._unsynced = False
        # when set, appends are never fsync'd (the kernel writes them back): a
        # record no outcome depends on (the turn record, runtime/replay)
        self.writeback = False
        # segmented ledgers: close the open file at this size (None: one file)
        self.segment_bytes: int | None = None
        # how much of the closed tail a close copies beside the newest segment
        # (None: TAIL_COPY_BYTES; a ledger of large records nothing tails sets 0)
        self.tail_copy_bytes: int | None = None
        # (number of the newest closed segment, its copy of the closed tail,
        # whether that copy was capped by TAIL_COPY_BYTES)
        self._closed_cache: tuple[int | None, list[R], bool] | None = None
        # (size, inode, arguments) of the last tail_previews call and its records
        self._preview_cache: tuple[tuple[Any, ...], list[R]] | None = None

    # -- writing ---------------------------------------------------------
    def _repair_tail(self, fd: int) -> int:
        """Cut a torn last line off; return the (new) size."""
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        if os.pread(fd, 1, size - 1) == b"\n":
            return size
        # Find the end of the last complete line.
        pos = size
        keep = 0
        while pos > 0:
            start = max(0, pos - 65536)
            chunk = os.pread(fd, pos - start, start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        fragment = os.pread(fd, size - keep, keep)
        if _complete(fragment, self.max_version) is not None:
            # a whole record that only lacks its newline: finish it, keep it
            os.write(fd, b"\n")
            os.fsync(fd)
            return size + 1
        try:  # keep the fragment for forensics; never needed for correctness
            with open(
                os.open(str(self.path) + ".torn", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
                "ab",
            ) as f:
                f.write(fragment + b"\n")
        except OSError:
            pass
        os.ftruncate(fd, keep)
        os.fsync(fd)
        return keep

    def append(self, record: R | Callable[[R | None], R]) -> R:
        """Durably append one record. ``record`` may be a function of the last record
        (called under the lock), which is how sequence numbers are assigned."""
        wake_fd = -1 if self.wake_dir is None else mark(self.wake_dir)
        try:
            return self._append(record)
        finally:
            unmark(wake_fd)

    def _append(self, record: R | Callable[[R | None], R]) -> R:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        closed: Path | None = None
        with locked(self.lock_path, what=f"ledger {self.path.name}"):
            if self.segment_bytes is not None and self.size() >= self.segment_bytes:
                closed = self._close_locked()
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
            mark_fd = -1
            try:
                size = self._repair_tail(fd)
                if callable(record):
                    last = self._last_from_fd(fd, size)
                    rec = record(last)
                else:
                    rec = record
                # the record as the writer built it (a TypedDict is a dict at run time)
                raw = cast(dict[str, Any], rec)
                mark_fd, mark_new = open_mark(self.mark_path)
                if self.seq_key is not None:
                    self._above_high_water(raw, mark_fd)
                raw.setdefault("v", LEDGER_VERSION)
                data = (dumps(raw) + "\n").encode("utf-8")
                self.last_append_offset = size
                n = os.write(fd, data)
                if n != len(data):
                    raise CorruptStateError(
                        f"short write to {self.path} ({n} of {len(data)} bytes)",
                        hint=(
                            "check free disk space; the partial line is repaired on the next append"
                        ),
                    )
                if self.writeback:
                    pass
                elif self.defer_sync:
                    self._unsynced = True
                elif not deferred(self.path):
                    os.fsync(fd)
                self._cached_size = size + n
                self._cached_last = rec
                seq = raw.get(self.seq_key) if self.seq_key is not None else None
                high = seq if isinstance(seq, int) else None
                put_mark(mark_fd, self.mark_path, mark_new, size + n, high)
            finally:
                os.close(fd)
                if mark_fd >= 0:
                    os.close(mark_fd)
            if created:
                fsync_dir(self.path.parent)
        if closed is not None:
            compress_segment(closed)
        return rec

    # -- segments --------------------------------------------------------
    @property
    def segments_dir(self) -> Path:
        return self.path.parent / SEGMENTS_DIR

    def closed_segments(self) -> list[Path]:
        """The closed segments, oldest first (a ``.gz`` where both exist)."""
        return closed_segments(self.segments_dir, self.path.stem)

    def close_segment(self) -> Path | None:
        """Close the open file as a segment now (nothing when it is empty) and
        compress it; the closed segment's path, or ``None``."""
        if not self.path.exists():
            return None
        with locked(self.lock_path, what=f"ledger {self.path.name}"):
            closed = self._close_locked()
        if closed is not None:
            closed = compress_segment(closed)
        return closed

    def _close_locked(self) -> Path | None:
        """Rename the open file into ``segments/`` (the caller holds the lock).
        The mark goes to size 0 first, keeping the high-water number: a kill
        between the two leaves a file longer than its mark (normal), never a
        shorter one (which would read as a cut)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return None
        if size == 0:
            return None
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        try:  # a torn tail is set aside, as before an append
            keep = self._repair_tail(fd)
        finally:
            os.close(fd)
        if keep == 0:
            return None
        mark = read_mark(self.mark_path)
        high = mark.get("high_water") if isinstance(mark, dict) else None
        last = self._last_open()
        if self.seq_key is not None:
            # a writer killed between its record and its mark left the mark
            # one behind: the numbers go on above both
            seq = cast(Mapping[str, Any], last).get(self.seq_key) if last else None
            if isinstance(seq, int) and not isinstance(seq, bool):
                high = seq if high is None else max(high, seq)
        seg_dir = self.segments_dir
        seg_dir.mkdir(exist_ok=True)
        num = next_segment_number(seg_dir, self.path.stem)
        from holon_cli.store.fsio import atomic_write_bytes

        # the copy of the tail is read now (from the open file and the previous
        # copy) but written only once segment ``num`` exists: a copy numbered
        # above every segment then always means that segment was deleted, never
        # a close a kill interrupted before its rename (``home check``)
        copy = self._tail_copy() if last is not None else None
        if last is not None:  # last() of an empty open file answers from here
            atomic_write_bytes(last_path(seg_dir, self.path.stem), (dumps(last) + "\n").encode())
        write_mark(self.mark_path, 0, high)
        dest = segment_path(seg_dir, self.path.stem, num)
        os.rename(self.path, dest)
        fsync_dir(seg_dir)
        fsync_dir(self.path.parent)
        if copy is not None:  # tail() of an empty open file answers from here
            atomic_write_bytes(tail_path(seg_dir, self.path.stem, num), copy)
            for old in seg_dir.glob(f"{self.path.stem}.*.tail"):  # only the newest is read
                if old.name != tail_path(seg_dir, self.path.stem, num).name:
                    old.unlink(missing_ok=True)
        self._cached_size = -1
        self._cached_last = None
        self._tail_cache = None
        self._closed_cache = None
        return dest

    def trimmed(self) -> Trimmed | None:
        """What retention dropped from this ledger (``None``: nothing):
        ``{"through_seq", "before", "segments", "bytes"}`` (``through_seq``:
        the highest sequence number dropped, numbered ledgers only; ``before``:
        the time of the newest record dropped)."""
        return read_trimmed(self.segments_dir, self.path.stem)

    def _closed_records(self, seg: Path) -> list[R]:
        return [rec for _, rec in iter_segment(seg, self.max_version, self.validate)]

    def _above_high_water(self, rec: dict[str, Any], mark_fd: int) -> None:
        """Number ``rec`` above every number this ledger ever wrote."""
        assert self.seq_key is not None
        seq = rec.get(self.seq_key)
        raw = os.pread(mark_fd, MARK_WIDTH, 0)
        mark = parse_mark(raw) if raw else None
        high = mark.get("high_water") if isinstance(mark, dict) else None
        if isinstance(high, int) and isinstance(seq, int) and seq <= high:
            rec[self.seq_key] = high + 1

    def sync(self) -> None:
        """Make appends made with ``defer_sync`` durable (one fsync)."""
        if not self._unsynced:
            return
        fsync_file(self.path)
        self._unsynced = False

    # -- reading ---------------------------------------------------------
    def _whole(self, rec: dict[str, Any], offset: int = 0, path: Path | None = None) -> R:
        """A whole record read without its newline, checked like a line."""
        led_path = self.path if path is None else path
        check = self.validate if led_path == self.path else self._copy_validate
        out: R = _checked(led_path, None, offset, rec, check)
        return out

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

    def last(self) -> R | None:
        """The last complete record (a torn tail is ignored); for an empty open
        segment, the last record of the closed ones."""
        rec = self._last_open()
        if rec is None and self.segment_bytes is not None:
            try:
                raw = last_path(self.segments_dir, self.path.stem).read_bytes()
            except FileNotFoundError:
                return None
            whole = _complete(raw.rstrip(b"\n"), self.max_version)
            return None if whole is None else self._whole(whole)
        return rec

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
                pos = size
                while pos > 0:
                    start = max(0, pos - 65536)
                    chunk = os.pread(fd, pos - start, start)
                    idx = chunk.rfind(b"\n")
                    if idx >= 0:
                        break
                    pos = start
                line_start = start + idx + 1 if pos > 0 else 0
                whole = _complete(os.pread(fd, size - line_start, line_start), self.max_version)
                if whole is not None:
                    return self._whole(whole, line_start)
                pos = size
                while pos > 0:
                    start = max(0, pos - 65536)
                    chunk = os.pread(fd, pos - start, start)
                    idx = chunk.rfind(b"\n")
                    if idx >= 0:
                        size = start + idx + 1
                        break
                    pos = start
                else:
                    size = 0
            self._cached_size = -1
            return self._last_from_fd(fd, size)
        finally:
            os.close(fd)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

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

    def records(self) -> list[R]:
        """Every record: the closed segments' (oldest first), then the open file's."""
        out: list[R] = []
        for seg in self.closed_segments():
            out.extend(self._closed_records(seg))
        out.extend(self.read_from(0)[0])
        return out

    def _copy_validate(self, rec: Any) -> str | None:
        """The record check for the copy of the closed tail: its capped header
        is no record of this ledger's kind."""
        if COPY_HEADER in rec or self.validate is None:
            return None
        return self.validate(rec)

    def _tail_copy(self) -> bytes:
        """The last ``TAIL_CACHE_RECORDS`` lines of all history (the open file,
        then the previous copy), as written: never parsed, at most
        ``TAIL_COPY_BYTES`` (then headed by a ``COPY_HEADER`` line), so a close
        costs the same with 1 MB records as with small ones."""
        n = TAIL_CACHE_RECORDS
        budget = TAIL_COPY_BYTES if self.tail_copy_bytes is None else self.tail_copy_bytes
        lines, capped, used = _whole_tail(self.path, n, budget)
        if len(lines) < n and not capped:
            segs = self.closed_segments()
            num = segment_number(segs[-1].name, self.path.stem) if segs else None
            copy = tail_path(self.segments_dir, self.path.stem, num or 0)
            if segs and copy.exists():
                older, capped, _ = _whole_tail(copy, n - len(lines), budget - used)
                if older and COPY_HEADER.encode() in older[0]:
                    older, capped = older[1:], capped or len(older) - 1 < n - len(lines)
                lines = older + lines
            elif segs:  # an older home without a copy: parse what the segments hold
                lines = [dumps(r).encode() for r in self._older(n - len(lines))] + lines
        head = [dumps({"v": LEDGER_VERSION, COPY_HEADER: True}).encode()] if capped else []
        return b"".join(ln + b"\n" for ln in head + lines)

    def _older(self, n: int) -> list[R]:
        """The last ``n`` records of the closed segments: from the copy of the
        last ``TAIL_CACHE_RECORDS`` the newest closed segment keeps (read once
        per handle: closed history changes only by a close), else newest
        segments first until ``n`` are found."""
        out: list[R] = []
        segs = self.closed_segments()
        if segs and n <= TAIL_CACHE_RECORDS:
            num = segment_number(segs[-1].name, self.path.stem)
            cached = self._closed_cache
            if cached is not None and cached[0] == num and (len(cached[1]) >= n or not cached[2]):
                return cached[1][-n:]
            try:  # the last records of all closed history, copied as the newest closed
                recs = [
                    rec
                    for _, rec in iter_segment(
                        tail_path(self.segments_dir, self.path.stem, num or 0),
                        self.max_version,
                        self._copy_validate,
                    )
                ]
                capped = bool(recs) and COPY_HEADER in recs[0]
                recs = recs[1:] if capped else recs
                self._closed_cache = (num, recs, capped)
                if len(recs) >= n or not capped:
                    return recs[-n:]
            except FileNotFoundError:
                pass
        for seg in reversed(segs):  # more than the copy holds: whole segments
            recs = self._closed_records(seg)
            out[:0] = recs[-(n - len(out)) :]
            if len(out) >= n:
                break
        return out

    def tail(self, n: int) -> list[R]:
        """The last ``n`` complete records (treat them as read-only).

        The first call reads backwards from the end; later calls on the same
        ``Ledger`` only parse what was appended since (ledgers only grow), so
        a turn that looks at recent history every round pays for new records,
        not for the window again."""
        if n <= 0:
            return []
        recs = self._tail_open(n)
        if len(recs) < n and self.segment_bytes is not None:
            older = self._older(n - len(recs))
            if older:
                return older + recs
        return recs

    def tail_previews(
        self,
        n: int,
        *,
        max_record_bytes: int = PREVIEW_RECORD_BYTES,
        text_chars: int = 4000,
        max_bytes: int | None = None,
    ) -> list[R]:
        """The last ``n`` records like :meth:`tail`, for readers that show a
        preview of each (the prompt's recent conversation, a work item's
        trace): a record longer than ``max_record_bytes`` is neither parsed
        nor held whole, it comes back as the fields its head holds, the
        string cut shortened to ``text_chars`` (and ``_preview_of_bytes``:
        the whole record's size). Memory and parsing are bounded by ``n``
        whatever the size of the records (issue 31 #27: 1 MB message bodies),
        and so are the bytes read: at most ``max_bytes`` (default ``n *
        max_record_bytes``), fewer records when the newest are that large.
        A whole record is checked into ``R``; a preview is not (it is part of
        one: a field after the cut is simply not there)."""
        if n <= 0:
            return []
        budget = n * max_record_bytes if max_bytes is None else max_bytes
        key = (self.size(), self._file_id(), n, max_record_bytes, text_chars, budget)
        cached = self._preview_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        recs, used = self._previews(self.path, n, max_record_bytes, text_chars, budget)
        if len(recs) < n and used < budget and self.segment_bytes is not None:
            older = self._older_previews(n - len(recs), max_record_bytes, text_chars, budget - used)
            recs = older + recs
        self._preview_cache = (key, recs)
        return recs

    def _older_previews(
        self, n: int, max_record_bytes: int, text_chars: int, budget: int
    ) -> list[R]:
        segs = self.closed_segments()
        if not segs:
            return []
        num = segment_number(segs[-1].name, self.path.stem)
        copy = tail_path(self.segments_dir, self.path.stem, num or 0)
        if n <= TAIL_CACHE_RECORDS and copy.exists():
            return self._previews(copy, n, max_record_bytes, text_chars, budget)[0]
        return self._older(n)  # no plain copy of the closed tail (an older home)

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

    def tail_with_offset(self, n: int) -> tuple[list[R], int]:
        """The last ``n`` complete records and the byte offset just after them
        (where a follower continues with :meth:`read_from`)."""
        return self._tail_read(max(1, n))

    def file_id(self) -> int | None:
        """The open file's inode (``None``: no open file): a closed segment or
        a replaced file changes it."""
        return self._file_id()

    def _file_id(self) -> int | None:
        try:
            return os.stat(self.path).st_ino
        except FileNotFoundError:
            return None

    def _tail_read(self, n: int) -> tuple[list[R], int]:
        return ledger_read.tail_read(self, n)

    def records_after(self, key: str, since: int, limit: int | None = None) -> tuple[list[R], int]:
        """The records whose integer ``key`` exceeds ``since`` (at most
        ``limit``, oldest first) and the offset where a follower continues with
        :meth:`read_from`: ``ledger_read.records_after``."""
        return ledger_read.records_after(self, key, since, limit)

    def _parse_line(self, raw: bytes, offset: int) -> R:
        if not raw.strip():
            raise _corrupt(self.path, None, offset, "empty line")
        rec: R = _parse(self.path, raw, None, offset, self.max_version, self.validate)
        return rec

    def records_skipping_damaged(self) -> tuple[list[R], list[Problem]]:
        """Every complete record, damaged lines left out and reported
        (``ledger_read.records_skipping_damaged``)."""
        return ledger_read.records_skipping_damaged(self)

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
