"""One turn: dequeue the next message, run the provider/tool loop, record
everything, settle.

Modules: ``entry`` (``run_turn``, ``run_turns_all``), ``loop`` (``TurnRun``:
the lifecycle as steps), ``round`` (``TurnRound``: a provider round),
``tool_phase`` (``ToolPhase``: a round's tool calls), ``state``
(``TurnState``: what those share), ``hooks`` (``TurnHooks``: what other
planes plug into a turn, passed in by the caller; ``Watchers``: what one
turn reports to), ``fit`` (``ContextFit``: the context budget),
``spend`` (``TurnSpend``: the budget gate and each round's spend),
``progress`` (a settled turn's progress and working-memory delta),
``model_round`` (a model round's and a tool result's records), ``steps``
(the hook each provider round and tool call runs through: ``TurnSteps``),
``settle`` (the settlement and the terminal records), ``journal`` (crash
replay), ``recorder`` (events and transcript bound to the turn), ``closure``
(ClosureDecision), ``context`` (trigger, recent conversation), ``result``
(``TurnResult``).

Invariants:
- one turn per agent at a time (the turn lock; a second caller gets exit 75);
- every provider round, tool call and terminal is an event, a transcript
  entry, or both; the queue entry is settled last;
- a crash mid-turn leaves the message ``dequeued``; the next turn replays it
  from the turn journal (``state/turn_journal.json``), so tool calls already
  recorded are not run again, and a call that was in flight when the process
  died is reported to the model as interrupted instead of being re-run;
- a message gets exactly one terminal (brief, transcript entry, event), also
  when the process dies between writing it and settling the queue entry;
- a tool failure is a tool result, never the end of the turn; a provider
  failure ends the turn as ``aborted`` with a failure brief;
- the turn never undoes an operator's stop or pause.
"""

from holon_cli.runtime.agents.lifecycle import agent_ids
from holon_cli.runtime.turn.closure import derive_closure
from holon_cli.runtime.turn.context import RECENT_CHARS, context_trigger, recent_conversation
from holon_cli.runtime.turn.entry import (
    agents_with_work,
    repair_stale_run,
    run_turn,
    run_turns_all,
)
from holon_cli.runtime.turn.journal import Journal
from holon_cli.runtime.turn.loop import DEFAULT_MAX_ROUNDS, TurnRun
from holon_cli.runtime.turn.result import AgentFailure, TurnResult, attempt_timeline

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "AgentFailure",
    "RECENT_CHARS",
    "Journal",
    "TurnResult",
    "TurnRun",
    "agent_ids",
    "attempt_timeline",
    "agents_with_work",
    "derive_closure",
    "recent_conversation",
    "context_trigger",
    "repair_stale_run",
    "run_turn",
    "run_turns_all",
]
