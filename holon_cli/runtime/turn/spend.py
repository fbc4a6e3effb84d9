"""The turn's spend (:class:`TurnSpend`): the budget gate before every
provider request (with its reservation and output cap,
``runtime/budgets/reserve.py``) and the spend of each round, written to
``ledger/spend.jsonl`` (deferred; fsync'd once, at settle)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.runtime.budgets import spend as budgets

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.providers.base import ProviderRequest
    from holon_cli.providers.chain import ChainResult
    from holon_cli.runtime.budgets.reserve import Admission
    from holon_cli.store.agent_store import AgentStore


def request_chars(request: ProviderRequest) -> int:
    """The characters of a request's prompt and conversation (sizes / 4 is
    the runtime's token estimate)."""
    frame = request.frame
    sent = len(frame.system_prompt) + sum(
        len(b) for b in (*frame.system_blocks, *frame.context_blocks)
    )
    return sent + sum(len(i.text) for i in request.conversation)


class TurnSpend:
    """What one turn's provider requests cost, charged to its work item."""

    def __init__(
        self, store: AgentStore, config: HolonConfig, turn_id: str, message_id: str
    ) -> None:
        self.store = store
        self.cfg = config
        self.turn_id = turn_id
        self.mid = message_id
        self.writer = budgets.SpendWriter(store)
        self.sent_any = False  # a round of this turn has been recorded
        self.round_id = ""
        self.request: ProviderRequest | None = None
        self.request_est = 0  # sizes / 4 of the round's request
        self.admissions: list[Admission] = []

    # ------------------------------------------------------------ a round

    def begin_round(self, request: ProviderRequest) -> None:
        """A provider round starts: its request is measured once."""
        self.round_id = clock.new_id("rnd")
        self.request = request
        self.request_est = request_chars(request) // 4

    def estimate(self, transport: Any = None) -> int:
        """The round's input tokens before it is sent: what the transport says
        it will count (the scripted model's declared usage), else sizes / 4
        times what the provider counted over sizes / 4 last time."""
        peek = getattr(transport, "estimate_input_tokens", None)
        if peek is not None and self.request is not None:
            told = peek(self.request)
            if isinstance(told, int) and told >= 0:
                return told
        return math.ceil(self.request_est * self._calibration())

    def _calibration(self) -> float:
        """input_tokens / request_est of the agent's last request, else of the
        home's last one (a new agent), else 1: what the provider counts for
        what sizes / 4 says (tool schemas, the tokenizer, cache accounting
        that leaves cached input out)."""
        for led in (
            self.store.ledger(budgets.LEDGER),
            budgets.home_ledger(budgets.home_of(self.store)),
        ):
            last = led.last() if led.path.exists() else None
            try:
                est = int((last.get("request_est") if last else None) or 0)
                got = int(last["input_tokens"] if last else 0)
            except (TypeError, ValueError):
                continue
            if est > 0 and got > 0:
                return got / est
        return 1.0

    def before_attempt(self, ref: str, transport: Any, focus: str | None) -> None:
        """Before every provider request (retries and fallbacks included):
        check the budgets and reserve the request's share (raises
        :class:`~holon_cli.runtime.budgets.check.BudgetStop`), and cap its
        ``max_output_tokens`` to what the tightest budget leaves."""
        from holon_cli.runtime.budgets import check, reserve

        if not check.active(self.cfg, budgets.home_of(self.store), self.store):
            return
        adm = reserve.admit(
            self.store,
            self.cfg,
            round_id=self.round_id,
            new_turn=not self.sent_any,
            work_item_id=focus,
            est_in=self.estimate(transport),
            model_ref=ref,
            max_output=getattr(transport, "max_output_tokens", None),
        )
        self.admissions.append(adm)
        if self.request is not None:
            self.request.max_output_tokens = adm.cap

    def end_round(self) -> None:
        """The round's spend is recorded: its reservations go."""
        for adm in self.admissions:
            adm.release()
        self.admissions = []

    # ------------------------------------------------------------ spend

    def of_round(self, chain: ChainResult, request: ProviderRequest, focus: str | None) -> None:
        """The round's spend: the provider's usage, or sizes / 4 when it reports none."""
        if chain.usage is not None:
            self.record(chain.model_ref, chain.usage.to_dict(), focus, estimated=False)
            return
        resp = chain.response
        got = len(resp.text) + sum(len(str(c.arguments)) for c in resp.tool_calls)
        usage = {"input_tokens": request_chars(request) // 4, "output_tokens": got // 4}
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
            cached_input_tokens=int(usage.get("cache_read_input_tokens", 0)),
            estimated=estimated,
            request_est=self.request_est or None,
        )
        self.sent_any = True

    def sync(self) -> None:
        """The turn's spend records become durable (once, in the turn's last
        batch); the home's copy only when a ``budgets.home`` budget reads it."""
        self.writer.sync(home=bool(budgets.home_limits(self.cfg)))
