"""The memory search index: one SQLite database per agent with FTS5.

Owns ``agent_home/.holon/indexes/memory.sqlite3`` (disposable: every row is
derived from a stronger source and can be rebuilt) and the text projection
that FTS5 searches. Each document keeps its exact body beside the
projection; the projection expands CJK runs to overlapping bigrams, so
``蓝绿`` finds ``部署流程使用蓝绿发布``, and nothing read back for a person or a
model ever comes from the projection.

Invariants:
- WAL mode and a busy timeout: a search during an update reads the last
  committed state and never sees ``database is locked``.
- Every change (a sync, a rebuild) is one transaction: a process killed in
  the middle leaves the previous state, and the dirty marker (removed only
  after the commit) makes the next search redo the work.
- A database that SQLite cannot read is removed and rebuilt, never a
  reason for a search to fail; one whose schema is not this one (a table
  dropped, another database in its place) is renamed aside
  (``memory.sqlite3.damaged-<time>``) and rebuilt. :func:`index_problem` is
  the read-only check ``holon home check`` makes (schema, then SQLite's
  ``quick_check``).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from holon_cli.errors import RejectedError

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 5000

# Han (incl. extensions A and compatibility), kana, Hangul syllables and jamo
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_]+", re.UNICODE)


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
    metadata: dict[str, Any]
    fingerprint: str


class Hit(NamedTuple):
    row: dict[str, Any]
    rank: float  # lower is better
    tier: int  # 0: exact phrase, 1: every term, 2: any term


def _bigrams(run: str) -> str:
    if len(run) == 1:
        return run
    return " ".join(run[i : i + 2] for i in range(len(run) - 1))


def project(text: str) -> str:
    """The FTS projection: CJK runs become space-separated bigrams."""
    return _CJK_RUN.sub(lambda m: " " + _bigrams(m.group(0)) + " ", text)


def query_terms(query: str) -> list[str]:
    """A query's terms as FTS5 phrases: each a quoted string (no operator a
    caller types reaches FTS5), a CJK run as its bigram phrase."""
    out: list[str] = []
    for tok in _TOKEN.findall(query):
        text = _bigrams(tok) if _CJK_RUN.fullmatch(tok) else tok
        out.append('"' + text.replace('"', '""') + '"')
    return out


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


class MemoryIndex:
    """A connection to one agent's index; use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.con = self._open()

    def _open(self) -> sqlite3.Connection:
        if not fts5_available():
            raise RejectedError(
                f"this Python's sqlite3 (SQLite {sqlite3.sqlite_version}) has no FTS5, "
                "which memory search needs",
                hint="use a Python whose SQLite is built with FTS5 (python.org, Debian and "
                "Homebrew builds have it)",
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return self._connect()
        except sqlite3.DatabaseError:
            remove_files(self.path)  # unreadable: it is only a cache
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            con.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            con.execute("PRAGMA synchronous=NORMAL")
            version = con.execute("PRAGMA user_version").fetchone()[0]
            wrong = version not in (0, SCHEMA_VERSION) or (
                version == SCHEMA_VERSION and schema_problem(con) is not None
            )
            if version == 0 and con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                wrong = True  # tables, but not ours (ours set user_version with them)
            if wrong:
                # another schema (a table dropped, another database put here):
                # the index is a cache; whatever is here is kept aside, not read
                con.close()
                set_aside(self.path)
                return self._connect()
            if version == 0:
                con.execute("PRAGMA journal_mode=WAL")  # persistent: set once, at creation
                self._create(con)
        except BaseException:
            con.close()
            raise
        return con

    @staticmethod
    def _create(con: sqlite3.Connection) -> None:
        con.executescript(
            f"""
            BEGIN IMMEDIATE;
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS docs(
              id INTEGER PRIMARY KEY,
              source_key TEXT UNIQUE NOT NULL,
              source_ref TEXT UNIQUE NOT NULL,
              kind TEXT NOT NULL, scope_kind TEXT NOT NULL, workspace_id TEXT,
              agent_id TEXT NOT NULL, source_path TEXT, title TEXT NOT NULL,
              body TEXT NOT NULL, updated_at TEXT, metadata TEXT NOT NULL,
              fingerprint TEXT NOT NULL);
            CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
              title, body, tokenize='unicode61 remove_diacritics 2');
            PRAGMA user_version={SCHEMA_VERSION};
            COMMIT;
            """
        )

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> MemoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- writes

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def upsert(self, doc: Doc, source_ref: str) -> None:
        """Insert or replace ``doc`` (inside :meth:`transaction`)."""
        self.delete(doc.source_key)
        cur = self.con.execute(
            "INSERT INTO docs(source_key, source_ref, kind, scope_kind, workspace_id, agent_id,"
            " source_path, title, body, updated_at, metadata, fingerprint)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
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
            ),
        )
        self.con.execute(
            "INSERT INTO fts(rowid, title, body) VALUES (?,?,?)",
            (cur.lastrowid, project(doc.title), project(doc.body)),
        )

    def delete(self, source_key: str) -> None:
        row = self.con.execute("SELECT id FROM docs WHERE source_key=?", (source_key,)).fetchone()
        if row:
            self.con.execute("DELETE FROM fts WHERE rowid=?", (row[0],))
            self.con.execute("DELETE FROM docs WHERE id=?", (row[0],))

    def delete_prefix(self, prefix: str) -> None:
        ids = [
            r[0]
            for r in self.con.execute(
                "SELECT id FROM docs WHERE source_key >= ? AND source_key < ?",
                _prefix_range(prefix),
            )
        ]
        for i in ids:
            self.con.execute("DELETE FROM fts WHERE rowid=?", (i,))
            self.con.execute("DELETE FROM docs WHERE id=?", (i,))

    def clear(self) -> None:
        self.con.execute("DELETE FROM fts")
        self.con.execute("DELETE FROM docs")
        self.con.execute("DELETE FROM meta")

    def set_meta(self, key: str, value: Any) -> None:
        self.con.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value))
        )

    # ----------------------------------------------------------------- reads

    def meta(self, key: str) -> Any:
        row = self.con.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def fingerprints(self, prefix: str) -> dict[str, str]:
        """Source key → fingerprint for keys starting with ``prefix`` (a range
        on the unique index of ``source_key``, not a scan of every row)."""
        return dict(
            self.con.execute(
                "SELECT source_key, fingerprint FROM docs WHERE source_key >= ? AND source_key < ?",
                _prefix_range(prefix),
            ).fetchall()
        )

    def count(self) -> int:
        return int(self.con.execute("SELECT count(*) FROM docs").fetchone()[0])

    def get(self, source_ref: str) -> dict[str, Any] | None:
        cur = self.con.execute("SELECT * FROM docs WHERE source_ref=?", (source_ref,))
        row = cur.fetchone()
        return _row(cur, row) if row else None

    def search(
        self, query: str, *, limit: int, workspace_id: str | None, all_workspaces: bool
    ) -> list[Hit]:
        """Exact-phrase hits first, then documents with every term, then any
        term; bm25 orders each tier."""
        terms = query_terms(query)
        if not terms:
            return []
        tiers = [" ".join(terms), " AND ".join(terms), " OR ".join(terms)]
        if len(terms) > 1:
            tiers[0] = '"' + " ".join(t.strip('"') for t in terms) + '"'
        else:
            tiers = tiers[:1]
        seen: set[int] = set()
        hits: list[Hit] = []
        for tier, match in enumerate(tiers):
            if len(hits) >= limit:
                break
            for rec in self._ranked(match, limit + len(seen), workspace_id, all_workspaces):
                if rec["id"] in seen:
                    continue
                seen.add(rec["id"])
                hits.append(Hit(rec, float(rec.pop("rank")), tier if len(tiers) > 1 else 0))
        return hits[:limit]

    def _ranked(
        self, match: str, n: int, workspace_id: str | None, all_workspaces: bool
    ) -> list[dict[str, Any]]:
        """The ``n`` best documents for one FTS query, in scope. The ranking
        runs on the FTS table alone and only its best rows are joined (a
        common word matches most documents: joining them all first doubled a
        search); when the scope filter leaves fewer than ``n`` of a full
        window, the whole match is ranked again with the filter inside."""
        window = n if all_workspaces else n * 4
        scope = "" if all_workspaces else " WHERE (d.scope_kind='agent' OR d.workspace_id IS ?)"
        sql = (
            "SELECT d.*, t.rank FROM (SELECT rowid, bm25(fts, 2.0, 1.0) AS rank FROM fts"
            " WHERE fts MATCH ? ORDER BY rank LIMIT ?) t JOIN docs d ON d.id = t.rowid"
            f"{scope} ORDER BY t.rank LIMIT ?"
        )
        args: tuple[Any, ...] = (
            (match, window, n) if all_workspaces else (match, window, workspace_id, n)
        )
        cur = self.con.execute(sql, args)
        rows = [_row(cur, r) for r in cur.fetchall()]
        if all_workspaces or len(rows) >= n:
            return rows
        (matched,) = self.con.execute(
            "SELECT count(*) FROM fts WHERE fts MATCH ?", (match,)
        ).fetchone()
        if matched <= window:
            return rows  # the window held every match: nothing more in scope
        cur = self.con.execute(
            "SELECT d.*, bm25(fts, 2.0, 1.0) AS rank FROM fts JOIN docs d ON d.id = fts.rowid"
            " WHERE fts MATCH ? AND (d.scope_kind='agent' OR d.workspace_id IS ?)"
            " ORDER BY rank LIMIT ?",
            (match, workspace_id, n),
        )
        return [_row(cur, r) for r in cur.fetchall()]


def _row(cur: sqlite3.Cursor, row: Iterable[Any]) -> dict[str, Any]:
    rec = dict(zip([c[0] for c in cur.description], row, strict=True))
    rec["metadata"] = json.loads(rec["metadata"])
    return rec


def _prefix_range(prefix: str) -> tuple[str, str]:
    """``[prefix, prefix with its last character + 1)``: every key starting with it."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


# the tables (and columns) of SCHEMA_VERSION; ``fts`` is an FTS5 table
SCHEMA: dict[str, frozenset[str]] = {
    "meta": frozenset({"key", "value"}),
    "docs": frozenset(
        {
            "id",
            "source_key",
            "source_ref",
            "kind",
            "scope_kind",
            "workspace_id",
            "agent_id",
            "source_path",
            "title",
            "body",
            "updated_at",
            "metadata",
            "fingerprint",
        }
    ),
    "fts": frozenset({"title", "body"}),
}


def schema_problem(con: sqlite3.Connection) -> str | None:
    """What is wrong with the schema of an open index (``None``: it is ours)."""
    rows = dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type='table'").fetchall())
    for table, cols in SCHEMA.items():
        if table not in rows:
            return f"it has no `{table}` table"
        have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        if not cols <= have:
            return f"its `{table}` table lacks {', '.join(sorted(cols - have))}"
    if "fts5" not in str(rows["fts"] or "").lower():
        return "its `fts` table is not an FTS5 table"
    return None


def index_problem(path: Path) -> str | None:
    """Why the index at ``path`` cannot serve a search (read-only: ``holon
    home check``); ``None`` when it is sound or does not exist."""
    if not path.exists():
        return None
    try:
        if path.stat().st_size == 0:
            return "it is empty (no schema)"
        uri = f"file:{path}?mode=ro"
        try:
            con = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:  # a WAL database without its -shm: read it as is
            con = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                return f"its schema version is {version}, not {SCHEMA_VERSION}"
            why = schema_problem(con)
            if why is None:
                bad = con.execute("PRAGMA quick_check").fetchone()[0]
                why = None if bad == "ok" else f"SQLite reports damage ({bad})"
            return why
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return f"SQLite cannot read it ({exc})"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"


def set_aside(path: Path) -> None:
    """Keep what is at ``path`` as ``<name>.damaged-<time>`` (never read again)."""
    import time

    if path.exists():
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path.replace(path.with_name(f"{path.name}.damaged-{stamp}"))
    remove_files(path)


def remove_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)
