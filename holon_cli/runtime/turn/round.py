"""One provider round of a turn (:class:`TurnRound`): build the prompt, fit
it to the context budget, call the model over its chain, record the answer.

The round keeps what only rounds need: the context budget's view of the
conversation (:class:`~holon_cli.runtime.turn.fit.ContextFit`), the budget
gate and each round's spend (:class:`~holon_cli.runtime.turn.spend.TurnSpend`),
the working memory the turn was prompted with, and when the prompt was
last built. What it shares with the rest of the turn (the journal, the
current work item, the workspace binding, whether the turn failed) lives in
:class:`~holon_cli.runtime.turn.state.TurnState`.

Each round runs as one step of the turn's step hook; the answer is recorded
before the hook's step returns (``model_round.record_model_round``) and made
durable by the turn's batch (``durable``) when it calls tools (or always, when
the hook asks for it: ``TurnSteps.durable_rounds``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.providers.base import ProviderRequest
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.budgets.check import BudgetStop
from holon_cli.runtime.memory import compaction as cp
from holon_cli.runtime.memory import working
from holon_cli.runtime.prompt import BuiltPrompt, active_skill_rows, build_frame
from holon_cli.runtime.tasks.sandbox import projection as execution_projection
from holon_cli.runtime.turn.context import context_trigger
from holon_cli.runtime.turn.fit import ContextFit
from holon_cli.runtime.turn.model_round import ModelRound, record_chain_failure, record_model_round
from holon_cli.runtime.turn.spend import TurnSpend
from holon_cli.runtime.turn.steps import StepRecord, round_record

if TYPE_CHECKING:
    from holon_cli.model.events import TurnContextBuiltData
    from holon_cli.runtime.turn.state import TurnState


class TurnRound:
    """The provider rounds of one turn (see the module docstring)."""

    def __init__(
        self,
        t: TurnState,
        models: list[str],
        *,
        sleep: Callable[[float], None],
        resolve: Callable[[str], Any] | None,
        durable: Callable[[], None],
    ) -> None:
        self.t = t
        self.models = models
        self.sleep = sleep
        self.resolve = resolve
        self.durable = durable  # the turn's fsync batch
        # the compacted view of this turn's conversation against the budget
        self.ctx = ContextFit(t.journal, t.rec, t.cfg)
        self.spend = TurnSpend(t.store, t.cfg, t.turn_id, t.mid)  # fsync'd once, at settle
        self.wm = working.empty_state()  # the working memory the turn was prompted with
        self.context_reported = False
        self.context_build_ms = 0.0
        # called before each prompt is built (`holon replay` serves what was read)
        self.before_build: Callable[[], None] | None = None

    # --------------------------------------------------------- build prompt

    def build_prompt(self) -> BuiltPrompt:
        if self.before_build is not None:
            self.before_build()
        t, ctx = self.t, self.ctx
        t_ctx = time.monotonic()
        built = build_frame(
            agent_id=t.store.agent_id,
            agent_home=t.store.layout.home,
            is_default_agent=t.is_default,
            ws=t.binding(),
            message=t.msg,
            tools=t.catalog.specs,
            guidance=t.catalog.guidance,
            work_queue=wi.project_work_queue(
                t.store,
                bound_work_item_id=t.focus,
                exclude_turn_id=t.turn_id,
                max_chars=ctx.queue_chars,
            ),
            recent=ctx.recent,
            active_skills=active_skill_rows(t.session_skills, t.turn_skills),
            trigger=context_trigger(t.store, provision=t.self_owned),
            working_memory=ctx.memory_block(),
            memory_delta=working.render_delta(self.wm),
            policy=execution_projection(t.cfg, t.store.agent_id),
            **ctx.cache_state(),
            inherited=t.inherited,
        )
        built = ctx.keep_turn_blocks(built)
        ctx.measure(built.frame, t.catalog.specs)
        self.context_build_ms = round((time.monotonic() - t_ctx) * 1000, 3)
        if not self.context_reported:
            self.context_reported = True
            built_data: TurnContextBuiltData = {
                "context_build_ms": self.context_build_ms,
                "prompt_cache_key": built.frame.prompt_cache_key,
                "context_fingerprint": built.frame.context_fingerprint,
                "sections": built.sections,
                "tool_count": len(t.catalog.specs),
                "bound_work_item_id": t.bound_wi,
            }
            ctx.report_cache(built_data)
            t.rec.event("turn_context_built", built_data)
        return built

    # ---------------------------------------------------------- fit budget

    def fit(self, built: BuiltPrompt) -> BuiltPrompt | None:
        """Keep the next request under ``runtime.context_budget_tokens``
        (:meth:`ContextFit.fit <holon_cli.runtime.turn.fit.ContextFit.fit>`:
        compaction, then smaller context blocks and a rebuilt prompt).
        ``None`` (the turn fails) when the frame's fixed part alone does not fit."""
        t = self.t
        fixed = cp.fixed_tokens(built.frame, t.catalog.specs)
        if fixed > self.ctx.budget_tokens:
            t.failed = True
            t.result.failure_artifact = self.ctx.fail_budget(fixed)
            t.result.failure_kind = "context_budget_too_small"
            return None
        if self.ctx.fit(t.focus):
            return self.fit(self.build_prompt())
        return built

    # ------------------------------------------------------- provider round

    def run(self, built: BuiltPrompt) -> ModelRound | None:
        """Call the model and record its answer, as one step of the hook.
        ``None``: no answer (a chain failure or a budget stop ended the loop)."""
        t = self.t
        done: list[ModelRound] = []

        def step() -> StepRecord | None:
            rnd = self.call_model(built)
            if rnd is None:
                return None
            self.record(rnd)
            done.append(rnd)
            usage = rnd.response.usage.to_dict() if rnd.response.usage is not None else None
            return round_record(t.journal.rounds, t.journal.items[-1], usage)

        t.watch.steps.round(t.journal.rounds + 1, step)
        return done[0] if done else None

    # ----------------------------------------------------------- call model

    def request(self, built: BuiltPrompt) -> ProviderRequest:
        t = self.t
        return ProviderRequest(
            frame=self.ctx.stamped(built.frame),
            conversation=self.ctx.window.view(t.journal.items),
            history=self.ctx.history.items(),
            tools=t.catalog.specs,
            state_dir=t.store.layout.state_dir,
            agent_id=t.store.agent_id,
            turn_id=t.turn_id,
        )

    def call_model(self, built: BuiltPrompt) -> ModelRound | None:
        """One provider round over the model chain. A chain failure is recorded
        (event, transcript) and ends the loop: returns ``None``."""
        from holon_cli.providers.chain import ChainFailure, call_with_fallback

        t, spend, watch = self.t, self.spend, self.t.watch
        request = self.request(built)
        watch.observer.request(t.journal.rounds + 1, request)
        # from here on a crash counts as an attempt of this message
        t.journal.mark_request()
        started_at = clock.now_iso()
        t0 = time.monotonic()
        spend.begin_round(request)
        try:
            try:
                chain = t.abort.call(
                    lambda: call_with_fallback(
                        self.models,
                        request,
                        sleep=self.sleep,
                        resolve=self.resolve,
                        before_attempt=lambda ref, tr: spend.before_attempt(ref, tr, t.focus),
                    )
                )
            except BudgetStop as stop:
                watch.observer.failed(stop)
                t.budget_hit = stop.hit
                return None
            except ChainFailure as failure:
                watch.tracer.chat(failure.timeline, None, request)
                watch.observer.failed(failure)
                if failure.usage is not None:
                    usage = failure.usage.to_dict()
                    spend.record(failure.last.model_ref, usage, t.focus, estimated=False)
                spend.end_round()
                if self.ctx.overflow_compacted(failure, t.focus):
                    return self.call_model(built)  # once: overflow_compacted says no again
                t.failed = True
                t.result.failure_artifact, t.result.failure_kind = record_chain_failure(
                    t.rec, t.journal, failure, round((time.monotonic() - t0) * 1000, 3)
                )
                return None
            watch.tracer.chat(chain.timeline, chain.response, request)
            watch.observer.answered(chain.response, chain.model_ref)
            spend.of_round(chain, request, t.focus)
        finally:
            # the round's spend is recorded (or nothing was sent): its
            # reservations go, whichever way the round ended
            spend.end_round()
        reported = int(getattr(chain.usage, "input_tokens", 0) or 0) if chain.usage else 0
        self.ctx.note_sent(reported)
        return ModelRound(chain, started_at, round((time.monotonic() - t0) * 1000, 3))

    # --------------------------------------------------------- record round

    def record(self, rnd: ModelRound) -> None:
        """The model's answer is recorded: events, transcript, journal. A round
        with tool calls becomes durable in one fsync batch before they start
        (the previous round's tool results join it); a final answer with the
        settlement (nothing runs before it), unless the step hook asks for
        every round (``TurnSteps.durable_rounds``). The agent's totals are
        updated once, at settle."""
        t = self.t
        record_model_round(
            t.rec,
            t.journal,
            rnd,
            context_build_ms=self.context_build_ms,
            work_item_id=t.focus,
        )
        if rnd.tool_calls or getattr(t.watch.steps, "durable_rounds", True):
            self.durable()
