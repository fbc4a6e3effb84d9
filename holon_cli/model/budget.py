"""Spend and budget records that cross layers: one spend ledger record, the
status view of a budget, and the budget a request was stopped by. TypedDicts:
zero runtime cost, the JSON is unchanged."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired, TypedDict

from holon_cli.model.typed import NONNEGATIVE

BudgetName = Literal[
    "tokens_per_day",
    "cost_usd_per_day",
    "turns_per_hour",
    "tokens_per_work_item",
    # the bounds of one `holon run` (--max-tokens, --max-cost)
    "max_tokens",
    "max_cost_usd",
]
BUDGET_NAMES: tuple[BudgetName, ...] = (
    "tokens_per_day",
    "cost_usd_per_day",
    "turns_per_hour",
    "tokens_per_work_item",
)
RUN_BUDGET_NAMES: tuple[BudgetName, ...] = ("max_tokens", "max_cost_usd")
# where a budget is set: an agent's (or an ancestor's) budgets, a running
# `holon run`'s bounds, or budgets.home (the sum over all agents)
BudgetScope = Literal["agent", "run", "home"]


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
    input_tokens: Annotated[int, NONNEGATIVE]
    output_tokens: Annotated[int, NONNEGATIVE]
    cost_usd: float
    estimated: bool  # the provider reported no usage: sizes / 4
    # the runtime's estimate of the request's input tokens (sizes / 4) before
    # it was sent: input_tokens / request_est calibrates the next estimate
    request_est: NotRequired[int]
    # appended again by `home check --repair` from the turn's events
    recovered_from: NotRequired[str]
    # input tokens the provider's prompt cache served (part of input_tokens);
    # written only when there were some
    cached_input_tokens: NotRequired[Annotated[int, NONNEGATIVE]]


class BudgetUse(TypedDict):
    """``holon status --json`` data ``budget.<name>``."""

    limit: float
    used: float
    resets_at: str | None  # None: only the operator lifts it (tokens_per_work_item)
    work_item_id: NotRequired[str | None]


class BudgetHit(TypedDict):
    """The budget that stopped a request (saved in the turn's settlement)."""

    budget: BudgetName
    agent_id: str  # whose budget (the agent or an ancestor; the run's agent)
    limit: float
    used: float
    resets_at: str | None
    work_item_id: NotRequired[str | None]
    scope: NotRequired[BudgetScope]  # absent: "agent" (records before issue 35)
    reserved: NotRequired[float]  # held by other requests in flight
    needed: NotRequired[float]  # what the refused request needed (input + 1 output)
    run_id: NotRequired[str]
    # the profile file whose budget it is (a child made from a profile)
    profile: NotRequired[str]


class BudgetHold(TypedDict):
    """One budget that holds an agent back (``runtime/budgets/check.holds``):
    for ``holon status`` holds, ``home audit`` and ``enqueue --wait`` hints."""

    kind: Literal["budget"]
    budget: BudgetName
    scope: BudgetScope
    owner: str  # the agent whose budget it is, or "home"
    reason: str  # one sentence: which budget, spent how far, what the next request needs
    until: str | None  # when it resets (None: only the operator lifts it)
    limit: float
    used: float
