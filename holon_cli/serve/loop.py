"""The owner loop of ``holon serve``: decide *when* to run the steps cron runs.

Invariants:
- per agent, a pass is exactly what ``holon tick --agent A && holon turn
  --agent A`` does (``tick_agent`` then ``run_turn``), repeated until the
  agent has no runnable message; nothing here changes agent state itself;
- one pass per agent at a time, at most ``concurrency`` agents at once;
- a turn lock held by someone else (a manual ``holon turn``) is not an
  error: the agent is retried shortly and on the next change;
- a pass ends at an aborted turn and the agent's next pass is held back
  (``FAIL_BACKOFF_S`` doubling to ``FAIL_BACKOFF_MAX_S``), never spun;
- wake-ups are per agent and event-driven: the watcher (``serve/watch.py``:
  inotify, blocking, so an idle serve does not wake) sees the wake index's
  markers (``store/wake.py``: every writer of an agent's state makes its
  marker, and the marker's close says the write is done), new agent folders
  and ``config.yaml``; deadlines (sleep end, work-item recheck, timer, budget
  reset, output ageing: ``runtime/wake.assess``) sit in one heap for the
  home; start-up and the slow safety sweep take from the wake index only
  the agents that are marked, have work or are due (all of them when the
  index is in doubt);
- a pass claims its agent's marker first and suppresses marking for its
  own writes to that agent (it assesses the agent when it ends, and that
  entry goes into the index, batched, before the claim is released);
- stopping takes no new work; running passes get ``drain_s`` to finish, then
  the process leaves them (the turn journal replays an interrupted turn).
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.runtime.wake import agent_deadline as agent_deadline
from holon_cli.serve.index_batch import IndexBatch
from holon_cli.serve.passes import Log, Stats, run_pass_turn
from holon_cli.store import wake as W
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.model.tool import Toolbox
    from holon_cli.serve.watch import Watcher


BUSY_RETRY_S = 1.0
# a writer held the agent's marker when its pass claimed it: that write may
# have landed after the pass read the agent; look again this soon
CLAIM_RETRY_S = 0.05
# After an aborted turn (provider down, bad credentials, ...) the agent's next
# pass waits: 5 s, doubling up to 5 min, back to none after a turn that did
# not abort. Without it serve spun: the next tick re-activates the agent's
# open work item, that turn aborts too, and so on, hundreds of provider
# requests a minute (cron's minute was the only brake before serve).
FAIL_BACKOFF_S = 5.0
FAIL_BACKOFF_MAX_S = 300.0
GC_EVERY_S = 86400.0  # serve applies `retention` once a day (runtime/home/gc.py)
SWEEP_S = 300.0  # a safety net only: arrivals are watched, deadlines tracked
# The main loop sleeps until the next deadline; a change, a finished pass or
# stop() wakes it. The slice only bounds a sleep in case a wake-up is missed.
WAIT_SLICE_S = 60.0
# serve's retention pass runs spread out: its thread sleeps so that it uses
# at most this share of a CPU (0.06 s a minute; a 0.3 s pass takes 5 min)
GC_DUTY = 0.001


def _agent_status(root: Any, agent_id: str) -> str | None:
    from holon_cli.store.fsio import read_snapshot

    try:
        rec = read_snapshot(root / "agents" / agent_id / ".holon" / "state" / "agent.json")
    except Exception:  # noqa: BLE001 - a damaged record: the sweep reports it
        return None
    state = (rec or {}).get("state") or {}
    status = state.get("status")
    return status if isinstance(status, str) else None


def _budget_line(hit: Any) -> str:
    from holon_cli.runtime.agents.holds import budget_line

    return budget_line(hit)


class _Pacer:
    """Sleeps between units of a background job so that its thread uses at
    most ``duty`` of a CPU; raises :class:`_Stopped` once serve stops."""

    def __init__(self, duty: float, stopping: threading.Event) -> None:
        self.duty = duty
        self.stopping = stopping
        self.cpu0 = time.thread_time()
        self.slept = 0.0
        self.t0 = time.monotonic()

    def __call__(self) -> None:
        if self.stopping.is_set():
            raise _Stopped
        used = time.thread_time() - self.cpu0
        wall = time.monotonic() - self.t0
        owed = used / self.duty - wall
        if owed > 0 and self.stopping.wait(owed):
            raise _Stopped


class _Stopped(Exception):
    pass


def _gc_delay(gc_s: float | None) -> float:
    """Seconds until serve's first retention pass (``gc_s``: a test's period)."""
    if gc_s is not None:
        return gc_s
    from holon_cli.runtime.home.gc import next_gc_in

    return next_gc_in()


def _retention(duty: float, stopping: threading.Event, log: Log) -> None:
    """Serve's daily retention pass (``holon home gc``), paced (at most
    ``duty`` of a CPU), so no minute of an idle serve holds all of it."""
    from holon_cli.errors import HolonError
    from holon_cli.runtime.home.gc import scheduled_gc

    pace = _Pacer(duty, stopping)
    try:
        r = scheduled_gc(pace=pace)
    except _Stopped:
        return
    except (HolonError, OSError) as exc:
        log(f"retention: gc failed: {getattr(exc, 'message', exc)}")
        return
    log(
        f"retention: {len(r['closed'])} segment(s) closed, {len(r['dropped'])} dropped, "
        f"{r['freed_bytes']} bytes freed"
        + (f"; home {r['home_bytes']} bytes" if r["home_bytes"] is not None else "")
        + (" (over retention.max_home_bytes)" if r["over_max_home_bytes"] else "")
        + f"; took {time.monotonic() - pace.t0:.1f} s"
    )


class Scheduler:
    """Runs agent passes on daemon threads as changes and deadlines call for them."""

    def __init__(
        self,
        *,
        concurrency: int = 4,
        catalog: Toolbox | None = None,
        log: Log | None = None,
        sweep_s: float = SWEEP_S,
        drain_s: float = 10.0,
        gc_s: float | None = None,
    ) -> None:
        self.concurrency = max(1, concurrency)
        if catalog is None:
            from holon_cli.tools.catalog import default_catalog

            catalog = default_catalog()
        self.catalog: Toolbox = catalog
        self.log: Log = log or (lambda _m: None)
        self.sweep_s = sweep_s
        self.drain_s = drain_s
        # seconds between retention passes (None: daily, from run/retention.json)
        self.gc_s = gc_s
        self.gc_duty = GC_DUTY
        self.root = HomeLayout.current().root
        self.stats = Stats()
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.watching = threading.Event()  # the first watcher is up
        self._watcher: threading.Thread | None = None
        self._watch: Watcher | None = None
        self._cv = threading.Condition(threading.RLock())  # re-entrant: see stop()
        self._dirty: set[str] = set()
        self._running: set[str] = set()
        # agent -> monotonic time of its next deadline (the truth), and the
        # home's one heap of them (entries that no longer match are skipped)
        self._due: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self.watch_builds = 0  # how often the watcher (re)started: tests and status
        # agent -> (monotonic time before which no pass starts, current backoff)
        self._held: dict[str, tuple[float, float]] = {}
        self._status: dict[str, str | None] = {}  # agent -> status last read (dbos: resumes)
        # passes' wake index entries not written yet and the claims they release
        self._index = IndexBatch(self.root)
        self._gc_running = False

    # ------------------------------------------------------------ inputs
    def mark(self, ids: Iterable[str]) -> None:
        with self._cv:
            self._dirty.update(ids)
            self._cv.notify_all()

    def mark_all(self) -> None:
        """Every agent: at start-up with the index in doubt, after a change
        of ``config.yaml``, when the kernel dropped events. Their passes'
        entries then make the index whole again."""
        from holon_cli.runtime.agents.lifecycle import agent_ids

        ids = agent_ids()
        with self._cv:
            self._index.rebuild_with(ids)
        self.mark(ids)

    def _from_index(self) -> None:
        """Start-up and the sweep: the agents the wake index says are marked,
        have work or are due, and every quiet agent's deadline into the heap."""
        from holon_cli.runtime.agents.lifecycle import agent_ids

        valid = W.Validity.now(self.root)
        entries = W.load(self.root, valid)
        if entries is None:
            with self._cv:
                rebuilding = self._index.rebuild is not None
            if not rebuilding:
                self.mark_all()
            return
        marks = W.marked(self.root)
        now = clock.now()
        ids = agent_ids()
        gone = (set(entries) | set(marks)) - set(ids)
        if gone:  # removed agents: their markers and entries go
            for aid in gone & set(marks):
                W.forget(self.root / "agents" / aid)
            W.merge(self.root, {}, valid, agents=ids)
        todo = []
        with self._cv:
            for aid in ids:
                raw = entries.get(aid)
                if aid in marks or not W.quiet(raw, now):
                    todo.append(aid)
                elif aid not in self._running and aid not in self._due:
                    e = W.entry(raw)
                    if e is not None and e.due is not None:
                        self._set_due(aid, e.due)
        self.mark(todo)

    def _news(self, ids: set[str]) -> None:
        """Agents the watcher saw a change of (their marker was written)."""
        self.mark(ids)

    def _reconfigured(self) -> None:
        """``config.yaml`` changed: every agent is looked at (a raised budget,
        a new model may let held work run)."""
        self.mark_all()

    def stop(self) -> None:
        """Stop taking work and wake the main loop and the watcher. Safe from a
        signal handler, which runs on the main thread, maybe while the main
        loop holds the lock between its look at ``stopping`` and its wait: a
        notify from there would find no waiter and be lost (the loop would
        sleep out its slice, up to a minute). So on the main thread the
        notify comes from a thread of its own: it takes the lock only once
        the loop gives it up, in its wait, and wakes it."""
        self.stopping.set()
        w = self._watch
        if w is not None:
            w.stop()
        if threading.current_thread() is threading.main_thread():
            threading.Thread(target=self._notify, name="holon-stop", daemon=True).start()
        else:
            self._notify()

    def _notify(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def running(self) -> list[str]:
        with self._cv:
            return sorted(self._running)

    def _watch_loop(self) -> None:
        """Watch until stopped (see :meth:`_watch_once`)."""
        try:
            self._watch_until_stopped()
        finally:
            # start-up waits for this event; a stop() that came before the
            # first watcher was up must not leave it waiting for its timeout
            self.watching.set()

    def _watch_until_stopped(self) -> None:
        failures = 0
        while not self.stopping.is_set():
            try:
                self._watch_once()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - the sweep still runs; say why
                failures += 1
                if failures > 1:  # once: a folder vanished while adding; retry at once
                    self.log(f"watcher failed ({type(exc).__name__}: {exc}); restarting in 1 s")
                    self.watching.set()  # start-up goes on: deadlines and the sweep still run
                    self.stopping.wait(1.0)

    def _watch_once(self) -> None:
        """One watcher: the home (``config.yaml``, ``agents/`` appearing),
        ``agents/`` (a new agent folder) and the wake index's markers. Until
        stopped, or until a watched folder goes (then it is built again and
        every agent looked at: anything could have been missed)."""
        from holon_cli.serve.watch import classify, open_watcher

        root = str(self.root)
        wake_d = W.wake_dir(root)
        agents_d = f"{root}/agents"
        os.makedirs(wake_d, mode=0o700, exist_ok=True)
        w = open_watcher()
        self._watch = w
        try:
            if self.stopping.is_set():
                return
            w.add(root)
            w.add(wake_d)
            w.add(agents_d)
            self.watch_builds += 1
            if self.watch_builds > 1:
                self.mark_all()
            self.watching.set()
            closes = isinstance(w, _inotify_type())
            while not self.stopping.is_set():
                changes = w.wait()
                if changes is None:
                    return
                seen = classify(changes, root, closes=closes)
                if seen.reconfigured:
                    self._reconfigured()
                elif seen.everyone:
                    self.mark_all()
                elif seen.ids:
                    self._news(seen.ids)
                if seen.again:
                    return
        finally:
            self._watch = None
            w.close()

    def _resumed(self, ids: Iterable[str]) -> set[str]:
        """Agents whose record changed from a held status (``paused``,
        ``stopped``) to a runnable one: ``holon agent start`` (or a resume
        control). The dbos engine enqueues their pass by that cause; any
        other change of the record (a turn's own writes) is no resume."""
        from holon_cli.model.agent import HELD_STATUSES

        out: set[str] = set()
        for aid in ids:
            status = _agent_status(self.root, aid)
            before = self._status.get(aid, "unknown")
            self._status[aid] = status
            if status is None or status == before or status in HELD_STATUSES:
                continue
            if before in HELD_STATUSES or before == "unknown":
                out.add(aid)
        return out

    def _remember_statuses(self) -> None:
        """The status of every agent as the watcher starts (a held agent's
        resume is recognised by the change away from it)."""
        from holon_cli.runtime.agents.lifecycle import agent_ids

        for aid in agent_ids():
            if aid not in self._status:
                self._status[aid] = _agent_status(self.root, aid)

    # ------------------------------------------------------------ passes
    def _entry(self, aid: str, at: int) -> W.Entry:
        """The agent's wake index entry as its pass leaves it."""
        from holon_cli.runtime.wake import entry_of
        from holon_cli.store.agent_store import AgentStore

        return entry_of(AgentStore(HomeLayout(self.root).agent(aid)), at, acted=False)

    def _pass(self, aid: str) -> None:
        retry_at: float | None = None
        entry: W.Entry | None = None
        at = time.monotonic_ns()
        valid = W.Validity.now(self.root)
        claim = W.claim(self.root, aid)
        if claim.busy:  # a write was in flight: it may land after our reads
            retry_at = time.monotonic() + CLAIM_RETRY_S
        try:
            with W.holding([self.root / "agents" / aid]):
                while not self.stopping.is_set():
                    with self._cv:
                        self._dirty.discard(aid)
                    turn = run_pass_turn(aid, stats=self.stats, catalog=self.catalog, log=self.log)
                    if turn.busy:
                        retry_at = time.monotonic() + BUSY_RETRY_S
                    res = turn.result
                    if res is None:
                        break
                    if not res.ran:
                        if res.budget is not None:
                            self.log(f"{aid}: held: {_budget_line(res.budget)}")
                        break
                    if res.budget is not None:
                        self.log(
                            f"{aid}: stopped before a provider request: {_budget_line(res.budget)}"
                        )
                    if res.status == "aborted":
                        # an operator's abort paused the agent: no failure, no backoff
                        if turn.failed:
                            retry_at = self._hold_after_failure(aid)
                        break
                    with self._cv:
                        self._held.pop(aid, None)
            entry = self._entry(aid, at)
        finally:
            if entry is None:  # the pass or its assessment failed: look again next time
                entry = W.Entry(at, None, True, "its last pass failed")
            with self._cv:
                self._running.discard(aid)
                self._due.pop(aid, None)
                if entry.due is not None:
                    self._set_due(aid, entry.due)
                if retry_at is not None and retry_at < self._due.get(aid, float("inf")):
                    self._due[aid] = retry_at
                    heapq.heappush(self._heap, (retry_at, aid))
                self._index.add(aid, entry, valid, claim)
                self._cv.notify_all()

    def _set_due(self, aid: str, at_wall: float) -> None:
        """(under the lock) the agent's next deadline, from a wall-clock time."""
        mono = time.monotonic() + max(0.0, at_wall - clock.now())
        self._due[aid] = mono
        heapq.heappush(self._heap, (mono, aid))

    def flush(self) -> bool:
        """Write the batched entries into the wake index and release their
        claims (``serve/index_batch.py``). Refused (the index in doubt, the
        home moved on): everything stays for the next flush, which the next
        pass schedules."""
        with self._cv:
            taken = self._index.take()
        if taken is None:
            return False
        try:
            if self._index.write(taken):
                return True
        except Exception as exc:  # noqa: BLE001 - the claims stay: looked at again
            self.log(f"wake index: not written ({type(exc).__name__}: {exc})")
        with self._cv:
            self._index.put_back(taken)
        return False

    def _hold_after_failure(self, aid: str) -> float:
        """Hold the agent's next pass back after a failed turn (recorded by
        :func:`run_pass_turn`); return when."""
        with self._cv:
            prev = self._held.get(aid)
            backoff = FAIL_BACKOFF_S if prev is None else min(prev[1] * 2, FAIL_BACKOFF_MAX_S)
            until = time.monotonic() + backoff
            self._held[aid] = (until, backoff)
        self.log(f"{aid}: turn aborted; its next pass waits {backoff:g} s")
        return until

    # ------------------------------------------------------------ main loop
    def start_watching(self, timeout: float = 30.0) -> None:
        """Start the watcher and wait until it is up, so nothing written
        after this returns goes unseen (the start-up pass covers the rest),
        or until it has left because :meth:`stop` came first."""
        if self._watcher is None:
            self._watcher = threading.Thread(
                target=self._watch_loop, name="holon-watch", daemon=True
            )
            self._watcher.start()
        self.watching.wait(timeout)

    def run(self) -> None:
        """Until :meth:`stop` (then :meth:`drain`)."""
        self.start_watching()
        self._from_index()
        next_sweep = time.monotonic() + self.sweep_s
        next_gc = time.monotonic() + _gc_delay(self.gc_s)
        self.ready.set()
        with self._cv:
            while not self.stopping.is_set():
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + self.sweep_s
                    self._from_index()
                if now >= next_gc:
                    next_gc = now + (self.gc_s or GC_EVERY_S)
                    if not self._gc_running:
                        self._gc_running = True
                        threading.Thread(target=self._gc, name="holon-gc", daemon=True).start()
                flush_at = self._index.next_flush
                if flush_at is not None and now >= flush_at:
                    self.flush()
                heap = self._heap
                while heap and heap[0][0] <= now:
                    due, aid = heapq.heappop(heap)
                    if self._due.get(aid) == due:
                        del self._due[aid]
                        self._dirty.add(aid)
                held = {a: until for a, (until, _b) in self._held.items() if until > now}
                for aid in sorted(self._dirty - self._running - held.keys()):
                    if len(self._running) >= self.concurrency:
                        break
                    self._dirty.discard(aid)
                    self._running.add(aid)
                    threading.Thread(
                        target=self._pass, args=(aid,), name=f"holon-agent-{aid}", daemon=True
                    ).start()
                # a held agent with news runs when its hold ends
                ends = [until for a, until in held.items() if a in self._dirty]
                wake = min(
                    next_sweep,
                    next_gc,
                    heap[0][0] if heap else next_sweep,
                    next_sweep if flush_at is None else flush_at,
                    *ends,
                )
                self._cv.wait(timeout=max(0.0, min(WAIT_SLICE_S, wake - time.monotonic())))

    def _gc(self) -> None:
        """Serve's daily retention pass, off the loop (:func:`_retention`)."""
        try:
            _retention(self.gc_duty, self.stopping, self.log)
        finally:
            with self._cv:
                self._gc_running = False

    def drain(self) -> list[str]:
        """Wait up to ``drain_s`` for running passes; write what their passes
        found into the wake index; return those still running."""
        end = time.monotonic() + self.drain_s
        with self._cv:
            while self._running and time.monotonic() < end:
                self._cv.wait(timeout=min(0.2, end - time.monotonic()))
            left = sorted(self._running)
        self.flush()
        return left


def _inotify_type() -> type:
    from holon_cli.serve.watch import InotifyWatcher

    return InotifyWatcher
