"""One turn as steps (:class:`TurnRun`), in the spec's lifecycle order:

    start -> close in-flight calls -> (build prompt -> fit budget ->
    call model -> record round -> run tools -> take interjects ->
    decide stop)* -> settle

The loop itself is :meth:`TurnRun.execute`; the run holds the turn's pieces,
each with its own state: the round (:class:`~holon_cli.runtime.turn.round.
TurnRound`: build the prompt, fit it to the context budget, call the model,
record the answer) and the tool phase (:class:`~holon_cli.runtime.turn.
tool_phase.ToolPhase`: run the round's calls, apply their effects, record
their results). What they share is the turn's
:class:`~holon_cli.runtime.turn.state.TurnState`; the run keeps the
lifecycle: the start, the stop decisions, the fsync batches and the settle.
Beside them: :mod:`~holon_cli.runtime.turn.fit` (the context budget),
:mod:`~holon_cli.runtime.turn.spend` (the budget gate and each round's
spend) and :mod:`~holon_cli.runtime.turn.progress` (what the settled turn did).

The loop knows no tool by name and imports no tool: the catalog is passed
in (a :class:`~holon_cli.model.tool.Toolbox`: specs to offer, a call to
execute), and tools report what they did through the typed
:class:`~holon_cli.model.tool.ToolEffects` on their result. Nor does it
import the planes that hook a turn: the caller passes them
(:class:`~holon_cli.runtime.turn.hooks.Watchers`: the step recorder, the
observer keeping the turn record, the tracer; and the children plane's
inherited context). Events and transcript entries go through one
:class:`~holon_cli.runtime.turn.recorder.TurnRecorder` bound to the turn; a
replayed turn first re-walks the rounds and tool results its journal holds
through the step hook.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.model.agent import HELD_STATUSES
from holon_cli.providers.base import ConversationItem
from holon_cli.runtime import queue as q
from holon_cli.runtime import telemetry
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.profiles import narrow
from holon_cli.runtime.memory import working
from holon_cli.runtime.prompt import first_user_item, render_message
from holon_cli.runtime.turn.abort import ABORT_REASON, TurnAborted
from holon_cli.runtime.turn.hooks import NO_HOOKS, Quiet, TurnHooks, Watchers
from holon_cli.runtime.turn.journal import Journal
from holon_cli.runtime.turn.model_round import ModelRound
from holon_cli.runtime.turn.progress import memory_delta, turn_progress
from holon_cli.runtime.turn.recorder import TurnRecorder
from holon_cli.runtime.turn.result import TurnResult
from holon_cli.runtime.turn.round import TurnRound
from holon_cli.runtime.turn.settle import decide_settlement, finish_agent_state, write_terminal
from holon_cli.runtime.turn.state import TurnState
from holon_cli.runtime.turn.steps import round_record, tool_record
from holon_cli.runtime.turn.tool_phase import ToolPhase
from holon_cli.runtime.workspace import workspace_for
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import fsync_dir
from holon_cli.store.layout import default_agent_id

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord, AgentState
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.continuation import ContinuationRecord
    from holon_cli.model.envelope import QueueEntry
    from holon_cli.model.events import (
        MessageInterjectedData,
        MessageProcessingStartedData,
        TurnRoundLimitReachedData,
        WorkItemStaleReminderData,
    )
    from holon_cli.model.tool import Toolbox
    from holon_cli.model.turn import TurnSettlement
    from holon_cli.runtime.telemetry import TurnTracer

DEFAULT_MAX_ROUNDS = 50


class TurnRun:
    """One dequeued message worked to its terminal. Call :meth:`execute` once.

    ``hooks``: what other planes plug in (:class:`~holon_cli.runtime.turn.
    hooks.TurnHooks`: the step recorder, the turn record, the children
    plane); by default none. ``tracer``: the telemetry plane's tracer."""

    def __init__(
        self,
        store: AgentStore,
        entry: QueueEntry,
        turn_id: str,
        models: list[str],
        *,
        catalog: Toolbox,
        config: HolonConfig,
        sleep: Callable[[float], None],
        max_rounds: int | None = None,
        resolve: Callable[[str], Any] | None = None,
        hooks: TurnHooks = NO_HOOKS,
        tracer: TurnTracer = telemetry.NOOP,
        continuation: ContinuationRecord | None = None,
    ) -> None:
        self.t_start = time.monotonic()
        self.models = models
        self.lineage = hooks.lineage
        # the message's continuation decision, written with the turn's start
        self.continuation = continuation
        rt_cfg = config.get("runtime") or {}
        self.max_rounds = max_rounds or int(rt_cfg.get("max_provider_rounds") or DEFAULT_MAX_ROUNDS)
        msg = entry["envelope"]
        result = TurnResult(store.agent_id, ran=True, turn_id=turn_id, message_id=msg["id"])
        resumed = Journal.resume(store, turn_id, msg["id"])
        result.replayed = resumed is not None or int(entry.get("interrupted", 0)) > 0
        self.fresh = resumed is None
        journal = resumed or Journal(store, turn_id, msg["id"])
        # the turn record (runtime/replay) when the caller keeps one: what each
        # request, answer and tool result was (`holon replay` passes its own,
        # which compares)
        observer = hooks.record(store, journal, turn_id, entry) if hooks.record else Quiet()
        self.t = TurnState(
            store,
            entry,
            turn_id,
            config=config,
            catalog=catalog,
            journal=journal,
            rec=TurnRecorder(store, msg, turn_id),
            result=result,
            watch=Watchers(hooks.steps, observer, tracer),
        )
        self.round = TurnRound(self.t, models, sleep=sleep, resolve=resolve, durable=self.durable)
        self.tools = ToolPhase(self.t)
        self.abort_reason: str | None = None
        self._interjected = False  # messages joined since the last durable batch
        self._asks = q.Interjects(store)  # whether a safe point needs to ask

    @property
    def result(self) -> TurnResult:
        return self.t.result

    @property
    def journal(self) -> Journal:
        return self.t.journal

    # ------------------------------------------------------------ the loop

    def execute(self) -> TurnResult:
        self.start()
        self.replay_steps()
        if self.journal.settlement is None:
            try:
                self.rounds()
            except TurnAborted:
                # the operator aborted the call in flight: nothing more runs
                self.t.failed = True
                self.abort_reason = self.result.failure_kind = ABORT_REASON
        return self.settle()

    def rounds(self) -> None:
        done = self.tools.close_in_flight()
        while not done:
            built = self.round.fit(self.round.build_prompt())  # to the context budget
            if built is None:
                break
            rnd = self.round.run(built)
            if rnd is None:
                break
            if not rnd.tool_calls:
                self.t.final_text = rnd.text
                break
            self.tools.run(rnd, built)
            self.take_interjects()
            done = self.decide_stop(rnd)

    def durable(self) -> None:
        """One fsync batch: the ledgers' deferred appends and the journal.
        The queue's own records (this message dequeued) wait for the turn's
        last batch, unless interjected messages were taken since the last
        batch (their ``dequeued`` records go with the journal that names them)."""
        self.t.store.sync_ledgers(skip=() if self._interjected else ("queue",))
        self._interjected = False
        self.journal.sync()

    # ---------------------------------------------------------------- start

    def start(self) -> None:
        """Mark the agent running (never over an operator's stop or pause),
        announce the turn, and open or resume its journal."""
        t = self.t
        t.abort.clear_stale()
        worker = os.environ.get("HOLON_WORKER_ID")  # set by `serve --engine dbos`
        # durable with the state folder's fsync below (or the turn's last batch)
        agent_rec = t.store.update_state(
            self._mark,
            reason="turn_started",
            message=t.msg,
            turn_id=t.turn_id,
            worker=worker,
            sync_dir=False,
        )
        t.state = agent_rec["state"]
        t.turn_index = t.state["turn_index"]
        self._announce(worker)
        if self.fresh:
            self.journal.begin()
            self.journal.add_item(first_user_item(t.msg))
            t.rec.message_entry(t.msg)
            # the new journal's name (and the record's rename) made durable:
            # the journal's records are, by the first round that runs tools
            # or the settlement, without another fsync of the folder
            fsync_dir(t.store.layout.state_dir)
        t.watch.observer.started(agent_rec)
        self._take_up(agent_rec)

    def _mark(self, state: AgentState) -> None:
        t = self.t
        if state["status"] not in HELD_STATUSES:
            state["status"] = "awake_running"
        state["current_run_id"] = t.turn_id
        state["current_run_pid"] = os.getpid()
        state["last_wake_reason"] = t.msg.get("trigger_kind") or t.msg.get("kind")
        state["sleeping_until"] = None
        state["turn_index"] = int(state.get("turn_index", 0)) + 1
        state["total_message_count"] = int(state.get("total_message_count", 0)) + (
            0 if self.result.replayed else 1
        )
        if self.continuation is not None:
            state["last_continuation"] = self.continuation

    def _announce(self, worker: str | None) -> None:
        t = self.t
        queue_wait_ms = None
        try:
            queue_wait_ms = max(0, int((clock.now() - clock.parse_iso(t.msg["created_at"])) * 1000))
        except (KeyError, ValueError):
            pass
        started: MessageProcessingStartedData = {
            "turn_index": t.turn_index,
            "attempt": t.entry.get("attempts", 1),
            "queue_wait_ms": queue_wait_ms,
            "trigger_kind": t.msg.get("trigger_kind"),
            "replayed": self.result.replayed,
        }
        if worker:
            started["worker"] = worker
        t.rec.event("message_processing_started", started)

    def _take_up(self, agent_rec: AgentRecord) -> None:
        """What the turn works with, from the agent as it started it."""
        t = self.t
        identity = agent_rec["identity"]
        t.ws = workspace_for(t.store.layout.home, t.state)
        t.is_default = identity["kind"] == "default" or t.store.agent_id == default_agent_id()
        t.self_owned = identity.get("ownership", "self_owned") == "self_owned"
        # a profiled child is offered its profile's tools; a forked one sees its parent's context
        t.catalog = narrow(t.catalog, identity)
        if self.lineage is not None:
            t.inherited = self.lineage.inherited(t.store, dict(identity))
        t.bound_wi = t.state.get("current_work_item_id")
        t.focus = t.bound_wi
        t.session_skills = list(t.state.get("active_skills") or [])
        self.round.wm = working.state_of(t.state.get("working_memory"))
        self.round.ctx.open_history(t.store, self.round.wm, t.mid, t.turn_id)

    # ------------------------------------------------------- replay steps

    def replay_steps(self) -> None:
        """A resumed journal's rounds and tool results, in order, through the
        step hook (nothing is re-sent or re-run: the hook compares or records)."""
        if self.fresh:
            return
        steps = self.t.watch.steps
        n = 0
        for item in self.journal.items:
            if item.role == "assistant":
                n += 1
                steps.replayed(round_record(n, item, None))
            elif item.role == "tool":
                steps.replayed(tool_record(n, item))

    # ----------------------------------------------------- take interjects

    def take_interjects(self) -> None:
        """Safe point: trusted operator interjections join the running turn."""
        t = self.t
        taken = self._interjects()
        if taken:
            self._interjected = True
            t.watch.observer.interjected(taken)
        for ie in taken:
            env = ie["envelope"]
            self.journal.add_interject(env["id"])
            self.journal.add_item(ConversationItem("user", render_message(env)))
            t.rec.message_entry(env, interject=True)
            interjected: MessageInterjectedData = {"into_message_id": t.mid}
            t.rec.event("message_interjected", interjected, message=env)

    def _interjects(self) -> list[QueueEntry]:
        if not self._asks.due():
            return []
        taken = q.take_interjects(self.t.store, self.t.turn_id)
        self._asks.asked()
        return taken

    # ---------------------------------------------------------- decide stop

    def decide_stop(self, rnd: ModelRound) -> bool:
        """After a tool round: stop for a sleep request or the round limit;
        otherwise remind a model that has not touched its work item lately."""
        t, tools = self.t, self.tools
        if tools.sleep_req is not None:
            t.final_text = rnd.response.text
            return True
        if self.journal.rounds >= self.max_rounds:
            t.final_text = rnd.response.text
            limit: TurnRoundLimitReachedData = {
                "rounds": self.journal.rounds,
                "max_rounds": self.max_rounds,
            }
            t.rec.event("turn_round_limit_reached", limit)
            return True
        reminder = wi.stale_reminder(t.store, tools.rounds_since_mutation)
        if reminder:
            self.journal.add_provider_only(ConversationItem("user", reminder))
            stale: WorkItemStaleReminderData = {
                "rounds_without_mutation": tools.rounds_since_mutation
            }
            t.rec.event("work_item_stale_reminder", stale)
        return False

    # --------------------------------------------------------------- settle

    def decide(self) -> TurnSettlement:
        """The ending, decided once and saved in the journal with what the turn
        adds to working memory (a replay settles from the saved one). Durable,
        with the turn's records so far (events, transcript), before any
        terminal record is written: a replay that finds it writes only what
        is missing, and the turn's transcript never lacks a round its
        settlement covers."""
        t, tools = self.t, self.tools
        s = decide_settlement(
            t.store,
            turn_id=t.turn_id,
            turn_index=t.turn_index,
            bound_work_item_id=t.bound_wi,
            focus=t.focus,
            final_text=t.final_text,
            failed=t.failed,
            failure_artifact=self.result.failure_artifact,
            failure_kind=self.result.failure_kind,
            sleep_req=tools.sleep_req,
            wrote_completion_brief=bool(tools.completion_briefs),
            turn_skills=t.turn_skills,
            budget_hit=t.budget_hit,
            progress=turn_progress(
                t.msg,
                self.journal,
                turn_id=t.turn_id,
                bound_work_item_id=t.bound_wi,
                tool_calls=tools.tool_calls_made,
                work_item_changed=tools.work_item_changed,
                budget_stopped=t.budget_hit is not None,
            ),
            abort_reason=self.abort_reason,
            message_id=t.mid,
            turn_ids={t.turn_id, *self.journal.requested},
        )
        s["memory"] = memory_delta(
            t.store,
            t.msg,
            s,
            self.journal,
            turn_id=t.turn_id,
            turn_index=t.turn_index,
            focus=t.focus,
            ws=t.ws,
            wm=self.round.wm,
            compacted=self.round.ctx.window.compacted,
        )
        self.journal.settle(s)  # one fsync: the journal
        self.durable()  # the events and transcript so far
        return s

    def settle(self) -> TurnResult:
        """Decide the ending once (saved in the journal), write the terminal
        records that are not written yet, settle the queue entries, and
        record the settled turn on the agent; then the turn's last fsync
        batch: every ledger it appended to (the terminal records, the queue,
        the spend), and the agent record's folder. A power loss before that
        batch ends leaves the settled journal (it is removed after), and
        the next turn finishes from it whatever the batch left out
        (:func:`~holon_cli.runtime.turn.entry.repair_stale_run`)."""
        t = self.t
        t_cleanup = time.monotonic()
        s = self.journal.settlement
        replaying = s is not None
        if s is None:
            s = self.decide()
        self.result.take_settlement(s, self.journal, self.models[0] if self.models else None)
        write_terminal(t.store, t.msg, s, self.journal, t_cleanup, self.t_start, replaying)
        t.watch.observer.settled(s)  # the turn record (written back, never fsync'd)
        self.result.duration_ms = int(s.get("duration_ms", 0))
        self._settle_queue(s)
        finish_agent_state(t.store, s, self.journal, sync_dir=False)
        self.round.ctx.keep_turn(t.mid, t.turn_id)  # the next turn's prefix
        # the turn's last batch (then the settled bodies go, then the journal)
        self.round.spend.sync()
        fsync_dir(t.store.layout.state_dir)
        t.store.sync_ledgers()
        self.journal.clear()
        t.abort.clear()
        from holon_cli.runtime.waiting.scheduler import after_turn

        slept = s.get("sleep")
        after_turn(t.store, sleep_ms=slept["duration_ms"] if slept else None)
        return self.result

    def _settle_queue(self, s: TurnSettlement) -> None:
        """The message and the messages interjected into its turn leave the queue."""
        t = self.t
        aborted = s["status"] == "aborted"
        q.settle(
            t.store,
            t.mid,
            "aborted" if aborted else "processed",
            turn_id=s["turn_id"],
            # why, for `holon status`: the operator's abort, or the failure kind
            reason=s.get("reason")
            or (f"turn_failed:{s.get('failure_kind') or 'unknown'}" if aborted else None),
        )
        for iid in self.journal.interject_ids:
            q.settle(t.store, iid, "processed", turn_id=s["turn_id"], reason="interject")
