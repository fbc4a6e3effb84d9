"""The turn's observer: what a :class:`~holon_cli.runtime.turn.loop.TurnRun`
tells whoever keeps its record (issue 40).

The turn makes it with its hooks' ``record`` (``runtime/turn/hooks.py``; none:
an observer that hears nothing); the default catalog's is
:class:`holon_cli.runtime.replay.capture.TurnCapture` (every turn's record:
requests, answers, tool results, in the turn journal and, at settle, in
``ledger/turn_records.jsonl``); ``holon replay`` passes its own, which
compares each rebuilt request with the recorded one instead. The calls come
in the loop's order:

- :meth:`TurnObserver.started` once the agent is marked running (its record
  as the turn sees it);
- :meth:`TurnObserver.request` just before each provider request (a round,
  or its retry after a context-overflow compaction), then
  :meth:`TurnObserver.answered` or :meth:`TurnObserver.failed`;
- :meth:`TurnObserver.tool` after each tool call returned (and for each call
  closed as interrupted on a resumed turn);
- :meth:`TurnObserver.interjected` when operator messages join the turn;
- :meth:`TurnObserver.settled` once the ending is decided and its terminal
  records are written, before they are made durable (the record joins that
  fsync batch).

Invariants: an observer never changes what the turn does (its own failures
are its own: the capture disables itself and says so in the record); it
runs on the turn's thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord
    from holon_cli.model.envelope import QueueEntry
    from holon_cli.model.tool import ToolResult
    from holon_cli.model.turn import TurnSettlement
    from holon_cli.providers.base import ModelResponse, ProviderRequest, ToolCall


class TurnObserver(Protocol):
    def started(self, record: AgentRecord) -> None: ...

    def request(self, round_no: int, request: ProviderRequest) -> None: ...

    def answered(self, response: ModelResponse, model_ref: str) -> None: ...

    def failed(self, error: BaseException) -> None:
        """The request got no answer: a ``ChainFailure`` or a ``BudgetStop``."""
        ...

    def tool(self, call: ToolCall, result: ToolResult) -> None: ...

    def interjected(self, entries: list[QueueEntry]) -> None: ...

    def settled(self, settlement: TurnSettlement) -> None: ...
