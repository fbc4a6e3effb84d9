"""A turn's tool calls (:class:`ToolPhase`): each call of a round run in
order through the turn's step hook, its typed effects applied, its result
recorded as it lands; and, on a replayed turn, the calls that were in
flight when the runtime died closed as interrupted (never re-run).

The phase keeps what only tool calls need: the tools' turn-local scratch
(``ToolContext.effects``), what the round's calls did (a work item changed,
``work_done`` briefs written, a sleep asked for) and the no-progress guard's
counters. It reads only the calls' typed
:class:`~holon_cli.model.tool.ToolEffects`; the catalog runs the calls and
no tool is named here. What it changes for the rest of the turn (the
workspace binding, the current work item, the skills activated) it writes
to the shared :class:`~holon_cli.runtime.turn.state.TurnState`.
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Any

from holon_cli.providers.base import ConversationItem, ToolCall
from holon_cli.runtime.turn.abort import stop_call_commands
from holon_cli.runtime.turn.model_round import ModelRound, record_tool_result
from holon_cli.runtime.turn.steps import StepRecord, tool_record
from holon_cli.runtime.workspace import workspace_for

if TYPE_CHECKING:
    from holon_cli.model.events import ToolErrorEnvelope
    from holon_cli.model.memory import CommandRun
    from holon_cli.model.tool import SleepRequest, ToolContext
    from holon_cli.runtime.prompt import BuiltPrompt
    from holon_cli.runtime.turn.state import TurnState

_INTERRUPTED: ToolErrorEnvelope = {
    "kind": "interrupted",
    "message": "this call was in flight when the runtime stopped; it was not re-run",
    "recovery_hint": "check its effects (e.g. with ExecCommand) before running it again",
    "retryable": True,
    "details": None,
}


class ToolPhase:
    """The tool calls of one turn (see the module docstring)."""

    def __init__(self, t: TurnState) -> None:
        self.t = t
        self.turn_local: dict[str, Any] = {}  # tools' turn-local scratch (ToolContext.effects)
        self.completion_briefs: list[str] = []  # work_done briefs written in the last round
        self.sleep_req: SleepRequest | None = None
        self.rounds_since_mutation = 0
        self.tool_calls_made = 0  # the no-progress guard's view of the turn
        self.work_item_changed = False
        self._mutated = False  # a call of the current round changed a work item

    # ------------------------------------------------------------ run tools

    def run(self, rnd: ModelRound, built: BuiltPrompt) -> None:
        """Execute the round's calls in order; each result is recorded as it
        lands. Reads only the calls' typed effects."""
        # the tool values load with a round's first call, as the tools do
        from holon_cli.model.tool import ToolContext

        t = self.t
        resp = rnd.response
        ws = t.binding()
        ctx = ToolContext(
            store=t.store,
            agent_id=t.store.agent_id,
            execution_root=ws.execution_root,
            cwd=ws.cwd,
            workspace_anchor=ws.workspace_anchor,
            turn_id=t.turn_id,
            message=t.msg,
            round_text=resp.text,
            round_calls=list(resp.tool_calls),
            config=t.cfg,
            effects=self.turn_local,
        )
        self._mutated = False
        self.completion_briefs = []
        for call in resp.tool_calls:
            t.watch.steps.tool(call.id, partial(self._run_call, ctx, call, built))
        mutated = self._mutated
        self.rounds_since_mutation = 0 if mutated else self.rounds_since_mutation + 1
        self.tool_calls_made += len(resp.tool_calls)
        self.work_item_changed = self.work_item_changed or mutated
        if mutated:
            t.focus = t.store.read_record()["state"].get("current_work_item_id")

    def _run_call(self, ctx: ToolContext, call: ToolCall, built: BuiltPrompt) -> StepRecord:
        """One tool call: run it, apply its effects, record its result."""
        t = self.t
        t_tool = time.monotonic()
        with t.watch.tracer.tool(call) as traced:
            res = t.abort.call(partial(t.catalog.execute, ctx, call), on_abort=self._stop_call)
            traced.result(res)
        tool_ms = round((time.monotonic() - t_tool) * 1000, 3)
        t.watch.observer.tool(call, res)
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
        record_tool_result(t.rec, t.journal, call, res, tool_ms, fx.work_item_id or t.focus)
        # after its result: a replay counts the effects of recorded calls only
        runs: list[CommandRun] = [
            {"cmd": str(c.get("cmd")), "exit_status": c.get("exit_status")} for c in fx.command_runs
        ]
        t.journal.add_effects(fx.files_touched, runs, bool(fx.completion_brief_id))
        return tool_record(t.journal.rounds, t.journal.items[-1])

    def _rebind(self, ctx: ToolContext) -> None:
        """The binding changed mid-turn: the next calls and rounds use it."""
        t = self.t
        ws = t.ws = workspace_for(t.store.layout.home, t.store.read_record()["state"])
        ctx.execution_root = ws.execution_root
        ctx.cwd = ws.cwd
        ctx.workspace_anchor = ws.workspace_anchor

    def _stop_call(self) -> None:
        stop_call_commands(self.t.store, self.t.turn_id)

    def _activate_skills(self, commands: list[str], skills: Any) -> None:
        from holon_cli.runtime.prompt import skill_activations

        t = self.t
        cwd = t.binding().cwd
        for act in (a for c in commands if c for a in skill_activations(c, cwd, skills)):
            if act["skill"] not in t.turn_skills:
                t.turn_skills[act["skill"]] = {**act, "state": "turn_active"}
                t.rec.plain_event("skill_activated", act)

    # ---------------------------------------------- close in-flight calls

    def close_in_flight(self) -> bool:
        """Replay: calls of the last recorded round that have no recorded result
        were in flight when the runtime died; the model hears they were
        interrupted (never re-run). Returns True when the journal already
        ends with a final answer (only settling is left)."""
        t = self.t
        last = t.journal.items[-1] if t.journal.items else None
        if last is None or last.role != "assistant":
            return False
        if not last.tool_calls:
            t.final_text = last.text
            return True
        recorded = t.journal.recorded_results()
        for call in last.tool_calls:
            if call.id not in recorded:
                t.watch.steps.tool(call.id, partial(self._interrupted, call))
        return False

    def _interrupted(self, call: ToolCall) -> StepRecord:
        """One in-flight call closed as interrupted (a step of its own)."""
        from holon_cli.model.tool import ToolResult, render_error

        t = self.t
        content = render_error(call.name, _INTERRUPTED)
        t.watch.observer.tool(call, ToolResult(ok=False, content=content, error=_INTERRUPTED))
        item = ConversationItem("tool", content, call_id=call.id, name=call.name, is_error=True)
        t.journal.add_item(item)
        t.rec.transcript(
            "tool_result",
            call_id=call.id,
            tool_name=call.name,
            ok=False,
            output=content,
            error={"kind": "interrupted"},
        )
        return tool_record(t.journal.rounds, item)
