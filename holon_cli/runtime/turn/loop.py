"""One turn as steps (:class:`TurnRun`), in the spec's lifecycle order:

    start -> close in-flight calls -> (build prompt -> fit budget ->
    call model -> record round -> run tools -> take interjects ->
    decide stop)* -> settle

Each step is a short method; the loop itself is :meth:`TurnRun.execute`.
The steps keep the turn's state; the pieces with little of their own live
beside it: :mod:`~holon_cli.runtime.turn.fit` (the context budget),
:mod:`~holon_cli.runtime.turn.spend` (the budget gate and each round's
spend) and :mod:`~holon_cli.runtime.turn.progress` (what the settled turn did).
The loop knows no tool by name and imports no tool: the catalog is passed
in (a :class:`~holon_cli.model.tool.Toolbox`: specs to offer, a call to
execute), and tools report what they did through the typed
:class:`~holon_cli.model.tool.ToolEffects` on their result. Events and
transcript entries go through one
:class:`~holon_cli.runtime.turn.recorder.TurnRecorder` bound to the turn.
Each provider round and each tool call runs through the turn's
:class:`~holon_cli.runtime.turn.steps.TurnSteps` hook (a recorder such as
``serve --engine dbos``'s; by default nothing), and a replayed turn first
re-walks the rounds and tool results its journal holds through the same hook.
What the turn tells the telemetry plane goes through one tracer
(:class:`~holon_cli.runtime.telemetry.TurnTracer`, ``self.tracer``: each
round's attempts, each tool call; a no-op while tracing is off).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from holon_cli import clock
from holon_cli.model.agent import HELD_STATUSES
from holon_cli.providers.base import ConversationItem, ProviderRequest, ToolCall
from holon_cli.runtime import queue as q
from holon_cli.runtime import telemetry
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.profiles import narrow
from holon_cli.runtime.budgets.check import BudgetStop
from holon_cli.runtime.children.context import block_for as inherited_block
from holon_cli.runtime.memory import compaction as cp
from holon_cli.runtime.memory import working
from holon_cli.runtime.prompt import (
    BuiltPrompt,
    active_skill_rows,
    build_frame,
    first_user_item,
    render_message,
)
from holon_cli.runtime.replay.capture import TurnCapture
from holon_cli.runtime.tasks.sandbox import projection as execution_projection
from holon_cli.runtime.turn.abort import (
    ABORT_REASON,
    AbortWatch,
    TurnAborted,
    stop_call_commands,
)
from holon_cli.runtime.turn.context import context_trigger
from holon_cli.runtime.turn.fit import ContextFit
from holon_cli.runtime.turn.journal import Journal
from holon_cli.runtime.turn.model_round import (
    ModelRound,
    record_chain_failure,
    record_model_round,
    record_tool_result,
)
from holon_cli.runtime.turn.progress import memory_delta, turn_progress
from holon_cli.runtime.turn.recorder import TurnRecorder
from holon_cli.runtime.turn.result import TurnResult
from holon_cli.runtime.turn.settle import decide_settlement, finish_agent_state, write_terminal
from holon_cli.runtime.turn.spend import TurnSpend
from holon_cli.runtime.turn.steps import DIRECT, StepRecord, TurnSteps, round_record, tool_record
from holon_cli.runtime.workspace import WorkspaceBinding, workspace_for
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import default_agent_id

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState
    from holon_cli.model.budget import BudgetHit
    from holon_cli.model.envelope import Envelope, QueueEntry
    from holon_cli.model.events import (
        MessageInterjectedData,
        MessageProcessingStartedData,
        ToolErrorEnvelope,
        TurnContextBuiltData,
        TurnRoundLimitReachedData,
        WorkItemStaleReminderData,
    )
    from holon_cli.model.tool import SleepRequest, Toolbox, ToolContext
    from holon_cli.model.turn import TurnSettlement
    from holon_cli.runtime.telemetry import TurnTracer
    from holon_cli.runtime.turn.observe import TurnObserver

DEFAULT_MAX_ROUNDS = 50

_INTERRUPTED: ToolErrorEnvelope = {
    "kind": "interrupted",
    "message": "this call was in flight when the runtime stopped; it was not re-run",
    "recovery_hint": "check its effects (e.g. with ExecCommand) before running it again",
    "retryable": True,
    "details": None,
}


class TurnRun:
    """One dequeued message worked to its terminal. Call :meth:`execute` once."""

    def __init__(
        self,
        store: AgentStore,
        entry: QueueEntry,
        turn_id: str,
        models: list[str],
        *,
        catalog: Toolbox,
        config: dict[str, Any],
        sleep: Callable[[float], None],
        max_rounds: int | None = None,
        resolve: Callable[[str], Any] | None = None,
        steps: TurnSteps = DIRECT,
        observer: TurnObserver | None = None,
        tracer: TurnTracer = telemetry.NOOP,
    ) -> None:
        self.t_start = time.monotonic()
        self.store = store
        self.entry = entry
        self.msg: Envelope = entry["envelope"]
        self.mid: str = self.msg["id"]
        self.turn_id = turn_id
        self.models = models
        self.catalog = catalog
        self.cfg = config
        self.sleep = sleep
        self.resolve = resolve
        self.steps = steps
        self.tracer = tracer
        rt_cfg = config.get("runtime") or {}
        self.max_rounds = max_rounds or int(rt_cfg.get("max_provider_rounds") or DEFAULT_MAX_ROUNDS)
        self.rec = TurnRecorder(store, self.msg, turn_id)
        self.result = TurnResult(store.agent_id, ran=True, turn_id=turn_id, message_id=self.mid)
        resumed = Journal.resume(store, turn_id, self.mid)
        self.result.replayed = resumed is not None or int(entry.get("interrupted", 0)) > 0
        self.journal = resumed or Journal(store, turn_id, self.mid)
        self.fresh = resumed is None
        # the turn record (runtime/replay): what each request, answer and tool
        # result was; `holon replay` passes its own observer, which compares
        self.observer: TurnObserver = observer or TurnCapture(store, self.journal, turn_id, entry)
        # turn state, filled by start() and the round steps
        self.state = cast("AgentState", {})  # read by start()
        self.turn_index = 0
        self.ws: WorkspaceBinding | None = None
        self.is_default = False
        self.self_owned = True  # provisions its trigger capability (start() reads it)
        self.bound_wi: str | None = None
        self.focus: str | None = None  # the current work item as it changes during the turn
        self.completion_briefs: list[str] = []  # work_done briefs written in the final round
        self.session_skills: list[dict[str, Any]] = []
        self.turn_skills: dict[str, dict[str, Any]] = {}
        self.failed = False
        self.sleep_req: SleepRequest | None = None
        self.rounds_since_mutation = 0
        self.final_text = ""
        self.turn_local: dict[str, Any] = {}  # tools' turn-local scratch (ToolContext.effects)
        self.context_reported = False
        self.context_build_ms = 0.0
        self.budget_hit: BudgetHit | None = None  # a budget refused the next request
        self.tool_calls_made = 0  # the no-progress guard's view of the turn
        self._mutated = False  # a call of the current tool round changed a work item
        self.work_item_changed = False
        self.spend = TurnSpend(store, config, turn_id, self.mid)  # fsync'd once, at settle
        # an operator's abort: each provider and tool call is waited for here
        self.abort = AbortWatch(store, turn_id)
        self.abort_reason: str | None = None
        # memory plane: the compacted view of this turn's conversation against
        # the context budget, and the working memory the turn was prompted with
        self.ctx = ContextFit(self.journal, self.rec, config)
        self.wm = working.empty_state()
        self.inherited: str | None = None  # a forked child's inherited context block

    # ------------------------------------------------------------ the loop

    def execute(self) -> TurnResult:
        self.start()
        self.replay_steps()
        if self.journal.settlement is None:
            try:
                self.rounds()
            except TurnAborted:
                # the operator aborted the call in flight: nothing more runs
                self.failed = True
                self.abort_reason = self.result.failure_kind = ABORT_REASON
        return self.settle()

    def rounds(self) -> None:
        done = self.close_in_flight_calls()
        while not done:
            fitted = self.fit(self.build_prompt())  # compacted to the context budget
            if fitted is None:
                break
            built = fitted
            rnd = self.provider_round(built)
            if rnd is None:
                break
            if not rnd.tool_calls:
                self.final_text = rnd.text
                break
            self.run_tools(rnd, built)
            self.take_interjects()
            done = self.decide_stop(rnd)

    def make_durable(self) -> None:
        """One fsync batch: the ledgers' deferred appends and the journal."""
        self.store.sync_ledgers()
        self.journal.sync()

    # ---------------------------------------------------------------- start

    def start(self) -> None:
        """Mark the agent running (never over an operator's stop or pause),
        announce the turn, and open or resume its journal."""
        replayed = self.result.replayed
        msg = self.msg

        def mark(state: AgentState) -> None:
            if state["status"] not in HELD_STATUSES:
                state["status"] = "awake_running"
            state["current_run_id"] = self.turn_id
            state["current_run_pid"] = os.getpid()
            state["last_wake_reason"] = msg.get("trigger_kind") or msg.get("kind")
            state["sleeping_until"] = None
            state["turn_index"] = int(state.get("turn_index", 0)) + 1
            state["total_message_count"] = int(state.get("total_message_count", 0)) + (
                0 if replayed else 1
            )

        self.abort.clear_stale()
        worker = os.environ.get("HOLON_WORKER_ID")  # set by `serve --engine dbos`
        agent_rec = self.store.update_state(
            mark, reason="turn_started", message=msg, turn_id=self.turn_id, worker=worker
        )
        self.state = agent_rec["state"]
        self.turn_index = self.state["turn_index"]
        queue_wait_ms = None
        try:
            queue_wait_ms = max(0, int((clock.now() - clock.parse_iso(msg["created_at"])) * 1000))
        except (KeyError, ValueError):
            pass
        started: MessageProcessingStartedData = {
            "turn_index": self.turn_index,
            "attempt": self.entry.get("attempts", 1),
            "queue_wait_ms": queue_wait_ms,
            "trigger_kind": msg.get("trigger_kind"),
            "replayed": replayed,
        }
        if worker:
            started["worker"] = worker
        self.rec.event("message_processing_started", started)
        if self.fresh:
            self.journal.begin()
            self.journal.add_item(first_user_item(msg))
            self.rec.message_entry(msg)
        self.observer.started(agent_rec)
        self.make_durable()
        self.ws = workspace_for(self.store.layout.home, self.state)
        self.is_default = (
            agent_rec["identity"]["kind"] == "default" or self.store.agent_id == default_agent_id()
        )
        self.self_owned = agent_rec["identity"].get("ownership", "self_owned") == "self_owned"
        # a profiled child is offered its profile's tools; a forked one sees its parent's context
        self.catalog = narrow(self.catalog, agent_rec["identity"])
        self.inherited = inherited_block(self.store, dict(agent_rec["identity"]))
        self.bound_wi = self.state.get("current_work_item_id")
        self.focus = self.bound_wi
        self.session_skills = list(self.state.get("active_skills") or [])
        self.wm = working.state_of(self.state.get("working_memory"))
        self.ctx.open_history(self.store, self.wm, self.mid, self.turn_id)

    # ------------------------------------------------------- replay steps

    def replay_steps(self) -> None:
        """A resumed journal's rounds and tool results, in order, through the
        step hook (nothing is re-sent or re-run: the hook compares or records)."""
        if self.fresh:
            return
        n = 0
        for item in self.journal.items:
            if item.role == "assistant":
                n += 1
                self.steps.replayed(round_record(n, item, None))
            elif item.role == "tool":
                self.steps.replayed(tool_record(n, item))

    # ---------------------------------------------- close in-flight calls

    def close_in_flight_calls(self) -> bool:
        """Replay: calls of the last recorded round that have no recorded result
        were in flight when the runtime died; the model hears they were
        interrupted (never re-run). Returns True when the journal already
        ends with a final answer (only settling is left)."""
        last = self.journal.items[-1] if self.journal.items else None
        if last is None or last.role != "assistant":
            return False
        if not last.tool_calls:
            self.final_text = last.text
            return True
        recorded = self.journal.recorded_results()
        for call in last.tool_calls:
            if call.id not in recorded:
                self.steps.tool(call.id, partial(self._interrupted, call))
        return False

    def _interrupted(self, call: ToolCall) -> StepRecord:
        """One in-flight call closed as interrupted (a step of its own)."""
        from holon_cli.model.tool import ToolResult, render_error

        content = render_error(call.name, _INTERRUPTED)
        self.observer.tool(call, ToolResult(ok=False, content=content, error=_INTERRUPTED))
        item = ConversationItem("tool", content, call_id=call.id, name=call.name, is_error=True)
        self.journal.add_item(item)
        self.rec.transcript(
            "tool_result",
            call_id=call.id,
            tool_name=call.name,
            ok=False,
            output=content,
            error={"kind": "interrupted"},
        )
        return tool_record(self.journal.rounds, item)

    # --------------------------------------------------------- build prompt

    def build_prompt(self) -> BuiltPrompt:
        t_ctx = time.monotonic()
        assert self.ws is not None
        built = build_frame(
            agent_id=self.store.agent_id,
            agent_home=self.store.layout.home,
            is_default_agent=self.is_default,
            ws=self.ws,
            message=self.msg,
            tools=self.catalog.specs,
            guidance=self.catalog.guidance,
            work_queue=wi.project_work_queue(
                self.store,
                bound_work_item_id=self.focus,
                exclude_turn_id=self.turn_id,
                max_chars=self.ctx.queue_chars,
            ),
            recent=self.ctx.recent,
            active_skills=active_skill_rows(self.session_skills, self.turn_skills),
            trigger=context_trigger(self.store, provision=self.self_owned),
            working_memory=self.ctx.memory_block(),
            memory_delta=working.render_delta(self.wm),
            policy=execution_projection(self.cfg, self.store.agent_id),
            **self.ctx.cache_state(),
            inherited=self.inherited,
        )
        built = self.ctx.keep_turn_blocks(built)
        self.ctx.measure(built.frame, self.catalog.specs)
        self.context_build_ms = round((time.monotonic() - t_ctx) * 1000, 3)
        if not self.context_reported:
            self.context_reported = True
            built_data: TurnContextBuiltData = {
                "context_build_ms": self.context_build_ms,
                "prompt_cache_key": built.frame.prompt_cache_key,
                "context_fingerprint": built.frame.context_fingerprint,
                "sections": built.sections,
                "tool_count": len(self.catalog.specs),
                "bound_work_item_id": self.bound_wi,
            }
            self.ctx.report_cache(built_data)
            self.rec.event("turn_context_built", built_data)
        return built

    # ---------------------------------------------------------- fit budget

    def fit(self, built: BuiltPrompt) -> BuiltPrompt | None:
        """Keep the next request under ``runtime.context_budget_tokens``
        (:meth:`ContextFit.fit <holon_cli.runtime.turn.fit.ContextFit.fit>`:
        compaction, then smaller context blocks and a rebuilt prompt).
        ``None`` (the turn fails) when the frame's fixed part alone does not fit."""
        fixed = cp.fixed_tokens(built.frame, self.catalog.specs)
        if fixed > self.ctx.budget_tokens:
            self.failed = True
            self.result.failure_artifact = self.ctx.fail_budget(fixed)
            self.result.failure_kind = "context_budget_too_small"
            return None
        if self.ctx.fit(self.focus):
            return self.fit(self.build_prompt())
        return built

    # ------------------------------------------------------- provider round

    def provider_round(self, built: BuiltPrompt) -> ModelRound | None:
        """Call the model and record its answer, as one step of the hook.
        ``None``: no answer (a chain failure or a budget stop ended the loop)."""
        done: list[ModelRound] = []

        def step() -> StepRecord | None:
            rnd = self.call_model(built)
            if rnd is None:
                return None
            self.record_round(rnd)
            done.append(rnd)
            usage = rnd.response.usage.to_dict() if rnd.response.usage is not None else None
            return round_record(self.journal.rounds, self.journal.items[-1], usage)

        self.steps.round(self.journal.rounds + 1, step)
        return done[0] if done else None

    # ----------------------------------------------------------- call model

    def call_model(self, built: BuiltPrompt) -> ModelRound | None:
        """One provider round over the model chain. A chain failure is recorded
        (event, transcript) and ends the loop: returns ``None``."""
        from holon_cli.providers.chain import ChainFailure, call_with_fallback

        request = ProviderRequest(
            frame=self.ctx.stamped(built.frame),
            conversation=self.ctx.window.view(self.journal.items),
            history=self.ctx.history.items(),
            tools=self.catalog.specs,
            state_dir=self.store.layout.state_dir,
            agent_id=self.store.agent_id,
            turn_id=self.turn_id,
        )
        self.observer.request(self.journal.rounds + 1, request)
        # from here on a crash counts as an attempt of this message
        self.journal.mark_request()
        started_at = clock.now_iso()
        t0 = time.monotonic()
        self.spend.begin_round(request)
        try:
            try:
                chain = self.abort.call(
                    lambda: call_with_fallback(
                        self.models,
                        request,
                        sleep=self.sleep,
                        resolve=self.resolve,
                        before_attempt=lambda ref, tr: self.spend.before_attempt(
                            ref, tr, self.focus
                        ),
                    )
                )
            except BudgetStop as stop:
                self.observer.failed(stop)
                self.budget_hit = stop.hit
                return None
            except ChainFailure as failure:
                self.tracer.chat(failure.timeline, None, request)
                self.observer.failed(failure)
                if failure.usage is not None:
                    usage = failure.usage.to_dict()
                    self.spend.record(failure.last.model_ref, usage, self.focus, estimated=False)
                self.spend.end_round()
                if self.ctx.overflow_compacted(failure, self.focus):
                    return self.call_model(built)  # once: overflow_compacted says no again
                self.failed = True
                self.result.failure_artifact, self.result.failure_kind = record_chain_failure(
                    self.rec, self.journal, failure, round((time.monotonic() - t0) * 1000, 3)
                )
                return None
            self.tracer.chat(chain.timeline, chain.response, request)
            self.observer.answered(chain.response, chain.model_ref)
            self.spend.of_round(chain, request, self.focus)
        finally:
            # the round's spend is recorded (or nothing was sent): its
            # reservations go, whichever way the round ended
            self.spend.end_round()
        reported = int(getattr(chain.usage, "input_tokens", 0) or 0) if chain.usage else 0
        self.ctx.note_sent(reported)
        return ModelRound(chain, started_at, round((time.monotonic() - t0) * 1000, 3))

    # --------------------------------------------------------- record round

    def record_round(self, rnd: ModelRound) -> None:
        """The model's answer becomes durable: events, transcript, journal (one
        fsync batch, before its tool calls start; the previous round's tool
        results join it). The agent's totals are updated once, at settle."""
        record_model_round(
            self.rec,
            self.journal,
            rnd,
            context_build_ms=self.context_build_ms,
            work_item_id=self.focus,
        )
        self.make_durable()

    # ------------------------------------------------------------ run tools

    def run_tools(self, rnd: ModelRound, built: BuiltPrompt) -> None:
        """Execute the round's calls in order; each result is recorded as it
        lands. Reads only the calls' typed effects."""
        # the tool values load with a round's first call, as the tools do
        from holon_cli.model.tool import ToolContext

        resp = rnd.response
        assert self.ws is not None
        ctx = ToolContext(
            store=self.store,
            agent_id=self.store.agent_id,
            execution_root=self.ws.execution_root,
            cwd=self.ws.cwd,
            workspace_anchor=self.ws.workspace_anchor,
            turn_id=self.turn_id,
            message=self.msg,
            round_text=resp.text,
            round_calls=list(resp.tool_calls),
            config=self.cfg,
            effects=self.turn_local,
        )
        self._mutated = False
        self.completion_briefs = []
        for call in resp.tool_calls:
            self.steps.tool(call.id, partial(self._run_call, ctx, call, built))
        mutated = self._mutated
        self.rounds_since_mutation = 0 if mutated else self.rounds_since_mutation + 1
        self.tool_calls_made += len(resp.tool_calls)
        self.work_item_changed = self.work_item_changed or mutated
        if mutated:
            self.focus = self.store.read_record()["state"].get("current_work_item_id")

    def _run_call(self, ctx: ToolContext, call: ToolCall, built: BuiltPrompt) -> StepRecord:
        """One tool call: run it, apply its effects, record its result."""
        t_tool = time.monotonic()
        with self.tracer.tool(call) as traced:
            res = self.abort.call(
                partial(self.catalog.execute, ctx, call), on_abort=self._stop_call
            )
            traced.result(res)
        tool_ms = round((time.monotonic() - t_tool) * 1000, 3)
        self.observer.tool(call, res)
        fx = res.effects
        self._mutated = self._mutated or fx.work_item_mutated
        if fx.completion_brief_id:
            self.completion_briefs.append(fx.completion_brief_id)
        if fx.sleep is not None:
            self.sleep_req = fx.sleep
        if fx.workspace_changed:
            self._rebind(ctx)
        if fx.commands and built.sources.get("skills"):
            self._activate_skills(fx.commands, built.sources["skills"])
        record_tool_result(
            self.rec, self.journal, call, res, tool_ms, fx.work_item_id or self.focus
        )
        # after its result: a replay counts the effects of recorded calls only
        runs = [
            {"cmd": str(c.get("cmd")), "exit_status": c.get("exit_status")} for c in fx.command_runs
        ]
        self.journal.add_effects(fx.files_touched, runs, bool(fx.completion_brief_id))
        return tool_record(self.journal.rounds, self.journal.items[-1])

    def _rebind(self, ctx: ToolContext) -> None:
        """The binding changed mid-turn: the next calls and rounds use it."""
        self.ws = workspace_for(self.store.layout.home, self.store.read_record()["state"])
        ctx.execution_root = self.ws.execution_root
        ctx.cwd = self.ws.cwd
        ctx.workspace_anchor = self.ws.workspace_anchor

    def _stop_call(self) -> None:
        stop_call_commands(self.store, self.turn_id)

    def _activate_skills(self, commands: list[str], skills: Any) -> None:
        from holon_cli.runtime.prompt import skill_activations

        assert self.ws is not None
        for act in (a for c in commands if c for a in skill_activations(c, self.ws.cwd, skills)):
            if act["skill"] not in self.turn_skills:
                self.turn_skills[act["skill"]] = {**act, "state": "turn_active"}
                self.rec.plain_event("skill_activated", act)

    # ----------------------------------------------------- take interjects

    def take_interjects(self) -> None:
        """Safe point: trusted operator interjections join the running turn."""
        taken = self._interjects()
        if taken:
            self.observer.interjected(taken)
        for ie in taken:
            env = ie["envelope"]
            self.journal.add_interject(env["id"])
            self.journal.add_item(ConversationItem("user", render_message(env)))
            self.rec.message_entry(env, interject=True)
            interjected: MessageInterjectedData = {"into_message_id": self.mid}
            self.rec.event("message_interjected", interjected, message=env)

    def _interjects(self) -> list[QueueEntry]:
        return q.take_interjects(self.store, self.turn_id)

    # ---------------------------------------------------------- decide stop

    def decide_stop(self, rnd: ModelRound) -> bool:
        """After a tool round: stop for a sleep request or the round limit;
        otherwise remind a model that has not touched its work item lately."""
        if self.sleep_req is not None:
            self.final_text = rnd.response.text
            return True
        if self.journal.rounds >= self.max_rounds:
            self.final_text = rnd.response.text
            limit: TurnRoundLimitReachedData = {
                "rounds": self.journal.rounds,
                "max_rounds": self.max_rounds,
            }
            self.rec.event("turn_round_limit_reached", limit)
            return True
        reminder = wi.stale_reminder(self.store, self.rounds_since_mutation)
        if reminder:
            self.journal.add_provider_only(ConversationItem("user", reminder))
            stale: WorkItemStaleReminderData = {
                "rounds_without_mutation": self.rounds_since_mutation
            }
            self.rec.event("work_item_stale_reminder", stale)
        return False

    # --------------------------------------------------------------- settle

    def decide(self) -> TurnSettlement:
        """The ending, decided once and saved in the journal with what the turn
        adds to working memory (a replay settles from the saved one)."""
        self.make_durable()  # the last round's tool results first
        self.spend.sync()
        s = decide_settlement(
            self.store,
            turn_id=self.turn_id,
            turn_index=self.turn_index,
            bound_work_item_id=self.bound_wi,
            focus=self.focus,
            final_text=self.final_text,
            failed=self.failed,
            failure_artifact=self.result.failure_artifact,
            failure_kind=self.result.failure_kind,
            sleep_req=self.sleep_req,
            wrote_completion_brief=bool(self.completion_briefs),
            turn_skills=self.turn_skills,
            budget_hit=self.budget_hit,
            progress=turn_progress(
                self.msg,
                self.journal,
                turn_id=self.turn_id,
                bound_work_item_id=self.bound_wi,
                tool_calls=self.tool_calls_made,
                work_item_changed=self.work_item_changed,
                budget_stopped=self.budget_hit is not None,
            ),
            abort_reason=self.abort_reason,
            message_id=self.mid,
            turn_ids={self.turn_id, *self.journal.requested},
        )
        s["memory"] = memory_delta(
            self.store,
            self.msg,
            s,
            self.journal,
            turn_id=self.turn_id,
            turn_index=self.turn_index,
            focus=self.focus,
            ws=self.ws,
            wm=self.wm,
            compacted=self.ctx.window.compacted,
        )
        self.journal.settle(s)
        return s

    def settle(self) -> TurnResult:
        """Decide the ending once (saved in the journal), write the terminal
        records that are not written yet, settle the queue entries, and
        record the settled turn on the agent."""
        t_cleanup = time.monotonic()
        s = self.journal.settlement
        replaying = s is not None
        if s is None:
            s = self.decide()
        self.result.take_settlement(s, self.journal, self.models[0] if self.models else None)
        write_terminal(self.store, self.msg, s, self.journal, t_cleanup, self.t_start, replaying)
        self.observer.settled(s)  # the turn record joins the terminal records' batch
        self.result.duration_ms = int(s.get("duration_ms", 0))
        self.store.sync_ledgers()  # the terminal records are durable before the queue settles
        aborted = s["status"] == "aborted"
        q.settle(
            self.store,
            self.mid,
            "aborted" if aborted else "processed",
            turn_id=s["turn_id"],
            # why, for `holon status`: the operator's abort, or the failure kind
            reason=s.get("reason")
            or (f"turn_failed:{s.get('failure_kind') or 'unknown'}" if aborted else None),
        )
        for iid in self.journal.interject_ids:
            q.settle(self.store, iid, "processed", turn_id=s["turn_id"], reason="interject")
        self.store.sync_ledgers()
        finish_agent_state(self.store, s, self.journal)
        self.ctx.keep_turn(self.mid, self.turn_id)  # the next turn's prefix
        self.journal.clear()
        self.abort.clear()
        from holon_cli.runtime.waiting.scheduler import after_turn

        slept = s.get("sleep")
        after_turn(self.store, sleep_ms=slept["duration_ms"] if slept else None)
        return self.result
