"""Entry points of the turn step: :func:`run_turn` (one agent) and
:func:`run_turns_all` (every agent with queued work)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.errors import RejectedError, as_holon_error
from holon_cli.model.agent import HELD_STATUSES, is_supervised_child, lifecycle_hint
from holon_cli.runtime import queue as q
from holon_cli.runtime import telemetry
from holon_cli.runtime.agents.lifecycle import agent_ids, open_agent
from holon_cli.runtime.agents.models import candidates
from holon_cli.runtime.turn.hooks import NO_HOOKS, TurnHooks
from holon_cli.runtime.turn.journal import Journal, journal_path
from holon_cli.runtime.turn.loop import TurnRun
from holon_cli.runtime.turn.preflight import check_prompt_fits, resolve_chain
from holon_cli.runtime.turn.result import AgentFailure, TurnResult
from holon_cli.runtime.turn.settle import finish_agent_state, write_terminal
from holon_cli.runtime.turn.steps import DIRECT, TurnSteps
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord, AgentState
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.envelope import QueueEntry
    from holon_cli.model.events import (
        AgentStateRepairedData,
        RuntimeErrorData,
        TurnInterruptedData,
    )
    from holon_cli.model.tool import Toolbox
    from holon_cli.runtime.turn.hooks import Lineage


def _runtime_cfg() -> HolonConfig:
    from holon_cli.store.config import load_config

    return load_config()


def _release_run(store: AgentStore, reason: str, failure: str | None = None) -> None:
    """After an interrupted or failed turn: the agent must not look busy; an
    operator's stop or pause holds. ``failure``: an internal failure, kept
    as the agent's ``last_failure`` (daemon status reads it)."""

    def release(st: AgentState) -> None:
        if failure is not None:
            now = clock.now_iso()
            st["last_failure"] = {
                "occurred_at": now,
                "at": now,
                "summary": f"{store.agent_id}: turn {st.get('current_run_id')} failed: {failure}"[
                    :500
                ],
                "phase": "runtime_turn",
                "detail_hint": f"see `holon tail --agent {store.agent_id}`",
                "turn_id": st.get("current_run_id"),
            }
        if st["status"] not in HELD_STATUSES:
            st["status"] = "awake_idle"
        st["current_run_id"] = None
        st["current_run_pid"] = None

    store.update_state(release, reason=reason)


def repair_stale_run(store: AgentStore) -> AgentStateRepairedData | None:
    """Clear the run marker a killed turn left behind, and finish a settled
    turn whose journal is still there. The caller holds the turn lock, so no
    turn is running and ``awake_running`` is stale.

    When the journal shows the turn was settled and its queue entry is no
    longer in flight (killed after the queue settle), the settled turn is
    finished as the turn would have done: its terminal records that are
    missing are written (a power loss during the turn's last fsync batch
    may keep the queue's ``processed`` record and lose them) and the turn
    is recorded on the agent; otherwise the agent is only made idle (the
    next dequeue replays the message). Returns what was repaired, or
    ``None`` when nothing was stale."""
    state = store.read_record()["state"]
    running = state["status"] == "awake_running" or bool(state.get("current_run_id"))
    journal = Journal.load(store) if running or journal_path(store).exists() else None
    settled = (
        journal is not None
        and journal.settlement is not None
        and _message_left(store, journal.message_id)
    )
    if not running and not settled:
        return None
    stale_run_id = state.get("current_run_id")
    if settled:
        assert journal is not None and journal.settlement is not None
        _finish_settled(store, journal)
    else:
        _release_run(store, "stale_run_repaired")
    status = store.read_record()["state"]["status"]
    out: AgentStateRepairedData = {
        "stale_run_id": stale_run_id,
        "from": state["status"],
        "to": status,
        "settled_turn_recorded": settled,
    }
    store.emit("agent_state_repaired", out)
    return out


def _message_left(store: AgentStore, message_id: str) -> bool:
    """Whether a message has left the queue: settled, or known nowhere (no
    unfinished entry and no body in the inbox). A message whose records a
    power loss took while its body stayed in the inbox is admitted again by
    the next ingest, and its turn resumes from the journal."""
    st = q.load(store)
    if message_id in st.recent_final:
        return True
    if message_id in st.entries:
        return False
    name = f"{message_id}.json"
    return not any((d / name).exists() for d in (store.inbox.new, store.inbox.cur))


def _finish_settled(store: AgentStore, journal: Journal) -> None:
    """A settled turn whose message left the queue: the terminal records that
    are missing, the agent state, then the journal goes."""
    s = journal.settlement
    assert s is not None
    env = q.find_envelope(store, journal.message_id)
    if env is not None:
        now = time.monotonic()
        write_terminal(store, env, s, journal, now, now, replaying=True)
    finish_agent_state(store, s, journal)
    store.sync_ledgers()
    journal.clear()


def _budget_hold(store: AgentStore, cfg: HolonConfig, models: list[str]) -> TurnResult | None:
    """Before the dequeue: a cost budget with a model of the chain unpriced is
    a config error (nothing consumed); an agent whose last turn a budget
    stopped, with that budget still spent, runs no turn (its messages stay
    queued until the budget resets or is raised)."""
    from holon_cli.runtime.budgets import check
    from holon_cli.runtime.budgets import spend as budgets

    if not check.active(cfg, budgets.home_of(store), store):
        return None
    err = budgets.price_error(cfg, store.agent_id, models)
    if err is not None:
        err.message += "; nothing was dequeued"
        raise err
    hit = check.exhausted(store, cfg)
    if hit is None or not q.pending_count(store):
        return None  # nothing queued: nothing is held back (the dequeue finds nothing)
    return TurnResult(store.agent_id, ran=False, budget=hit)


def _journal_facts(store: AgentStore) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """From the crashed turn's journal: the message whose settlement is already
    saved (its replay only finishes recording the ending, so the replay limit
    must not abort it) and the turns that got as far as a provider request
    (only those count as attempts: a turn killed before it reached the model
    costs its message nothing)."""
    journal = Journal.load(store)
    if journal is None:
        return (), ()
    settled = (journal.message_id,) if journal.settlement is not None else ()
    return settled, tuple(sorted(journal.requested))


def run_turn(
    agent_id: str | None = None,
    *,
    store: AgentStore | None = None,
    cli_model: str | None = None,
    cli_fallbacks: list[str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_rounds: int | None = None,
    catalog: Toolbox,
    steps: TurnSteps = DIRECT,
    hooks: TurnHooks | None = None,
) -> TurnResult:
    """Run one turn for the agent if it has queued work, offering the tools of
    ``catalog`` (the caller builds it: ``tools.catalog.default_catalog()``).
    ``hooks``: what other planes plug into the turn (:mod:`.hooks`: the turn
    record, the children plane); by default the ones the catalog brings
    (``catalog.turn_hooks``: the default catalog's keep the record and serve
    child agents), else none. Each provider round and tool call goes
    through ``steps`` (a recorder: ``serve --engine dbos``; by default
    nothing; it replaces the hooks' own).
    Raises BusyError (75) when another turn holds the agent, RejectedError (4)
    when it is stopped."""
    hooks = hooks or getattr(catalog, "turn_hooks", None) or NO_HOOKS
    if steps is not DIRECT:
        hooks = hooks._replace(steps=steps)
    store = store or open_agent(agent_id)
    lock = store.turn_lock()
    lock.try_acquire()
    try:
        rec = _recovered_record(store)
        models = candidates(rec["state"], cli_model=cli_model, cli_fallbacks=cli_fallbacks)
        resolve = resolve_chain(models)  # before the dequeue: a bad chain consumes nothing
        cfg = _runtime_cfg()
        held = _budget_hold(store, cfg, models)
        if held is not None:
            return held
        if q.pending_count(store):  # a budget below the fixed prompt consumes nothing
            check_prompt_fits(store, catalog, cfg)
        turn_id = clock.new_id("turn")
        settled, attempted = _journal_facts(store)
        # from the dequeue on, the turn's appends become durable in batches:
        # a round's before its tools run, the rest in the turn's last batch
        # (TurnRun.settle); the block's end syncs what a path left over
        with store.deferred_sync():
            entry = q.dequeue_next(store, turn_id, settled=settled, attempted=attempted)
            if entry is None:
                return TurnResult(store.agent_id, ran=False)
            catalog = _agent_toolbox(store, cfg, catalog, entry)
            return _dequeued(
                store,
                entry,
                turn_id,
                models,
                cfg,
                catalog=catalog,
                child=is_supervised_child(rec["identity"]),
                sleep=sleep,
                max_rounds=max_rounds,
                resolve=resolve,
                hooks=hooks,
            )
    finally:
        lock.release()


def _dequeued(
    store: AgentStore,
    entry: QueueEntry,
    turn_id: str,
    models: list[str],
    cfg: HolonConfig,
    *,
    catalog: Toolbox,
    child: bool,
    sleep: Callable[[float], None],
    max_rounds: int | None,
    resolve: Callable[[str], Any],
    hooks: TurnHooks,
) -> TurnResult:
    """The dequeued message: settled without the model (a liveness tick, an
    observational or control message), or run as a turn."""
    from holon_cli.runtime.waiting import scheduler as waiting

    # a message the model sees leaves its continuation to the turn's start
    # (one write of the agent record for both)
    decision = waiting.before_turn(store, entry, turn_id, persist=False)
    if not decision.run_model:
        # liveness-only tick, observational or control message: no provider request
        waiting.after_turn(store)
        return TurnResult(
            store.agent_id,
            ran=True,
            turn_id=turn_id,
            message_id=entry["message_id"],
            status="settled",
            closure=store.read_record()["state"].get("last_closure"),
        )
    lineage = hooks.lineage if child else None
    # a supervised child's turns continue its parent's trace: the context
    # stored with its delegation (read only when tracing is on)
    inherited = partial(lineage.trace, store) if lineage is not None else None
    obs = telemetry.turn_tracer(store, entry["envelope"], cfg, inherited=inherited)
    run = TurnRun(
        store,
        entry,
        turn_id,
        models,
        catalog=catalog,
        config=cfg,
        sleep=sleep,
        max_rounds=max_rounds,
        resolve=resolve,
        hooks=hooks,
        tracer=obs,
        continuation=decision.continuation,
    )
    obs.start(turn_id)
    try:
        result = _execute(store, run, entry, turn_id, lineage=lineage)
    except BaseException as exc:
        obs.finish(error=exc)
        raise
    obs.finish(result)
    if obs is not telemetry.NOOP:
        telemetry.record_queue_depth(store.agent_id, q.pending_count(store), cfg)
    return result


def _agent_toolbox(
    store: AgentStore, cfg: HolonConfig, catalog: Toolbox, entry: QueueEntry
) -> Toolbox:
    """The agent's own toolbox (its MCP servers' tools added). A ``required``
    server that cannot start refuses the turn before any provider request:
    the message goes back to the queue, its attempt not counted."""
    bind = getattr(catalog, "for_agent", None)
    if bind is None:
        return catalog
    try:
        bound: Toolbox = bind(store, cfg)
    except BaseException:
        q.put_back(store, entry["message_id"], reason="mcp_unavailable")
        raise
    return bound


def _recovered_record(store: AgentStore) -> AgentRecord:
    """Under the turn lock, before anything else: stop the commands a killed
    turn left running (before the model hears "interrupted"; lost tasks
    report once), repair a stale run marker, and refuse a held agent. The
    agent record as it is then."""
    # the recovery module alone, and only when a task was ever recorded: the
    # plane's code is not needed to find that nothing is left over, the
    # common case (a new agent, `holon run`'s, has no tasks folder at all)
    if _has_tasks(store):
        from holon_cli.runtime.tasks.recovery import recovery_pass

        recovery_pass(store)
    repair_stale_run(store)
    rec = store.read_record()
    status = rec["state"]["status"]
    if status in HELD_STATUSES:
        raise RejectedError(
            f"agent {store.agent_id!r} is {status}; no turn was run",
            hint=lifecycle_hint(status) or "",
            kind="agent_stopped" if status == "stopped" else "agent_paused",
        )
    return rec


def _has_tasks(store: AgentStore) -> bool:
    try:
        return any(n.startswith("task_") for n in os.listdir(store.layout.tasks_dir))
    except FileNotFoundError:
        return False


def _execute(
    store: AgentStore, run: TurnRun, entry: QueueEntry, turn_id: str, *, lineage: Lineage | None
) -> TurnResult:
    """Run the dequeued turn. Interrupted or failed, the message stays
    dequeued (the next turn replays it from the journal) and the agent is
    released so it does not look busy meanwhile. A supervised child that
    closed reports to its parent now (``lineage``: the children plane's hook)."""
    try:
        result = run.execute()  # inside run_turn's deferred fsyncs (see TurnRun)
        if lineage is not None:
            lineage.after_turn(store)
        return result
    except KeyboardInterrupt:
        # Ctrl-C: the message stays dequeued and the next turn replays it
        # from the journal; the agent must not look busy meanwhile
        interrupted: TurnInterruptedData = {"turn_id": turn_id, "reason": "keyboard_interrupt"}
        store.emit("turn_interrupted", interrupted, message=entry["envelope"], turn_id=turn_id)
        _release_run(store, "turn_interrupted")
        raise
    except Exception as exc:
        # an internal failure: record it and leave the message dequeued, so
        # the next turn replays it (bounded by queue.MAX_ATTEMPTS)
        internal: RuntimeErrorData = {
            "turn_id": turn_id,
            "error": f"{type(exc).__name__}: {exc}",
            "failure_kind": "internal",
        }
        store.emit("runtime_error", internal, message=entry["envelope"], turn_id=turn_id)
        _release_run(store, "turn_failed", internal["error"])
        raise


def _has_work(agent_id: str) -> bool:
    store = open_agent(agent_id, create_default=False)
    if store.read_record()["state"]["status"] in HELD_STATUSES:
        return False
    return q.pending_count(store) > 0


def agents_with_work() -> list[str]:
    """Agents with queued work (damaged agents are left out: see run_turns_all)."""
    out = []
    for aid in agent_ids():
        try:
            if _has_work(aid):
                out.append(aid)
        except Exception:  # noqa: BLE001 - reported by run_turns_all
            continue
    return out


def run_turns_all(**kw: Any) -> list[TurnResult | AgentFailure]:
    """One turn for every agent with queued work. An agent that cannot run
    (damaged, busy, stopped meanwhile) is reported as an :class:`AgentFailure`
    and the others still run."""
    out: list[TurnResult | AgentFailure] = []
    for aid in agent_ids():
        try:
            if _has_work(aid):
                out.append(run_turn(aid, **kw))
        except Exception as exc:  # noqa: BLE001 - one agent must not stop the others
            out.append(AgentFailure(aid, as_holon_error(exc)))
    return out
