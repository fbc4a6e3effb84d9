"""The work-item index in memory: the fold of the work plane's ledgers
(``store/workitem_index.py`` says what the index is on disk, how it is
loaded and checkpointed, and why it is two files).

``WorkItemIndex`` holds the *head* (every open item and the recent completed
ones, with their reports and waits), the changes since the checkpoint to
items the archive holds (``pending_*``), where the archive is and how much of
it the head covers, and the archive's fold once read (on first need, once
per process and generation, through ``workitem_archive``; a damaged one is
folded from the ledgers instead). It answers the lookups (``get``,
``open_records``, ``recent_completed``, every item or report or wait), folds
ledger records into itself (``apply_item``, ``apply_report``, ``apply_wait``;
``fold_tails`` the ledgers after its offsets), and says what a checkpoint
keeps in the head (``KEEP_RECENT``) and writes (``to_snapshot``). It never
writes a file itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, cast

from holon_cli.errors import CorruptStateError
from holon_cli.model import workitem as wm
from holon_cli.model import workitem_readiness as wr
from holon_cli.model.workitem import (
    DeliverySummaryRecord,
    WaitingIntentRecord,
    WorkItemLine,
    WorkItemRecord,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot
from holon_cli.store.ledger import Ledger
from holon_cli.store.workitem_archive import (
    _ARCHIVES,
    ARCHIVE_NAME,
    Archive,
    newer_report,
    read_archive,
    report_fields,
)

INDEX_VERSION = 2  # the head snapshot (v1: every item in one snapshot, still read)
WORK_ITEMS_LEDGER: Final = "work_items"
DELIVERY_LEDGER: Final = "delivery_summaries"
WAITS_LEDGER: Final = "waiting_intents"
# completed items the head keeps, newest first: this many of any kind and
# this many with a report (the prompt's completed class shows a few of them)
KEEP_RECENT = 32

# (archive path, generation) already warned about in this process
_WARNED: set[tuple[str, str | None]] = set()


class WorkItemIndex:
    # a plain class, not a dataclass: `holon workitem list` and `holon status`
    # load this module, and dataclasses (with inspect) would cost them more
    # than their own work
    def __init__(
        self,
        offset: int = 0,
        ds_offset: int = 0,
        wait_offset: int = 0,
        items: dict[str, WorkItemRecord] | None = None,
        reports: dict[str, dict[str, Any]] | None = None,
        waits: dict[str, WaitingIntentRecord] | None = None,
        saved_offset: int = 0,
        saved_ds_offset: int = 0,
        saved_wait_offset: int = 0,
        *,
        archive_path: Path | None = None,
        archive_generation: str | None = None,
        archive_bytes: int = 0,
        archived: int = 0,
        archive_lines: int = 0,
    ) -> None:
        self.offset = offset
        self.ds_offset = ds_offset
        self.wait_offset = wait_offset
        # the head: every open item and the recent completed ones
        self.head: dict[str, WorkItemRecord] = {} if items is None else items
        # work_item_id -> newest delivery summary (id, text, created_at, source)
        self.head_reports: dict[str, dict[str, Any]] = {} if reports is None else reports
        self.head_waits: dict[str, WaitingIntentRecord] = {} if waits is None else waits
        # changes since the checkpoint to items the archive holds (the next
        # checkpoint appends them there)
        self.pending_items: dict[str, WorkItemRecord] = {}
        self.pending_reports: dict[str, dict[str, Any]] = {}
        self.pending_waits: dict[str, WaitingIntentRecord] = {}
        # the archive this head continues (None: there is none, every item
        # is in the head: a fresh agent, a v1 snapshot, a rebuild)
        self.archive_path = archive_path
        self.archive_generation = archive_generation
        self.archive_bytes = archive_bytes
        self.archived = archived  # completed items in the archive
        self.archive_lines = archive_lines  # its lines after the header (a compaction's due)
        self._archive: Archive | None = None
        # the agent's store, for reading the ledgers when the archive is damaged
        self.store: AgentStore | None = None
        # ledger offsets recorded in the snapshot file (what a checkpoint covers)
        self.saved_offset = saved_offset
        self.saved_ds_offset = saved_ds_offset
        self.saved_wait_offset = saved_wait_offset
        # derived views, recomputed after any change
        self._open: list[WorkItemRecord] | None = None
        self._done: list[WorkItemRecord] | None = None
        self._all: dict[str, WorkItemRecord] | None = None
        self._waits_by_item: dict[str, list[WaitingIntentRecord]] | None = None

    def _invalidate(self) -> None:
        self._open = self._done = self._all = None
        self._waits_by_item = None

    # -- the archive (read on demand) -------------------------------------
    def archive(self) -> Archive:
        """The archive's fold, read on first use (once per process and
        generation). A damaged archive is read from the ledgers instead."""
        if self._archive is not None:
            return self._archive
        if self.archive_generation is None or self.archive_path is None:
            self._archive = Archive()
            return self._archive
        key = str(self.archive_path)
        cached = _ARCHIVES.get(key)
        if (
            cached is not None
            and cached.generation == self.archive_generation
            and cached.size == self.archive_bytes
        ):
            self._archive = cached
            return cached
        try:
            try:
                got = read_archive(
                    self.archive_path, self.archive_generation, self.archive_bytes, cached
                )
            except CorruptStateError:
                if not self._adopt_compacted():
                    raise
                got = read_archive(self.archive_path, self.archive_generation, self.archive_bytes)
        except CorruptStateError as exc:
            if (key, self.archive_generation) not in _WARNED:  # once per process
                _WARNED.add((key, self.archive_generation))
                _warn(
                    "warning: %s; the work items are read from the ledgers instead; "
                    "`holon home check --repair` rebuilds the index and its archive",
                    exc.message,
                )
            got = self._archive_from_ledgers()
        else:
            _ARCHIVES[key] = got
        self._archive = got
        return got

    def _adopt_compacted(self) -> bool:
        """A compaction (``home gc``) replaced the archive since this index was
        read: it changed nothing but the archive's generation and length, so
        the head on disk, at the same offsets, names the archive to read."""
        if self.store is None or self.archive_path is None:
            return False
        try:
            snap = read_snapshot(index_path(self.store), max_version=INDEX_VERSION)
        except CorruptStateError:
            return False
        if not snap or snap.get("v") != INDEX_VERSION:
            return False
        same = (snap.get("offset"), snap.get("ds_offset"), snap.get("wait_offset")) == (
            self.saved_offset,
            self.saved_ds_offset,
            self.saved_wait_offset,
        )
        arch = snap.get("archive") or {}
        gen = arch.get("generation")
        if not same or not isinstance(gen, str) or gen == self.archive_generation:
            return False
        self.archive_generation = gen
        self.archive_bytes = int(arch.get("bytes") or 0)
        self.archive_lines = int(arch.get("lines") or 0)
        return True

    def _archive_from_ledgers(self) -> Archive:
        """What the archive holds, folded from the ledgers (a damaged archive)."""
        out = Archive(self.archive_generation, self.archive_bytes)
        if self.store is None:
            return out
        full = fold_ledgers(
            self.store.ledger(WORK_ITEMS_LEDGER),
            self.store.ledger(DELIVERY_LEDGER),
            self.store.ledger(WAITS_LEDGER),
            (self.offset, self.ds_offset, self.wait_offset),
        )
        for wid, rec in full.head.items():
            if wid not in self.head:
                out.items[wid] = rec
        for wid, rep in full.head_reports.items():
            if wid not in self.head:
                out.reports[wid] = rep
        for wait_id, w in full.head_waits.items():
            if w.get("work_item_id") not in self.head:
                out.waits[wait_id] = w
        return out

    # -- lookups ------------------------------------------------------------
    def get(self, wid: str) -> WorkItemRecord | None:
        """One item by id: the head, then what changed since the checkpoint,
        then the archive (read on first need)."""
        rec = self.head.get(wid) or self.pending_items.get(wid)
        if rec is None and self.archive_generation is not None:
            rec = (self._archive or self.archive()).items.get(wid)
        return rec

    def has_items(self) -> bool:
        return bool(self.head or self.archived or self.pending_items)

    @property
    def items(self) -> dict[str, WorkItemRecord]:
        """Every item (the archive read on first use): for the readers that
        need all of them. The hot paths use :meth:`get`, :meth:`open_records`
        and the head."""
        if self._all is None:
            if self.archive_generation is None and not self.pending_items:
                self._all = self.head
            else:
                self._all = {**self.archive().items, **self.pending_items, **self.head}
        return self._all

    @property
    def reports(self) -> dict[str, dict[str, Any]]:
        """Every item's newest delivery summary (the archive's included)."""
        if self.archive_generation is None and not self.pending_reports:
            return self.head_reports
        out = dict(self.archive().reports)
        for wid, rep in self.pending_reports.items():
            if newer_report(out.get(wid), rep):
                out[wid] = rep
        out.update(self.head_reports)
        return out

    @property
    def waits(self) -> dict[str, WaitingIntentRecord]:
        if self.archive_generation is None and not self.pending_waits:
            return self.head_waits
        return {**self.archive().waits, **self.pending_waits, **self.head_waits}

    def report_of(self, wid: str) -> dict[str, Any] | None:
        if wid in self.head:
            return self.head_reports.get(wid)
        rep = self.pending_reports.get(wid)
        if self.archive_generation is not None:
            old = (self._archive or self.archive()).reports.get(wid)
            if rep is None or (old is not None and not newer_report(old, rep)):
                rep = old
        return rep

    def open_records(self) -> list[WorkItemRecord]:
        if self._open is None:
            self._open = [r for r in self.head.values() if r.get("state") == "open"]
        return self._open

    def recent_completed(self) -> list[WorkItemRecord]:
        """The head's completed items (the recent ones), newest update first."""
        if self._done is None:
            done = [r for r in self.head.values() if r.get("state") == "completed"]
            done.sort(key=lambda r: (str(r.get("updated_at") or ""), r["id"]), reverse=True)
            self._done = done
        return self._done

    def completed_count(self) -> int:
        return len(self.recent_completed()) + self.archived

    def recent_completed_with_report(self, n: int) -> list[WorkItemRecord]:
        out = []
        for r in self.recent_completed():
            if self.has_report(r["id"]):
                out.append(r)
                if len(out) >= n:
                    break
        return out

    # -- folding ------------------------------------------------------------
    def _in_head(self, wid: Any) -> bool:
        return self.archive_generation is None or wid in self.head

    def apply_item(self, rec: Mapping[str, Any]) -> None:
        wid = rec.get("id")
        if not isinstance(wid, str):
            return
        up = wm.upgrade_record(dict(rec))
        if self._in_head(wid) or rec.get("change") == "created" or up.get("state") == "open":
            self.head[wid] = up
            self.pending_items.pop(wid, None)
        else:
            self.pending_items[wid] = up
        self._invalidate()

    def apply_report(self, rec: Mapping[str, Any]) -> None:
        wid = rec.get("work_item_id")
        text = rec.get("text")
        if isinstance(wid, str) and isinstance(text, str) and text.strip():
            target = self.head_reports if self._in_head(wid) else self.pending_reports
            if newer_report(target.get(wid), rec):
                target[wid] = report_fields(rec)
                self._invalidate()

    def apply_wait(self, rec: Mapping[str, Any]) -> None:
        wait_id, wid = rec.get("id"), rec.get("work_item_id")
        if isinstance(wait_id, str) and isinstance(wid, str):
            target = self.head_waits if self._in_head(wid) else self.pending_waits
            target[wait_id] = cast(WaitingIntentRecord, dict(rec))

    # -- derived --------------------------------------------------------------
    def wait_summaries(self, *, every_item: bool = False) -> dict[str, wr.WaitSummary]:
        """Wait summaries by item: of the head's items (what scheduling looks
        at), or with ``every_item`` of all of them."""
        items = self.items if every_item else self.head
        waits = self.waits if every_item else self.head_waits
        by_item: dict[str, list[WaitingIntentRecord]] = {}
        for w in waits.values():
            by_item.setdefault(w["work_item_id"], []).append(w)
        return {
            wid: wr.summarize_waits(items[wid], ws) for wid, ws in by_item.items() if wid in items
        }

    def waits_for(self, rec: WorkItemRecord) -> wr.WaitSummary:
        wid = rec.get("id")
        if wid in self.head:
            found = [w for w in self.head_waits.values() if w.get("work_item_id") == wid]
        else:  # an archived item: its waits from one index of them all
            if self._waits_by_item is None:
                by: dict[str, list[WaitingIntentRecord]] = {}
                for w in self.waits.values():
                    by.setdefault(w["work_item_id"], []).append(w)
                self._waits_by_item = by
            found = self._waits_by_item.get(str(wid), [])
        return wr.summarize_waits(rec, found)

    def has_report(self, wid: str) -> bool:
        rec = self.get(wid)
        return bool(rec and (rec.get("result_summary") or self.report_of(wid)))

    # -- checkpoints -----------------------------------------------------------
    def _kept(self) -> set[str]:
        """The completed items the head keeps: the newest of any kind and the
        newest with a report."""
        keep: set[str] = set()
        with_report = 0
        for i, r in enumerate(self.recent_completed()):
            if i < KEEP_RECENT:
                keep.add(r["id"])
            if with_report < KEEP_RECENT and (
                r.get("result_summary") or r["id"] in self.head_reports
            ):
                keep.add(r["id"])
                with_report += 1
            if i >= KEEP_RECENT and with_report >= KEEP_RECENT:
                break
        return keep

    def _spill_ids(self) -> list[str]:
        keep = self._kept()
        return [r["id"] for r in self.recent_completed() if r["id"] not in keep]

    def to_snapshot(self) -> dict[str, Any]:
        return {
            "v": INDEX_VERSION,
            "offset": self.offset,
            "ds_offset": self.ds_offset,
            "wait_offset": self.wait_offset,
            "items": self.head,
            "reports": self.head_reports,
            "waits": self.head_waits,
            "archive": {
                "generation": self.archive_generation,
                "bytes": self.archive_bytes,
                "items": self.archived,
                "lines": self.archive_lines,
            },
        }

    def copy(self) -> WorkItemIndex:
        """A copy safe to mutate: records are never changed in place (every
        change appends a new record), so copying the maps is enough; the
        archive's fold is shared (it is never changed once read)."""
        out = WorkItemIndex(
            offset=self.offset,
            ds_offset=self.ds_offset,
            wait_offset=self.wait_offset,
            items=dict(self.head),
            reports=dict(self.head_reports),
            waits=dict(self.head_waits),
            saved_offset=self.saved_offset,
            saved_ds_offset=self.saved_ds_offset,
            saved_wait_offset=self.saved_wait_offset,
            archive_path=self.archive_path,
            archive_generation=self.archive_generation,
            archive_bytes=self.archive_bytes,
            archived=self.archived,
            archive_lines=self.archive_lines,
        )
        out.pending_items = dict(self.pending_items)
        out.pending_reports = dict(self.pending_reports)
        out.pending_waits = dict(self.pending_waits)
        out._archive = self._archive
        out.store = self.store
        out._open = self.open_records()
        out._done = self.recent_completed()
        return out

    @classmethod
    def from_snapshot(cls, snap: Mapping[str, Any], archive_path: Path | None) -> WorkItemIndex:
        arch = snap.get("archive") if snap.get("v") == INDEX_VERSION else None
        arch = arch if isinstance(arch, Mapping) else {}
        gen = arch.get("generation")
        return cls(
            offset=int(snap.get("offset", 0)),
            ds_offset=int(snap.get("ds_offset", 0)),
            wait_offset=int(snap.get("wait_offset", 0)),
            items=dict(snap.get("items") or {}),
            reports=dict(snap.get("reports") or {}),
            waits=dict(snap.get("waits") or {}),
            saved_offset=int(snap.get("offset", 0)),
            saved_ds_offset=int(snap.get("ds_offset", 0)),
            saved_wait_offset=int(snap.get("wait_offset", 0)),
            archive_path=archive_path,
            archive_generation=gen if isinstance(gen, str) else None,
            archive_bytes=int(arch.get("bytes") or 0) if isinstance(gen, str) else 0,
            archived=int(arch.get("items") or 0) if isinstance(gen, str) else 0,
            archive_lines=int(arch.get("lines") or 0) if isinstance(gen, str) else 0,
        )


def index_path(store: AgentStore) -> Path:
    return store.layout.state_dir / "work_items.json"


def archive_path(store: AgentStore) -> Path:
    return store.layout.state_dir / ARCHIVE_NAME


def _warn(message: str, *args: Any) -> None:
    import logging

    logging.getLogger("holon.workitems").warning(message, *args)


def fold_tails(
    idx: WorkItemIndex,
    items_led: Ledger[WorkItemLine],
    ds_led: Ledger[DeliverySummaryRecord],
    wait_led: Ledger[WaitingIntentRecord],
) -> None:
    for _, end, rec in items_led.scan(idx.offset):
        idx.apply_item(rec)
        idx.offset = end
    for _, end, report in ds_led.scan(idx.ds_offset):
        idx.apply_report(report)
        idx.ds_offset = end
    for _, end, wait in wait_led.scan(idx.wait_offset):
        idx.apply_wait(wait)
        idx.wait_offset = end


def fold_ledgers(
    items_led: Ledger[WorkItemLine],
    ds_led: Ledger[DeliverySummaryRecord],
    wait_led: Ledger[WaitingIntentRecord],
    upto: tuple[int, int, int],
) -> WorkItemIndex:
    """Every item from the ledgers' first bytes to ``upto`` (no archive)."""
    idx = WorkItemIndex()
    for led, end_at, apply in (
        (items_led, upto[0], idx.apply_item),
        (ds_led, upto[1], idx.apply_report),
        (wait_led, upto[2], idx.apply_wait),
    ):
        for _, end, rec in led.scan(0):
            if end > end_at:
                break
            apply(rec)
    return idx
