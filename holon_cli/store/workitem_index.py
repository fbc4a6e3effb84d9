"""The work-item index on disk: the fold of the work plane's ledgers, kept as
a small head snapshot plus an append-only archive; loading it (with its
in-process cache), checkpointing it, the appends that fold into it, its
rebuild and compaction; and the plan-file paths and descriptors. The fold
itself, in memory (``WorkItemIndex``: the head, what changed since the
checkpoint, the archive read on demand, the lookups), is
``store/workitem_fold.py``'s; the archive file's format and writes are
``store/workitem_archive.py``'s. Their names are importable from here.

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

The index (derived; ``home check --repair`` rebuilds it from the ledgers)
  ``state/work_items.json`` (v2, the *head*): the byte offset it reflects in
  each ledger; every open item, the newest :data:`KEEP_RECENT` completed
  items and the newest :data:`KEEP_RECENT` completed items with a report,
  with their reports and waits; and which archive it continues
  (``archive``: ``generation``, ``bytes`` covered, ``items`` archived).
  ``state/work_items.archive.jsonl`` (the *archive*): every other item, one
  line per change that reached it. A header line names its ``generation``;
  then ``{"v": 1, "kind": "item"|"report"|"wait", "rec": {...}}`` lines, the
  newest line for an id winning (reports: the newest ``created_at``).

Why two files: a long-lived agent accumulates completed items for months.
With them all in one snapshot, every process that wrote an item parsed and
every checkpoint rewrote the whole file (10 MB at 7,000 items). Now a writer
reads the head (its open items and a few recent completions) and the ledger
tails, and a checkpoint rewrites the head and *appends* the items that left
it to the archive: a write costs the same on an empty home and on one with
100,000 items. Readers that need every item (``workitem list``, ``show`` of
an old item, the memory index, ``home check``) read the archive once per
process (cached by its generation and length, extended by what was appended).

Crash safety. A checkpoint (under the agent lock) first cuts the archive
back to the length the current head covers (what an interrupted checkpoint
left), appends, fsyncs, and only then replaces the head (atomic snapshot).
The head is the commit point: a kill before it leaves the old head, whose
archive length excludes the new lines and whose ledger offsets replay the
records again. Readers read the archive only up to the length the head
names, after checking its header's generation. A rebuilt archive (a
migration from the v1 snapshot, a repair) is a new file with a new
generation, written whole and renamed into place before the head that names
it: a kill in between leaves the old head (v1 or another generation), which
ignores the new file, and the next checkpoint writes it again. Nothing a
ledger holds is lost at any point; a damaged archive is reported by
``home check`` and the readers fall back to the ledgers.

Writers (:func:`append_item`, :func:`append_report`, :func:`save`) must hold
the agent lock: the index offsets are exact only because every writer of
these ledgers holds it. :func:`load` is read-only and safe without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from holon_cli import clock
from holon_cli.errors import CorruptStateError
from holon_cli.model import workitem as wm
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
from holon_cli.store.workitem_archive import (
    _ARCHIVES,
    append_archive,
    encode,
    entries,
    new_archive,
    newer_report,
    read_archive,
    read_header,
)
from holon_cli.store.workitem_fold import (
    DELIVERY_LEDGER,
    INDEX_VERSION,
    KEEP_RECENT,
    WAITS_LEDGER,
    WORK_ITEMS_LEDGER,
    WorkItemIndex,
    _warn,
    archive_path,
    fold_tails,
    index_path,
)

# the in-memory index and its names, importable from here as before
__all__ = ["DELIVERY_LEDGER", "INDEX_VERSION", "KEEP_RECENT", "SNAPSHOT_EVERY_BYTES"]
__all__ += ["WAITS_LEDGER", "WORK_ITEMS_LEDGER", "WorkItemIndex", "append_item", "append_report"]
__all__ += ["archive_path", "compact", "compaction_due", "describe_file", "index_path", "load"]
__all__ += ["plan_path", "rebuild", "save", "unchanged_on_disk"]

# a checkpoint is written once this many ledger bytes were folded since the last
SNAPSHOT_EVERY_BYTES = 128 * 1024


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


def unchanged_on_disk(path: str | Path, desc: PlanDescriptor | None) -> bool:
    """Cheap pre-check: same size and modification time as the descriptor says
    (``path`` may be the descriptor's string: a list of every item calls this
    once per item, and a ``Path`` per call cost more than the ``stat``)."""
    if not desc or not desc.get("exists", True) or desc.get("bytes") is None:
        return False
    try:
        st = os.stat(path)
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
    """Head snapshot plus ledger tails (the archive is read when a caller
    needs it). Read-only; safe without the agent lock.

    Ledgers only grow and the head is replaced (new inode) on every save,
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
    apath = archive_path(store)
    try:
        snap = read_snapshot(index_path(store), max_version=INDEX_VERSION)
    except CorruptStateError:
        snap = None  # the index is a cache: rebuild it from the ledgers
    idx = WorkItemIndex.from_snapshot(snap, apath) if snap else WorkItemIndex(archive_path=apath)
    idx.store = store
    for _ in range(3):  # a compaction renames its archive a moment before its head
        if idx.archive_generation is None or _names(apath, idx.archive_generation):
            break
        import time

        time.sleep(0.01)
        try:
            snap = read_snapshot(index_path(store), max_version=INDEX_VERSION)
        except CorruptStateError:
            break
        if not snap:
            break
        idx = WorkItemIndex.from_snapshot(snap, apath)
        idx.store = store
    if idx.archive_generation is not None:
        head = read_header(apath)
        if not isinstance(head, dict) or head.get("generation") != idx.archive_generation:
            _warn(
                "warning: %s does not continue %s (%s); the work items are read from the "
                "ledgers; `holon home check --repair` rebuilds both",
                index_path(store),
                apath,
                head if isinstance(head, str) else "missing or another generation",
            )
            snap, idx = None, WorkItemIndex(archive_path=apath)
            idx.store = store
    if (
        idx.offset > items_led.size()
        or idx.ds_offset > ds_led.size()
        or idx.wait_offset > wait_led.size()
    ):
        # the index describes more than the ledgers hold: they were cut or
        # replaced. Fold what is there, and say so (never silently)
        _warn(
            "warning: %s describes more than the work item ledgers hold (they were emptied "
            "or cut); `holon home check --repair` appends back what the index and the "
            "events still hold",
            index_path(store),
        )
        idx = WorkItemIndex(archive_path=apath)
        idx.store = store
    if snap is None or idx.offset == 0 or snap.get("v", 1) < INDEX_VERSION:
        # missing, unreadable, foreign or v1 snapshot: the next save under the
        # lock writes the head and a new archive (the v1 -> v2 migration)
        idx.saved_offset = idx.saved_ds_offset = idx.saved_wait_offset = -(1 << 60)
    fold_tails(idx, items_led, ds_led, wait_led)
    for wid, item in idx.head.items():
        if not isinstance(item.get("plan_artifact"), dict):
            # a record written without a descriptor: point at the conventional
            # path; the next refresh fills in (or reports the file missing)
            desc = wm.describe_plan(str(plan_path(store, wid)), None, None)
            desc["exists"] = True
            item["plan_artifact"] = desc
    return idx


def _names(path: Path, generation: str) -> bool:
    head = read_header(path)
    return isinstance(head, dict) and head.get("generation") == generation


def _archive_payload(idx: WorkItemIndex, spill: Iterable[str]) -> tuple[bytes, int]:
    """The archive lines of the items leaving the head (each with its report
    and waits) and of the changes to archived items since the checkpoint."""
    spilled = set(spill)
    return encode(
        [
            *entries(
                {wid: idx.head[wid] for wid in spill},
                {wid: r for wid, r in idx.head_reports.items() if wid in spilled},
                {k: w for k, w in idx.head_waits.items() if w.get("work_item_id") in spilled},
            ),
            *entries(idx.pending_items, idx.pending_reports, idx.pending_waits),
        ]
    )


def save(store: AgentStore, idx: WorkItemIndex, *, force: bool = False) -> None:
    """Checkpoint the index. The ledgers are the truth and ``load`` replays
    their tails after the head's offsets, so the checkpoint is written only
    once enough has been appended since the last one: a mutation costs one
    ledger append. A checkpoint appends the completed items that leave the
    head (and the changes to archived ones) to the archive, then replaces the
    head; its cost does not grow with the number of items. An index without
    an archive (a v1 snapshot, a rebuild) writes a new one whole: the
    migration."""
    behind = (
        (idx.offset - idx.saved_offset)
        + (idx.ds_offset - idx.saved_ds_offset)
        + (idx.wait_offset - idx.saved_wait_offset)
    )
    if not force and 0 <= behind < SNAPSHOT_EVERY_BYTES:
        return
    apath = archive_path(store)
    idx.archive_path = apath
    spill = idx._spill_ids()
    fresh = idx.archive_generation is None
    lines = idx.archive_lines
    if fresh and not (spill or idx.pending_items):
        generation, size, archived = None, 0, 0  # nothing to archive yet: no file
    elif fresh:
        # everything not kept in the head goes into a new archive
        payload, n = _archive_payload(idx, spill)
        generation, size = new_archive(apath, payload)
        archived = len(spill) + sum(
            1 for r in idx.pending_items.values() if r.get("state") == "completed"
        )
        lines = n
    elif spill or idx.pending_items or idx.pending_reports or idx.pending_waits:
        payload, n = _archive_payload(idx, spill)
        generation = idx.archive_generation
        assert generation is not None
        size = append_archive(apath, generation, idx.archive_bytes, payload)
        archived = idx.archived + len(spill)
        lines += n
    else:
        generation, size, archived = idx.archive_generation, idx.archive_bytes, idx.archived
    # what the archive's fold in memory learns, before the head forgets it
    base = idx._archive
    if base is not None and not fresh:
        base = base.extended()
    elif base is None or fresh:
        base = None
    moved = {wid: idx.head[wid] for wid in spill}
    if base is not None:
        for wid, rec in {**idx.pending_items, **moved}.items():
            base.items[wid] = rec
        for wid, rep in idx.pending_reports.items():
            if newer_report(base.reports.get(wid), rep):
                base.reports[wid] = rep
        for wid in spill:
            if wid in idx.head_reports:
                base.reports[wid] = idx.head_reports[wid]
        for wait_id, w in {**idx.pending_waits}.items():
            base.waits[wait_id] = w
        for wait_id, w in idx.head_waits.items():
            if w.get("work_item_id") in moved:
                base.waits[wait_id] = w
        base.size = size
    for wid in spill:
        idx.head.pop(wid, None)
        idx.head_reports.pop(wid, None)
    for wait_id in [k for k, w in idx.head_waits.items() if w.get("work_item_id") in moved]:
        idx.head_waits.pop(wait_id)
    idx.pending_items.clear()
    idx.pending_reports.clear()
    idx.pending_waits.clear()
    idx.archive_generation, idx.archive_bytes, idx.archived = generation, size, archived
    idx.archive_lines = lines if generation is not None else 0
    idx._archive = base
    if base is not None:
        _ARCHIVES[str(apath)] = base
    idx._invalidate()
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
    # a new item has no previous revision: never look for one in the archive
    prev = None if change == "created" else idx.get(rec["id"])
    out: WorkItemRecord = {**rec}
    out["v"] = wm.WORK_ITEM_RECORD_VERSION
    out["rev"] = int(prev.get("rev", 0)) + 1 if prev else 1
    out["change"] = change
    out["recorded_at"] = clock.now_iso()
    led = store.ledger(WORK_ITEMS_LEDGER)
    led.append(out)
    idx.apply_item(out)
    idx.offset = led.size()  # exact: every work_items writer holds the agent lock
    got = idx.get(rec["id"])
    assert got is not None
    return got


def append_report(store: AgentStore, idx: WorkItemIndex, rec: DeliverySummaryRecord) -> None:
    """Append a delivery summary and fold it into ``idx``."""
    led = store.ledger(DELIVERY_LEDGER)
    led.append({**rec})
    idx.apply_report(rec)
    idx.ds_offset = led.size()


def rebuild(store: AgentStore) -> WorkItemIndex:
    """The index folded from the whole ledgers and checkpointed as a new head
    and archive (``home check --repair``; the caller holds the agent lock)."""
    _LOADED.pop(str(index_path(store)), None)
    _ARCHIVES.pop(str(archive_path(store)), None)
    idx = WorkItemIndex(archive_path=archive_path(store))
    idx.store = store
    idx.saved_offset = idx.saved_ds_offset = idx.saved_wait_offset = -(1 << 60)
    fold_tails(
        idx,
        store.ledger(WORK_ITEMS_LEDGER),
        store.ledger(DELIVERY_LEDGER),
        store.ledger(WAITS_LEDGER),
    )
    save(store, idx, force=True)
    return idx


def compaction_due(lines: int, items: int) -> bool:
    """The archive holds about twice as many lines as it needs (each late
    change to an archived item added one): time to write it again."""
    return lines > 2 * items + 64


def compact(store: AgentStore, *, force: bool = False) -> bool:
    """Write the archive again with one line per item (and per report and
    wait), a new generation, when :func:`compaction_due` (``home gc`` and
    serve's daily pass: never a write's cost). Under the agent lock, skipped
    when it is busy or the archive is damaged (``home check`` reports that);
    returns whether it compacted. The head is written again with only its
    ``archive`` changed; a reader holding the old head adopts the new one."""
    from holon_cli.errors import BusyError
    from holon_cli.store.locks import locked

    path, apath = index_path(store), archive_path(store)
    try:
        with locked(store.layout.agent_lock, timeout=0, what=f"agent {store.agent_id!r}"):
            try:
                snap = read_snapshot(path, max_version=INDEX_VERSION)
            except CorruptStateError:
                return False
            meta = (snap or {}).get("archive")
            if not snap or snap.get("v") != INDEX_VERSION or not isinstance(meta, dict):
                return False
            gen, items = meta.get("generation"), int(meta.get("items") or 0)
            if not isinstance(gen, str):
                return False
            if not force and not compaction_due(int(meta.get("lines") or 0), items):
                return False
            try:
                arch = read_archive(apath, gen, int(meta.get("bytes") or 0))
            except CorruptStateError:
                return False
            head = snap.get("items") or {}
            payload, n = encode(
                entries(
                    {k: v for k, v in arch.items.items() if k not in head},
                    {k: v for k, v in arch.reports.items() if k not in head},
                    {k: w for k, w in arch.waits.items() if w.get("work_item_id") not in head},
                )
            )
            generation, size = new_archive(apath, payload)
            snap["archive"] = {
                "generation": generation,
                "bytes": size,
                "items": items,
                "lines": n,
            }
            write_snapshot(path, snap)
            _ARCHIVES.pop(str(apath), None)
            _LOADED.pop(str(path), None)
            return True
    except BusyError:
        return False
