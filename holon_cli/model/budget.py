"""Spend and budget records that cross layers: one spend ledger record, the
status view of a budget, and the budget a request was stopped by. TypedDicts:
zero runtime cost, the JSON is unchanged."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

BudgetName = Literal["tokens_per_day", "cost_usd_per_day", "turns_per_hour", "tokens_per_work_item"]
BUDGET_NAMES: tuple[BudgetName, ...] = (
    "tokens_per_day",
    "cost_usd_per_day",
    "turns_per_hour",
    "tokens_per_work_item",
)


class SpendRecord(TypedDict):
    """One provider round in ``.holon/ledger/spend.jsonl`` (of the agent that
    made it and of every ancestor on its lineage chain)."""

    v: int
    at: str
    ts: float
    agent_id: str  # the agent that sent the request
    turn_id: str
    message_id: str | None
    work_item_id: str | None
    model_ref: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    estimated: bool  # the provider reported no usage: sizes / 4
    # input tokens the provider's prompt cache served (part of input_tokens);
    # written only when there were some
    cached_input_tokens: NotRequired[int]


class BudgetUse(TypedDict):
    """``holon status --json`` data ``budget.<name>``."""

    limit: float
    used: float
    resets_at: str | None  # None: only the operator lifts it (tokens_per_work_item)
    work_item_id: NotRequired[str | None]


class BudgetHit(TypedDict):
    """The budget that stopped a request (saved in the turn's settlement)."""

    budget: BudgetName
    agent_id: str  # whose budget (the agent or an ancestor)
    limit: float
    used: float
    resets_at: str | None
    work_item_id: NotRequired[str | None]
