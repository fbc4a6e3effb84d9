"""The memory search index: one SQLite database per agent with FTS5.

Owns ``agent_home/.holon/indexes/memory.sqlite3`` (disposable: every row is
derived from a stronger source and can be rebuilt) and the text projection
that FTS5 searches. Each document keeps its exact body beside the
projection; the projection expands CJK runs to overlapping bigrams, so
``蓝绿`` finds ``部署流程使用蓝绿发布``, and nothing read back for a person or a
model ever comes from the projection.

Tables: ``meta`` (what the index has seen of each source, the build state),
``docs`` (one row per source: exact body, provenance, fingerprint and the
generation that last saw it), ``fts`` (every document) and ``fts_recent``
(the same projection of the newest :data:`RECENT_DOCS` documents, by id).

Ranking (``store/memory_ranking.py``): exact-phrase hits first, then
documents with every term, then any term, bm25 in each tier; above
:data:`RECENT_DOCS` (+ slack) documents a tier is ranked on ``fts_recent``
(kept here, in step with every write) and filled from the older matches,
newest first. This module owns the database: opening and checking it, the
writes, the recent window, the cached reads, the kept connections.

Invariants:
- WAL mode and a busy timeout: a search during an update reads the last
  committed state and never sees ``database is locked``.
- Every change is one transaction (a sync step, a chunk of a build): a
  process killed in the middle leaves the previous state.
- ``fts_recent`` holds exactly the documents whose id is at least
  ``recent_low`` (:meth:`MemoryIndex.recent_low`): the floor in use, or
  the lowest id filled so far while it is being filled.
- A database that SQLite cannot read is removed and rebuilt, never a
  reason for a search to fail; one whose schema is not this one (a table
  dropped, another database in its place) is renamed aside
  (``memory.sqlite3.damaged-<time>``) and rebuilt; an index of an earlier
  version of ours is removed and rebuilt. :func:`index_problem` is the
  read-only check ``holon home check`` makes (schema, then SQLite's
  ``quick_check``).
- :func:`open_index` keeps one connection per thread and index (a search
  pays no connect, schema check or WAL checkpoint); it is dropped when the
  file (or its WAL index) was replaced, and its caches when another
  connection committed (``PRAGMA data_version``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from holon_cli.errors import RejectedError
from holon_cli.store import memory_ranking
from holon_cli.store.memory_ranking import Hit as Hit
from holon_cli.store.memory_ranking import row_dict
from holon_cli.store.memory_schema import SCHEMA_VERSION as SCHEMA_VERSION
from holon_cli.store.memory_schema import TOKENIZE as TOKENIZE
from holon_cli.store.memory_schema import connect, schema_problem
from holon_cli.store.memory_schema import index_problem as index_problem
from holon_cli.store.memory_schema import remove_files as remove_files
from holon_cli.store.memory_text import project

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject

# the newest documents ranked first; above RECENT_DOCS + RECENT_SLACK
# documents the window is trimmed back to RECENT_DOCS
RECENT_DOCS = 10_000
RECENT_SLACK = 1_000
# connections kept per thread (a serve with many agents searches many indexes)
OPEN_PER_THREAD = 8


class Doc(NamedTuple):
    """One indexed source, as the runtime hands it over."""

    source_key: str  # stable identity of the source, e.g. "work_item:wi_…"
    kind: str
    scope_kind: str  # "agent" (always searched) or "workspace"
    workspace_id: str | None
    agent_id: str
    source_path: str | None
    title: str
    body: str
    updated_at: str | None
    metadata: JsonObject
    fingerprint: str


_FTS5: bool | None = None


def fts5_available() -> bool:
    """Whether this Python's SQLite has FTS5 (checked once per process)."""
    global _FTS5
    if _FTS5 is None:
        con = sqlite3.connect(":memory:")
        try:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(a)")
            _FTS5 = True
        except sqlite3.OperationalError:
            _FTS5 = False
        finally:
            con.close()
    return _FTS5


def _require_fts5() -> None:
    if not fts5_available():
        raise RejectedError(
            f"this Python's sqlite3 (SQLite {sqlite3.sqlite_version}) has no FTS5, "
            "which memory search needs",
            hint="use a Python whose SQLite is built with FTS5 (python.org, Debian and "
            "Homebrew builds have it)",
        )


def _identity(path: Path | str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class MemoryIndex:
    """A connection to one agent's index; use as a context manager (or get a
    kept one from :func:`open_index`).

    ``cache`` holds what was read from the database (meta values,
    fingerprints) and what callers derive from it; it is emptied when
    another connection commits and when a transaction of ours rolls back.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        _require_fts5()
        self.con = connect(path)
        self.cache: dict[str, Any] = {}
        self._version = self._data_version()
        self._ident = (_identity(path), _identity(f"{path}-shm"))
        self._inserted = 0

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> MemoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ freshness

    def _data_version(self) -> int:
        return int(self.con.execute("PRAGMA data_version").fetchone()[0])

    def still_current(self) -> bool:
        """Whether this connection still reads the file at ``path`` (not one
        removed or replaced since: a new inode, or its WAL index gone)."""
        return self._ident == (_identity(self.path), _identity(f"{self.path}-shm"))

    def refresh(self) -> None:
        """Empty the caches when another connection committed since we last
        looked; check the schema again then (a table may have been dropped)."""
        version = self._data_version()
        if version != self._version:
            self._version = version
            self.cache.clear()
            user_version = self.con.execute("PRAGMA user_version").fetchone()[0]
            if user_version != SCHEMA_VERSION or schema_problem(self.con) is not None:
                raise sqlite3.DatabaseError("the memory index was changed to another schema")

    # ---------------------------------------------------------------- writes

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN IMMEDIATE")
        try:
            self.refresh()  # what others committed before we took the lock
            self._inserted = 0
            yield
            if self._inserted:
                self._trim_recent()
        except BaseException:
            self.con.execute("ROLLBACK")
            self.cache.clear()
            raise
        self.con.execute("COMMIT")

    def upsert(self, doc: Doc, source_ref: str, gen: int) -> None:
        """Insert or replace ``doc`` (inside :meth:`transaction`); it gets the
        next id, so it counts among the newest documents."""
        self.delete(doc.source_key)
        cur = self.con.execute(
            "INSERT INTO docs(source_key, source_ref, kind, scope_kind, workspace_id, agent_id,"
            " source_path, title, body, updated_at, metadata, fingerprint, gen)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                doc.source_key,
                source_ref,
                doc.kind,
                doc.scope_kind,
                doc.workspace_id,
                doc.agent_id,
                doc.source_path,
                doc.title,
                doc.body,
                doc.updated_at,
                json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True),
                doc.fingerprint,
                gen,
            ),
        )
        rowid = cur.lastrowid
        self._counted(1)
        projected = (rowid, project(doc.title), project(doc.body))
        self.con.execute("INSERT INTO fts(rowid, title, body) VALUES (?,?,?)", projected)
        low = self.recent_low()
        if low is not None and rowid is not None and rowid >= low:
            self.con.execute("INSERT INTO fts_recent(rowid, title, body) VALUES (?,?,?)", projected)
        self._inserted += 1
        fps = self._cached_fps(doc.source_key)
        if fps is not None:
            fps[doc.source_key] = doc.fingerprint

    def touch(self, source_key: str, gen: int) -> None:
        """Mark an unchanged document as seen by generation ``gen``."""
        self.con.execute(
            "UPDATE docs SET gen=? WHERE source_key=? AND gen<>?", (gen, source_key, gen)
        )

    def _delete_id(self, i: int) -> None:
        self.con.execute("DELETE FROM fts WHERE rowid=?", (i,))
        low = self.recent_low()
        if low is not None and i >= low:
            self.con.execute("DELETE FROM fts_recent WHERE rowid=?", (i,))
        self.con.execute("DELETE FROM docs WHERE id=?", (i,))
        self._counted(-1)

    def delete(self, source_key: str) -> None:
        row = self.con.execute("SELECT id FROM docs WHERE source_key=?", (source_key,)).fetchone()
        if row:
            self._delete_id(row[0])
        fps = self._cached_fps(source_key)
        if fps is not None:
            fps.pop(source_key, None)

    def delete_prefix(self, prefix: str) -> None:
        ids = self.con.execute(
            "SELECT id FROM docs WHERE source_key >= ? AND source_key < ?", _prefix_range(prefix)
        ).fetchall()
        for (i,) in ids:
            self._delete_id(i)
        self.cache.get("fp", {}).pop(prefix, None)

    def sweep(self, gen: int, limit: int) -> int:
        """Remove up to ``limit`` documents no source showed since generation
        ``gen`` began; returns how many."""
        rows = self.con.execute(
            "SELECT id, source_key FROM docs WHERE gen<? LIMIT ?", (gen, limit)
        ).fetchall()
        for i, key in rows:
            self._delete_id(i)
            fps = self._cached_fps(key)
            if fps is not None:
                fps.pop(key, None)
        return len(rows)

    def set_meta(self, key: str, value: Any) -> None:
        if value is None:
            self.con.execute("DELETE FROM meta WHERE key=?", (key,))
        else:
            self.con.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value))
            )
        meta = self.cache.get("meta")
        if meta is not None:
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = json.loads(json.dumps(value))  # as a read would give it

    def delete_meta_prefix(self, prefix: str) -> None:
        for key in [k for k in self._meta() if k.startswith(prefix)]:
            self.set_meta(key, None)

    # ---------------------------------------------------- the recent window

    def recent_low(self) -> int | None:
        """The lowest id ``fts_recent`` holds every document from (``None``:
        not kept: ranking uses ``fts`` alone)."""
        fill = self.meta("recent_fill")
        if isinstance(fill, dict):
            return int(fill["next"])
        recent = self.meta("recent")
        return int(recent["floor"]) if isinstance(recent, dict) else None

    def recent_floor(self) -> int | None:
        """The window searched first, when it is complete."""
        recent = self.meta("recent")
        return int(recent["floor"]) if isinstance(recent, dict) else None

    def drop_recent(self) -> None:
        """Stop keeping the window (a build from empty fills it at its end)."""
        self.con.execute("DROP TABLE IF EXISTS fts_recent")
        self.con.execute(
            f"CREATE VIRTUAL TABLE fts_recent USING fts5(title, body, tokenize='{TOKENIZE}')"
        )
        self.set_meta("recent", None)
        self.set_meta("recent_fill", None)

    def _newest_floor(self) -> int | None:
        """The id of the :data:`RECENT_DOCS`-th newest document."""
        row = self.con.execute(
            "SELECT id FROM docs ORDER BY id DESC LIMIT 1 OFFSET ?", (RECENT_DOCS - 1,)
        ).fetchone()
        return int(row[0]) if row else None

    def _trim_recent(self) -> None:
        floor = self.recent_floor()
        if floor is None or self.meta("recent_fill") is not None:
            return
        # New ids are above every id, so the id span from the floor bounds
        # the documents in the window from above (a count of them read
        # 10,000 rows with their bodies: 18 ms per change at 100,000
        # documents). Ids freed by replaced documents leave gaps: a check
        # that finds nothing to trim is not made again before RECENT_SLACK
        # more ids, so the window holds at most RECENT_DOCS + RECENT_SLACK.
        recent = self.meta("recent") or {}
        (top,) = self.con.execute("SELECT coalesce(max(id), 0) FROM docs").fetchone()
        top = int(top)
        if top - floor + 1 <= RECENT_DOCS + RECENT_SLACK:
            return
        if top < int(recent.get("checked", 0)) + RECENT_SLACK:
            return
        new = self._newest_floor()
        if new is None or new <= floor:
            self.set_meta("recent", {"floor": floor, "checked": top})
            return
        self.con.execute("DELETE FROM fts_recent WHERE rowid < ?", (new,))
        self.set_meta("recent", {"floor": new, "checked": top})

    def recent_fill_needed(self) -> bool:
        """No window is kept (a build from empty ended) and the index is
        large enough to want one."""
        if self.meta("recent") is not None or self.meta("recent_fill") is not None:
            return False
        return self.count() > RECENT_DOCS + RECENT_SLACK

    def fill_recent(self, chunk: int) -> bool:
        """Copy up to ``chunk`` documents into the window, newest first
        (inside :meth:`transaction`); True when the window is complete."""
        fill = self.meta("recent_fill")
        if not isinstance(fill, dict):
            if self.meta("recent") is not None:
                return True
            floor = self._newest_floor() or 1
            top = int(self.con.execute("SELECT coalesce(max(id), 0) FROM docs").fetchone()[0])
            self.drop_recent()
            fill = {"floor": floor, "next": top + 1}
        floor, nxt = int(fill["floor"]), int(fill["next"])
        low = max(floor, nxt - chunk)
        self.con.execute(
            "INSERT INTO fts_recent(rowid, title, body)"
            " SELECT rowid, title, body FROM fts WHERE rowid >= ? AND rowid < ?",
            (low, nxt),
        )
        if low <= floor:
            self.set_meta("recent_fill", None)
            self.set_meta("recent", {"floor": floor})
            return True
        self.set_meta("recent_fill", {"floor": floor, "next": low})
        return False

    # ----------------------------------------------------------------- reads

    def _meta(self) -> JsonObject:
        meta = self.cache.get("meta")
        if meta is None:
            meta = {k: json.loads(v) for k, v in self.con.execute("SELECT key, value FROM meta")}
            self.cache["meta"] = meta
        return meta

    def meta(self, key: str) -> Any:
        return self._meta().get(key)

    def fingerprints(self, prefix: str) -> dict[str, str]:
        """Source key → fingerprint for keys starting with ``prefix`` (a kind
        and its colon, e.g. ``work_item:``), read once (a range on the unique
        index of ``source_key``) and kept in :attr:`cache` in step with this
        connection's writes. The caller must not change it."""
        by_kind: dict[str, dict[str, str]] = self.cache.setdefault("fp", {})
        fps = by_kind.get(prefix)
        if fps is None:
            fps = by_kind[prefix] = dict(
                self.con.execute(
                    "SELECT source_key, fingerprint FROM docs"
                    " WHERE source_key >= ? AND source_key < ?",
                    _prefix_range(prefix),
                ).fetchall()
            )
        return fps

    def _cached_fps(self, source_key: str) -> dict[str, str] | None:
        by_kind: dict[str, dict[str, str]] | None = self.cache.get("fp")
        if by_kind is None:
            return None
        return by_kind.get(source_key.split(":", 1)[0] + ":")

    def fingerprint(self, source_key: str) -> str | None:
        row = self.con.execute(
            "SELECT fingerprint FROM docs WHERE source_key=?", (source_key,)
        ).fetchone()
        return str(row[0]) if row else None

    def count(self) -> int:
        n = self.cache.get("count")
        if n is None:
            n = self.cache["count"] = int(
                self.con.execute("SELECT count(*) FROM docs").fetchone()[0]
            )
        return int(n)

    def _counted(self, delta: int) -> None:
        if "count" in self.cache:
            self.cache["count"] += delta

    def get(self, source_ref: str) -> dict[str, Any] | None:
        cur = self.con.execute("SELECT * FROM docs WHERE source_ref=?", (source_ref,))
        row = cur.fetchone()
        return row_dict(cur, row) if row else None

    def search(
        self, query: str, *, limit: int, workspace_id: str | None, all_workspaces: bool
    ) -> list[Hit]:
        """The best ``limit`` documents for ``query`` in scope, ranked in
        tiers over the newest documents first (``store/memory_ranking.py``)."""
        return memory_ranking.search(
            self.con,
            query,
            self.recent_floor,
            limit=limit,
            workspace_id=workspace_id,
            all_workspaces=all_workspaces,
        )


def _prefix_range(prefix: str) -> tuple[str, str]:
    """``[prefix, prefix with its last character + 1)``: every key starting with it."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


# ------------------------------------------------------------ kept connections

_KEPT = threading.local()
_KEPT_PID = [os.getpid()]
_INHERITED: list[MemoryIndex] = []  # a forked child never closes its parent's


def open_index(path: Path) -> MemoryIndex:
    """This thread's kept connection to the index at ``path`` (opened, or
    opened again when the file was removed or replaced), its caches emptied
    when another connection committed. Never close it; :func:`forget`
    drops it."""
    _require_fts5()
    if _KEPT_PID[0] != os.getpid():  # a forked child: its parent's connections are not ours
        _INHERITED.extend(getattr(_KEPT, "by_path", {}).values())
        _KEPT.__dict__.clear()
        _KEPT_PID[0] = os.getpid()
    kept: dict[str, MemoryIndex] = _KEPT.__dict__.setdefault("by_path", {})
    key = str(path)
    idx = kept.pop(key, None)
    if idx is not None and not idx.still_current():
        idx.close()
        idx = None
    if idx is not None:
        try:
            idx.refresh()
        except sqlite3.DatabaseError:
            idx.close()
            idx = None
    if idx is None:
        idx = MemoryIndex(path)
    kept[key] = idx  # most recently used last
    while len(kept) > OPEN_PER_THREAD:
        kept.pop(next(iter(kept))).close()
    return idx


def forget(path: Path) -> None:
    """Close this thread's kept connection to ``path`` (before the file is
    removed, or after an error)."""
    kept: dict[str, MemoryIndex] = _KEPT.__dict__.get("by_path", {})
    idx = kept.pop(str(path), None)
    if idx is not None and _KEPT_PID[0] == os.getpid():
        idx.close()
