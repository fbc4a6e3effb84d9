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

A ``Ledger`` handle is three layers of state, each in its own module:
``ledger_reader.LedgerReader`` reads the open file (scans, the last record,
the tail window, previews; its caches), ``ledger_history.LedgerHistory``
extends those reads over the closed segments (their caches), and ``Ledger``
here writes: the append under the lock, the torn-tail repair, the mark and
its numbering, deferred fsyncs, and closing the open file into a segment.
The smaller pieces, each named in its own docstring: ``ledger_lines``
(parsing one line), ``ledger_mark`` (the sidecar), ``ledger_segments``
(closed segments on disk), ``ledger_read`` (reads by key cursor, of the open
file's tail, at an offset; the damaged-line scans) and ``ledger_tail``
(bounded tail previews); their public names are importable from here too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, overload

from holon_cli.errors import CorruptStateError
from holon_cli.store.fsio import PRIVATE_FILE_MODE, deferred, dumps, fsync_dir, fsync_file
from holon_cli.store.ledger_history import LedgerHistory
from holon_cli.store.ledger_lines import Problem, _complete, line_start
from holon_cli.store.ledger_mark import (
    MARK_WIDTH,
    mark_path_of,
    open_mark,
    parse_mark,
    put_mark,
    read_mark,
    write_mark,
)
from holon_cli.store.ledger_reader import PREVIEW_RECORD_BYTES, TAIL_CACHE_RECORDS, LedgerReader, R
from holon_cli.store.ledger_segments import (
    COPY_HEADER,
    SEGMENTS_DIR,
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
from holon_cli.store.records import ANY_RECORD, RecordKind
from holon_cli.store.wake import mark, unmark

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject


# this module's public names, and those of the pieces, importable from here as before
__all__ = ["COPY_HEADER", "LEDGER_VERSION", "PREVIEW_RECORD_BYTES", "SEGMENTS_DIR", "SEGMENT_BYTES"]
__all__ += ["TAIL_CACHE_RECORDS", "TAIL_COPY_BYTES", "Ledger", "LedgerHistory", "LedgerReader"]
__all__ += ["MARK_WIDTH", "Problem", "mark_path_of", "open_mark", "parse_mark", "put_mark"]
__all__ += ["read_mark", "write_mark", "closed_segments", "compress_segment", "iter_segment"]
__all__ += ["last_path", "next_segment_number", "open_segment", "read_trimmed", "segment_number"]
__all__ += ["tail_path", "trimmed_path", "write_trimmed", "Trimmed"]

LEDGER_VERSION = 1
# the copy of the closed tail holds at most this many bytes (1 MB records:
# fewer than TAIL_CACHE_RECORDS); a capped copy starts with a header line
# holding COPY_HEADER, and a longer tail() reads the segments themselves
TAIL_COPY_BYTES = 4 * 1024 * 1024
# an open segment this big is closed by the next append (segmented ledgers)
SEGMENT_BYTES = 8 * 1024 * 1024


class Ledger(LedgerHistory[R]):
    """One JSONL ledger whose records are of type ``R``: every line read is
    checked into it by ``validate``, the ledger's record kind
    (``store/records.py``); a ledger without one holds any JSON objects.
    The reads are ``LedgerHistory``'s and ``LedgerReader``'s; this class
    holds the writer's state and the writes."""

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
        super().__init__(path, max_version, validate if validate is not None else ANY_RECORD)
        # the record field numbered from a high-water mark kept in mark_path
        self.seq_key = seq_key
        self.mark_path = mark_path_of(path)
        self.lock_path = lock_path
        # byte offset where the last record this handle appended starts
        self.last_append_offset = 0
        # the agent folder whose wake marker an append holds (store/wake.py):
        # set by AgentStore for ledgers whose records a tick acts on
        self.wake_dir: str | None = None
        # when set, appends skip their fsync until sync() (a caller batching
        # several appends into one durable step, e.g. one turn round)
        self.defer_sync = False
        self._unsynced = False
        # when set, appends are never fsync'd (the kernel writes them back): a
        # record no outcome depends on (the turn record, runtime/replay)
        self.writeback = False
        # how much of the closed tail a close copies beside the newest segment
        # (None: TAIL_COPY_BYTES; a ledger of large records nothing tails sets 0)
        self.tail_copy_bytes: int | None = None

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
                raw = cast("JsonObject", rec)
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

    def _repair_tail(self, fd: int) -> int:
        """Cut a torn last line off; return the (new) size."""
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        if os.pread(fd, 1, size - 1) == b"\n":
            return size
        keep = line_start(fd, size)  # the end of the last complete line
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

    def _above_high_water(self, rec: JsonObject, mark_fd: int) -> None:
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
        self._closed_moved()
        return dest

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
