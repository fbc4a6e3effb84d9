"""Keeping the memory index in step with its sources: the checks before
every search, builds in chunks, and the hand-off to a background builder.

Before every search or get (:func:`freshen`), cheap checks that write
nothing when nothing changed:

- the memory files (``memory/self.md``, ``memory/operator.md``): a stat.
  A file whose device, inode, size, mtime *and ctime* are those this
  process last hashed is unchanged: every write moves the ctime and no
  call a user can make sets it back (``touch -d``, ``os.utime`` and editors
  that restore the mtime move it to now). Two exceptions are covered by
  hashing again (size and SHA-256 of all the index keeps, compared with
  what the index recorded): a file changed within :data:`RACY_NS` of its
  last hash (a second write in the same timestamp tick keeps the ctime:
  git's "racily clean" rule), and every :data:`REHASH_S` seconds whatever
  the stat says (a filesystem whose ctime is not kept, some FUSE and FAT
  mounts). So a same-size edit with the mtime put back is seen by the
  next search, as issue 36 asks, and a search pays one ``stat`` per file,
  not a hash of up to 800 KB;
- workspace profiles: the attached workspaces (none: nothing read);
- the plan files of open work items that are indexed: a ``stat`` each
  (relative to an open ``work-items`` folder), compared with the
  fingerprint the index holds; past ``PLAN_CHECKS`` open items, the
  most recently updated ones and a round over the rest paced so that a
  plan edited by hand is seen by every search that starts
  ``PLAN_ROUND_S`` after the edit (:mod:`.plans`).

Bulk work, in chunks of at most :data:`CHUNK_DOCS` documents or
:data:`CHUNK_S` seconds, one transaction each (progress is recorded with
the rows, so a chunk cut off by a kill is redone and nothing before it):

- ``briefs`` and ``context_episodes``: the records appended since the
  offset the index recorded (a ledger that shrank or whose first bytes
  changed is read again from the start; its rows go first); a ledger whose
  stat is the one recorded is not opened;
- work items: the items named by the ``work_items`` and
  ``delivery_summaries`` records appended since the recorded offsets;
  every item (a pass by id) when the ledgers were replaced, or in a build;
- a build (a new index, ``memory.dirty``, ``holon memory rebuild``):
  generation ``g + 1`` starts, the ledgers are read from the start and
  every source is indexed or marked seen by ``g + 1``; then what no source
  showed is swept. An existing index keeps answering (with its older
  rows) during a rebuild; a new one answers with what is indexed so far;
- the recent window (``store.memory_index``): filled once an index
  outgrows it.

A search does the bulk work itself when it is small (at most
:data:`INLINE_BYTES` of source to read); otherwise for at most
:data:`BUDGET_S` seconds, then hands the rest to a background builder
(``runtime.memory.builder``: one per index, a detached process holding
``memory.builder.lock``) and answers from what is indexed so far, saying
``building``. While a builder runs, searches leave the bulk work to it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, NamedTuple

from holon_cli.errors import CorruptStateError, HolonError
from holon_cli.runtime.memory import plans
from holon_cli.runtime.memory import sources as S
from holon_cli.runtime.memory.background import builder_lock_path as builder_lock_path
from holon_cli.runtime.memory.background import builder_running, spawn_builder
from holon_cli.runtime.memory.background import started_builder as started_builder
from holon_cli.runtime.memory.sources import ref_key
from holon_cli.runtime.memory.sources import source_ref as source_ref
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.memory_index import Doc, MemoryIndex

INLINE_BYTES = 1 << 20  # pending source bytes a search indexes itself, however long it takes
BUDGET_S = 0.3  # more than that: this long inline, then a background builder
CHUNK_S = 0.1  # one chunk (one transaction) holds the write lock about this long at most
CHUNK_DOCS = 500
WORK_TAIL_RECORDS = 100  # work ledger records read per chunk (an item costs the most)
SWEEP_CHUNK = 2000
FILL_CHUNK = 2000  # documents copied into the recent window per chunk
RACY_NS = 2_000_000_000  # a file changed this recently may change again within its tick
REHASH_S = 10.0  # a process hashes the memory files at least this often when it searches
TAILED_LEDGERS = {"briefs": S.brief_doc, "context_episodes": S.episode_doc}
WORK_LEDGERS = ("work_items", "delivery_summaries")


class Outcome(NamedTuple):
    state: str  # "ready" | "building"
    rebuilt: bool  # a build ended in this call
    changed: int  # documents written


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


class _Paths(NamedTuple):
    """The files a search stats, as strings (pathlib joins cost more than
    the stats they name)."""

    marker: str
    ledgers: dict[str, str]
    work_items: str


_PATHS: dict[Any, _Paths] = {}


def _paths(store: AgentStore) -> _Paths:
    got = _PATHS.get(store.layout)
    if got is None:
        led = store.layout.ledger_dir
        got = _PATHS[store.layout] = _Paths(
            str(dirty_marker(store)),
            {n: str(led / f"{n}.jsonl") for n in (*TAILED_LEDGERS, *WORK_LEDGERS)},
            str(store.layout.work_items_dir),
        )
    return got


def _marker_identity(store: AgentStore) -> list[int] | None:
    try:
        st = os.stat(_paths(store).marker)
    except OSError:
        return None
    return [st.st_ino, st.st_mtime_ns]


def _stat_sig(path: Path | str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _head(path: Path) -> str | None:
    """The first bytes and inode of a ledger: a replaced or rewritten file differs."""
    try:
        with open(path, "rb") as f:
            return f"{os.fstat(f.fileno()).st_ino}:{f.read(256).hex()}"
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------- the sync


class _Deadline:
    def __init__(self, seconds: float | None) -> None:
        self.end = None if seconds is None else time.monotonic() + seconds

    def passed(self) -> bool:
        return self.end is not None and time.monotonic() > self.end


class Sync:
    """One agent's index brought in step with its sources (see the module)."""

    def __init__(self, store: AgentStore, idx: MemoryIndex) -> None:
        self.store, self.idx = store, idx
        self.home = str(store.layout.home)
        self.changed = 0
        self._key: bytes | None = None

    # -- writing ------------------------------------------------------------
    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = ref_key(self.store)
        return self._key

    def gen(self) -> int:
        build = self.idx.meta("build")
        if isinstance(build, dict):
            return int(build["gen"])
        return int(self.idx.meta("gen") or 0)

    def put(self, doc: Doc | None, known: dict[str, str] | None = None) -> None:
        """Index ``doc`` unless the index holds it as it is (then, in a
        build, mark it seen)."""
        if doc is None:
            return
        have = known.get(doc.source_key) if known is not None else None
        if known is None:
            have = self.idx.fingerprint(doc.source_key)
        if have == doc.fingerprint:
            if self.idx.meta("build") is not None:
                self.idx.touch(doc.source_key, self.gen())
            return
        self.idx.upsert(doc, source_ref(self.key, doc.source_key), self.gen())
        self.changed += 1

    # -- a build ------------------------------------------------------------
    def start_build(self, rebuild: bool) -> bool:
        """Start a build when asked, when ``memory.dirty`` is new to the
        index, or when the index is new; True when one started."""
        marker = _marker_identity(self.store)
        build = self.idx.meta("build")
        wanted = (
            rebuild
            or (marker is not None and (not isinstance(build, dict) or build["marker"] != marker))
            or (build is None and self.idx.meta("gen") is None)
        )
        if not wanted:
            return False
        with self.idx.transaction():
            gen = max(self.gen(), int(self.idx.meta("gen") or 0)) + 1
            if self.idx.count() == 0:
                self.idx.drop_recent()  # filled from `fts` at the end, once
            self.idx.set_meta("build", {"gen": gen, "marker": marker})
            for ledger in TAILED_LEDGERS:
                self.idx.set_meta(f"ledger:{ledger}", None)
            self.idx.set_meta("work", None)
        self.idx.cache.pop("mem_verified", None)
        return True

    def finish_build(self) -> bool:
        """The memory files and workspaces seen by the build's generation,
        then what no source showed swept; True when the build is over."""
        build = self.idx.meta("build")
        if not isinstance(build, dict):
            return True
        with self.idx.transaction():
            build = self.idx.meta("build")
            if not isinstance(build, dict):
                return True
            gen = int(build["gen"])
            for name in S.MEMORY_FILES:
                self._index_memory_file(name, S.memory_file_signature(self.store, name)[1])
            self._workspaces(self.store.read_record()["state"], force=True)
            if self.idx.sweep(gen, SWEEP_CHUNK) == SWEEP_CHUNK:
                return False  # more to sweep: the next chunk
            self.idx.set_meta("gen", gen)
            self.idx.set_meta("build", None)
        self.idx.cache.pop("mem_verified", None)
        marker = dirty_marker(self.store)
        if build.get("marker") is not None and _marker_identity(self.store) == build["marker"]:
            marker.unlink(missing_ok=True)  # a newer request (touched since) stays
        return True

    # -- memory files -------------------------------------------------------
    def _index_memory_file(self, name: str, sig: list[Any] | None) -> None:
        key = f"memory:{name}"
        doc = S.memory_file_doc(self.store, name)
        if doc is None:
            self.idx.delete(key)
        else:
            self.put(doc)
        self.idx.set_meta(f"hash:memory:{name}", sig)

    def memory_files(self) -> None:
        verified: dict[str, tuple[Any, float, bool]] = self.idx.cache.setdefault("mem_verified", {})
        now = time.monotonic()
        for name in S.MEMORY_FILES:
            seen = verified.get(name)
            if seen is not None and seen[2] and now - seen[1] < REHASH_S:
                if S.memory_file_stat(self.store, name) == seen[0]:
                    continue  # unchanged since this process hashed it (see the module)
            stat, sig = S.memory_file_signature(self.store, name)
            if self.idx.meta(f"hash:memory:{name}") != sig:
                with self.idx.transaction():
                    if self.idx.meta(f"hash:memory:{name}") != sig:
                        self._index_memory_file(name, sig)
                verified = self.idx.cache.setdefault("mem_verified", {})
            settled = stat is None or time.time_ns() - stat[4] > RACY_NS
            verified[name] = (stat, now, settled)

    # -- workspaces ---------------------------------------------------------
    def _workspaces(self, state: Any, *, force: bool = False) -> None:
        from holon_cli.runtime.workspace import attached_ids

        known = self.idx.fingerprints("workspace:")
        if not force and not known and not attached_ids(state):
            return  # none attached, none indexed: nothing to read
        try:
            docs = S.workspace_profile_docs(self.store)
        except HolonError:  # a damaged registry: `holon home check` names it
            return
        stale = set(known) - {d.source_key for d in docs}
        todo = [d for d in docs if known.get(d.source_key) != d.fingerprint]
        if not force and not todo and not stale:
            return
        for doc in docs if force else todo:
            self.put(doc, known)
        for key in stale:
            self.idx.delete(key)

    def workspaces(self, state: Any) -> None:
        from holon_cli.runtime.workspace import attached_ids

        known = self.idx.fingerprints("workspace:")
        if not known and not attached_ids(state):
            return
        try:
            docs = S.workspace_profile_docs(self.store)
        except HolonError:
            return
        if {d.source_key: d.fingerprint for d in docs} == known:
            return
        with self.idx.transaction():
            self._workspaces(state)

    # -- open work items' plans ---------------------------------------------
    def _work_sigs(self) -> list[Any]:
        ledgers = _paths(self.store).ledgers
        return [_stat_sig(ledgers[n]) for n in WORK_LEDGERS]

    def open_plans(self, state: Any) -> None:
        """Re-index the open items whose plan file changed (those indexed:
        the rest come with the work pass; :func:`.plans.changed_plans`).
        None indexed yet (a new index): nothing to check, and the work items
        are not loaded (the build loads them when it gets there)."""
        known = self.idx.fingerprints("work_item:")
        if not known:
            return
        stale = plans.changed_plans(
            self.store, self.idx, known, self._work_sigs(), _paths(self.store).work_items, state
        )
        if stale:
            with self.idx.transaction():
                self._index_items(stale)

    def _index_items(self, ids: list[str], chunk: _Deadline | None = None) -> int:
        """Index the items ``ids`` (those whose fingerprint moved); with
        ``chunk``, stop when it passes. Returns how many of ``ids`` were done."""
        from holon_cli.store import workitem_index

        try:
            wix = workitem_index.load(self.store)
        except CorruptStateError:
            return len(ids)
        known = self.idx.fingerprints("work_item:")
        for n, wid in enumerate(ids):
            if chunk is not None and n and n % 10 == 0 and chunk.passed():
                return n
            rec = wix.get(wid)  # the head first: the archive is read only for older items
            if rec is None:
                continue
            summary = wix.report_of(wid) or {}
            fp = S.work_item_fingerprint(self.home, rec, summary.get("id"))
            if known.get(f"work_item:{wid}") == fp:
                if self.idx.meta("build") is not None:
                    self.idx.touch(f"work_item:{wid}", self.gen())
                continue
            self.put(S.work_item_doc(self.store, rec, summary.get("text"), fp), known)
        return len(ids)

    # -- tailed ledgers -----------------------------------------------------
    def _tail_pending(self, ledger: str) -> int:
        """Bytes of ``ledger`` to read (0: its stat is the one recorded when
        every record up to it was indexed)."""
        mark = self.idx.meta(f"ledger:{ledger}")
        sig = _stat_sig(_paths(self.store).ledgers[ledger])
        if isinstance(mark, dict) and mark.get("sig") == sig:
            return 0
        size = sig[1] if sig else 0
        offset = int(mark.get("offset", 0)) if isinstance(mark, dict) else 0
        return max(size - offset, 1)

    def tail_chunk(self, ledger: str) -> bool:
        """Index the next records of ``ledger`` (one chunk); True when every
        complete record is indexed (a torn last line waits for its end)."""
        led = self.store.ledger(ledger)
        path = led.path
        make = TAILED_LEDGERS[ledger]
        prefix = {"briefs": "brief", "context_episodes": "episode"}[ledger]
        chunk = _Deadline(CHUNK_S)
        with self.idx.transaction():
            sig = _stat_sig(path)
            size = sig[1] if sig else 0
            mark = self.idx.meta(f"ledger:{ledger}")
            if isinstance(mark, dict) and mark.get("sig") == sig:
                return True
            head = _head(path)
            if not isinstance(mark, dict):
                offset = 0  # a new index or a build: every record (a build sweeps the rest)
            elif head != mark.get("head") or size < int(mark.get("offset", 0)):
                self.idx.delete_prefix(f"{prefix}:")  # replaced or cut: read again
                offset = 0
            else:
                offset = int(mark.get("offset", 0))
            end, n, done = offset, 0, True
            try:
                for _, end, rec in led.scan(offset):
                    self.put(make(self.store, rec))
                    n += 1
                    if n >= CHUNK_DOCS or (n % 20 == 0 and chunk.passed()):
                        done = False
                        break
            except CorruptStateError:  # a damaged line: index what can be read
                self.idx.delete_prefix(f"{prefix}:")
                records, _ = led.records_skipping_damaged()
                for rec in records:
                    self.put(make(self.store, rec))
                end, done = size, True
            # done: every complete record up to the stat taken first is read
            # (an append since moves the stat: read from `end` next time)
            self.idx.set_meta(
                f"ledger:{ledger}", {"offset": end, "head": head, "sig": sig if done else None}
            )
            return done

    # -- work items ---------------------------------------------------------
    def _work_pending(self) -> int:
        mark = self.idx.meta("work")
        sigs = self._work_sigs()
        if isinstance(mark, dict) and mark.get("sigs") == sigs and "pass" not in mark:
            return 0
        sizes = [s[1] if s else 0 for s in sigs]
        if not isinstance(mark, dict) or "pass" in mark:
            return max(sum(sizes), 1)
        offsets = mark.get("offsets") or [0, 0]
        return max(sum(sizes) - sum(offsets), 1)

    def work_chunk(self) -> bool:
        """The next work items to index (one chunk); True when every change is indexed."""
        leds = [self.store.ledger(n) for n in WORK_LEDGERS]
        with self.idx.transaction():
            sigs = self._work_sigs()
            mark = self.idx.meta("work")
            if isinstance(mark, dict) and mark.get("sigs") == sigs and "pass" not in mark:
                return True
            heads = [_head(led.path) for led in leds]
            sizes = [s[1] if s else 0 for s in sigs]
            offsets = [0, 0]
            whole = not isinstance(mark, dict) or "pass" in mark
            if isinstance(mark, dict) and not whole:
                offsets = [int(x) for x in mark.get("offsets") or [0, 0]]
                whole = mark.get("heads") != heads or any(
                    s < o for s, o in zip(sizes, offsets, strict=True)
                )
            if whole:
                return self._work_pass(mark, sigs, heads, sizes)
            return self._work_tail(leds, offsets, sigs, heads)

    def _work_pass(self, mark: Any, sigs: list[Any], heads: list[Any], sizes: list[int]) -> bool:
        """Every item, by id, a chunk at a time; the offsets it covers are
        those of its start (what was appended since is read as a tail)."""
        from holon_cli.store import workitem_index

        run = mark.get("pass") if isinstance(mark, dict) else None
        if not isinstance(run, dict):
            run = {"after": "", "offsets": sizes, "heads": heads}
        try:
            wix = workitem_index.load(self.store)
        except CorruptStateError:
            self.idx.set_meta("work", {"sigs": sigs, "offsets": sizes, "heads": heads})
            return True  # `holon home check` reports it; search keeps what it has
        ids = sorted(w for w in wix.items if w > run["after"])
        batch = ids[:CHUNK_DOCS]
        n = self._index_items(batch, _Deadline(CHUNK_S))
        if n < len(ids):
            self.idx.set_meta("work", {"pass": {**run, "after": batch[n - 1]}})
            return False
        # what was appended since the pass began is read as a tail next
        self.idx.set_meta("work", {"sigs": None, "offsets": run["offsets"], "heads": run["heads"]})
        return False

    def _work_tail(
        self, leds: list[Any], offsets: list[int], sigs: list[Any], heads: list[Any]
    ) -> bool:
        """The items named by the records appended since ``offsets``."""
        changed: dict[str, None] = {}
        ends = list(offsets)
        done = True
        for i, led in enumerate(leds):
            n = 0
            try:
                for _, end, rec in led.scan(offsets[i]):
                    wid = rec.get("id") if i == 0 else rec.get("work_item_id")
                    if isinstance(wid, str):
                        changed[wid] = None
                    ends[i] = end
                    n += 1
                    if n >= WORK_TAIL_RECORDS:
                        done = False
                        break
            except CorruptStateError:  # a damaged line: every item, by id
                sizes = [s[1] if s else 0 for s in sigs]
                self.idx.set_meta("work", {"pass": {"after": "", "offsets": sizes, "heads": heads}})
                return False
        self._index_items(list(changed))
        self.idx.set_meta("work", {"sigs": sigs if done else None, "offsets": ends, "heads": heads})
        return done

    # -- the recent window ----------------------------------------------------
    def fill_pending(self) -> bool:
        return self.idx.meta("recent_fill") is not None or (
            self.idx.meta("build") is None and self.idx.recent_fill_needed()
        )

    def fill_chunk(self) -> bool:
        with self.idx.transaction():
            return self.idx.fill_recent(FILL_CHUNK)

    # -- the driver ---------------------------------------------------------
    def pending_bytes(self) -> int:
        """Source bytes the bulk work has to read (0: none pending)."""
        total = sum(self._tail_pending(ledger) for ledger in TAILED_LEDGERS)
        total += self._work_pending()
        if self.idx.meta("build") is not None:
            total += 1
        if self.fill_pending():
            total += INLINE_BYTES + 1  # thousands of documents to copy: never inline
        return total

    def bulk_step(self) -> bool:
        """One chunk of the first pending bulk work; False when none is left.
        The ledger tails first: a chunk of them is bounded, where the first
        chunk of a work pass loads every work item (0.3-0.5 s at 10,000
        items), which a search's budget leaves to the builder."""
        for ledger in ("context_episodes", "briefs"):
            if self._tail_pending(ledger):
                self.tail_chunk(ledger)
                return True
        if self._work_pending():
            self.work_chunk()
            return True
        if self.idx.meta("build") is not None:
            self.finish_build()
            return True
        if self.fill_pending():
            self.fill_chunk()
            return True
        return False


def freshen(
    store: AgentStore,
    idx: MemoryIndex,
    *,
    budget: float | None,
    rebuild: bool = False,
    state: Any = None,
) -> Outcome:
    """Bring ``idx`` in step with the sources (see the module). ``budget``:
    the seconds of bulk work this call may do when it is large (``None``:
    all of it, here)."""
    sync = Sync(store, idx)
    started = sync.start_build(rebuild)
    sync.memory_files()
    if state is None:
        state = store.read_record()["state"]
    sync.workspaces(state)
    sync.open_plans(state)
    pending = sync.pending_bytes()
    if not pending:
        return Outcome("ready", started, sync.changed)
    if budget is not None:
        if builder_running(store):
            return Outcome("building", False, sync.changed)
        if pending <= INLINE_BYTES:
            budget = None
    deadline = _Deadline(budget)
    building = idx.meta("build") is not None
    while sync.bulk_step():
        if deadline.passed() and sync.pending_bytes():
            spawn_builder(store)
            return Outcome("building", False, sync.changed)
    return Outcome("ready", building or started, sync.changed)
