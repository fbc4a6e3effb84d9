"""Memory index at scale (issue 44 item 6): builds in chunks and in the
background, a search during a build, a builder killed in the middle, the
cheap freshness checks (stat and ctime for the memory files, a bounded
round over many open plans), the recent window and the upgrade from the
first index layout."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.briefs import write_brief
from holon_cli.runtime.memory import plans as MP
from holon_cli.runtime.memory import search as M
from holon_cli.runtime.memory import sources as S
from holon_cli.runtime.memory import sync as MS
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store import memory_index as MI
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.locks import HeldLock
from tests.inprocess_cli import bind_runner, run  # noqa: F401


@pytest.fixture
def store() -> AgentStore:
    return open_agent(None)


def write_memory(store: AgentStore, name: str, text: str) -> None:
    (store.layout.home / "memory" / f"{name}.md").write_text(text)


def search(store: AgentStore, q: str, **kw: Any) -> dict[str, Any]:
    return M.memory_search(store, q, **kw)


def found(store: AgentStore, q: str, **kw: Any) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = search(store, q, **kw)["results"]
    return results


def wait_for_builder(store: AgentStore, timeout: float = 120.0) -> None:
    """The builder this process started has exited (bounded: it is reaped here)."""
    proc = MS.started_builder(store)
    assert proc is not None, "no builder was started"
    proc.wait(timeout=timeout)
    assert proc.returncode == 0, MS.builder_log_path(store).read_text()


def briefs(store: AgentStore, n: int, word: str) -> None:
    for i in range(n):
        write_brief(store, kind="result", text=f"entry {i} mentions {word}")


# ------------------------------------------------------------- background


def test_a_large_build_goes_to_the_background_and_a_search_answers_meanwhile(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search never waits for a large build: it indexes for its budget,
    starts a builder, answers from what is indexed and says `building`;
    the builder finishes alone; the next search is complete."""
    write_memory(store, "self", "# Self\nThe quokka protocol is mine.\n")
    briefs(store, 300, "wombats")
    monkeypatch.setattr(MS, "INLINE_BYTES", 0)  # every build counts as large
    monkeypatch.setattr(MS, "BUDGET_S", 0.0)  # one chunk inline, then the builder
    monkeypatch.setattr(MS, "CHUNK_DOCS", 50)
    t0 = time.monotonic()
    first = search(store, "quokka")
    assert first["index"]["state"] == "building"
    assert first["index"]["documents"] < 302
    assert [r["kind"] for r in first["results"]] == ["memory_file"]  # indexed first
    assert time.monotonic() - t0 < 30  # not the whole build (generous: a loaded machine)
    wait_for_builder(store)
    done = search(store, "wombats", limit=50)
    assert done["index"] == {"state": "ready"}
    assert len(done["results"]) == 50
    assert M.sync(store)["documents"] == 302
    assert not MS.builder_running(store)


def test_the_cli_says_when_results_may_be_incomplete(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    briefs(store, 120, "ibexes")
    monkeypatch.setattr(MS, "INLINE_BYTES", 0)
    monkeypatch.setattr(MS, "BUDGET_S", 0.0)
    monkeypatch.setattr(MS, "CHUNK_DOCS", 20)
    r = run("memory", "search", "ibexes")
    assert r.returncode == 0, r.stderr
    assert "being built in the background" in r.stderr and "may be incomplete" in r.stderr
    j = run("memory", "search", "ibexes", "--json")
    assert j.returncode == 0
    assert json.loads(j.stdout)["data"]["index"]["state"] in ("building", "ready")
    wait_for_builder(store)
    done = run("memory", "search", "ibexes")
    assert done.returncode == 0 and "background" not in done.stderr


def test_while_a_builder_runs_a_search_leaves_the_bulk_work_to_it(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the builder lock held, a search does only the cheap checks (an
    edited memory file is still seen) and says `building`; once the lock is
    free, the next search does the work itself (small) and is complete."""
    write_memory(store, "self", "# Self\nfirst note\n")
    assert found(store, "first")
    briefs(store, 5, "capybaras")
    write_memory(store, "self", "# Self\nsecond note\n")
    with HeldLock(MS.builder_lock_path(store), "test builder"):
        assert MS.builder_running(store)
        during = search(store, "capybaras")
        assert during["index"]["state"] == "building" and during["results"] == []
        assert found(store, "second") and not found(store, "first")
    after = search(store, "capybaras")
    assert after["index"] == {"state": "ready"} and len(after["results"]) == 5


def test_a_small_build_is_done_in_the_search_itself(store: AgentStore) -> None:
    briefs(store, 30, "okapis")
    res = search(store, "okapis", limit=50)
    assert res["index"] == {"state": "ready"} and len(res["results"]) == 30
    assert MS.started_builder(store) is None


@pytest.mark.slow
def test_a_builder_killed_mid_build_leaves_a_usable_index_that_is_finished_later(
    store: AgentStore, holon_home: Path
) -> None:
    """SIGKILL in the middle of a build from empty: the index opens and
    answers with what it holds (no check finds a problem), and the next
    search finishes the build; nothing is lost or doubled."""
    write_memory(store, "operator", "# Operator\nOn call: the pelican team.\n")
    briefs(store, 400, "tapirs")
    code = (
        "import sys, time\n"
        "from holon_cli.runtime.agents.lifecycle import open_agent\n"
        "from holon_cli.runtime.memory import builder as B, sync as MS\n"
        "MS.CHUNK_DOCS = 20\n"
        "real = MS.Sync.put\n"
        "def slow(self, doc, known=None):\n"
        "    time.sleep(0.003); real(self, doc, known)\n"
        "MS.Sync.put = slow\n"
        "print('go', flush=True)\n"
        "sys.exit(B.build(open_agent(None)))\n"
    )
    env = dict(os.environ, HOLON_HOME=str(holon_home))
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "go"
    path = M.index_path(store)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until some chunks are committed
        if path.exists():
            with sqlite3.connect(path) as con:
                try:
                    if con.execute("SELECT count(*) FROM docs").fetchone()[0] >= 60:
                        break
                except sqlite3.OperationalError:
                    pass
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert MI.index_problem(path) is None  # usable as it is
    with sqlite3.connect(path) as con:
        held = con.execute("SELECT count(*) FROM docs").fetchone()[0]
        assert 0 < held < 402 and con.execute("SELECT value FROM meta WHERE key='build'").fetchone()
    assert not MS.builder_running(store)  # the kernel released the dead builder's lock
    res = search(store, "tapirs", limit=50)  # small: the search finishes the build
    assert res["index"] == {"state": "ready"} and len(res["results"]) == 50
    assert M.sync(store)["documents"] == 402  # the briefs and the two memory files
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT count(DISTINCT source_key) FROM docs").fetchone()[0] == 402
        assert con.execute("SELECT count(*) FROM fts").fetchone()[0] == 402


def test_a_cut_off_rebuild_keeps_answering_with_the_old_rows(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild of an index that exists marks and sweeps: while it runs
    (and after it is cut off) every document is still found."""
    briefs(store, 40, "narwhals")
    assert len(found(store, "narwhals", limit=50)) == 40
    calls = {"n": 0}
    real = MS.Sync.put

    def dying(self: MS.Sync, doc: Any, known: Any = None) -> None:
        calls["n"] += 1
        if calls["n"] == 25:
            raise KeyboardInterrupt
        real(self, doc, known)

    monkeypatch.setattr(MS, "CHUNK_DOCS", 10)
    monkeypatch.setattr(MS.Sync, "put", dying)
    with pytest.raises(KeyboardInterrupt):
        M.sync(store, rebuild=True)
    monkeypatch.setattr(MS.Sync, "put", real)
    with MI.MemoryIndex(M.index_path(store)) as idx:
        assert idx.meta("build") is not None  # a build under way
        hits = idx.search("narwhals", limit=50, workspace_id="agent_home", all_workspaces=False)
        assert len(hits) == 40  # the old rows answer
    assert len(found(store, "narwhals", limit=50)) == 40
    with MI.MemoryIndex(M.index_path(store)) as idx:
        assert idx.meta("build") is None and idx.count() == 42


def test_a_rebuild_sweeps_what_no_source_shows_any_more(store: AgentStore) -> None:
    briefs(store, 3, "lemurs")
    assert len(found(store, "lemurs")) == 3
    led = store.ledger("briefs").path
    lines = led.read_bytes().splitlines(keepends=True)
    led.write_bytes(b"".join(lines[:1]))  # two briefs gone from the ledger
    M.sync(store, rebuild=True)
    assert len(found(store, "lemurs")) == 1


# -------------------------------------------------------------- freshness


def test_memory_files_are_stat_not_hashed_once_settled(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unchanged memory file costs a stat: it is hashed again only after
    a change (its ctime moved), within the racy window, or every REHASH_S."""
    write_memory(store, "self", "# Self\nowl\n")
    monkeypatch.setattr(MS, "RACY_NS", 0)  # the file's ctime is old enough at once
    hashed: list[str] = []
    real = S.memory_file_signature

    def counting(store_: AgentStore, name: str) -> Any:
        hashed.append(name)
        return real(store_, name)

    monkeypatch.setattr(S, "memory_file_signature", counting)
    assert found(store, "owl")  # builds the index
    assert found(store, "owl")  # hashes once more, then trusts the stat
    hashed.clear()
    for _ in range(5):
        assert found(store, "owl")
    assert hashed == []
    write_memory(store, "self", "# Self\nemu\n")
    assert found(store, "emu") and hashed == ["self"]
    monkeypatch.setattr(MS, "REHASH_S", 0.0)
    hashed.clear()
    found(store, "emu")
    assert sorted(hashed) == ["operator", "self"]


def test_within_the_racy_window_a_same_tick_edit_is_seen(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second write in the same timestamp tick keeps size, mtime and
    ctime: simulated by a stat that never changes. Within RACY_NS of the
    ctime the file is hashed anyway, so the edit is seen."""
    write_memory(store, "operator", "# Operator\nDeploy with the walrus plan.\n")
    frozen = S.memory_file_stat(store, "operator")
    monkeypatch.setattr(S, "memory_file_stat", lambda s, n: frozen)
    assert found(store, "walrus")
    write_memory(store, "operator", "# Operator\nDeploy with the dugong plan.\n")
    assert found(store, "dugong") and not found(store, "walrus")


def test_the_periodic_hash_covers_a_filesystem_without_ctime(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mount whose stat does not move (simulated) still shows an edit
    after at most REHASH_S: the bound of the guarantee there."""
    write_memory(store, "operator", "# Operator\nThe ibis runbook.\n")
    frozen = S.memory_file_stat(store, "operator")
    monkeypatch.setattr(S, "memory_file_stat", lambda s, n: frozen)
    monkeypatch.setattr(MS, "RACY_NS", 0)
    assert found(store, "ibis")  # builds the index
    assert found(store, "ibis")  # hashed: the stat is trusted from now on
    write_memory(store, "operator", "# Operator\nThe kiwi runbook.\n")
    assert not found(store, "kiwi")  # trusted: the stat is the one hashed
    monkeypatch.setattr(MS, "REHASH_S", 0.0)
    assert found(store, "kiwi")


def test_a_same_size_edit_with_the_timestamp_put_back_moves_the_ctime(store: AgentStore) -> None:
    """What the stat check relies on: putting the mtime back moves the ctime."""
    write_memory(store, "self", "# Self\nalpha\n")
    before = S.memory_file_stat(store, "self")
    assert before is not None
    path = store.layout.home / "memory" / "self.md"
    st = path.stat()
    time.sleep(0.02)  # past one timestamp tick
    path.write_text("# Self\nomega\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = S.memory_file_stat(store, "self")
    assert after is not None
    assert after[2:4] == before[2:4] and after[4] != before[4]  # size, mtime kept; ctime moved


def _items(store: AgentStore, n: int) -> list[str]:
    out = []
    for i in range(n):
        w = wi.create_work_item(store, f"item {i} about the harbour", source="operator")
        out.append(w["work_item"]["id"] if "work_item" in w else w["id"])
    return out


def test_with_many_open_items_every_plan_is_checked_within_a_round(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond PLAN_CHECKS open items a search stats the most recently
    updated ones and the next slice of a round over the rest: an edit of
    any plan is seen within a round (a few searches, or PLAN_ROUND_S)."""
    ids = _items(store, 12)
    monkeypatch.setattr(MP, "PLAN_CHECKS", 4)
    monkeypatch.setattr(MP, "PLAN_HOT", 2)
    monkeypatch.setattr(MP, "PLAN_SLICE", 2)
    monkeypatch.setattr(MP, "PLAN_ROUND_S", 3600.0)
    assert found(store, "harbour")
    cold = ids[0]  # the least recently updated: never in the hot two
    plan = store.layout.home / "work-items" / cold / "plan.md"
    plan.write_text(plan.read_text() + "\nCheck the heron gauge.\n")
    seen_after = None
    for n in range(1, 7):  # ten others, two per search: five searches at most
        if found(store, "heron"):
            seen_after = n
            break
    assert seen_after is not None and seen_after <= 6
    plan.write_text(plan.read_text() + "\nAnd the stork gauge.\n")
    monkeypatch.setattr(MP, "PLAN_ROUND_S", 0.0)  # a round this old ends now
    found(store, "harbour")  # starts a new round
    assert found(store, "stork")


def test_the_plan_round_is_paced_by_time_and_a_first_search_checks_every_plan(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process's first search stats every plan; later ones the hot ones
    and a share of the rest in proportion to the time since the previous
    search (PLAN_ROUND_S for the whole round), at least PLAN_SLICE: an edit
    is seen by a search PLAN_ROUND_S after it, never by a spike that stats
    every plan at once."""
    _items(store, 12)
    monkeypatch.setattr(MP, "PLAN_CHECKS", 4)
    monkeypatch.setattr(MP, "PLAN_HOT", 2)
    monkeypatch.setattr(MP, "PLAN_SLICE", 1)
    monkeypatch.setattr(MP, "PLAN_ROUND_S", 3600.0)
    sync = MS.Sync(store, MI.open_index(M.index_path(store)))
    assert found(store, "harbour")
    MP._PLAN_ROUNDS.pop(sync.home, None)  # as in a new process
    items = MP.open_items(store, sync._work_sigs())
    assert len(items) == 12
    assert len(MP.plans_to_check(sync.home, items, None)) == 12  # the first: all
    assert len(MP.plans_to_check(sync.home, items, None)) == 2 + 1  # hot + PLAN_SLICE
    clock = [1024.0]  # round numbers: the share of 1800 s of 3600 s is 5 of 10, exactly
    monkeypatch.setattr(MS.time, "monotonic", lambda: clock[0])
    MP.plans_to_check(sync.home, items, None)
    clock[0] += 1800.0  # half a round since the previous search: half the rest
    assert len(MP.plans_to_check(sync.home, items, None)) == 2 + 5
    clock[0] += 3600.0 * 3  # a long pause: the whole rest, once
    assert len(MP.plans_to_check(sync.home, items, None)) == 12
    other = list(items)  # the open items changed: every plan again
    assert len(MP.plans_to_check(sync.home, other, None)) == 12


def test_the_current_items_plan_is_checked_every_search(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _items(store, 12)
    monkeypatch.setattr(MP, "PLAN_CHECKS", 4)
    monkeypatch.setattr(MP, "PLAN_HOT", 2)
    monkeypatch.setattr(MP, "PLAN_SLICE", 2)
    monkeypatch.setattr(MP, "PLAN_ROUND_S", 3600.0)
    wi.pick_work_item(store, ids[0], source="operator")
    assert found(store, "harbour")
    plan = store.layout.home / "work-items" / ids[0] / "plan.md"
    plan.write_text(plan.read_text() + "\nThe egret step.\n")
    assert found(store, "egret")


def test_a_completed_items_report_is_seen(store: AgentStore) -> None:
    (wid,) = _items(store, 1)
    assert not found(store, "flamingo")
    wi.complete_work_item(
        store,
        wid,
        report="Shipped the flamingo release.",
        source="operator",
        cancel_waits=cancel_for_work_item,
    )
    (hit,) = found(store, "flamingo")
    assert hit["kind"] == "work_item" and hit["metadata"]["state"] == "completed"


# ---------------------------------------------------------- recent window


def _fts_ids(path: Path, table: str) -> list[int]:
    with sqlite3.connect(path) as con:
        return [r[0] for r in con.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]


def test_the_recent_window_holds_the_newest_documents(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above RECENT_DOCS + RECENT_SLACK documents the window is trimmed to
    the newest RECENT_DOCS; a tier with enough hits among them is ranked
    there, one without is filled with older matches."""
    monkeypatch.setattr(MI, "RECENT_DOCS", 6)
    monkeypatch.setattr(MI, "RECENT_SLACK", 2)
    write_brief(store, kind="result", text="the old heron report")
    briefs(store, 5, "gulls")
    assert found(store, "gulls")  # indexed while small: the window holds all
    briefs(store, 10, "terns")
    assert found(store, "terns")
    path = M.index_path(store)
    with MI.MemoryIndex(path) as idx:
        floor = idx.recent_floor()
        assert floor is not None
        with sqlite3.connect(path) as con:
            newest = [r[0] for r in con.execute("SELECT id FROM docs WHERE id >= ?", (floor,))]
        assert len(newest) == 6
    assert _fts_ids(path, "fts_recent") == sorted(newest)
    (hit,) = found(store, "heron")  # only in an old document: found below the window
    assert "heron" in hit["title"]
    assert len(found(store, "terns", limit=3)) == 3


def test_a_tier_short_of_hits_among_the_newest_is_filled_with_older_ones_newest_first(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the window, a tier's ranked hits among the newest documents come
    first, then the older documents that match, newest first (no bm25 pass
    over the whole index), each once, in scope, before the next tier."""
    monkeypatch.setattr(MI, "RECENT_DOCS", 4)
    monkeypatch.setattr(MI, "RECENT_SLACK", 1)
    for i in range(6):
        write_brief(store, kind="result", text=f"old {i}: the ibis stood by the weir")
    write_brief(store, kind="result", text="old 6: an ibis alone")
    briefs(store, 6, "storks")
    write_brief(store, kind="result", text="new: the ibis stood by the weir again")
    res = found(store, "ibis stood", limit=10)
    texts = [r["snippet"] for r in res]
    path = M.index_path(store)
    with MI.MemoryIndex(path) as idx:
        assert idx.recent_floor() is not None  # the window is in use
    assert texts[0].startswith("new:")  # the one phrase hit among the newest
    # then the older phrase hits, newest first, then the tier "every word"
    assert [t.split(":")[0] for t in texts[1:7]] == [f"old {i}" for i in range(5, -1, -1)]
    assert texts[7].startswith("old 6") and len(res) == 8
    scores = [r["score"] for r in res]
    assert scores == sorted(scores, reverse=True)
    assert len({r["source_ref"] for r in res}) == len(res)
    assert len(found(store, "ibis", limit=3)) == 3


def test_replaced_documents_leave_gaps_the_window_is_checked_by_id_span_not_counted(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trim is decided on the id span (no count of the window's rows per
    change); an edit that re-indexes a document frees its id, and a check
    that finds nothing to trim is not repeated before RECENT_SLACK more
    ids. The window keeps exactly the documents from its floor up."""
    monkeypatch.setattr(MI, "RECENT_DOCS", 4)
    monkeypatch.setattr(MI, "RECENT_SLACK", 2)
    briefs(store, 10, "plovers")
    assert found(store, "plovers")
    M.sync(store)  # the window filled (a builder's work), here
    with MI.MemoryIndex(M.index_path(store)) as idx:
        assert idx.recent_floor() is not None
    calls = {"n": 0}
    real = MI.MemoryIndex._newest_floor

    def counted(self: MI.MemoryIndex) -> int | None:
        calls["n"] += 1
        return real(self)

    monkeypatch.setattr(MI.MemoryIndex, "_newest_floor", counted)
    for i in range(12):  # a document replaced: a new id each time, the old one freed
        name = ("self", "operator")[i % 2]  # two of them: the freed id is not the top one
        write_memory(store, name, f"# Note\nrevision {i} of the avocet note\n")
        assert found(store, f"revision {i}")[0]["kind"] == "memory_file"
    assert calls["n"] <= 12 // 2 + 1  # about once per RECENT_SLACK ids, not per change
    path = M.index_path(store)
    with MI.MemoryIndex(path) as idx:
        floor = idx.recent_floor()
        assert floor is not None
    with sqlite3.connect(path) as con:
        window = [r[0] for r in con.execute("SELECT id FROM docs WHERE id >= ?", (floor,))]
    assert _fts_ids(path, "fts_recent") == sorted(window)
    assert len(window) <= 4 + 2
    assert len(found(store, "plovers", limit=20)) == 10  # older ones still found


def test_a_build_from_empty_fills_the_window_at_its_end(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(MI, "RECENT_DOCS", 5)
    monkeypatch.setattr(MI, "RECENT_SLACK", 1)
    briefs(store, 20, "puffins")
    res = search(store, "puffins", limit=50)
    assert res["index"] == {"state": "ready"} and len(res["results"]) == 20
    path = M.index_path(store)
    with MI.MemoryIndex(path) as idx:
        floor = idx.recent_floor()
        assert floor is not None and idx.meta("recent_fill") is None
    with sqlite3.connect(path) as con:
        ids = [r[0] for r in con.execute("SELECT id FROM docs ORDER BY id DESC LIMIT 5")]
    assert _fts_ids(path, "fts_recent") == sorted(ids) and min(ids) == floor


# ---------------------------------------------------------------- layout


def test_an_index_of_the_first_layout_is_rebuilt_not_set_aside(store: AgentStore) -> None:
    write_memory(store, "self", "# Self\nThe cormorant rule.\n")
    path = M.index_path(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE docs(id INTEGER PRIMARY KEY, source_key TEXT UNIQUE NOT NULL,
          source_ref TEXT UNIQUE NOT NULL, kind TEXT NOT NULL, scope_kind TEXT NOT NULL,
          workspace_id TEXT, agent_id TEXT NOT NULL, source_path TEXT, title TEXT NOT NULL,
          body TEXT NOT NULL, updated_at TEXT, metadata TEXT NOT NULL, fingerprint TEXT NOT NULL);
        CREATE VIRTUAL TABLE fts USING fts5(title, body);
        PRAGMA user_version=1;
        """
    )
    con.close()
    assert MI.index_problem(path) is None  # not a problem: the next search rebuilds it
    assert found(store, "cormorant")
    assert not list(path.parent.glob("memory.sqlite3.damaged-*"))
    with MI.MemoryIndex(path) as idx:
        assert idx.con.execute("PRAGMA user_version").fetchone()[0] == MI.SCHEMA_VERSION


def test_a_kept_connection_follows_a_replaced_file(store: AgentStore) -> None:
    write_memory(store, "self", "# Self\nThe gannet rule.\n")
    assert found(store, "gannet")
    first = MI.open_index(M.index_path(store))
    import shutil

    shutil.rmtree(M.indexes_dir(store))
    assert found(store, "gannet")
    assert MI.open_index(M.index_path(store)) is not first
