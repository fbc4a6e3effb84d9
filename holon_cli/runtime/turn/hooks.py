"""What other planes plug into a turn: one small set of hooks, passed in by
the caller as it passes the tool catalog (the runtime's turn imports none
of these planes; issue 43 item 3).

:class:`TurnHooks` is what a caller of ``run_turn`` hands over (the default
catalog, ``tools.catalog.default_catalog()``, carries the standard set as
``turn_hooks``; ``run_turn(hooks=...)`` replaces it):

- ``steps`` (:class:`~holon_cli.runtime.turn.steps.TurnSteps`): where each
  provider round and tool call is recorded (``serve --engine dbos``); by
  default nothing;
- ``record``: makes the turn's
  :class:`~holon_cli.runtime.turn.observe.TurnObserver` (the turn record of
  ``runtime/replay``: ``TurnCapture``); ``None``: no record is kept;
- ``lineage`` (:class:`Lineage`): the children plane's part in a child
  agent's turn (its inherited context, its delegation's trace, its result
  reported to its parent); ``None``: the agent is nobody's child.

:class:`Watchers` is what one running turn reports to, built per turn from
those hooks and the telemetry plane (which the turn may import: it is below
it): the step recorder, the observer and the tracer. Each is called on the
turn's thread, in the order its own protocol documents; none of them changes
what the turn does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from holon_cli.runtime.turn.steps import DIRECT, TurnSteps

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord
    from holon_cli.model.envelope import QueueEntry
    from holon_cli.model.tool import ToolResult
    from holon_cli.model.tracecontext import TraceContext
    from holon_cli.model.turn import TurnSettlement
    from holon_cli.providers.base import ModelResponse, ProviderRequest, ToolCall
    from holon_cli.runtime.telemetry import TurnTracer
    from holon_cli.runtime.turn.journal import Journal
    from holon_cli.runtime.turn.observe import TurnObserver
    from holon_cli.store.agent_store import AgentStore

    RecordFactory = Callable[[AgentStore, Journal, str, QueueEntry], TurnObserver]


class Lineage(Protocol):
    """The children plane's part in a turn (``runtime/children``)."""

    def inherited(self, store: AgentStore, identity: dict[str, Any]) -> str | None:
        """A forked child's inherited context block (else ``None``)."""
        ...

    def trace(self, store: AgentStore) -> TraceContext | None:
        """The trace a supervised child's turns continue (its delegation's)."""
        ...

    def after_turn(self, store: AgentStore) -> None:
        """After a turn of a supervised child: its result to its parent."""
        ...


class TurnHooks(NamedTuple):
    """The hooks a caller passes to a turn (see the module docstring)."""

    steps: TurnSteps = DIRECT
    record: RecordFactory | None = None
    lineage: Lineage | None = None


NO_HOOKS = TurnHooks()


class Quiet:
    """The observer of a turn whose record is not kept: hears nothing."""

    def started(self, record: AgentRecord) -> None:
        return None

    def request(self, round_no: int, request: ProviderRequest) -> None:
        return None

    def answered(self, response: ModelResponse, model_ref: str) -> None:
        return None

    def failed(self, error: BaseException) -> None:
        return None

    def tool(self, call: ToolCall, result: ToolResult) -> None:
        return None

    def interjected(self, entries: list[QueueEntry]) -> None:
        return None

    def settled(self, settlement: TurnSettlement) -> None:
        return None


class Watchers(NamedTuple):
    """What one running turn reports to (see the module docstring)."""

    steps: TurnSteps
    observer: TurnObserver
    tracer: TurnTracer
