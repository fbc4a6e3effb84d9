"""The turn's spend (:class:`TurnSpend`): the budget gate before every
provider request and the spend of each round, written to
``ledger/spend.jsonl`` (deferred; fsync'd once, at settle)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holon_cli.runtime.budgets import spend as budgets

if TYPE_CHECKING:
    from holon_cli.providers.base import ProviderRequest
    from holon_cli.providers.chain import ChainResult
    from holon_cli.store.agent_store import AgentStore


class TurnSpend:
    """What one turn's provider requests cost, charged to its work item."""

    def __init__(
        self, store: AgentStore, config: dict[str, Any], turn_id: str, message_id: str
    ) -> None:
        self.store = store
        self.cfg = config
        self.turn_id = turn_id
        self.mid = message_id
        self.writer = budgets.SpendWriter(store)

    def gate(self, focus: str | None) -> None:
        """Before every provider request (retries and fallbacks included):
        raises :class:`~holon_cli.runtime.budgets.spend.BudgetStop` over a budget."""
        if budgets.configured(self.cfg):
            budgets.gate(self.store, self.cfg, self.turn_id, focus)

    def of_round(self, chain: ChainResult, request: ProviderRequest, focus: str | None) -> None:
        """The round's spend: the provider's usage, or sizes / 4 when it reports none."""
        if chain.usage is not None:
            self.record(chain.model_ref, chain.usage.to_dict(), focus, estimated=False)
            return
        resp = chain.response
        sent = len(request.frame.system_prompt) + sum(
            len(b) for b in (*request.frame.system_blocks, *request.frame.context_blocks)
        )
        sent += sum(len(i.text) for i in request.conversation)
        got = len(resp.text) + sum(len(str(c.arguments)) for c in resp.tool_calls)
        usage = {"input_tokens": sent // 4, "output_tokens": got // 4}
        self.record(chain.model_ref, usage, focus, estimated=True)

    def record(
        self, model_ref: str | None, usage: dict[str, int], focus: str | None, *, estimated: bool
    ) -> None:
        self.writer.record(
            self.cfg,
            turn_id=self.turn_id,
            message_id=self.mid,
            work_item_id=focus,
            model_ref=model_ref,
            input_tokens=int(usage.get("input_tokens", 0)),
            output_tokens=int(usage.get("output_tokens", 0)),
            estimated=estimated,
        )

    def sync(self) -> None:
        """The turn's spend records become durable (once, at settle)."""
        self.writer.sync()
