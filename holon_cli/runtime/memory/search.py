"""``MemorySearch`` and ``MemoryGet``: the index kept in step with its
sources, ranked search, exact retrieval through opaque references.

Freshness, checked before every search or get (all in one transaction):
- the agent's memory files: hashed (their size and the part the index
  keeps, bounded), since an editor or a shell changes them without telling
  anyone, and a same-size edit within one timestamp tick (or with the
  timestamp put back) leaves size and mtime as they were;
- the ``briefs`` and ``context_episodes`` ledgers: the appended tail since
  the offset the index recorded (a ledger that shrank or was replaced is
  read again from the start);
- work items: every item again when the ``work_items`` or
  ``delivery_summaries`` ledger moved, else the plan files of open items
  only (the ones a person edits);
- workspace profiles: the attached workspaces (id, anchor, the head of
  their ``AGENTS.md``), a detached one removed;
- ``memory.dirty`` present (a rebuild was asked for, or one was cut off):
  everything from scratch. ``rm -rf .holon/indexes`` is the same.

A ``source_ref`` is ``mem_`` + an HMAC of the source key under a per-agent
secret (``.holon/state/memory_ref.key``): stable across rebuilds, and not
something a model can make up; anything not in the index is ``not_found``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from holon_cli.errors import CorruptStateError, HolonError, NotFoundError, Said, UsageError
from holon_cli.runtime.memory import sources as S
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.memory_index import Doc, MemoryIndex

DEFAULT_LIMIT = 8
MAX_LIMIT = 50
DEFAULT_MAX_CHARS = 12_000
MAX_CHARS = 50_000
SNIPPET_CHARS = 240
TAILED_LEDGERS = {"briefs": S.brief_doc, "context_episodes": S.episode_doc}
WORK_LEDGERS = ("work_items", "delivery_summaries")


def indexes_dir(store: AgentStore) -> Path:
    return store.layout.runtime / "indexes"


def index_path(store: AgentStore) -> Path:
    return indexes_dir(store) / "memory.sqlite3"


def dirty_marker(store: AgentStore) -> Path:
    return indexes_dir(store) / "memory.dirty"


def mark_dirty(store: AgentStore) -> None:
    """Ask for a rebuild at the next search (cheap; no fsync: the index is a cache)."""
    indexes_dir(store).mkdir(parents=True, exist_ok=True)
    dirty_marker(store).touch()


# ------------------------------------------------------------- references


def _ref_key(store: AgentStore) -> bytes:
    """The agent's secret for source refs: made once, kept with its state
    (not the disposable index), so refs survive a rebuild."""
    from holon_cli.store.fsio import create_new_bytes

    path = store.layout.state_dir / "memory_ref.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        create_new_bytes(path, os.urandom(32))  # a concurrent first use: one key wins
        return path.read_bytes()


def source_ref(key: bytes, source_key: str) -> str:
    import hashlib
    import hmac

    return "mem_" + hmac.new(key, source_key.encode(), hashlib.sha256).hexdigest()[:24]


# ------------------------------------------------------------------- sync


class _Sync:
    def __init__(self, store: AgentStore, idx: MemoryIndex) -> None:
        self.store, self.idx = store, idx
        self.key = _ref_key(store)
        self.changed = 0

    def put(self, doc: Doc | None, known: dict[str, str] | None = None) -> None:
        if doc is None:
            return
        if known is not None and known.get(doc.source_key) == doc.fingerprint:
            return
        self.idx.upsert(doc, source_ref(self.key, doc.source_key))
        self.changed += 1

    def memory_files(self) -> None:
        """The known memory files, hashed before every search (bounded:
        :func:`~holon_cli.runtime.memory.sources.memory_file_signature`): a
        size and a timestamp say nothing of an edit that kept both."""
        known: dict[str, str] | None = None
        for name in S.MEMORY_FILES:
            sig = S.memory_file_signature(self.store, name)
            key = f"hash:memory:{name}"
            if sig is not None and self.idx.meta(key) == sig:
                continue
            doc = S.memory_file_doc(self.store, name)
            if doc is None:
                self.idx.delete(f"memory:{name}")
            else:
                if known is None:
                    known = self.idx.fingerprints("memory:")
                self.put(doc, known)
            self.idx.set_meta(key, sig)

    def tailed(self, ledger: str) -> None:
        led = self.store.ledger(ledger)
        head = _head(led.path)
        mark = self.idx.meta(f"ledger:{ledger}") or {}
        offset = mark.get("offset", 0)
        if head != mark.get("head") or led.size() < offset:
            self.idx.delete_prefix(f"{_prefix(ledger)}:")
            offset = 0
        if led.size() == offset and head == mark.get("head"):
            return
        try:
            records, end = led.read_from(offset)
        except CorruptStateError:  # a damaged line: index what can be read
            self.idx.delete_prefix(f"{_prefix(ledger)}:")
            records, _ = led.records_skipping_damaged()
            end = led.size()
        make = TAILED_LEDGERS[ledger]
        for rec in records:
            self.put(make(self.store, rec))
        self.idx.set_meta(f"ledger:{ledger}", {"offset": end, "head": head})

    def work_items(self) -> None:
        from holon_cli.store import workitem_index

        sizes = [self.store.ledger(n).size() for n in WORK_LEDGERS]
        heads = [_head(self.store.ledger(n).path) for n in WORK_LEDGERS]
        moved = self.idx.meta("ledger:work") != {"sizes": sizes, "heads": heads}
        try:
            wix = workitem_index.load(self.store)
        except CorruptStateError:
            return  # `holon home check` reports it; search keeps what it has
        items = wix.items.values() if moved else wix.open_records()
        known = self.idx.fingerprints("work_item:")
        home = str(self.store.layout.home)
        for rec in items:
            summary = wix.report_of(rec["id"]) or {}
            fp = S.work_item_fingerprint(home, rec, summary.get("id"))
            if known.get(f"work_item:{rec['id']}") != fp:
                self.put(S.work_item_doc(self.store, rec, summary.get("text"), fp))
        if moved:
            self.idx.set_meta("ledger:work", {"sizes": sizes, "heads": heads})

    def workspaces(self) -> None:
        """Profiles of the attached workspaces; a detached one leaves the index."""
        try:
            docs = S.workspace_profile_docs(self.store)
        except HolonError:  # a damaged registry: `holon home check` names it
            return
        known = self.idx.fingerprints("workspace:")
        for doc in docs:
            self.put(doc, known)
        for key in set(known) - {d.source_key for d in docs}:
            self.idx.delete(key)

    def run(self, *, full: bool) -> None:
        with self.idx.transaction():
            if full:
                self.idx.clear()
            self.memory_files()
            for ledger in TAILED_LEDGERS:
                self.tailed(ledger)
            self.work_items()
            self.workspaces()


def _prefix(ledger: str) -> str:
    return {"briefs": "brief", "context_episodes": "episode"}[ledger]


def _head(path: Path) -> str | None:
    """The first bytes and inode of a ledger: a replaced or rewritten file differs."""
    try:
        with open(path, "rb") as f:
            return f"{os.fstat(f.fileno()).st_ino}:{f.read(256).hex()}"
    except FileNotFoundError:
        return None


def sync(store: AgentStore, *, rebuild: bool = False) -> dict[str, Any]:
    """Bring the index in step with its sources; a full rebuild when asked,
    when ``memory.dirty`` is present, or when the index is new."""
    with _synced(store, rebuild=rebuild) as (idx, out):
        out["documents"] = idx.count()
    return out


@contextmanager
def _synced(
    store: AgentStore, *, rebuild: bool = False
) -> Iterator[tuple[MemoryIndex, dict[str, Any]]]:
    """An open index, in step with its sources (one connection for the sync
    and the read that follows it)."""
    import sqlite3

    from holon_cli.store.memory_index import remove_files

    marker = dirty_marker(store)
    path = index_path(store)
    full = rebuild or marker.exists() or not path.exists()
    if full:
        mark_dirty(store)  # a rebuild cut off by a kill is redone by the next search
    try:
        idx = MemoryIndex(path)
        try:
            s = _Sync(store, idx)
            s.run(full=full)
        except BaseException:
            idx.close()
            raise
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise
        # pages damaged past what opening it shows: the index is a cache
        remove_files(path)
        mark_dirty(store)
        full = True
        idx = MemoryIndex(path)
        s = _Sync(store, idx)
        s.run(full=True)
    with idx:
        if full:
            marker.unlink(missing_ok=True)
        try:
            yield idx, {"rebuilt": full, "changed": s.changed}
        except sqlite3.DatabaseError as exc:
            mark_dirty(store)  # the next search rebuilds it
            raise CorruptStateError(
                f"{path}: the memory index is damaged ({exc})",
                hint="`holon memory rebuild` rebuilds it from its sources (nothing is lost)",
                details={"path": str(path)},
            ) from None


# ----------------------------------------------------------- search, get


def active_workspace_id(store: AgentStore) -> str:
    from holon_cli.runtime.workspace import workspace_for

    return workspace_for(store.layout.home, store.read_record()["state"]).workspace_id


def _provenance(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": row["kind"],
        "source_ref": row["source_ref"],
        "scope_kind": row["scope_kind"],
        "workspace_id": row["workspace_id"],
        "agent_id": row["agent_id"],
        "source_path": row["source_path"],
        "title": row["title"],
        "updated_at": row["updated_at"],
        "metadata": row["metadata"],
    }


def snippet(body: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """A window of the exact body around the first query term found (never
    the index's projection, so no bigram appears)."""
    from holon_cli.store.memory_index import query_terms

    low = body.lower()
    pos = -1
    for term in [query.strip(), *(t.strip('"').replace(" ", "") for t in query_terms(query))]:
        if term:
            pos = low.find(term.lower())
            if pos >= 0:
                break
    start = max(0, pos - width // 3) if pos >= 0 else 0
    text = " ".join(body[start : start + width].split())
    return ("…" if start > 0 else "") + text + ("…" if start + width < len(body) else "")


def memory_search(
    store: AgentStore,
    query: str,
    *,
    limit: int = DEFAULT_LIMIT,
    include_all_workspaces: bool = False,
) -> dict[str, Any]:
    if not query.strip():
        raise UsageError(
            "`query` is empty", hint="pass words to look for", details={"field": "query"}
        )
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(
            f"`limit` must be between 1 and {MAX_LIMIT}, got {limit}",
            hint=f"pass a limit from 1 to {MAX_LIMIT}",
            details={"field": "limit"},
        )
    ws = active_workspace_id(store)
    with _synced(store) as (idx, _):
        hits = idx.search(
            query, limit=limit, workspace_id=ws, all_workspaces=include_all_workspaces
        )
    results = []
    for h in hits:
        r = max(-h.rank, 0.0)  # bm25: more negative is better
        score = round((2 - h.tier) + r / (1 + r), 4)  # the tier first, then bm25 in [0, 1)
        results.append(
            {**_provenance(h.row), "snippet": snippet(h.row["body"], query), "score": score}
        )
    return {
        "query": query,
        "workspace_id": ws,
        "include_all_workspaces": include_all_workspaces,
        "results": results,
    }


def memory_get(
    store: AgentStore, ref: str, *, max_chars: int = DEFAULT_MAX_CHARS
) -> dict[str, Any]:
    if not 1 <= max_chars <= MAX_CHARS:
        raise UsageError(
            Said(
                f"--max-chars must be between 1 and {MAX_CHARS}, got {max_chars}",
                tool=f"`max_chars` must be between 1 and {MAX_CHARS}, got {max_chars}",
            ),
            hint=Said(
                f"pass --max-chars from 1 to {MAX_CHARS} (default {DEFAULT_MAX_CHARS})",
                tool=f"pass max_chars from 1 to {MAX_CHARS} (default {DEFAULT_MAX_CHARS})",
            ),
            details={"field": "max_chars"},
        )
    with _synced(store) as (idx, _):
        row = idx.get(ref) if ref.startswith("mem_") else None
    if row is None:
        raise NotFoundError(
            f"no memory source {ref!r}",
            hint=Said(
                "pass a source_ref exactly as `holon memory search` printed it (it is not a path)",
                tool="pass a source_ref exactly as MemorySearch returned it (it is not a path)",
            ),
        )
    body: str = row["body"]
    return {**_provenance(row), "content": body[:max_chars], "truncated": len(body) > max_chars}
