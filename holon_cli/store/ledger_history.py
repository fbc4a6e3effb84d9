"""Reading a ledger's whole history: its closed segments, oldest first,
then its open file (``store/ledger.py`` has the format).

``LedgerHistory`` extends the reads of the open file (``LedgerReader``) to
a segmented ledger (``segment_bytes`` set): ``records`` reads every closed
segment then the open file; ``tail`` and ``tail_previews`` top up the open
file's last records from the copy of the closed tail the newest closed
segment keeps (``<stem>.<N>.tail``, read once per handle: closed history
changes only by a close), else from whole segments; ``last`` of an empty
open file answers from ``<stem>.last``; ``records_after`` and
``records_skipping_damaged`` walk the segments through ``ledger_read``;
``trimmed`` says what retention dropped. Its state is what it caches of the
closed history and the last previews. The segment files themselves (names,
compression, reading one) are ``store/ledger_segments.py``'s; closing the
open file into a segment is the writer's (``Ledger.close_segment``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from holon_cli.store import ledger_read
from holon_cli.store.ledger_lines import Problem, _complete
from holon_cli.store.ledger_reader import PREVIEW_RECORD_BYTES, TAIL_CACHE_RECORDS, LedgerReader, R
from holon_cli.store.ledger_segments import (
    COPY_HEADER,
    SEGMENTS_DIR,
    Trimmed,
    closed_segments,
    iter_segment,
    last_path,
    read_trimmed,
    segment_number,
    tail_path,
)
from holon_cli.store.records import Validator


class LedgerHistory(LedgerReader[R]):
    """The reads of one ledger across its closed segments and open file."""

    def __init__(self, path: Path, max_version: int, validate: Validator) -> None:
        super().__init__(path, max_version, validate)
        # segmented ledgers: close the open file at this size (None: one file)
        self.segment_bytes: int | None = None
        # (number of the newest closed segment, its copy of the closed tail,
        # whether that copy was capped by TAIL_COPY_BYTES)
        self._closed_cache: tuple[int | None, list[R], bool] | None = None
        # (size, inode, arguments) of the last tail_previews call and its records
        self._preview_cache: tuple[tuple[Any, ...], list[R]] | None = None

    def _closed_moved(self) -> None:
        """Forget what this handle cached of the open file and the closed
        history (the open file was just closed into a segment)."""
        self._cached_size = -1
        self._cached_last = None
        self._tail_cache = None
        self._closed_cache = None

    @property
    def segments_dir(self) -> Path:
        return self.path.parent / SEGMENTS_DIR

    def closed_segments(self) -> list[Path]:
        """The closed segments, oldest first (a ``.gz`` where both exist)."""
        return closed_segments(self.segments_dir, self.path.stem)

    def trimmed(self) -> Trimmed | None:
        """What retention dropped from this ledger (``None``: nothing):
        ``{"through_seq", "before", "segments", "bytes"}`` (``through_seq``:
        the highest sequence number dropped, numbered ledgers only; ``before``:
        the time of the newest record dropped)."""
        return read_trimmed(self.segments_dir, self.path.stem)

    def _closed_records(self, seg: Path) -> list[R]:
        return [rec for _, rec in iter_segment(seg, self.max_version, self.validate)]

    def records(self) -> list[R]:
        """Every record: the closed segments' (oldest first), then the open file's."""
        out: list[R] = []
        for seg in self.closed_segments():
            out.extend(self._closed_records(seg))
        out.extend(self.read_from(0)[0])
        return out

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

    def records_after(self, key: str, since: int, limit: int | None = None) -> tuple[list[R], int]:
        """The records whose integer ``key`` exceeds ``since`` (at most
        ``limit``, oldest first) and the offset where a follower continues with
        :meth:`read_from`: ``ledger_read.records_after``."""
        return ledger_read.records_after(self, key, since, limit)

    def records_skipping_damaged(self) -> tuple[list[R], list[Problem]]:
        """Every complete record, damaged lines left out and reported
        (``ledger_read.records_skipping_damaged``)."""
        return ledger_read.records_skipping_damaged(self)
