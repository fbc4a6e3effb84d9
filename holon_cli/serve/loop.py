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
- wake-ups come from watchfiles (inbox arrivals, task records, the timers
  ledger, config, new agent folders, an agent's status leaving ``paused`` or
  ``stopped``; :func:`watch_dirs`, each folder watched non-recursively),
  from the earliest deadline of each
  agent (sleep end, work-item recheck, the waiting plane's timer
  ``next_deadline``) and from a slow safety sweep over every agent;
- stopping takes no new work; running passes get ``drain_s`` to finish, then
  the process leaves them (the turn journal replays an interrupted turn).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.serve.passes import Log, Stats, run_pass_turn
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.model.tool import Toolbox


# watchfiles: wait for the first change, then until nothing new arrived for
# STEP_MS (at most DEBOUNCE_MS). Its default 1.6 s debounce is far too slow
# for the reaction target (enqueue -> provider request p50 <= 50 ms).
# watchfiles' Rust loop has no blocking wait: it sleeps STEP_MS, takes the GIL
# and looks at what inotify collected, so an idle serve wakes 1000/STEP_MS
# times a second. Measured on a 2-CPU VM, one wake-up costs 40-60 us of CPU
# whatever it does (a bare ``time.sleep`` loop costs the same), so the step
# sets the watcher's idle cost: 10 ms ~0.27 s CPU a minute, 15 ms ~0.18 s,
# 20 ms ~0.13 s. A change is seen 1-2 steps after it lands (the second step
# confirms the burst is over), 1.5 steps on average: 15 ms -> ~22 ms of the
# reaction budget, next to the ~18 ms a pass needs before its provider
# request on a quiet machine (mostly fsyncs).
DEBOUNCE_MS = 30
STEP_MS = 15
BUSY_RETRY_S = 1.0
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
# stop() wakes it. The slice only bounds a sleep in case a wake-up is missed
# (it was 0.5 s when stop() only set a flag: 2 wake-ups a second for nothing).
WAIT_SLICE_S = 30.0


def _classify(root: Path, paths: Iterable[str]) -> tuple[set[str], bool]:
    """Map changed paths to the agents they concern; ``True`` = every agent
    (config changed). Other files (ledgers, state, workspaces) are ignored:
    they are written by the passes themselves."""
    agents_dir = root / "agents"
    ids: set[str] = set()
    everyone = False
    for raw in paths:
        p = Path(raw)
        if p == root / "config.yaml":
            everyone = True
            continue
        try:
            rel = p.relative_to(agents_dir).parts
        except ValueError:
            continue
        if not rel or rel[0].startswith("."):
            continue
        if len(rel) == 1:  # a new (or renamed-into-place) agent folder
            ids.add(rel[0])
        elif rel[1:4] == (".holon", "inbox", "new"):
            ids.add(rel[0])
        elif rel[1:3] == (".holon", "tasks") and (rel[-1] == "task.json" or len(rel) == 4):
            ids.add(rel[0])  # a task record changed, or a task got its folder
        elif rel[1:] == (".holon", "ledger", "timers.jsonl"):
            ids.add(rel[0])  # a timer added or changed: its deadline is news
    return ids, everyone


# per agent, the folders whose changes are news (each watched on its own,
# not recursively); a task's own folder under tasks/ is watched as well;
# state/ for agent.json: `holon agent start` must restart processing at once
_AGENT_DIRS = (
    (".holon", "inbox", "new"),
    (".holon", "ledger"),
    (".holon", "tasks"),
    (".holon", "state"),
)
_STATE_FILE = (".holon", "state", "agent.json")


def _state_agent(root: Path, path: str) -> str | None:
    """The agent whose record (``state/agent.json``) this path is, or None."""
    try:
        rel = Path(path).relative_to(root / "agents").parts
    except ValueError:
        return None
    if len(rel) == 4 and rel[1:] == _STATE_FILE and not rel[0].startswith("."):
        return rel[0]
    return None


def _agent_status(root: Path, agent_id: str) -> str | None:
    from holon_cli.store.fsio import read_snapshot

    try:
        rec = read_snapshot(root / "agents" / agent_id / ".holon" / "state" / "agent.json")
    except Exception:  # noqa: BLE001 - a damaged record: the sweep reports it
        return None
    state = (rec or {}).get("state") or {}
    status = state.get("status")
    return status if isinstance(status, str) else None


def watch_dirs(root: Path) -> list[str]:
    """The folders serve watches, each non-recursively: the home (config.yaml),
    ``agents/`` (new agents) and per agent its inbox arrivals, its ledger
    folder (timers.jsonl), its task records folder and each task's folder.
    Workspaces, notes, state and the rest are not watched: an agent's build
    in its workspace neither wakes serve nor uses up the inotify watch limit
    (a recursive watch of the home put one watch on every folder of every
    workspace). A folder that is missing is stood in for by its nearest
    existing parent inside the agent, so its creation is seen
    (:func:`_structural`) and the watch set rebuilt."""
    import os

    agents = root / "agents"
    dirs: set[Path] = {root}
    if agents.is_dir():
        dirs.add(agents)
        try:
            entries = list(os.scandir(agents))
        except OSError:
            entries = []
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            home = Path(entry.path)
            for parts in _AGENT_DIRS:
                d = home.joinpath(*parts)
                while d != home and not d.is_dir():
                    d = d.parent
                dirs.add(d)
            tasks = home / ".holon" / "tasks"
            try:
                dirs.update(
                    Path(t.path)
                    for t in os.scandir(tasks)
                    if not t.name.startswith(".") and t.is_dir(follow_symlinks=False)
                )
            except OSError:
                pass
    return sorted(str(d) for d in dirs)


def _structural(root: Path, path: str) -> str | None:
    """Whether a change means the watch set must grow: ``agents/`` or an
    agent appeared, one of an agent's watched folders (or a parent of it)
    was created, or a task got its folder. Returns the agent concerned
    (``"*"`` for ``agents/`` itself), or None."""
    p = Path(path)
    agents = root / "agents"
    if p == agents:
        return "*"
    try:
        rel = p.relative_to(agents).parts
    except ValueError:
        return None
    if not rel or rel[0].startswith("."):
        return None
    sub = rel[1:]
    if len(sub) == 3 and sub[:2] == (".holon", "tasks") and not sub[2].startswith("."):
        return rel[0]
    return rel[0] if any(sub == parts[: len(sub)] for parts in _AGENT_DIRS) else None


def watch_filter(root: Path) -> Callable[[Any, str], bool]:
    def keep(change: Any, path: str) -> bool:
        if int(change) == 3:  # deleted: ingest archiving inbox/new, not news
            return False
        ids, everyone = _classify(root, [path])
        if everyone or ids or _state_agent(root, path) is not None:
            return True
        return _structural(root, path) is not None

    return keep


def agent_deadline(agent_id: str) -> float | None:
    """The earliest wall-clock time at which a tick could find something for
    this agent: sleep end, work-item recheck, timer (if the waiting plane
    offers ``next_deadline``). Read-only."""
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(agent_id, create_default=False)
    state = store.read_record()["state"]
    cands: list[float] = []
    until = state.get("sleeping_until")
    if state.get("status") == "asleep" and until:
        cands.append(clock.parse_iso(until))
    for r in wi.load(store).items.values():
        at = r.get("recheck_at")
        if (
            r.get("state") == "open"
            and r.get("blocked_by")
            and isinstance(at, str)
            and not r.get("recheck_consumed_at")
        ):
            cands.append(clock.parse_iso(at))
    from holon_cli.runtime.budgets.check import active, wake_at
    from holon_cli.runtime.budgets.spend import home_of
    from holon_cli.store.config import load_config

    cfg = load_config()
    if active(cfg, home_of(store), store) and (reset := wake_at(store, cfg)) is not None:
        cands.append(reset)  # a budget that stopped a turn resets: look again then
    try:  # the waiting plane's timers, once it has landed
        timers = importlib.import_module("holon_cli.runtime.waiting.timers")
    except ImportError:
        pass
    else:
        nd = timers.next_deadline(store)
        if nd:
            cands.append(clock.parse_iso(nd))
    return min(cands) if cands else None


def _budget_line(hit: Any) -> str:
    from holon_cli.runtime.agents.holds import budget_line

    return budget_line(hit)


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
        self.root = HomeLayout.current().root
        self.stats = Stats()
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.watching = threading.Event()  # the first watcher is up
        self._watcher: threading.Thread | None = None
        self._cv = threading.Condition(threading.RLock())  # re-entrant: see stop()
        self._dirty: set[str] = set()
        self._running: set[str] = set()
        self._due: dict[str, float] = {}  # agent -> monotonic time of its next deadline
        self.watch_builds = 0  # how often the watcher (re)started: tests and status
        # agent -> (monotonic time before which no pass starts, current backoff)
        self._held: dict[str, tuple[float, float]] = {}
        self._status: dict[str, str | None] = {}  # agent -> status the watcher last read

    # ------------------------------------------------------------ inputs
    def mark(self, ids: Iterable[str]) -> None:
        with self._cv:
            self._dirty.update(ids)
            self._cv.notify_all()

    def mark_all(self) -> None:
        from holon_cli.runtime.agents.lifecycle import agent_ids

        self.mark(agent_ids())

    def stop(self) -> None:
        """Stop taking work and wake the main loop. Safe from a signal handler:
        the condition's lock is re-entrant (the handler runs on the main
        thread, which may hold it) and no thread holds it for long."""
        self.stopping.set()
        with self._cv:
            self._cv.notify_all()

    def running(self) -> list[str]:
        with self._cv:
            return sorted(self._running)

    def _watch(self) -> None:
        """Watch :func:`watch_dirs` until stopped. When the set must grow (a
        new agent or task folder), the watcher is rebuilt and then the agents
        concerned are marked once more: a change that landed while no watcher
        was up is still seen by that pass."""
        try:
            self._watch_until_stopped()
        finally:
            # start-up waits for this event; a stop() that came before the
            # first watcher was up must not leave it waiting for its timeout
            self.watching.set()

    def _watch_until_stopped(self) -> None:
        from watchfiles._rust_notify import RustNotify

        keep = watch_filter(self.root)
        recheck: set[str] = set()
        failures = 0
        while not self.stopping.is_set():
            try:
                with RustNotify(watch_dirs(self.root), False, False, 300, False, True) as notify:
                    self._remember_statuses()
                    self.watch_builds += 1
                    self.watching.set()
                    if "*" in recheck:
                        self.mark_all()
                    elif recheck:
                        self.mark(recheck)
                    recheck = set()
                    failures = 0
                    while not self.stopping.is_set():
                        raw = notify.watch(DEBOUNCE_MS, STEP_MS, 0, None)
                        if isinstance(raw, str):  # "signal"/"stop"/"timeout": nothing new
                            continue
                        paths = [p for c, p in raw if keep(c, p)]
                        ids, everyone = _classify(self.root, paths)
                        ids |= self._resumed(paths)
                        if everyone:
                            self.mark_all()
                        elif ids:
                            self.mark(ids)
                        grown = {_structural(self.root, p) for p in paths} - {None}
                        if grown:
                            recheck = {a for a in grown if a is not None}
                            break
            except Exception as exc:  # noqa: BLE001 - the sweep still runs; say why
                failures += 1
                if failures > 1:  # once: a folder vanished while listing; retry at once
                    self.log(f"watcher failed ({type(exc).__name__}: {exc}); restarting in 1 s")
                    self.watching.set()  # start-up goes on: deadlines and the sweep still run
                    time.sleep(1.0)

    def _resumed(self, paths: Iterable[str]) -> set[str]:
        """Agents whose record changed from a held status (``paused``,
        ``stopped``) to a runnable one: ``holon agent start`` (or a resume
        control). Their queued messages, pending wake hint and deferred
        task results were passed over while held; their pass runs now, not
        at the next sweep. Any other change of the record (a turn's own
        writes) is no news."""
        from holon_cli.model.agent import HELD_STATUSES

        out: set[str] = set()
        for aid in {a for a in (_state_agent(self.root, p) for p in paths) if a}:
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
    def _pass(self, aid: str) -> None:
        retry_at: float | None = None
        try:
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
        finally:
            due = self._deadline_mono(aid)
            if retry_at is not None:
                due = retry_at if due is None else min(due, retry_at)
            with self._cv:
                self._running.discard(aid)
                if due is None:
                    self._due.pop(aid, None)
                else:
                    self._due[aid] = due
                self._cv.notify_all()

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

    def _deadline_mono(self, aid: str) -> float | None:
        try:
            at = agent_deadline(aid)
        except Exception:  # noqa: BLE001 - a damaged agent: the sweep reports it
            return None
        if at is None:
            return None
        return time.monotonic() + max(0.0, at - clock.now())

    # ------------------------------------------------------------ main loop
    def start_watching(self, timeout: float = 30.0) -> None:
        """Start the watcher and wait until it is up, so nothing written
        after this returns goes unseen (the start-up pass covers the rest),
        or until it has left because :meth:`stop` came first."""
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="holon-watch", daemon=True)
            self._watcher.start()
        self.watching.wait(timeout)

    def run(self) -> None:
        """Until :meth:`stop`; then drain for up to ``drain_s``. Returns the
        agents whose passes were still running when the drain ended."""
        self.start_watching()
        self.mark_all()
        next_sweep = time.monotonic() + self.sweep_s
        next_gc = time.monotonic() + self._gc_delay()
        self.ready.set()
        with self._cv:
            while not self.stopping.is_set():
                now = time.monotonic()
                if now >= next_sweep:
                    from holon_cli.runtime.agents.lifecycle import agent_ids

                    self._dirty.update(agent_ids())
                    next_sweep = now + self.sweep_s
                if now >= next_gc:
                    threading.Thread(target=self._gc, name="holon-gc", daemon=True).start()
                    next_gc = now + (self.gc_s or GC_EVERY_S)
                for aid, due in list(self._due.items()):
                    if due <= now:
                        self._dirty.add(aid)
                        del self._due[aid]
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
                wake = min([next_sweep, next_gc, *self._due.values(), *ends])
                self._cv.wait(timeout=max(0.0, min(WAIT_SLICE_S, wake - time.monotonic())))

    def _gc_delay(self) -> float:
        if self.gc_s is not None:
            return self.gc_s
        from holon_cli.runtime.home.gc import next_gc_in

        return next_gc_in()

    def _gc(self) -> None:
        """Serve's daily retention pass (``holon home gc``), off the loop."""
        from holon_cli.errors import HolonError
        from holon_cli.runtime.home.gc import scheduled_gc

        try:
            r = scheduled_gc()
        except (HolonError, OSError) as exc:
            self.log(f"retention: gc failed: {getattr(exc, 'message', exc)}")
            return
        self.log(
            f"retention: {len(r['closed'])} segment(s) closed, {len(r['dropped'])} dropped, "
            f"{r['freed_bytes']} bytes freed; home {r['home_bytes']} bytes"
            + (" (over retention.max_home_bytes)" if r["over_max_home_bytes"] else "")
        )

    def drain(self) -> list[str]:
        """Wait up to ``drain_s`` for running passes; return those still running."""
        end = time.monotonic() + self.drain_s
        with self._cv:
            while self._running and time.monotonic() < end:
                self._cv.wait(timeout=min(0.2, end - time.monotonic()))
            return sorted(self._running)
