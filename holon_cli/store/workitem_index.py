"""The work-item index: the fold of the work plane's ledgers, its snapshot
file and its in-process cache, plus the plan-file paths and descriptors.

Durable truth
  ``ledger/work_items.jsonl``: one full ``WorkItemRecord`` snapshot per change
  (``v``, ``rev``, ``change``, ``recorded_at`` plus the record); the newest
  line for an id is that item's state.
  ``ledger/delivery_summaries.jsonl``: ``DeliverySummaryRecord`` per promoted
  completion report.
  ``ledger/waiting_intents.jsonl`` (written by the waiting plane, only read
  here): one full intent snapshot per change, ``{"id", "work_item_id",
  "kind": "task"|"external"|..., "status": "active"|"cancelled",
  "trigger_count", "last_triggered_at", "source", "resource", "condition"}``.
  ``work-items/<id>/plan.md``: the plan body, edited by the agent and the
  operator directly; records keep only a descriptor (:func:`describe_file`).

``state/work_items.json`` is an index: the fold of all three ledgers plus the
byte offset it reflects in each. Loading replays only the ledger tails after
those offsets, so reads never rescan history and a crash between a ledger
append and the index write loses nothing.

Writers (:func:`append_item`, :func:`append_report`, :func:`save`) must hold
the agent lock: the index offsets are exact only because every writer of
these ledgers holds it. :func:`load` is read-only and safe without it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, cast

from holon_cli import clock
from holon_cli.errors import CorruptStateError
from holon_cli.model import workitem as wm
from holon_cli.model import workitem_readiness as wr
from holon_cli.model.workitem import (
    DeliverySummaryRecord,
    PlanDescriptor,
    WaitingIntentRecord,
    WorkItemLine,
    WorkItemRecord,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot, write_snapshot
from holon_cli.store.ledger import Ledger

INDEX_VERSION = 1
WORK_ITEMS_LEDGER: Final = "work_items"
DELIVERY_LEDGER: Final = "delivery_summaries"
WAITS_LEDGER: Final = "waiting_intents"
SNAPSHOT_EVERY_BYTES = 128 * 1024


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
    ) -> None:
        self.offset = offset
        self.ds_offset = ds_offset
        self.wait_offset = wait_offset
        self.items: dict[str, WorkItemRecord] = {} if items is None else items
        # work_item_id -> newest delivery summary (id, text, created_at, source)
        self.reports: dict[str, dict[str, Any]] = {} if reports is None else reports
        self.waits: dict[str, WaitingIntentRecord] = {} if waits is None else waits
        # ledger offsets recorded in the snapshot file (what a checkpoint covers)
        self.saved_offset = saved_offset
        self.saved_ds_offset = saved_ds_offset
        self.saved_wait_offset = saved_wait_offset
        # derived views, recomputed after any change: the hot paths of a turn
        # (projection, activation, closure) touch open items and a few recent
        # completions only, so their cost does not grow with completed history
        self._open: list[WorkItemRecord] | None = None
        self._done: list[WorkItemRecord] | None = None

    def _invalidate(self) -> None:
        self._open = self._done = None

    def open_records(self) -> list[WorkItemRecord]:
        if self._open is None:
            self._open = [r for r in self.items.values() if r.get("state") == "open"]
        return self._open

    def completed_records(self) -> list[WorkItemRecord]:
        """Completed items, newest update first."""
        if self._done is None:
            done = [r for r in self.items.values() if r.get("state") == "completed"]
            done.sort(key=lambda r: (str(r.get("updated_at") or ""), r["id"]), reverse=True)
            self._done = done
        return self._done

    def recent_completed_with_report(self, n: int) -> list[WorkItemRecord]:
        out = []
        for r in self.completed_records():
            if self.has_report(r["id"]):
                out.append(r)
                if len(out) >= n:
                    break
        return out

    def apply_item(self, rec: Mapping[str, Any]) -> None:
        wid = rec.get("id")
        if isinstance(wid, str):
            self.items[wid] = wm.upgrade_record(dict(rec))
            self._invalidate()

    def apply_report(self, rec: Mapping[str, Any]) -> None:
        wid = rec.get("work_item_id")
        text = rec.get("text")
        if isinstance(wid, str) and isinstance(text, str) and text.strip():
            prev = self.reports.get(wid)
            if prev is None or str(rec.get("created_at", "")) >= str(prev.get("created_at", "")):
                self.reports[wid] = {
                    k: rec.get(k) for k in ("id", "text", "created_at", "source", "turn_id")
                }
                self._invalidate()

    def apply_wait(self, rec: Mapping[str, Any]) -> None:
        wid = rec.get("id")
        if isinstance(wid, str) and isinstance(rec.get("work_item_id"), str):
            self.waits[wid] = cast(WaitingIntentRecord, dict(rec))

    def wait_summaries(self) -> dict[str, wr.WaitSummary]:
        by_item: dict[str, list[WaitingIntentRecord]] = {}
        for w in self.waits.values():
            by_item.setdefault(w["work_item_id"], []).append(w)
        return {
            wid: wr.summarize_waits(self.items[wid], ws)
            for wid, ws in by_item.items()
            if wid in self.items
        }

    def waits_for(self, rec: WorkItemRecord) -> wr.WaitSummary:
        return wr.summarize_waits(
            rec, (w for w in self.waits.values() if w.get("work_item_id") == rec.get("id"))
        )

    def has_report(self, wid: str) -> bool:
        rec = self.items.get(wid)
        return bool(rec and (rec.get("result_summary") or wid in self.reports))

    def to_snapshot(self) -> dict[str, Any]:
        return {
            "v": INDEX_VERSION,
            "offset": self.offset,
            "ds_offset": self.ds_offset,
            "wait_offset": self.wait_offset,
            "items": self.items,
            "reports": self.reports,
            "waits": self.waits,
        }

    def copy(self) -> WorkItemIndex:
        """A copy safe to mutate: records are never changed in place (every
        change appends a new record), so copying the maps is enough."""
        out = WorkItemIndex(
            offset=self.offset,
            ds_offset=self.ds_offset,
            wait_offset=self.wait_offset,
            items=dict(self.items),
            reports=dict(self.reports),
            waits=dict(self.waits),
            saved_offset=self.saved_offset,
            saved_ds_offset=self.saved_ds_offset,
            saved_wait_offset=self.saved_wait_offset,
        )
        out._open = self.open_records()
        out._done = self.completed_records()
        return out

    @classmethod
    def from_snapshot(cls, snap: Mapping[str, Any]) -> WorkItemIndex:
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
        )


def index_path(store: AgentStore) -> Path:
    return store.layout.state_dir / "work_items.json"


def plan_path(store: AgentStore, work_item_id: str) -> Path:
    return (store.layout.work_items_dir / work_item_id / "plan.md").absolute()


def describe_file(path: Path) -> PlanDescriptor:
    """The plan descriptor of the file as it is now (``exists: false`` when gone)."""
    try:
        data = path.read_bytes()
        mtime = path.stat().st_mtime
    except (FileNotFoundError, IsADirectoryError):
        return wm.describe_plan(str(path), None, None)
    return wm.describe_plan(str(path), data, clock.iso(mtime))


def unchanged_on_disk(path: Path, desc: PlanDescriptor | None) -> bool:
    """Cheap pre-check: same size and modification time as the descriptor says."""
    if not desc or not desc.get("exists", True) or desc.get("bytes") is None:
        return False
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_size == desc.get("bytes") and clock.iso(st.st_mtime) == desc.get("updated_at")


# path of the index -> (file signature, parsed index): a turn reads the work
# queue several times per provider round; re-parsing an unchanged index each
# time made the cost grow with the number of work items
_LOADED: dict[str, tuple[tuple[Any, ...], WorkItemIndex]] = {}


def _stat_sig(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def load(store: AgentStore) -> WorkItemIndex:
    """Index snapshot plus ledger tails. Read-only; safe without the agent lock.

    Ledgers only grow and the snapshot is replaced (new inode) on every save,
    so an unchanged (inode, size, mtime) signature of all four files means the
    previously parsed index is still exact; it is returned as a copy."""
    items_led, ds_led, wait_led = (
        store.ledger(WORK_ITEMS_LEDGER),
        store.ledger(DELIVERY_LEDGER),
        store.ledger(WAITS_LEDGER),
    )
    key = str(index_path(store))
    sig = (
        _stat_sig(index_path(store)),
        _stat_sig(items_led.path),
        _stat_sig(ds_led.path),
        _stat_sig(wait_led.path),
    )
    hit = _LOADED.get(key)
    if hit is not None and hit[0] == sig:
        return hit[1].copy()
    idx = _load_uncached(store, items_led, ds_led, wait_led)
    _LOADED[key] = (sig, idx.copy())
    return idx


def _load_uncached(
    store: AgentStore,
    items_led: Ledger[WorkItemLine],
    ds_led: Ledger[DeliverySummaryRecord],
    wait_led: Ledger[WaitingIntentRecord],
) -> WorkItemIndex:
    try:
        snap = read_snapshot(index_path(store), max_version=INDEX_VERSION)
    except CorruptStateError:
        snap = None  # the index is a cache: rebuild it from the ledgers
    idx = WorkItemIndex.from_snapshot(snap) if snap else WorkItemIndex()
    if (
        idx.offset > items_led.size()
        or idx.ds_offset > ds_led.size()
        or idx.wait_offset > wait_led.size()
    ):
        # the index describes more than the ledgers hold: they were cut or
        # replaced. Fold what is there, and say so (never silently)
        import logging

        logging.getLogger("holon.workitems").warning(
            "warning: %s describes more than the work item ledgers hold (they were emptied "
            "or cut); `holon home check --repair` appends back what the index and the "
            "events still hold",
            index_path(store),
        )
        idx = WorkItemIndex()
    if snap is None or idx.offset == 0:
        # missing, unreadable or foreign snapshot: the next save rewrites it
        idx.saved_offset = idx.saved_ds_offset = idx.saved_wait_offset = -(1 << 60)
    for _, end, rec in items_led.scan(idx.offset):
        idx.apply_item(rec)
        idx.offset = end
    for _, end, report in ds_led.scan(idx.ds_offset):
        idx.apply_report(report)
        idx.ds_offset = end
    for _, end, wait in wait_led.scan(idx.wait_offset):
        idx.apply_wait(wait)
        idx.wait_offset = end
    for wid, item in idx.items.items():
        if not isinstance(item.get("plan_artifact"), dict):
            # a record written without a descriptor: point at the conventional
            # path; the next refresh fills in (or reports the file missing)
            desc = wm.describe_plan(str(plan_path(store, wid)), None, None)
            desc["exists"] = True
            item["plan_artifact"] = desc
    return idx


def save(store: AgentStore, idx: WorkItemIndex, *, force: bool = False) -> None:
    """Checkpoint the index. The ledgers are the truth and ``load`` replays
    their tails after the snapshot's offsets, so the (whole-index) snapshot is
    rewritten only once enough has been appended since the last one: a
    mutation costs one ledger append, not a rewrite of every work item."""
    behind = (
        (idx.offset - idx.saved_offset)
        + (idx.ds_offset - idx.saved_ds_offset)
        + (idx.wait_offset - idx.saved_wait_offset)
    )
    if not force and 0 <= behind < SNAPSHOT_EVERY_BYTES:
        return
    write_snapshot(index_path(store), idx.to_snapshot())
    idx.saved_offset, idx.saved_ds_offset, idx.saved_wait_offset = (
        idx.offset,
        idx.ds_offset,
        idx.wait_offset,
    )


def append_item(
    store: AgentStore, idx: WorkItemIndex, rec: WorkItemRecord, change: str
) -> WorkItemRecord:
    """Append the next revision of ``rec`` and fold it into ``idx``."""
    prev = idx.items.get(rec["id"])
    out: WorkItemRecord = {**rec}
    out["v"] = wm.WORK_ITEM_RECORD_VERSION
    out["rev"] = int(prev.get("rev", 0)) + 1 if prev else 1
    out["change"] = change
    out["recorded_at"] = clock.now_iso()
    led = store.ledger(WORK_ITEMS_LEDGER)
    led.append(out)
    idx.apply_item(out)
    idx.offset = led.size()  # exact: every work_items writer holds the agent lock
    return idx.items[rec["id"]]


def append_report(store: AgentStore, idx: WorkItemIndex, rec: DeliverySummaryRecord) -> None:
    """Append a delivery summary and fold it into ``idx``."""
    led = store.ledger(DELIVERY_LEDGER)
    led.append({**rec})
    idx.apply_report(rec)
    idx.ds_offset = led.size()
