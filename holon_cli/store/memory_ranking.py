"""Ranking a memory search over one index's database
(``store/memory_index.py`` owns the database, its tables and the window of
the newest documents; this module only reads them).

Exact-phrase hits first, then documents with every term, then any term;
bm25 orders each tier. Above :data:`~holon_cli.store.memory_index.RECENT_DOCS`
(+ slack) documents a tier is ranked on ``fts_recent`` (the newest
documents) and, when those hold too few hits, filled with the older
documents that match, newest first, after the ranked ones: bm25 costs a pass
over every match of every phrase (its IDF), so a common word at 100,000
documents costs 50 ms on ``fts`` and 5 ms on ``fts_recent``, and a rare
phrase 10 ms on ``fts`` where walking its matches newest first stops at the
ones needed (1 ms). An index of up to ``RECENT_DOCS`` (+ slack) documents
ranks everything at once. Scope: documents of the agent always, of a
workspace only when it is the one asked for (or every workspace).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from holon_cli.store.memory_text import query_terms


class Hit(NamedTuple):
    row: dict[str, Any]
    rank: float  # lower is better
    tier: int  # 0: exact phrase, 1: every term, 2: any term


def search(
    con: sqlite3.Connection,
    query: str,
    recent_floor: Callable[[], int | None],
    *,
    limit: int,
    workspace_id: str | None,
    all_workspaces: bool,
) -> list[Hit]:
    """Exact-phrase hits first, then documents with every term, then any
    term; bm25 orders each tier over the newest documents (every
    document of an index within the window), then older matches of the
    tier follow, newest first, when the newest hold too few."""
    terms = query_terms(query)
    if not terms:
        return []
    tiers = [" ".join(terms), " AND ".join(terms), " OR ".join(terms)]
    if len(terms) > 1:
        tiers[0] = '"' + " ".join(t.strip('"') for t in terms) + '"'
    else:
        tiers = tiers[:1]
    floor = recent_floor()
    if floor is not None:
        low = con.execute("SELECT min(id) FROM docs").fetchone()[0]
        if low is None or floor <= low:
            floor = None  # the window holds every document: rank them all at once
    seen: set[int] = set()
    hits: list[Hit] = []
    for tier, match in enumerate(tiers):
        if len(hits) >= limit:
            break
        need = limit + len(seen)
        if floor is not None:
            rows = _ranked(con, "fts_recent", match, need, workspace_id, all_workspaces)
            if len(rows) < need:  # too few among the newest: older ones, newest first
                more = need - len(rows)
                rows += _older(con, match, floor, more, workspace_id, all_workspaces)
        else:
            rows = _ranked(con, "fts", match, need, workspace_id, all_workspaces)
        for rec in rows:
            if rec["id"] in seen:
                continue
            seen.add(rec["id"])
            hits.append(Hit(rec, float(rec.pop("rank")), tier if len(tiers) > 1 else 0))
    return hits[:limit]


def _ranked(
    con: sqlite3.Connection,
    table: str,
    match: str,
    n: int,
    workspace_id: str | None,
    all_workspaces: bool,
) -> list[dict[str, Any]]:
    """The ``n`` best documents of ``table`` for one FTS query, in scope.
    The ranking runs on the FTS table alone and only its best rows are
    joined (a common word matches most documents: joining them all first
    doubled a search); when the scope filter leaves fewer than ``n`` of a
    full window, the whole match is ranked again with the filter inside.
    Equal ranks go newest first."""
    window = n if all_workspaces else n * 4
    scope = "" if all_workspaces else " WHERE (d.scope_kind='agent' OR d.workspace_id IS ?)"
    sql = (
        f"SELECT d.*, t.rank FROM (SELECT rowid, bm25({table}, 2.0, 1.0) AS rank FROM {table}"
        f" WHERE {table} MATCH ? ORDER BY rank, rowid DESC LIMIT ?) t"
        f" JOIN docs d ON d.id = t.rowid{scope} ORDER BY t.rank, t.rowid DESC LIMIT ?"
    )
    args: tuple[Any, ...] = (
        (match, window, n) if all_workspaces else (match, window, workspace_id, n)
    )
    cur = con.execute(sql, args)
    rows = [row_dict(cur, r) for r in cur.fetchall()]
    if all_workspaces or len(rows) >= n:
        return rows
    (matched,) = con.execute(
        f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (match,)
    ).fetchone()
    if matched <= window:
        return rows  # the window held every match: nothing more in scope
    cur = con.execute(
        f"SELECT d.*, bm25({table}, 2.0, 1.0) AS rank FROM {table}"
        f" JOIN docs d ON d.id = {table}.rowid"
        f" WHERE {table} MATCH ? AND (d.scope_kind='agent' OR d.workspace_id IS ?)"
        " ORDER BY rank, d.id DESC LIMIT ?",
        (match, workspace_id, n),
    )
    return [row_dict(cur, r) for r in cur.fetchall()]


def _older(
    con: sqlite3.Connection,
    match: str,
    floor: int,
    n: int,
    workspace_id: str | None,
    all_workspaces: bool,
) -> list[dict[str, Any]]:
    """The ``n`` newest documents below the window (id < ``floor``) that
    match, in scope, with rank 0 (after every ranked hit of their tier).
    No bm25 here: its IDF is a pass over every match of every phrase in
    the whole index (50 ms for a common word at 100,000 documents),
    where walking the matches newest first stops at the ``n``-th."""
    window = n if all_workspaces else n * 4
    scope = "" if all_workspaces else " WHERE (d.scope_kind='agent' OR d.workspace_id IS ?)"
    sql = (
        "SELECT d.*, 0.0 AS rank FROM (SELECT rowid FROM fts WHERE fts MATCH ? AND rowid < ?"
        f" ORDER BY rowid DESC LIMIT ?) t JOIN docs d ON d.id = t.rowid{scope}"
        " ORDER BY t.rowid DESC LIMIT ?"
    )
    args: tuple[Any, ...] = (match, floor, window, n)
    if not all_workspaces:
        args = (match, floor, window, workspace_id, n)
    cur = con.execute(sql, args)
    rows = [row_dict(cur, r) for r in cur.fetchall()]
    if all_workspaces or len(rows) >= n:
        return rows
    (matched,) = con.execute(
        "SELECT count(*) FROM (SELECT rowid FROM fts WHERE fts MATCH ? AND rowid < ?"
        " ORDER BY rowid DESC LIMIT ?)",
        (match, floor, window + 1),
    ).fetchone()
    if matched <= window:
        return rows  # the window held every older match
    cur = con.execute(
        "SELECT d.*, 0.0 AS rank FROM fts JOIN docs d ON d.id = fts.rowid"
        " WHERE fts MATCH ? AND fts.rowid < ?"
        " AND (d.scope_kind='agent' OR d.workspace_id IS ?)"
        " ORDER BY fts.rowid DESC LIMIT ?",
        (match, floor, workspace_id, n),
    )
    return [row_dict(cur, r) for r in cur.fetchall()]


def row_dict(cur: sqlite3.Cursor, row: Iterable[Any]) -> dict[str, Any]:
    rec = dict(zip([c[0] for c in cur.description], row, strict=True))
    rec["metadata"] = json.loads(rec["metadata"])
    rec.pop("gen", None)
    return rec
