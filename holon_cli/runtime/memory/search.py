"""``MemorySearch`` and ``MemoryGet``: ranked search over the index kept in
step with its sources, exact retrieval through opaque references.

Freshness (what is checked before every search or get, what is built in
the background) lives in :mod:`holon_cli.runtime.memory.sync`; a search
answers from what is indexed and says so: ``index.state`` is ``ready``, or
``building`` while a build (a new index, a rebuild, a large backlog) runs
in the background, with ``index.documents`` indexed so far. A search never
waits for more than :data:`~holon_cli.runtime.memory.sync.BUDGET_S` of a
large build.

A ``source_ref`` is ``mem_`` + an HMAC of the source key under a per-agent
secret (``.holon/state/memory_ref.key``): stable across rebuilds, and not
something a model can make up; anything not in the index is ``not_found``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NotRequired, TypedDict

from holon_cli.errors import CorruptStateError, NotFoundError, Said, UsageError
from holon_cli.runtime.memory import sync as _sync
from holon_cli.runtime.memory.sync import (
    Outcome,
    dirty_marker,
    freshen,
    index_path,
    indexes_dir,
    mark_dirty,
    source_ref,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.memory_index import MemoryIndex

__all__ = [
    "dirty_marker",
    "index_path",
    "indexes_dir",
    "mark_dirty",
    "memory_get",
    "memory_search",
    "source_ref",
    "sync",
]

DEFAULT_LIMIT = 8
MAX_LIMIT = 50
DEFAULT_MAX_CHARS = 12_000
MAX_CHARS = 50_000
SNIPPET_CHARS = 240


class Synced(TypedDict):
    """What :func:`sync` did: rebuilt the index, changed it, and its size."""

    rebuilt: bool
    changed: int
    documents: int


def sync(store: AgentStore, *, rebuild: bool = False) -> Synced:
    """Bring the index in step with its sources, all of it, here (``holon
    memory rebuild``, ``home check --repair``, the background builder's
    work): a full rebuild when asked, when ``memory.dirty`` is new, or
    when the index is new."""
    if rebuild:
        mark_dirty(store)  # a rebuild cut off by a kill is redone by the next search
    with _synced(store, complete=True, rebuild=rebuild) as (idx, out):
        documents = idx.count()
    return {"rebuilt": out.rebuilt, "changed": out.changed, "documents": documents}


@contextmanager
def _synced(
    store: AgentStore,
    *,
    complete: bool = False,
    state: Any = None,
    rebuild: bool = False,
) -> Iterator[tuple[MemoryIndex, Outcome]]:
    """The index (this thread's kept connection), in step with its sources
    (see :func:`~holon_cli.runtime.memory.sync.freshen`); ``complete``: all
    the bulk work here, however long (else a search's budget)."""
    import sqlite3

    from holon_cli.store.memory_index import forget, open_index, remove_files

    path = index_path(store)
    budget = None if complete else _sync.BUDGET_S
    try:
        idx = open_index(path)
        outcome = freshen(store, idx, budget=budget, state=state, rebuild=rebuild)
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise
        # pages damaged past what opening it shows: the index is a cache
        forget(path)
        remove_files(path)
        idx = open_index(path)
        outcome = freshen(store, idx, budget=budget, state=state)
    try:
        yield idx, outcome
    except sqlite3.DatabaseError as exc:
        forget(path)
        mark_dirty(store)  # the next search rebuilds it
        raise CorruptStateError(
            f"{path}: the memory index is damaged ({exc})",
            hint="`holon memory rebuild` rebuilds it from its sources (nothing is lost)",
            details={"path": str(path)},
        ) from None


# ----------------------------------------------------------- search, get


def active_workspace_id(store: AgentStore, state: Any = None) -> str:
    from holon_cli.runtime.workspace import workspace_for

    if state is None:
        state = store.read_record()["state"]
    return workspace_for(store.layout.home, state).workspace_id


class IndexState(TypedDict):
    """How far the index is: ``ready``, or ``building`` with what it holds so far."""

    state: str
    documents: NotRequired[int]


def _index_state(idx: MemoryIndex, out: Outcome) -> IndexState:
    if out.state == "ready":
        return {"state": "ready"}
    return {"state": "building", "documents": idx.count()}


def _provenance(row: Mapping[str, object]) -> dict[str, object]:
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


def snippet(body: str, query: str, width: int = SNIPPET_CHARS, *, finder: Any = None) -> str:
    """A window of the exact body around the first query term found (never
    the index's projection, so no bigram appears). ``finder``: the query's
    :func:`snippet_finder`, made once for all of a search's hits."""
    found = (finder or snippet_finder(query))(body)
    pos = found.start() if found else -1
    start = max(0, pos - width // 3) if pos >= 0 else 0
    text = " ".join(body[start : start + width].split())
    return ("…" if start > 0 else "") + text + ("…" if start + width < len(body) else "")


def snippet_finder(query: str) -> Any:
    """Where in a body the snippet goes: the whole query, else its first term
    found (case-insensitive; a CJK run as written, without its bigrams)."""
    import re

    from holon_cli.store.memory_text import query_terms

    terms = [query.strip(), *(t.strip('"').replace(" ", "") for t in query_terms(query))]
    terms = [t.replace('""', '"') for t in dict.fromkeys(terms) if t]
    if not terms:
        return lambda body: None
    whole = re.compile(re.escape(terms[0]), re.IGNORECASE)
    rest = [re.compile(re.escape(t), re.IGNORECASE) for t in terms[1:]]

    def find(body: str) -> Any:
        for rx in (whole, *rest):
            m = rx.search(body)
            if m:
                return m
        return None

    return find


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
    state = store.read_record()["state"]
    ws = active_workspace_id(store, state)
    with _synced(store, state=state) as (idx, out):
        hits = idx.search(
            query, limit=limit, workspace_id=ws, all_workspaces=include_all_workspaces
        )
        index = _index_state(idx, out)
    results = []
    finder = snippet_finder(query)
    for h in hits:
        r = max(-h.rank, 0.0)  # bm25: more negative is better
        score = round((2 - h.tier) + r / (1 + r), 4)  # the tier first, then bm25 in [0, 1)
        results.append(
            {
                **_provenance(h.row),
                "snippet": snippet(h.row["body"], query, finder=finder),
                "score": score,
            }
        )
    return {
        "query": query,
        "workspace_id": ws,
        "include_all_workspaces": include_all_workspaces,
        "results": results,
        "index": index,
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
    with _synced(store) as (idx, out):
        row = idx.get(ref) if ref.startswith("mem_") else None
    if row is None:
        building = (
            " (the memory index is still being built: a source not indexed yet is found once it is)"
            if out.state == "building"
            else ""
        )
        raise NotFoundError(
            f"no memory source {ref!r}{building}",
            hint=Said(
                "pass a source_ref exactly as `holon memory search` printed it (it is not a path)",
                tool="pass a source_ref exactly as MemorySearch returned it (it is not a path)",
            ),
        )
    body: str = row["body"]
    return {**_provenance(row), "content": body[:max_chars], "truncated": len(body) > max_chars}
