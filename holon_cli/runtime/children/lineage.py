"""The children plane's part in a child agent's turn (the turn's
:class:`~holon_cli.runtime.turn.hooks.Lineage` hook): a forked child's
inherited context block, the trace a supervised child's turns continue, and
a supervised child's result reported to its parent after each turn.

The turn never imports this plane (children run turns; a turn does not
reach back up to them): the caller hands :data:`LINEAGE` to the turn with
its hooks (``tools.catalog.default_catalog()`` carries it). Each method
imports what it needs when called: an agent that is nobody's child loads
nothing of the plane.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from holon_cli.model.tracecontext import TraceContext
    from holon_cli.store.agent_store import AgentStore


class ChildLineage:
    """:class:`~holon_cli.runtime.turn.hooks.Lineage` over this plane."""

    def inherited(self, store: AgentStore, identity: Mapping[str, object]) -> str | None:
        if identity.get("kind") != "child":
            return None  # the common case: nothing to read
        from holon_cli.runtime.children.context import block_for

        return block_for(store, identity)

    def trace(self, store: AgentStore) -> TraceContext | None:
        from holon_cli.runtime.children.supervision import delegation_trace

        return delegation_trace(store)

    def after_turn(self, store: AgentStore) -> None:
        from holon_cli.runtime.children.supervision import after_child_turn

        after_child_turn(store)


LINEAGE = ChildLineage()
