"""The memory index's files on disk: its schema (the tables and columns of
``SCHEMA_VERSION``), opening an index (ours, or created anew), checking one
against the schema, and setting a damaged one aside
(``store/memory_index.py`` is the index itself and re-exports these)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_VERSION = 2
OUR_OLDER_VERSIONS = (1,)  # ours, an earlier layout: removed and rebuilt, not "damaged"
BUSY_TIMEOUT_MS = 5000
TOKENIZE = "unicode61 remove_diacritics 2"

# the tables (and columns) of SCHEMA_VERSION; ``fts`` and ``fts_recent`` are FTS5 tables
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
            "gen",
        }
    ),
    "fts": frozenset({"title", "body"}),
    "fts_recent": frozenset({"title", "body"}),
}
FTS_TABLES = ("fts", "fts_recent")
# what schema 1 had (docs without `gen`, no window)
SCHEMA_V1: dict[str, frozenset[str]] = {
    "meta": SCHEMA["meta"],
    "docs": SCHEMA["docs"] - {"gen"},
    "fts": SCHEMA["fts"],
}


def schema_problem(con: sqlite3.Connection, version: int = SCHEMA_VERSION) -> str | None:
    """What is wrong with the schema of an open index (``None``: it is ours,
    of ``version``)."""
    tables = SCHEMA if version == SCHEMA_VERSION else SCHEMA_V1
    rows = dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type='table'").fetchall())
    for table, cols in tables.items():
        if table not in rows:
            return f"it has no `{table}` table"
        have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        if not cols <= have:
            return f"its `{table}` table lacks {', '.join(sorted(cols - have))}"
    for table in FTS_TABLES:
        if table in tables and "fts5" not in str(rows[table] or "").lower():
            return f"its `{table}` table is not an FTS5 table"
    return None


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the index at ``path`` whose schema is this one: the
    database there when it is ours, else a new one (an unreadable file or an
    earlier layout of ours removed, another schema set aside: the index is a
    cache, rebuilt from its sources)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _connect(path)
    except sqlite3.DatabaseError:
        remove_files(path)  # unreadable: it is only a cache
        return _connect(path)


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(
        path,
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,
        check_same_thread=False,  # kept per thread by open_index; closed by any
    )
    try:
        con.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        con.execute("PRAGMA synchronous=NORMAL")
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version in OUR_OLDER_VERSIONS and schema_problem(con, version) is None:
            con.close()  # ours, an earlier layout: a cache, rebuilt
            remove_files(path)
            return _connect(path)
        wrong = version not in (0, SCHEMA_VERSION) or (
            version == SCHEMA_VERSION and schema_problem(con) is not None
        )
        if version == 0 and con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            wrong = True  # tables, but not ours (ours set user_version with them)
        if wrong:
            # another schema (a table dropped, another database put here):
            # the index is a cache; whatever is here is kept aside, not read
            con.close()
            set_aside(path)
            return _connect(path)
        if version == 0:
            con.execute("PRAGMA journal_mode=WAL")  # persistent: set once, at creation
            _create(con)
    except BaseException:
        con.close()
        raise
    return con


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
          fingerprint TEXT NOT NULL, gen INTEGER NOT NULL DEFAULT 0);
        CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(title, body, tokenize='{TOKENIZE}');
        CREATE VIRTUAL TABLE IF NOT EXISTS fts_recent USING fts5(
          title, body, tokenize='{TOKENIZE}');
        INSERT OR REPLACE INTO meta(key, value) VALUES ('recent', '{{"floor": 1}}');
        PRAGMA user_version={SCHEMA_VERSION};
        COMMIT;
        """
    )


def index_problem(path: Path) -> str | None:
    """Why the index at ``path`` cannot serve a search (read-only: ``holon
    home check``); ``None`` when it is sound, does not exist, or is ours of
    an earlier version (the next search rebuilds that one)."""
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
            if version in OUR_OLDER_VERSIONS and schema_problem(con, version) is None:
                return None
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
