"""What the pieces of one turn share (:class:`TurnState`): the message and
its journal, where events go, what the turn reports to, and the facts that
change as the turn goes (its workspace binding, its current work item, the
skills it activated, whether it failed).

Each piece keeps its own state beside it:
:class:`~holon_cli.runtime.turn.loop.TurnRun` the lifecycle (start, stop,
settle), :class:`~holon_cli.runtime.turn.round.TurnRound` a provider round
(the prompt, its fit to the context budget, the spend) and
:class:`~holon_cli.runtime.turn.tool_phase.ToolPhase` a round's tool calls
(their effects, the turn-local scratch, the no-progress counters).
A plain class (slots), not a dataclass: ``holon run`` loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from holon_cli.runtime.turn.abort import AbortWatch

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState
    from holon_cli.model.budget import BudgetHit
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.envelope import Envelope, QueueEntry
    from holon_cli.model.tool import Toolbox
    from holon_cli.runtime.turn.hooks import Watchers
    from holon_cli.runtime.turn.journal import Journal
    from holon_cli.runtime.turn.recorder import TurnRecorder
    from holon_cli.runtime.turn.result import TurnResult
    from holon_cli.runtime.workspace import WorkspaceBinding
    from holon_cli.store.agent_store import AgentStore


class TurnState:
    """One turn's shared state (see the module docstring)."""

    __slots__ = (
        "store",
        "entry",
        "msg",
        "mid",
        "turn_id",
        "cfg",
        "catalog",
        "journal",
        "rec",
        "result",
        "watch",
        "abort",
        "state",
        "turn_index",
        "ws",
        "is_default",
        "self_owned",
        "bound_wi",
        "focus",
        "session_skills",
        "turn_skills",
        "inherited",
        "failed",
        "final_text",
        "budget_hit",
    )

    def __init__(
        self,
        store: AgentStore,
        entry: QueueEntry,
        turn_id: str,
        *,
        config: HolonConfig,
        catalog: Toolbox,
        journal: Journal,
        rec: TurnRecorder,
        result: TurnResult,
        watch: Watchers,
    ) -> None:
        self.store = store
        self.entry = entry
        self.msg: Envelope = entry["envelope"]
        self.mid: str = self.msg["id"]
        self.turn_id = turn_id
        self.cfg = config
        self.catalog = catalog  # narrowed to a profiled child's tools at start
        self.journal = journal
        self.rec = rec
        self.result = result
        self.watch = watch
        # an operator's abort: each provider and tool call is waited for here
        self.abort = AbortWatch(store, turn_id)
        # filled by TurnRun.start
        self.state = cast("AgentState", {})
        self.turn_index = 0
        self.ws: WorkspaceBinding | None = None
        self.is_default = False
        self.self_owned = True  # provisions its trigger capability
        self.bound_wi: str | None = None
        # the current work item as it changes during the turn
        self.focus: str | None = None
        self.session_skills: list[dict[str, Any]] = []
        self.turn_skills: dict[str, dict[str, Any]] = {}
        self.inherited: str | None = None  # a forked child's inherited context block
        # how it is going
        self.failed = False
        self.final_text = ""
        self.budget_hit: BudgetHit | None = None  # a budget refused the next request

    def binding(self) -> WorkspaceBinding:
        """The workspace binding (set at the turn's start)."""
        assert self.ws is not None
        return self.ws
