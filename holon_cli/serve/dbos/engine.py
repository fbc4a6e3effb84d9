"""``holon serve --engine dbos``: many serve workers over one home, coordinated
by DBOS Transact on Postgres (issue 30; contract "Scale-out engine").

Invariants:
- the file home stays the truth: a pass is what the local scheduler's pass
  is (``tick_agent`` then ``run_turn`` until nothing runs), the same steps,
  locks and journal; this module only decides *where and when* it runs;
- an agent's pass is a DBOS workflow on one queue partitioned by agent id
  with ``partition_concurrency=1``: at most one pass (so one turn) per agent
  runs cluster-wide;
- each provider round and each tool call of a pass's turns is a DBOS step
  of the pass (:class:`~holon_cli.serve.dbos.steps.DbosSteps`, the turn
  plane's ``TurnSteps`` hook, in its own module),
  recorded only after the turn journal holds it durably, and each turn that
  ran ends with a ``holon.turn`` step (its result): DBOS's steps are a
  prefix of the journal's. A recovered pass skips its finished turns (their
  recorded results), and its unfinished turn replays from the journal,
  re-walking it through the hook (compared with DBOS's records; missing
  ones are recorded; the journal wins a disagreement, logged), then goes on
  after the last completed step; a call in flight at the crash is closed as
  interrupted, never re-run;
- wakes have deterministic workflow ids, one per cause: ``A:msg:M`` for new
  queued messages (one pass for a backlog, and none while a pass of the
  agent waits to start: :meth:`DbosScheduler.wake`), ``A:at:T`` per
  deadline (delayed in DBOS, so it fires once cluster-wide even if the
  worker that saw it dies), ``A:resume:<mtime of the agent record>``,
  ``A:sweep:N``. Every worker that notices the same cause enqueues the same
  id; DBOS keeps one. (DBOS refuses ``deduplication_id`` on a partitioned
  queue, so the id is the dedup key; a spare pass finds nothing and ends.)
- workers heartbeat in ``holon_workers``; a live worker that finds a stale
  row locks it (``FOR UPDATE SKIP LOCKED``: one taker), has DBOS recover
  that executor's pending workflows, and deletes it in the same transaction
  (:mod:`.workers`).

The database's URL and its check before start are in :mod:`.database`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

from holon_cli import clock
from holon_cli.errors import HolonError
from holon_cli.serve.dbos import compat
from holon_cli.serve.dbos.steps import DbosSteps
from holon_cli.serve.dbos.workers import (
    HEARTBEAT_S,
    Registry,
    WorkerRow,
    cluster_workers,
    default_executor_id,
)
from holon_cli.serve.loop import BUSY_RETRY_S, FAIL_BACKOFF_MAX_S, FAIL_BACKOFF_S, Scheduler
from holon_cli.serve.passes import Log, run_pass_turn
from holon_cli.store import wake as W

if TYPE_CHECKING:
    from holon_cli.model.tool import Toolbox
    from holon_cli.runtime.turn.steps import TurnSteps

QUEUE = "holon-agent-passes"
APP_NAME = "holon"
POLL_S = 0.1  # dequeue latency vs idle cost: 0.05 s ~6.3 s CPU a minute idle, 0.1 s ~4, 1 s ~1.4
SWEEP_S = 60.0
SENT_MAX = 100_000  # remembered enqueued ids (a message's wake is enqueued once per worker)

_scheduler: DbosScheduler | None = None  # the process's engine (workflows reach it)


class _EnqueueOptions(TypedDict, total=False):
    """What a pass is enqueued with (DBOS's ``SetEnqueueOptions``)."""

    queue_partition_key: str
    delay_seconds: float


class PassResult(TypedDict):
    turns: int
    last_status: str | None


def _app_version() -> str:
    """One version for every worker of a release: a live worker may recover
    (and dequeue) only the workflows of its own application version."""
    from holon_cli import __version__

    return f"holon-{__version__}"


# ---------------------------------------------------------------- workflows


def _dbos() -> Any:
    from dbos import DBOS

    return DBOS


def _register() -> Any:
    """Register the pass workflow with DBOS (once per process)."""
    from dbos import DBOS

    @DBOS.workflow(name="holon.agent_pass")
    def agent_pass(agent_id: str, backoff: float = 0.0) -> PassResult:
        engine = _engine()
        engine.begin_pass(agent_id)
        try:
            return _pass_body(agent_id, backoff)
        finally:
            engine.end_pass(agent_id)

    def _pass_body(agent_id: str, backoff: float) -> PassResult:
        out: PassResult = {"turns": 0, "last_status": None}
        steps = DbosSteps(_engine().log, _engine().run_one_turn)
        while True:
            res = steps.turn(agent_id)
            if res.get("busy"):  # a manual `holon turn` holds the lock: wait, durably
                DBOS.sleep(BUSY_RETRY_S)
                continue
            if not res["ran"]:
                return out
            out["turns"] += 1
            out["last_status"] = res["status"]
            if res["status"] == "aborted":
                if res.get("failure_kind") != "operator_aborted":
                    nxt = min(max(backoff * 2, FAIL_BACKOFF_S), FAIL_BACKOFF_MAX_S)
                    _engine().enqueue_pass(
                        agent_id, f"retry:{res['turn_id']}", delay=nxt, backoff=nxt
                    )
                return out
            backoff = 0.0

    return agent_pass


def _engine() -> DbosScheduler:
    if _scheduler is None:
        raise HolonError("the DBOS engine is not running in this process")
    return _scheduler


def pending_message_ids(agent_id: str) -> list[str]:
    """Queued messages of an agent, those still in ``inbox/new`` included (read-only)."""
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(agent_id, create_default=False)
    st = q.load(store)
    ids = {e["message_id"] for e in st.entries.values() if e["status"] == "queued"}
    for p in store.inbox.pending():
        mid = p.name[: -len(".json")]
        if mid not in st.entries and mid not in st.recent_final:
            ids.add(mid)
    return sorted(ids)


def _record_mtime_ns(root: Any, agent_id: str) -> int:
    try:
        return os.stat(root / "agents" / agent_id / ".holon" / "state" / "agent.json").st_mtime_ns
    except OSError:
        return time.time_ns()


# ---------------------------------------------------------------- the scheduler


class DbosScheduler(Scheduler):
    """The local scheduler's watcher and deadlines; passes go through DBOS."""

    def __init__(
        self,
        *,
        database_url: str,
        executor_id: str | None = None,
        concurrency: int = 4,
        catalog: Toolbox | None = None,
        log: Log | None = None,
        drain_s: float = 10.0,
    ) -> None:
        super().__init__(
            concurrency=concurrency, catalog=catalog, log=log, sweep_s=SWEEP_S, drain_s=drain_s
        )
        self.database_url = database_url
        self.executor_id = executor_id or default_executor_id()
        self.http_addr: str | None = None
        self._resumes: set[str] = set()
        self._active: dict[str, int] = {}  # agent -> passes of this worker in flight
        self._sent: set[str] = set()  # workflow ids this worker enqueued (each once)
        self._parked: set[str] = set()  # passes dequeued while stopping: left pending
        self._reconfig: dict[str, str] = {}  # agent -> its pass's key after a config change
        # pass thread -> (claim time, validity, claim, marking held off)
        self._claims: dict[int, tuple[int, W.Validity, W.Claim, Any]] = {}
        self._workflow: Any = None
        self._queue: Any = None
        # this worker's row in holon_workers, and the dead ones it recovers
        self.registry = Registry(database_url, self.executor_id, lambda m: self.log(m))

    # ------------------------------------------------------------ DBOS
    def launch(self) -> None:
        """Configure and launch DBOS as this worker's executor."""
        global _scheduler

        DBOS = _dbos()
        os.environ["HOLON_WORKER_ID"] = self.executor_id
        _scheduler = self
        DBOS(
            config={
                "name": APP_NAME,
                "system_database_url": self.database_url,
                "executor_id": self.executor_id,
                # one version for every worker of this release: a live worker
                # may recover only the workflows of its own application version
                "application_version": _app_version(),
                "log_level": os.environ.get("HOLON_DBOS_LOG_LEVEL", "WARNING"),
            }
        )
        self._workflow = _register()
        DBOS.launch()
        self._queue = DBOS.register_queue(
            QUEUE,
            partition_concurrency=1,
            worker_concurrency=self.concurrency,
            polling_interval_sec=POLL_S,
            on_conflict="always_update",
        )
        self._heartbeat()

    def shutdown(self) -> None:
        global _scheduler
        try:
            self.registry.mark_gone()
        finally:
            _dbos().destroy(workflow_completion_timeout_sec=0)
            _scheduler = None

    def enqueue_pass(
        self, agent_id: str, key: str, *, delay: float = 0.0, backoff: float = 0.0
    ) -> bool:
        """Enqueue the pass ``agent_id:key`` (a second enqueue of the same key,
        from any worker, is the same workflow). False when the database is down."""
        from dbos import SetEnqueueOptions, SetWorkflowID

        wfid = f"{agent_id}:{key}"
        if wfid in self._sent:  # this worker enqueued it already: no round trip
            return True
        opts: _EnqueueOptions = {"queue_partition_key": agent_id}
        if delay > 0:
            opts["delay_seconds"] = delay
        try:
            with SetWorkflowID(wfid), SetEnqueueOptions(**opts):
                self._queue.enqueue(self._workflow, agent_id, backoff)
        except Exception as exc:  # noqa: BLE001 - the database is away: retried later
            self.log(f"{agent_id}: cannot enqueue {key} ({type(exc).__name__}: {exc})")
            return False
        self._remember([wfid])
        return True

    def _remember(self, wfids: Iterable[str]) -> None:
        if len(self._sent) > SENT_MAX:
            self._sent.clear()
        self._sent.update(wfids)

    def _pass_waiting(self, agent_id: str) -> bool:
        """Whether a pass of this agent is enqueued and not started yet (by any
        worker). Read after the arrival was written, so that pass's tick sees
        it. ``False`` when the database cannot say: then a pass is enqueued."""
        try:
            return compat.pass_waiting(QUEUE, agent_id, _app_version())
        except Exception as exc:  # noqa: BLE001 - the database is away: enqueue (and log) instead
            self.log(f"{agent_id}: cannot look for a waiting pass ({type(exc).__name__})")
            return False

    def begin_pass(self, agent_id: str) -> None:
        """A pass workflow starts on this worker. While stopping, it is parked
        instead: it stays pending under this executor id and a live worker
        recovers it once this one is gone (never run here half-way)."""
        if self.stopping.is_set():
            with self._cv:
                self._parked.add(agent_id)
            threading.Event().wait()
        with self._cv:
            self._active[agent_id] = self._active.get(agent_id, 0) + 1
            self._running.add(agent_id)
        # as the local pass: claim the agent's wake marker, and this thread's
        # writes to it make none (its entry goes into the index at the end)
        at = time.monotonic_ns()
        valid = W.Validity.now(self.root)
        claim = W.claim(self.root, agent_id)
        hold = W.holding([self.root / "agents" / agent_id])
        hold.__enter__()
        self._claims[threading.get_ident()] = (at, valid, claim, hold)

    def end_pass(self, agent_id: str) -> None:
        held = self._claims.pop(threading.get_ident(), None)
        if held is not None:
            at, valid, claim, hold = held
            hold.__exit__(None, None, None)
            try:
                entry = self._entry(agent_id, at)
            except Exception:  # noqa: BLE001 - looked at again next time
                entry = W.Entry(at, None, True, "its last pass failed")
            with self._cv:
                self._index.add(agent_id, entry, valid, claim)
        with self._cv:
            n = self._active.get(agent_id, 1) - 1
            if n <= 0:
                self._active.pop(agent_id, None)
                self._running.discard(agent_id)
            else:
                self._active[agent_id] = n
            self._dirty.add(agent_id)  # its deadline may have moved (a Sleep, a timer)
            self._cv.notify_all()

    def run_one_turn(self, agent_id: str, *, steps: TurnSteps | None = None) -> dict[str, Any]:
        """``tick_agent`` then one ``run_turn``, its rounds and tool calls
        through ``steps`` (the pass's :class:`DbosSteps`). A re-run tick
        finds what it already did."""
        turn = run_pass_turn(
            agent_id,
            stats=self.stats,
            catalog=self.catalog,
            log=self.log,
            steps=steps,
            where=f", worker {self.executor_id}",
        )
        if turn.busy:
            return {"ran": False, "busy": True}
        if turn.error is not None:
            return {"ran": False, "error": turn.error}
        res = turn.result
        if res is None or not res.ran:
            return {"ran": False}
        return {
            "ran": True,
            "status": res.status,
            "turn_id": res.turn_id,
            "failure_kind": res.failure_kind,
        }

    # ------------------------------------------------------------ wakes
    def mark_all(self) -> None:
        """Every agent woken (start-up, the sweep): its wake decides whether
        a pass is enqueued. (No index rebuild: passes run only for agents
        with work here, and the index is ``tick --all``'s and repair's.)"""
        from holon_cli.runtime.agents.lifecycle import agent_ids

        self.mark(agent_ids())

    def _news(self, ids: set[str]) -> None:
        """Changed agents: those that left ``paused``/``stopped`` are resumes
        (a pass of their own: their held messages are not new)."""
        out = self._resumed(ids)
        with self._cv:
            self._resumes |= out
        self.mark(ids)

    def _reconfigured(self) -> None:
        """``config.yaml`` changed: an agent with queued messages gets a pass
        named by the file's identity (every worker names it alike), as the
        sweep's: messages whose own pass found them held (a budget since
        raised) run now, not at the next sweep."""
        from holon_cli.runtime.agents.lifecycle import agent_ids

        ident = W.config_identity(self.root)
        key = "config:" + ("none" if ident is None else "-".join(str(v) for v in ident))
        ids = agent_ids()
        with self._cv:
            for aid in ids:
                self._reconfig[aid] = key
        self.mark(ids)

    def wake(self, agent_id: str, *, sweep: int | None = None) -> None:
        """Enqueue the passes this agent's files call for."""
        from holon_cli.serve.loop import agent_deadline

        with self._cv:
            resumed = agent_id in self._resumes
            self._resumes.discard(agent_id)
            reconfig = self._reconfig.pop(agent_id, None)
        pending = pending_message_ids(agent_id)
        fresh = [mid for mid in pending if f"{agent_id}:msg:{mid}" not in self._sent]
        # one pass takes every queued message (it runs turns until none is
        # left), and a pass still waiting to start will see these files: so at
        # most one waiting pass per agent, whatever the backlog
        if fresh and (
            self._pass_waiting(agent_id) or self.enqueue_pass(agent_id, f"msg:{fresh[0]}")
        ):
            self._remember(f"{agent_id}:msg:{mid}" for mid in fresh)
        if resumed:  # named by the record's change: every worker names it alike
            self.enqueue_pass(agent_id, f"resume:{_record_mtime_ns(self.root, agent_id)}")
        if sweep is not None and pending:  # held messages whose own pass found them held
            self.enqueue_pass(agent_id, f"sweep:{sweep}")
        elif reconfig is not None and pending and not fresh:
            self.enqueue_pass(agent_id, reconfig)
        at = agent_deadline(agent_id)
        if at is not None:
            self.enqueue_pass(agent_id, f"at:{int(at * 1000)}", delay=max(0.0, at - clock.now()))

    # ------------------------------------------------------------ workers
    def _heartbeat(self) -> None:
        """Record this worker as alive (:meth:`Registry.beat`)."""
        if self.registry.beat(self.http_addr, self.stats.started_at):
            self.mark_all()  # wakes enqueued while it was away were lost: enqueue again

    def workers(self) -> list[WorkerRow]:
        """The cluster's workers (on a connection of its own: the HTTP thread asks)."""
        return cluster_workers(self.database_url)

    # ------------------------------------------------------------ main loop
    def run(self) -> None:
        """Until :meth:`stop`: turn changes and deadlines into enqueued passes;
        heartbeat; recover dead workers."""
        self.start_watching()
        self._remember_statuses()
        self.mark_all()
        self.ready.set()
        next_beat = 0.0
        next_sweep = time.monotonic() + self.sweep_s
        while not self.stopping.is_set():
            now = time.monotonic()
            if now >= next_beat:
                self._heartbeat()
                self.registry.recover_dead()
                next_beat = now + HEARTBEAT_S
            sweep: int | None = None
            if now >= next_sweep:
                sweep = int(time.time() // self.sweep_s)
                next_sweep = now + self.sweep_s
                self.mark_all()
            with self._cv:
                dirty, self._dirty = self._dirty, set()
            for aid in sorted(dirty):
                try:
                    self.wake(aid, sweep=sweep)
                except Exception as exc:  # noqa: BLE001 - one agent must not stop the others
                    self.log(f"{aid}: cannot wake ({type(exc).__name__}: {exc})")
            flush_at = self._index.next_flush
            if flush_at is not None and time.monotonic() >= flush_at:
                self.flush()
            with self._cv:
                if not self._dirty and not self.stopping.is_set():
                    flush = self._index.next_flush
                    wake = next_beat if flush is None else min(next_beat, flush)
                    self._cv.wait(timeout=max(0.0, wake - time.monotonic()))

    def drain(self) -> list[str]:
        """Wait up to ``drain_s`` for this worker's running turns; then leave
        DBOS (what is left pending is recovered by a live worker)."""
        left = super().drain()
        self.shutdown()
        with self._cv:  # parked passes hold DBOS threads: the process must leave at once
            return sorted(set(left) | self._parked)
