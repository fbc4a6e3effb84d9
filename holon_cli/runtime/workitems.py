"""The work plane: work-item persistence, plan artifacts, mutations, derived
views, prompt projection and the scheduler's work-queue signals.

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
  operator directly; records keep only a descriptor that
  :func:`refresh_plan_descriptor` brings up to date.

``state/work_items.json`` is an index: the fold of all three ledgers plus the
byte offset it reflects in each. Loading replays only the ledger tails after
those offsets, so reads never rescan history and a crash between a ledger
append and the index write loses nothing.

Focus
  ``AgentState.current_work_item_id`` (in the agent record) is the one focus
  pointer. It changes only by explicit action: ``pick``, or the release that
  happens inside the mutation that makes the current item non-runnable
  (complete, block, needs_input). The runtime never re-picks.

Locking
  Every mutation holds the agent lock (``store.lock()``) for its whole
  read-validate-append-index cycle and rewrites the agent record itself while
  holding it. The lock is not reentrant: never call a mutating function here
  while already holding ``store.lock()``.

Nothing here prints; functions return plain dicts and raise
:class:`~holon_cli.errors.HolonError` subclasses (the tools turn those into
error envelopes, the CLI into exit codes).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from holon_cli import clock
from holon_cli.errors import CorruptStateError, NotFoundError, RejectedError, UsageError
from holon_cli.model import workitem as wm
from holon_cli.model.workitem import UNSET, Unset
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import atomic_write_text, read_snapshot, write_snapshot

INDEX_VERSION = 1
WORK_ITEMS_LEDGER = "work_items"
DELIVERY_LEDGER = "delivery_summaries"
WAITS_LEDGER = "waiting_intents"

DEFAULT_RECHECK_AFTER_MS = 30 * 60 * 1000
DEFAULT_PROJECTION_CHARS = 12_000
DEFAULT_TRACE_ENTRIES = 6
TRACE_SCAN_RECORDS = 200
STALE_REMINDER_DEFAULTS = {"rounds": 8, "cooldown_rounds": 8, "max_tokens": 400}

COMPLETE_TOOL = "CompleteWorkItem"
MUTATION_TOOLS = frozenset({"CreateWorkItem", "PickWorkItem", "UpdateWorkItem", COMPLETE_TOOL})


# ------------------------------------------------------------------ index


@dataclass
class WorkItemIndex:
    offset: int = 0
    ds_offset: int = 0
    wait_offset: int = 0
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    # work_item_id -> newest delivery summary (id, text, created_at, source)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    waits: dict[str, dict[str, Any]] = field(default_factory=dict)
    # derived views, recomputed after any change: the hot paths of a turn
    # (projection, activation, closure) touch open items and a few recent
    # completions only, so their cost does not grow with completed history
    # ledger offsets recorded in the snapshot file (what a checkpoint covers)
    saved_offset: int = 0
    saved_ds_offset: int = 0
    saved_wait_offset: int = 0
    _open: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    _done: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def _invalidate(self) -> None:
        self._open = self._done = None

    def open_records(self) -> list[dict[str, Any]]:
        if self._open is None:
            self._open = [r for r in self.items.values() if r.get("state") == "open"]
        return self._open

    def completed_records(self) -> list[dict[str, Any]]:
        """Completed items, newest update first."""
        if self._done is None:
            done = [r for r in self.items.values() if r.get("state") == "completed"]
            done.sort(key=lambda r: (str(r.get("updated_at") or ""), r["id"]), reverse=True)
            self._done = done
        return self._done

    def recent_completed_with_report(self, n: int) -> list[dict[str, Any]]:
        out = []
        for r in self.completed_records():
            if self.has_report(r["id"]):
                out.append(r)
                if len(out) >= n:
                    break
        return out

    def apply_item(self, rec: dict[str, Any]) -> None:
        wid = rec.get("id")
        if isinstance(wid, str):
            self.items[wid] = wm.upgrade_record(rec)
            self._invalidate()

    def apply_report(self, rec: dict[str, Any]) -> None:
        wid = rec.get("work_item_id")
        if isinstance(wid, str) and isinstance(rec.get("text"), str) and rec["text"].strip():
            prev = self.reports.get(wid)
            if prev is None or str(rec.get("created_at", "")) >= str(prev.get("created_at", "")):
                self.reports[wid] = {
                    k: rec.get(k) for k in ("id", "text", "created_at", "source", "turn_id")
                }
                self._invalidate()

    def apply_wait(self, rec: dict[str, Any]) -> None:
        if isinstance(rec.get("id"), str) and isinstance(rec.get("work_item_id"), str):
            self.waits[rec["id"]] = rec

    def wait_summaries(self) -> dict[str, wm.WaitSummary]:
        by_item: dict[str, list[dict[str, Any]]] = {}
        for w in self.waits.values():
            by_item.setdefault(w["work_item_id"], []).append(w)
        return {
            wid: wm.summarize_waits(self.items[wid], ws)
            for wid, ws in by_item.items()
            if wid in self.items
        }

    def waits_for(self, rec: Mapping[str, Any]) -> wm.WaitSummary:
        return wm.summarize_waits(
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
        return WorkItemIndex(
            offset=self.offset,
            ds_offset=self.ds_offset,
            wait_offset=self.wait_offset,
            items=dict(self.items),
            reports=dict(self.reports),
            waits=dict(self.waits),
            saved_offset=self.saved_offset,
            saved_ds_offset=self.saved_ds_offset,
            saved_wait_offset=self.saved_wait_offset,
            _open=self.open_records(),
            _done=self.completed_records(),
        )

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


def _load_uncached(store: AgentStore, items_led: Any, ds_led: Any, wait_led: Any) -> WorkItemIndex:
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
        idx = WorkItemIndex()  # the index describes other ledgers: rebuild
    if snap is None or idx.offset == 0:
        # missing, unreadable or foreign snapshot: the next save rewrites it
        idx.saved_offset = idx.saved_ds_offset = idx.saved_wait_offset = -(1 << 60)
    for _, end, rec in items_led.scan(idx.offset):
        idx.apply_item(rec)
        idx.offset = end
    for _, end, rec in ds_led.scan(idx.ds_offset):
        idx.apply_report(rec)
        idx.ds_offset = end
    for _, end, rec in wait_led.scan(idx.wait_offset):
        idx.apply_wait(rec)
        idx.wait_offset = end
    for wid, rec in idx.items.items():
        if not isinstance(rec.get("plan_artifact"), dict):
            # a record written without a descriptor: point at the conventional
            # path; the next refresh fills in (or reports the file missing)
            rec["plan_artifact"] = {
                **wm.describe_plan(str(plan_path(store, wid)), None, None),
                "exists": True,
            }
    return idx


SNAPSHOT_EVERY_BYTES = 128 * 1024


def _save(store: AgentStore, idx: WorkItemIndex, *, force: bool = False) -> None:
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


def _append_item(
    store: AgentStore, idx: WorkItemIndex, rec: dict[str, Any], change: str
) -> dict[str, Any]:
    prev = idx.items.get(rec["id"])
    out = dict(rec)
    out["v"] = wm.WORK_ITEM_RECORD_VERSION
    out["rev"] = int(prev.get("rev", 0)) + 1 if prev else 1
    out["change"] = change
    out["recorded_at"] = clock.now_iso()
    led = store.ledger(WORK_ITEMS_LEDGER)
    led.append(out)
    idx.apply_item(out)
    idx.offset = led.size()  # exact: every work_items writer holds the agent lock
    return idx.items[rec["id"]]


@contextmanager
def _mutation(store: AgentStore) -> Iterator[tuple[WorkItemIndex, dict[str, Any]]]:
    """Hold the agent lock; yield the fresh index and the agent record. The
    caller mutates and calls :func:`_save` / ``store.write_record`` itself."""
    with store.lock():
        yield load(store), store.read_record()


def _current_id(store: AgentStore) -> str | None:
    cur = store.read_record()["state"].get("current_work_item_id")
    return cur if isinstance(cur, str) else None


def _not_found(store: AgentStore, work_item_id: str) -> NotFoundError:
    return NotFoundError(
        f"unknown work item {work_item_id!r} for agent {store.agent_id!r}",
        hint="list work items with `holon workitem list` (tool: ListWorkItems) and use an id from there",
        kind="work_item_not_found",
        details={"field": "work_item_id", "work_item_id": work_item_id},
    )


def _require(store: AgentStore, idx: WorkItemIndex, work_item_id: Any) -> dict[str, Any]:
    if not isinstance(work_item_id, str) or not work_item_id.strip():
        raise UsageError(
            "work_item_id is required",
            hint="pass the id of a work item (wi_...)",
            kind="invalid_arguments",
            details={"field": "work_item_id"},
        )
    rec = idx.items.get(work_item_id.strip())
    if rec is None:
        raise _not_found(store, work_item_id)
    if rec.get("agent_id") not in (None, store.agent_id):
        raise RejectedError(
            f"work item {work_item_id!r} belongs to agent {rec.get('agent_id')!r}, not {store.agent_id!r}",
            hint="work items are per agent; use one of this agent's work items",
            kind="work_item_not_owned",
        )
    return rec


def _require_open(rec: Mapping[str, Any], what: str, hint: str) -> None:
    """Reject a mutation of a completed item (exit 4, kind ``work_item_completed``)."""
    if rec["state"] == "completed":
        wid = rec["id"]
        raise RejectedError(
            f"work item {wid} {what}",
            hint=hint,
            kind="work_item_completed",
            details={"field": "work_item_id", "work_item_id": wid},
        )


def require_work_item(store: AgentStore, work_item_id: str) -> dict[str, Any]:
    """The newest record of ``work_item_id`` (``NotFoundError`` when unknown)."""
    return wm.public_record(_require(store, load(store), work_item_id))


# ---------------------------------------------------------- plan artifact


def plan_path(store: AgentStore, work_item_id: str) -> Path:
    return (store.layout.work_items_dir / work_item_id / "plan.md").absolute()


def _unchanged_on_disk(path: Path, desc: Mapping[str, Any] | None) -> bool:
    """Cheap pre-check: same size and modification time as the descriptor says."""
    if not desc or not desc.get("exists", True) or desc.get("bytes") is None:
        return False
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_size == desc.get("bytes") and clock.iso(st.st_mtime) == desc.get("updated_at")


def _describe_file(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return wm.describe_plan(str(path), None, None)
    except IsADirectoryError:
        return wm.describe_plan(str(path), None, None)
    return wm.describe_plan(str(path), data, clock.iso(mtime))


def _plan_events(
    store: AgentStore,
    wid: str,
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    turn_id: str | None,
) -> None:
    if old and old.get("exists", True) and not new.get("exists"):
        store.emit(
            "plan_artifact_missing",
            {"path": new["path"], "previous_hash": old.get("hash")},
            work_item_id=wid,
            turn_id=turn_id,
        )
    elif new.get("exists"):
        store.emit(
            "plan_artifact_changed",
            {
                "path": new["path"],
                "hash": new["hash"],
                "previous_hash": (old or {}).get("hash"),
                "bytes": new["bytes"],
                "restored": bool(old and not old.get("exists", True)),
            },
            work_item_id=wid,
            turn_id=turn_id,
        )


def _refresh(
    store: AgentStore, ids: Iterable[str], *, turn_id: str | None = None
) -> list[dict[str, Any]]:
    """Bring the plan descriptors of ``ids`` up to date; one lock for all changes."""
    idx = load(store)
    stale = []
    for wid in dict.fromkeys(ids):
        rec = idx.items.get(wid)
        if rec is None:
            continue
        if _unchanged_on_disk(Path(rec["plan_artifact"]["path"]), rec.get("plan_artifact")):
            continue  # no need to read and hash the file
        fresh = _describe_file(Path(rec["plan_artifact"]["path"]))
        if wm.plan_changed(rec.get("plan_artifact"), fresh):
            stale.append(wid)
    if not stale:
        return []
    changes: list[tuple[str, dict[str, Any] | None, dict[str, Any]]] = []
    with _mutation(store) as (idx, _):
        for wid in stale:
            rec = idx.items[wid]
            old = rec["plan_artifact"]
            fresh = _describe_file(Path(old["path"]))
            if not wm.plan_changed(old, fresh):
                continue  # another process got here first
            _append_item(store, idx, {**rec, "plan_artifact": fresh}, "plan_artifact_refreshed")
            changes.append((wid, old, fresh))
        if changes:
            _save(store, idx)
    out = []
    for wid, old, fresh in changes:
        _plan_events(store, wid, old, fresh, turn_id)
        out.append(
            {
                "work_item_id": wid,
                "change": "changed" if fresh["exists"] else "missing",
                "plan_artifact": dict(fresh),
            }
        )
    return out


def refresh_plan_descriptor(
    store: AgentStore, work_item_id: str, *, turn_id: str | None = None
) -> dict[str, Any]:
    """Re-read one item's plan file. Returns ``{work_item_id, changed, exists,
    plan_artifact}``. A deleted file is reported (``exists: false`` and one
    ``plan_artifact_missing`` event), never recreated."""
    _require(store, load(store), work_item_id)
    changes = _refresh(store, [work_item_id], turn_id=turn_id)
    rec = load(store).items[work_item_id]
    desc = dict(rec["plan_artifact"])
    return {
        "work_item_id": work_item_id,
        "changed": bool(changes),
        "exists": bool(desc.get("exists")),
        "plan_artifact": desc,
    }


def refresh_all(store: AgentStore, *, turn_id: str | None = None) -> list[dict[str, Any]]:
    """Refresh every open item's plan descriptor (the turn engine calls this at
    turn end). Returns one ``{work_item_id, change, plan_artifact}`` per change."""
    idx = load(store)
    return _refresh(
        store, [wid for wid, r in idx.items.items() if r.get("state") == "open"], turn_id=turn_id
    )


# ------------------------------------------------------------------ views


def _completion_report(idx: WorkItemIndex, rec: Mapping[str, Any]) -> dict[str, Any] | None:
    if rec.get("state") != "completed":
        return None
    if rec.get("result_summary"):
        return {"text": rec["result_summary"], "source": "result_summary"}
    rep = idx.reports.get(str(rec.get("id")))
    if rep:
        return {
            "text": rep["text"],
            "source": "delivery_summary",
            "delivery_summary_id": rep.get("id"),
            "created_at": rep.get("created_at"),
        }
    return None


def _view(
    idx: WorkItemIndex,
    rec: Mapping[str, Any],
    *,
    current_id: str | None,
    include_todo_list: bool = True,
) -> dict[str, Any]:
    """A read-surface view: the record, its plan descriptor (never the body)
    and the derived readiness projection."""
    waits = idx.waits_for(rec)
    out = wm.public_record(rec)
    out["plan_artifact"] = dict(rec.get("plan_artifact") or {})
    todos = list(rec.get("todo_list") or [])
    if not include_todo_list:
        out.pop("todo_list", None)
    out["todo_counts"] = wm.todo_counts(todos)
    proj = wm.readiness_projection(rec, current_id=current_id, waits=waits)
    out.update(
        {
            "is_current": proj["focus"] == "current",
            "readiness": proj["readiness"],
            "scheduling_state": proj["scheduling_state"],
            "current_todo": proj["current_todo"],
            "has_active_waits": proj["has_active_waits"],
            "has_triggered_waits": proj["has_triggered_waits"],
        }
    )
    if waits.active:
        out["waits"] = [_wait_brief(w) for w in waits.active]
    if rec.get("state") == "completed":
        out["completion_report"] = _completion_report(idx, rec)
    return out


def _wait_brief(w: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: w.get(k)
        for k in (
            "id",
            "kind",
            "source",
            "resource",
            "condition",
            "trigger_count",
            "last_triggered_at",
        )
        if w.get(k) is not None
    }


def get_work_item(
    store: AgentStore, work_item_id: str, *, include_todo_list: bool = True, refresh: bool = True
) -> dict[str, Any]:
    """``GetWorkItem`` / ``holon workitem show``: one view with a fresh plan descriptor."""
    _require(store, load(store), work_item_id)
    if refresh:
        _refresh(store, [work_item_id])
    idx = load(store)
    return {
        "work_item": _view(
            idx,
            idx.items[work_item_id],
            current_id=_current_id(store),
            include_todo_list=include_todo_list,
        )
    }


def _ordered(idx: WorkItemIndex, current_id: str | None) -> list[dict[str, Any]]:
    """Current first, then the candidate classes in priority order, then
    completed items (newest first)."""
    cand = wm.classify(
        idx.items.values(),
        current_id=current_id,
        waits=idx.wait_summaries(),
        has_report={w: True for w in idx.items},
    )
    out: list[dict[str, Any]] = []
    if cand.current is not None:
        out.append(cand.current)
    for cls in wm.CANDIDATE_CLASSES[1:]:
        out.extend(cand.classes[cls])
    return out


def list_work_items(
    store: AgentStore,
    *,
    filter: str = "all",
    limit: int | None = None,
    include_todo_list: bool = False,
    refresh: bool = True,
) -> dict[str, Any]:
    """``ListWorkItems`` / ``holon workitem list``."""
    if filter not in wm.LIST_FILTERS:
        raise UsageError(
            f"unknown filter {filter!r}",
            hint=f"use one of: {', '.join(wm.LIST_FILTERS)}",
            kind="invalid_arguments",
            details={"field": "filter"},
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise UsageError(
            f"limit must be a positive integer (got {limit!r})",
            hint="e.g. limit 20",
            kind="invalid_arguments",
            details={"field": "limit"},
        )
    idx = load(store)
    current_id = _current_id(store)
    waits = idx.wait_summaries()
    matched = [
        r
        for r in _ordered(idx, current_id)
        if wm.matches_filter(
            r, filter, current_id=current_id, waits=waits.get(r["id"], wm.NO_WAITS)
        )
    ]
    shown = matched[:limit] if limit is not None else matched
    if refresh and shown:
        if _refresh(store, [r["id"] for r in shown]):
            idx = load(store)
    return {
        "filter": filter,
        "current_work_item_id": current_id,
        "total": len(matched),
        "truncated": len(shown) < len(matched),
        "work_items": [
            _view(
                idx, idx.items[r["id"]], current_id=current_id, include_todo_list=include_todo_list
            )
            for r in shown
        ],
        "counts": _counts(idx),
    }


def _counts(idx: WorkItemIndex) -> dict[str, int]:
    counts = {r: 0 for r in wm.READINESS}
    for rec in idx.items.values():
        counts[wm.readiness(rec, idx.waits_for(rec))] += 1
    return counts


def readiness_counts(store: AgentStore) -> dict[str, int]:
    """``{runnable, waiting_for_operator, blocked, completed}`` counts for ``holon status``."""
    return _counts(load(store))


# -------------------------------------------------------------- mutations


def _config_runtime() -> dict[str, Any]:
    from holon_cli.store.config import load_config

    rt = load_config().get("runtime") or {}
    return rt if isinstance(rt, dict) else {}


def default_recheck_after_ms() -> int:
    value = _config_runtime().get("default_recheck_after_ms")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return DEFAULT_RECHECK_AFTER_MS


def _deadline(ms: int) -> str:
    return clock.iso(clock.now() + ms / 1000.0)


def create_work_item(
    store: AgentStore,
    objective: str,
    *,
    plan_status: str | None = None,
    plan: str | None = None,
    todo_list: list[Any] | None = None,
    source: str = "agent",
    turn_id: str | None = None,
) -> dict[str, Any]:
    """Create an open work item and its plan file. Focus is never changed:
    this is also the control-plane enqueue path (no message is admitted)."""
    objective = wm.validate_objective(objective)
    status = wm.validate_plan_status(plan_status) if plan_status is not None else "draft"
    todos = wm.normalize_todo_list(todo_list) if todo_list is not None else []
    if plan is not None and not isinstance(plan, str):
        raise UsageError("plan must be text", kind="invalid_arguments", details={"field": "plan"})
    wid = clock.new_id("wi")
    path = plan_path(store, wid)
    body = plan if plan and plan.strip() else wm.default_plan_text(objective, wid)
    atomic_write_text(path, body if body.endswith("\n") else body + "\n")
    desc = _describe_file(path)
    with _mutation(store) as (idx, agent):
        state = agent["state"]
        rec = wm.new_work_item_record(
            work_item_id=wid,
            agent_id=store.agent_id,
            workspace_id=state.get("active_workspace_id"),
            objective=objective,
            plan_status=status,
            todo_list=todos,
            plan_artifact=desc,
            created_at=clock.now_iso(),
        )
        rec = _append_item(store, idx, rec, "created")
        _save(store, idx)
        current_id = state.get("current_work_item_id")
    store.emit(
        "work_item_created",
        {
            "objective": objective,
            "plan_status": status,
            "todo_count": len(todos),
            "plan_path": str(path),
            "plan_seeded": bool(plan and plan.strip()),
            "source": source,
        },
        work_item_id=wid,
        turn_id=turn_id,
    )
    note = (
        f"Created {wid}; focus unchanged (current: {current_id})."
        if current_id
        else f"Created {wid}. No work item is current: {_pick_hint(source, wid)} to make it current."
    )
    note += f" Edit the plan file directly: {path}"
    return {
        "work_item": _view(idx, rec, current_id=current_id),
        "current_work_item_id": current_id,
        "note": note,
        "warnings": wm.todo_warnings(todos),
    }


def _pick_hint(source: str, wid: str | None = None) -> str:
    """How to pick, in the caller's vocabulary (tool for the agent, CLI for the operator)."""
    if source == "operator":
        return f"run `holon workitem pick {wid or 'ID'}`"
    return f"call PickWorkItem({wid})" if wid else "call PickWorkItem"


def _binding_note(wid: str) -> str:
    return f"Subsequent tool calls in this turn are bound to work item {wid} unless another work_item_id is explicit."


def pick_work_item(
    store: AgentStore,
    work_item_id: str,
    *,
    reason: str | None = None,
    source: str = "agent",
    turn_id: str | None = None,
) -> dict[str, Any]:
    """Set the focus pointer. A ``reason`` is required only when switching away
    from a runnable current item; missing, it is a warning (phase one), and
    the ``work_item_picked`` event says ``reason_required``/``reason_missing``.
    The reason lives only on that event."""
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else None
    with _mutation(store) as (idx, agent):
        rec = _require(store, idx, work_item_id)
        wid = rec["id"]
        _require_open(
            rec,
            "is completed and cannot be picked",
            "pick an open work item (ListWorkItems filter=open), or create a new one for follow-up work",
        )
        state = agent["state"]
        prev_id = state.get("current_work_item_id")
        prev = idx.items.get(prev_id) if isinstance(prev_id, str) else None
        prev_open = prev is not None and prev.get("state") == "open"
        prev_readiness = (
            wm.readiness(prev, idx.waits_for(prev)) if prev is not None and prev_open else None
        )
        cur_readiness = wm.readiness(rec, idx.waits_for(rec))
        if prev_id == wid:
            switch_kind, reason_required = "reaffirm", False
        elif prev_open and prev_readiness == "runnable":
            switch_kind, reason_required = "explicit_focus_override", True
        elif prev_open:
            switch_kind, reason_required = "switch_from_non_runnable", False
        else:
            switch_kind, reason_required = "select", False
        if prev_id != wid:
            state["current_work_item_id"] = wid
            store.write_record(agent)
    reason_missing = reason_required and reason is None
    warnings: list[dict[str, Any]] = []
    if reason_missing:
        warnings.append(
            {
                "kind": "pick_reason_missing",
                "message": f"Switched focus away from runnable work item {prev_id} without a reason; pass `reason` when overriding a runnable current work item.",
                "previous_work_item_id": prev_id,
            }
        )
    if cur_readiness != "runnable":
        warnings.append(
            {
                "kind": "picked_non_runnable",
                "message": f"{wid} is {cur_readiness}; picking it for review does not make it runnable. Clear blocked_by (or set plan_status) with UpdateWorkItem only once the blocker is resolved.",
                "readiness": cur_readiness,
            }
        )
    store.emit(
        "work_item_picked",
        {
            "agent_id": store.agent_id,
            "previous_work_item_id": prev_id,
            "current_work_item_id": wid,
            "reason": reason,
            "previous_readiness": prev_readiness,
            "current_readiness": cur_readiness,
            "switch_kind": switch_kind,
            "reason_required": reason_required,
            "reason_missing": reason_missing,
            "source": source,
        },
        work_item_id=wid,
        turn_id=turn_id,
    )
    return {
        "work_item": _view(idx, rec, current_id=wid),
        "previous_work_item": _view(idx, prev, current_id=wid)
        if prev is not None and prev_id != wid
        else None,
        "current_work_item_id": wid,
        "switch_kind": switch_kind,
        "binding": _binding_note(wid),
        "warnings": warnings,
    }


def update_work_item(
    store: AgentStore,
    work_item_id: str,
    *,
    objective: str | None = None,
    plan_status: str | None = None,
    todo_list: list[Any] | None = None,
    blocked_by: str | None | Unset = UNSET,
    recheck_after_ms: int | None = None,
    source: str = "agent",
    turn_id: str | None = None,
) -> dict[str, Any]:
    """Update mutable fields. ``blocked_by``: :data:`UNSET` keeps it, ``None``
    clears it (with ``recheck_at``/``recheck_consumed_at``), text sets it with
    a fresh recheck deadline (``recheck_after_ms`` or the default). Focus is
    released inside this mutation when it blocks the current item or marks
    it ``needs_input``; clearing a blocker never re-picks."""
    if (
        objective is None
        and plan_status is None
        and todo_list is None
        and isinstance(blocked_by, Unset)
        and recheck_after_ms is None
    ):
        raise UsageError(
            "nothing to update",
            hint="pass at least one of objective, plan_status, todo_list, blocked_by",
            kind="invalid_arguments",
        )
    new_objective = wm.validate_objective(objective) if objective is not None else None
    new_status = wm.validate_plan_status(plan_status) if plan_status is not None else None
    new_todos = wm.normalize_todo_list(todo_list) if todo_list is not None else None
    new_blocker = wm.validate_blocked_by(blocked_by) if isinstance(blocked_by, str) else blocked_by
    if recheck_after_ms is not None:
        recheck_after_ms = wm.validate_recheck_after_ms(recheck_after_ms)
        if not isinstance(new_blocker, str):
            raise UsageError(
                "recheck_after applies only when setting a non-empty blocked_by",
                hint="pass blocked_by together with recheck_after (re-stating the blocker refreshes its deadline)",
                kind="invalid_arguments",
                details={"field": "recheck_after"},
            )
    focus_released = False
    with _mutation(store) as (idx, agent):
        rec = _require(store, idx, work_item_id)
        wid = rec["id"]
        _require_open(
            rec,
            "is completed; completed work items cannot be updated",
            "create a new work item for follow-up work",
        )
        new = dict(rec)
        changed: list[str] = []
        if new_objective is not None:
            new["objective"] = new_objective
            changed.append("objective")
        if new_status is not None:
            new["plan_status"] = new_status
            changed.append("plan_status")
        if new_todos is not None:
            new["todo_list"] = new_todos
            changed.append("todo_list")
        if isinstance(new_blocker, str):
            new["blocked_by"] = new_blocker
            new["recheck_at"] = _deadline(recheck_after_ms or default_recheck_after_ms())
            new["recheck_consumed_at"] = None
            changed.append("blocked_by")
        elif new_blocker is None:
            new["blocked_by"] = None
            new["recheck_at"] = None
            new["recheck_consumed_at"] = None
            changed.append("blocked_by")
        new["updated_at"] = clock.now_iso()
        state = agent["state"]
        current_id = state.get("current_work_item_id")
        release_reason = None
        if current_id == wid:
            if isinstance(new_blocker, str):
                release_reason = "blocked"
            elif new_status == "needs_input":
                release_reason = "needs_input"
        rec = _append_item(store, idx, new, "updated")
        if release_reason:
            state["current_work_item_id"] = None
            store.write_record(agent)
            focus_released = True
            current_id = None
        _save(store, idx)
    store.emit(
        "work_item_updated",
        {
            "changed": changed,
            "objective": rec["objective"] if "objective" in changed else None,
            "plan_status": rec["plan_status"],
            "blocked_by": rec["blocked_by"],
            "blocker_cleared": new_blocker is None,
            "recheck_at": rec["recheck_at"],
            "todo_counts": wm.todo_counts(rec["todo_list"]) if "todo_list" in changed else None,
            "focus_released": focus_released,
            "source": source,
        },
        work_item_id=wid,
        turn_id=turn_id,
    )
    if focus_released:
        store.emit(
            "work_item_focus_released",
            {"reason": release_reason, "source": source},
            work_item_id=wid,
            turn_id=turn_id,
        )
    notes = []
    if focus_released:
        notes.append(
            f"Focus released: {wid} is no longer current ({release_reason}). No work item is current; {_pick_hint(source)} for the next one."
        )
    if new_blocker is None and current_id != wid:
        notes.append(
            f"Blocker cleared; {wid} is not current: {_pick_hint(source, wid)} to resume it."
        )
    return {
        "work_item": _view(idx, rec, current_id=current_id),
        "changed": changed,
        "focus_released": focus_released,
        "current_work_item_id": current_id,
        "note": " ".join(notes) or None,
        "warnings": wm.todo_warnings(rec["todo_list"]) if "todo_list" in changed else [],
    }


def complete_work_item(
    store: AgentStore,
    work_item_id: str,
    *,
    report: str | None = None,
    source: str = "agent",
    ambiguous_round: bool = False,
    turn_id: str | None = None,
) -> dict[str, Any]:
    """Mark a work item completed (clears blocker and recheck; releases focus).

    ``source="agent"``: ``report`` is the same assistant round's text. It is
    promoted -- into ``result_summary``, a ``DeliverySummaryRecord`` and a
    ``work_done`` result brief -- only after the state change succeeds, and
    only when it is non-empty, the item was the focused one, and the round
    holds no other completion (``ambiguous_round``): the runtime does not
    guess which report belongs to which item. ``source="operator"``: the
    explicit ``report`` becomes ``result_summary``. Unfinished todos never
    block completion; they produce the structured ``unfinished_todos`` warning.
    """
    text = report.strip() if isinstance(report, str) else ""
    warnings: list[dict[str, Any]] = []
    ds_rec: dict[str, Any] | None = None
    with _mutation(store) as (idx, agent):
        rec = _require(store, idx, work_item_id)
        wid = rec["id"]
        _require_open(
            rec, "is already completed", "nothing to do; create a new work item for follow-up work"
        )
        state = agent["state"]
        focused = state.get("current_work_item_id") == wid
        unfinished = wm.unfinished_todos_warning(rec.get("todo_list") or [])
        if unfinished:
            warnings.append(unfinished)
        promote = False
        if source == "operator":
            promote = bool(text)
        elif not text:
            warnings.append(
                {
                    "kind": "missing_completion_report",
                    "message": "Completed without same-round report text, so no completion report was recorded. Write the operator-facing report as assistant text in the same round as CompleteWorkItem; if one is needed now, give it in your next reply.",
                }
            )
        elif ambiguous_round:
            warnings.append(
                {
                    "kind": "completion_report_ambiguous",
                    "message": "This round completes more than one work item, so its text was not promoted to any of them. Complete one work item per round with its own report.",
                }
            )
        elif not focused:
            warnings.append(
                {
                    "kind": "completion_report_not_focused",
                    "message": f"{wid} was not the current work item, so the round's text was not promoted to its completion report. Pick a work item before completing it with a report.",
                }
            )
        else:
            promote = True
        now = clock.now_iso()
        new = dict(rec)
        new.update(
            {
                "state": "completed",
                "blocked_by": None,
                "recheck_at": None,
                "recheck_consumed_at": None,
                "result_summary": text if promote else None,
                "completed_at": now,
                "updated_at": now,
            }
        )
        rec = _append_item(store, idx, new, "completed")
        if focused:
            state["current_work_item_id"] = None
            store.write_record(agent)
        if promote and source != "operator":
            ds_rec = wm.new_delivery_summary(
                summary_id=clock.new_id("dsum"),
                agent_id=store.agent_id,
                work_item_id=wid,
                text=text,
                source="assistant_round",
                created_at=now,
                turn_id=turn_id,
                warnings=[unfinished] if unfinished else None,
            )
            led = store.ledger(DELIVERY_LEDGER)
            led.append(ds_rec)
            idx.apply_report(ds_rec)
            idx.ds_offset = led.size()
        _save(store, idx)
        current_id = state.get("current_work_item_id")
    brief_id = None
    if ds_rec is not None:
        from holon_cli.runtime.briefs import write_brief

        brief = write_brief(
            store,
            kind="result",
            text=text,
            visibility="work_done",
            work_item_id=wid,
            turn_id=turn_id,
            title=rec["objective"][:200],
        )
        brief_id = brief["id"]
    counts = wm.todo_counts(rec.get("todo_list") or [])
    store.emit(
        "work_item_completed",
        {
            "objective": rec["objective"],
            "source": source,
            "report_promoted": promote,
            "delivery_summary_id": ds_rec["id"] if ds_rec else None,
            "brief_id": brief_id,
            "completed_with_unfinished_todos": unfinished is not None,
            "unfinished_todo_count": counts["pending"] + counts["in_progress"],
            "pending_todo_count": counts["pending"],
            "in_progress_todo_count": counts["in_progress"],
            "focus_released": focused,
            "warnings": [w["kind"] for w in warnings],
        },
        work_item_id=wid,
        turn_id=turn_id,
    )
    note = f"{wid} completed."
    if focused:
        note += f" Focus released; no work item is current: {_pick_hint(source)} for the next one."
    return {
        "work_item": _view(idx, rec, current_id=current_id),
        "completion_report": _completion_report(idx, rec),
        "delivery_summary_id": ds_rec["id"] if ds_rec else None,
        "brief_id": brief_id,
        "focus_released": focused,
        "current_work_item_id": current_id,
        "note": note,
        "warnings": warnings,
    }


# -------------------------------------------------------- turn and tick


def turn_end_commit(
    store: AgentStore, bound_work_item_id: str | None, facts: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Resolve the bound item's transition at turn end (spec: Turn-End
    Work-Item Transition Commit).

    ``facts`` are runtime facts about the finished turn:
      ``blocking_wait`` (str | None): a blocking wait condition the runtime
      observed, in words (e.g. "waiting for task tsk_1 (cargo test)");
      ``recheck_after_ms`` (int | None): the recheck delay for that blocker.

    Only the bound item is considered, never whatever is current now. It is
    never completed here (only ``CompleteWorkItem`` completes). When a
    blocking wait is reported and the item is open with no blocker, the
    blocker is set (and focus released if it is current); an agent-authored
    blocker is never overwritten. Returns ``{work_item_id, action, reason}``
    with ``action`` one of ``skipped``, ``none``, ``blocked``.
    """
    facts = facts or {}
    if not bound_work_item_id:
        return {"work_item_id": None, "action": "skipped", "reason": "no_bound_work_item"}
    idx = load(store)
    rec = idx.items.get(bound_work_item_id)
    if rec is None:
        return {
            "work_item_id": bound_work_item_id,
            "action": "skipped",
            "reason": "unknown_work_item",
        }
    if rec["state"] == "completed":
        return {"work_item_id": bound_work_item_id, "action": "none", "reason": "completed"}
    wait = facts.get("blocking_wait")
    if not (isinstance(wait, str) and wait.strip()):
        return {"work_item_id": bound_work_item_id, "action": "none", "reason": "remains_open"}
    if rec.get("blocked_by"):
        return {"work_item_id": bound_work_item_id, "action": "none", "reason": "already_blocked"}
    ms = facts.get("recheck_after_ms")
    res = update_work_item(
        store,
        bound_work_item_id,
        blocked_by=wait.strip(),
        recheck_after_ms=ms
        if isinstance(ms, int) and not isinstance(ms, bool) and ms > 0
        else None,
        source="turn_end",
    )
    store.emit(
        "work_item_turn_end_commit",
        {"action": "blocked", "blocked_by": wait.strip(), "focus_released": res["focus_released"]},
        work_item_id=bound_work_item_id,
    )
    return {
        "work_item_id": bound_work_item_id,
        "action": "blocked",
        "reason": "blocking_wait",
        "focus_released": res["focus_released"],
        "work_item": res["work_item"],
    }


def _compact(idx: WorkItemIndex, rec: Mapping[str, Any]) -> dict[str, Any]:
    waits = idx.waits_for(rec)
    out: dict[str, Any] = {
        "work_item_id": rec["id"],
        "objective": rec["objective"],
        "readiness": wm.readiness(rec, waits),
        "plan_status": rec.get("plan_status"),
        "current_todo": wm.current_todo(rec.get("todo_list") or []),
        "updated_at": rec.get("updated_at"),
    }
    if rec.get("blocked_by"):
        out["blocked_by"] = rec["blocked_by"]
    if waits.triggered:
        out["last_triggered_at"] = waits.last_triggered_at
    return out


def _fingerprint(parts: Iterable[Any]) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def activation_signal(store: AgentStore) -> dict[str, Any] | None:
    """What a work-queue tick should do, or ``None`` (no work items, or no
    candidate): 1. continue the current item when runnable; 2. surface
    triggered blocked items for review; 3. wake the agent to pick a queued
    runnable item. Never changes focus. ``action`` (alias
    ``reactivation_mode``: ``continue_active`` | ``review_triggered`` |
    ``activate_queued``) says which; ``text`` is ready for the system tick;
    ``fingerprint`` changes whenever the signal would say something new, so
    a tick can avoid re-sending it."""
    idx = load(store)
    if not idx.items:
        return None
    current_id = _current_id(store)
    cand = wm.classify(idx.open_records(), current_id=current_id, waits=idx.wait_summaries())
    if cand.classes["current_runnable"]:
        rec = cand.classes["current_runnable"][0]
        todo = wm.current_todo(rec.get("todo_list") or [])
        text = f"Continue the current work item {rec['id']}: {rec['objective']}"
        if todo:
            text += f" (current todo: {todo['text']})"
        return {
            "action": "continue_current",
            "reactivation_mode": "continue_active",
            "work_item_id": rec["id"],
            "objective": rec["objective"],
            "text": text,
            "fingerprint": _fingerprint(
                ["continue", rec["id"], rec.get("rev"), rec.get("updated_at")]
            ),
        }
    for cls, action, lead in (
        (
            "triggered_blocked",
            "review_triggered",
            "An external event arrived for blocked work; review it (the blocker is not cleared automatically):",
        ),
        (
            "queued_runnable",
            "activate_queued",
            "No work item is current. Pick one of the queued runnable work items with PickWorkItem:",
        ),
    ):
        top = cand.top(cls)
        if top:
            lines = [lead] + [f"- {r['id']}: {r['objective']}" for r in top]
            return {
                "action": action,
                "reactivation_mode": action,
                "work_item_id": None,
                "candidates": [_compact(idx, r) for r in top],
                "text": "\n".join(lines),
                "fingerprint": _fingerprint(
                    [action, current_id]
                    + [
                        f"{r['id']}@{r.get('rev')}@{idx.waits_for(r).last_triggered_at}"
                        for r in top
                    ]
                ),
            }
    return None


def closure_waiting_reason(store: AgentStore) -> str | None:
    """What the agent waits for when the work queue holds open work but none
    of it is actionable (no runnable current or queued item, no unreviewed
    trigger): ``awaiting_operator_input`` when an item needs input, else
    ``awaiting_task_result`` for task waits, else ``awaiting_external_change``
    for blockers and external waits. ``None`` when there is work to do or no
    open work at all (the message-driven path decides then)."""
    idx = load(store)
    if not idx.items:
        return None
    cand = wm.classify(
        idx.open_records(), current_id=_current_id(store), waits=idx.wait_summaries()
    )
    if any(cand.classes[c] for c in ("current_runnable", "triggered_blocked", "queued_runnable")):
        return None
    open_items = idx.open_records()
    states = {wm.scheduling_state(r, idx.waits_for(r)) for r in open_items}
    if "waiting_operator" in states:
        return "awaiting_operator_input"
    if "waiting_task" in states:
        return "awaiting_task_result"
    if states & {"blocked", "waiting_external"}:
        return "awaiting_external_change"
    return None


def _as_ts(now: float | str | None) -> float:
    if now is None:
        return clock.now()
    if isinstance(now, str):
        return clock.parse_iso(now)
    return float(now)


def recheck_due(store: AgentStore, now: float | str | None = None) -> list[dict[str, Any]]:
    """Blocked open items whose one-shot ``recheck_at`` has passed and not yet
    been consumed. Each is marked ``recheck_consumed_at`` (so it fires once
    per deadline) and returned; the blocker is neither cleared nor
    interpreted, and focus does not change."""
    ts = _as_ts(now)

    def due(r: Mapping[str, Any]) -> bool:
        at = r.get("recheck_at")
        return (
            r.get("state") == "open"
            and bool(r.get("blocked_by"))
            and isinstance(at, str)
            and not r.get("recheck_consumed_at")
            and clock.parse_iso(at) <= ts
        )

    if not any(due(r) for r in load(store).items.values()):
        return []
    out: list[dict[str, Any]] = []
    with _mutation(store) as (idx, _):
        consumed_at = clock.now_iso()
        for rec in sorted(
            (r for r in idx.items.values() if due(r)), key=lambda r: (r["recheck_at"], r["id"])
        ):
            _append_item(
                store, idx, {**rec, "recheck_consumed_at": consumed_at}, "recheck_consumed"
            )
            out.append(
                {
                    "id": rec["id"],
                    "work_item_id": rec["id"],
                    "objective": rec["objective"],
                    "blocked_by": rec["blocked_by"],
                    "recheck_at": rec["recheck_at"],
                    "text": f"Recheck reminder for blocked work item {rec['id']} ({rec['objective']}): blocked by {rec['blocked_by']!r}. Inspect the blocker; clear it with UpdateWorkItem(blocked_by=null) if resolved, or re-state it to wait longer.",
                }
            )
        if out:
            _save(store, idx)
    for item in out:
        store.emit(
            "work_item_recheck_due",
            {"recheck_at": item["recheck_at"], "blocked_by": item["blocked_by"]},
            work_item_id=item["work_item_id"],
        )
    return out


def newest_completion_report_since(store: AgentStore, since_iso: str) -> str | None:
    """Text of the newest ``DeliverySummaryRecord`` created at or after
    ``since_iso`` (``holon run``'s ``final_text``), else ``None``."""
    since = clock.parse_iso(since_iso)
    best: dict[str, Any] | None = None
    for rep in load(store).reports.values():
        at = rep.get("created_at")
        if (
            isinstance(at, str)
            and clock.parse_iso(at) >= since
            and (best is None or at >= str(best["created_at"]))
        ):
            best = rep
    return str(best["text"]) if best else None


# -------------------------------------------------------- prompt projection


def _one_line(text: Any, limit: int) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: max(0, limit - 1)] + "…"


def _short_hash(h: Any) -> str:
    return str(h).split(":", 1)[-1][:12] if h else "-"


def _todo_mark(state: str) -> str:
    return {"completed": "[x]", "in_progress": "[>]"}.get(state, "[ ]")


def _trace(store: AgentStore, wid: str, limit: int) -> list[str]:
    """Recent process trace bound to ``wid``: assistant text, tool executions
    and briefs (tail reads only; provider thinking is never included)."""
    if limit <= 0:
        return []
    entries: list[tuple[str, str]] = []

    def bound(r: Mapping[str, Any]) -> bool:
        return (r.get("work_item_id") or r.get("workItemId")) == wid

    for r in store.ledger("transcript").tail(TRACE_SCAN_RECORDS):
        if not bound(r):
            continue
        kind = str(r.get("kind"))
        at = str(r.get("at", ""))
        if kind in ("assistant_round", "assistant_message", "assistant"):
            text = r.get("text")
            if isinstance(text, str) and text.strip():
                entries.append((at, f"assistant: {_one_line(text, 240)}"))
        elif kind in ("tool_result", "tool_execution"):
            name = r.get("tool_name") or r.get("name") or "tool"
            failed = r.get("is_error") or r.get("ok") is False or r.get("error")
            summary = r.get("summary") or r.get("text") or ""
            entries.append(
                (
                    at,
                    f"tool {name}: {'error' if failed else 'ok'}{(' - ' + _one_line(summary, 120)) if summary else ''}",
                )
            )
    for r in store.ledger("briefs").tail(50):
        if bound(r) and isinstance(r.get("text"), str):
            entries.append(
                (str(r.get("at", "")), f"brief ({r.get('kind')}): {_one_line(r['text'], 240)}")
            )
    entries.sort(key=lambda e: e[0])
    return [f"  - {at[11:19] if len(at) >= 19 else at} {line}" for at, line in entries[-limit:]]


def _current_section(
    store: AgentStore,
    idx: WorkItemIndex,
    rec: Mapping[str, Any] | None,
    *,
    focused: bool,
    preview_chars: int,
    trace_limit: int,
) -> str:
    if rec is None:
        return (
            "Current work item: none.\n"
            "Pick runnable work with PickWorkItem(work_item_id, reason?) or create a work item with CreateWorkItem when a separate objective appears."
        )
    waits = idx.waits_for(rec)
    sched = wm.scheduling_state(rec, waits)
    desc = _describe_file(Path(rec["plan_artifact"]["path"]))  # the file is the truth
    lines = [
        f"Current work item: {rec['id']} ({'focus' if focused else 'bound to this turn'}; readiness: {wm.readiness(rec, waits)}; scheduling: {sched})"
    ]
    lines.append(f"- objective: {rec['objective']}")
    lines.append(f"- state: {rec['state']}; plan_status: {rec['plan_status']}")
    if desc["exists"]:
        complete = desc["preview_complete"] and len(desc["preview"]) <= preview_chars
        lines.append(
            f"- plan: {desc['path']} ({desc['bytes']} bytes, sha256 {_short_hash(desc['hash'])}, updated {desc['updated_at']}; "
            + (
                "preview complete)"
                if complete
                else "preview truncated: read the file for the full plan)"
            )
        )
        preview = desc["preview"][:preview_chars].rstrip("\n")
        lines.extend(f"  | {ln}".rstrip() for ln in preview.splitlines())
    else:
        lines.append(
            f"- plan: {desc['path']} is MISSING (deleted?). Recreate it with the task interpretation before continuing."
        )
    todos = list(rec.get("todo_list") or [])
    if todos:
        counts = wm.todo_counts(todos)
        cur = wm.current_todo(todos)
        lines.append(
            f"- todo ({counts['completed']}/{counts['total']} completed"
            + (f"; current: {cur['text']}" if cur else "")
            + "):"
        )
        lines.extend(f"  {_todo_mark(t['state'])} {t['text']}" for t in todos)
    else:
        lines.append("- todo: (empty)")
    if rec.get("blocked_by"):
        lines.append(
            f"- blocked_by: {rec['blocked_by']}"
            + (f" (recheck at {rec['recheck_at']})" if rec.get("recheck_at") else "")
        )
    if waits.active:
        lines.append(
            f"- waits: {len(waits.active)} active ({waits.active_task} task, {waits.active_external} external)"
            + (f"; triggered at {waits.last_triggered_at} (review it)" if waits.triggered else "")
        )
        for w in waits.active[:3]:
            lines.append("  - " + ", ".join(f"{k}={v}" for k, v in _wait_brief(w).items()))
    if sched != "runnable":
        lines.append(
            "- note: this item is not runnable; it is current for review. Clear blocked_by or set plan_status with UpdateWorkItem only when the blocker is really resolved."
        )
    trace = _trace(store, rec["id"], trace_limit)
    if trace:
        lines.append("- recent process trace:")
        lines.extend(trace)
    lines.append(
        "Priority: the objective says what this work is; the plan file is the durable interpretation and approach (it wins when they conflict); the todo list only tracks progress."
    )
    return "\n".join(lines)


def _candidate_line(idx: WorkItemIndex, cls: str, rec: Mapping[str, Any]) -> str:
    waits = idx.waits_for(rec)
    head = f'- {rec["id"]} "{_one_line(rec["objective"], 120)}"'
    if cls == "completed_recent":
        rep = _completion_report(idx, rec)
        return f"{head} - report: {_one_line(rep['text'] if rep else '', 300)}"
    bits = [f"plan_status {rec.get('plan_status')}"]
    if rec.get("blocked_by"):
        bits.append(f"blocked by: {_one_line(rec['blocked_by'], 160)}")
    if cls == "triggered_blocked":
        total = sum(int(w.get("trigger_count") or 0) for w in waits.active)
        bits.append(
            f"wait triggered at {waits.last_triggered_at} ({total} event(s)); blocker NOT cleared"
        )
    elif cls == "blocked" and not rec.get("blocked_by"):
        bits.append(
            f"waiting on {waits.active_task} task / {waits.active_external} external wait(s)"
        )
    todo = wm.current_todo(rec.get("todo_list") or [])
    if todo:
        bits.append(f"next todo: {_one_line(todo['text'], 100)}")
    preview = _plan_gist(rec)
    if preview:
        bits.append(f"plan: {preview}")
    return f"{head} - " + "; ".join(bits)


def _plan_gist(rec: Mapping[str, Any]) -> str:
    """First meaningful line of the stored preview (headers and comments skipped)."""
    desc = rec.get("plan_artifact") or {}
    if not desc.get("exists", True):
        return "(plan file missing)"
    in_comment = False
    for ln in str(desc.get("preview") or "").splitlines():
        s = ln.strip()
        if s.startswith("<!--"):
            in_comment = "-->" not in s
            continue
        if in_comment:
            in_comment = "-->" not in s
            continue
        if (
            not s
            or s.startswith("#")
            and s.lstrip("#").strip() == str(rec.get("objective", "")).strip()
        ):
            continue
        return _one_line(s.lstrip("# "), 120)
    return ""


_SECTION_TITLES = {
    "triggered_blocked": "Triggered blocked work items (an external event arrived; review before deciding - the blocker is not cleared automatically)",
    "queued_runnable": "Queued runnable work items (oldest first; pick one with PickWorkItem when current work is done or blocked)",
    "waiting_for_operator": "Work items waiting for operator input (plan_status needs_input)",
    "blocked": "Blocked work items",
    "completed_recent": "Recently completed work items (promoted completion reports)",
}


def _section(idx: WorkItemIndex, cand: wm.Candidates, cls: str) -> tuple[str, str] | None:
    items = cand.classes[cls]
    if not items:
        return None
    top = cand.top(cls)
    title = _SECTION_TITLES[cls]
    shown = f"{len(top)} of {len(items)}" if len(top) < len(items) else f"{len(items)}"
    if cls == "completed_recent" and cand.completed_total > len(items):
        shown += f"; {cand.completed_total} completed in total"
    full = "\n".join([f"{title} - {shown}:"] + [_candidate_line(idx, cls, r) for r in top])
    compact = f"{title}: {len(items)} (omitted for prompt budget; use ListWorkItems)"
    return full, compact


def project_work_queue(
    store: AgentStore,
    *,
    bound_work_item_id: str | None = None,
    max_chars: int = DEFAULT_PROJECTION_CHARS,
    trace_limit: int = DEFAULT_TRACE_ENTRIES,
) -> str | None:
    """The turn's work-queue context block, or ``None`` when the agent has no
    work items (the message-driven prompt path stays unchanged).

    The current item (``bound_work_item_id`` when given and open, else the
    focus pointer) is projected in full: objective, plan descriptor with a
    bounded preview read from the file, todo list, blocker, waits and recent
    bound process trace. Other items appear as compact candidates by class,
    each within :data:`~holon_cli.model.workitem.PROMPT_LIMITS`. Completed
    items appear only through promoted reports. When ``max_chars`` is tight,
    classes are kept in priority order (current, triggered, queued,
    waiting for operator, blocked, completed): once a class has to shrink to
    its count line, every lower class is at most a count line, and the first
    class that does not fit even as a count ends the projection.
    """
    idx = load(store)
    if not idx.items:
        return None
    focus_id = _current_id(store)
    current_id = focus_id
    if bound_work_item_id and idx.items.get(bound_work_item_id, {}).get("state") == "open":
        current_id = bound_work_item_id
    if current_id is not None and idx.items.get(current_id, {}).get("state") != "open":
        current_id = None
    # open items plus just enough recent completions to fill the completed class
    recent_done = idx.recent_completed_with_report(wm.PROMPT_LIMITS.get("completed_recent", 3) + 1)
    records = idx.open_records() + recent_done
    cand = wm.classify(
        records,
        current_id=current_id,
        waits=idx.wait_summaries(),
        has_report={r["id"]: True for r in recent_done},
    )
    cand.completed_total = len(idx.completed_records())
    header = "## Work queue"
    cur = _current_section(
        store,
        idx,
        cand.current,
        focused=current_id == focus_id,
        preview_chars=wm.PREVIEW_CHARS,
        trace_limit=trace_limit,
    )
    if len(header) + len(cur) + 1 > max_chars:
        cur = _current_section(
            store,
            idx,
            cand.current,
            focused=current_id == focus_id,
            preview_chars=400,
            trace_limit=min(trace_limit, 2),
        )
    parts = [header, cur]
    used = sum(len(p) + 1 for p in parts)
    detailed = True  # once a class is cut to its count, lower classes get counts at most
    for cls in wm.CANDIDATE_CLASSES[1:]:
        sec = _section(idx, cand, cls)
        if sec is None:
            continue
        full, compact = sec
        if detailed and used + len(full) + 2 <= max_chars:
            text = full
        elif used + len(compact) + 2 <= max_chars:
            text, detailed = compact, False
        else:
            break  # a lower class never displaces a higher one
        parts += ["", text]
        used += len(text) + 2
    return "\n".join(parts)


# ---------------------------------------------------------- stale reminder


def _int_setting(env: str, key: str, default: int) -> int:
    raw = os.environ.get(env)
    if raw is not None and raw.strip():
        try:
            return int(raw)
        except ValueError:
            raise UsageError(
                f"{env} must be an integer (got {raw!r})",
                hint=f"unset {env} or set it to a whole number",
            ) from None
    value = _config_runtime().get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def stale_reminder_settings() -> dict[str, int]:
    """Threshold, cooldown and token budget of the progress reminder:
    environment > ``config.yaml`` ``runtime.*`` > defaults."""
    return {
        "rounds": _int_setting(
            "HOLON_WORK_ITEM_STALE_REMINDER_ROUNDS",
            "work_item_stale_reminder_rounds",
            STALE_REMINDER_DEFAULTS["rounds"],
        ),
        "cooldown_rounds": _int_setting(
            "HOLON_WORK_ITEM_STALE_REMINDER_COOLDOWN_ROUNDS",
            "work_item_stale_reminder_cooldown_rounds",
            STALE_REMINDER_DEFAULTS["cooldown_rounds"],
        ),
        "max_tokens": _int_setting(
            "HOLON_WORK_ITEM_STALE_REMINDER_MAX_TOKENS",
            "work_item_stale_reminder_max_tokens",
            STALE_REMINDER_DEFAULTS["max_tokens"],
        ),
    }


def is_work_item_mutation(tool_name: str) -> bool:
    """Whether a successful call of ``tool_name`` resets the stale-round count."""
    return tool_name in MUTATION_TOOLS


def stale_reminder(store: AgentStore, rounds_without_mutation: int) -> str | None:
    """A provider-only progress reminder, or ``None``.

    Fires when ``rounds_without_mutation`` (consecutive provider rounds with
    no successful work-item mutation; the engine counts) reaches the
    threshold, then every ``cooldown`` rounds after it (cooldown <= 0: once).
    A threshold <= 0 disables it. The text is derived from the current item
    (completed todos omitted) and bounded to ``max_tokens`` (~4 chars each).
    It records nothing.
    """
    cfg = stale_reminder_settings()
    threshold, cooldown = cfg["rounds"], cfg["cooldown_rounds"]
    if threshold <= 0 or rounds_without_mutation < threshold:
        return None
    over = rounds_without_mutation - threshold
    if over and (cooldown <= 0 or over % cooldown):
        return None
    cur_id = _current_id(store)
    if cur_id is None:
        return None
    rec = load(store).items.get(cur_id)
    if rec is None or rec.get("state") != "open":
        return None
    lines = [
        f"Work-item progress reminder: {rounds_without_mutation} provider rounds without a work-item update.",
        f"Current work item {rec['id']}: {rec['objective']}",
        f"plan_status: {rec['plan_status']}; plan: {rec['plan_artifact']['path']}",
    ]
    gist = _plan_gist(rec)
    if gist:
        lines.append(f"plan gist: {gist}")
    active = [t for t in rec.get("todo_list") or [] if t.get("state") != "completed"]
    if active:
        lines.append(
            "active todos: " + "; ".join(f"{_todo_mark(t['state'])} {t['text']}" for t in active)
        )
    if rec.get("blocked_by"):
        lines.append(f"blocked_by: {rec['blocked_by']}")
    lines.append(
        "Update the work item (UpdateWorkItem todo_list/plan_status/blocked_by, or CompleteWorkItem) only if material progress, a scope change, a blocker or completed checklist items actually emerged. This reminder does not record progress."
    )
    text = "\n".join(lines)
    limit = max(80, cfg["max_tokens"] * 4)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------ misc


def round_completion_targets(calls: Iterable[Any]) -> list[str]:
    """Distinct ``work_item_id`` values of the ``CompleteWorkItem`` calls in one
    assistant round (``ToolCall`` objects or dicts)."""
    out: list[str] = []
    for c in calls:
        name = c.get("name") if isinstance(c, Mapping) else getattr(c, "name", None)
        if name != COMPLETE_TOOL:
            continue
        args = c.get("arguments") if isinstance(c, Mapping) else getattr(c, "arguments", None)
        wid = args.get("work_item_id") if isinstance(args, Mapping) else None
        key = wid if isinstance(wid, str) else repr(wid)
        if key not in out:
            out.append(key)
    return out
