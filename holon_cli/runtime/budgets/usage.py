"""``holon usage``: requests, tokens and cost out of the spend records, by
agent, model or UTC day.

Read through :func:`holon_cli.runtime.budgets.spend.all_records`: every
provider round once, a removed agent's included (the home's spend record,
and a parent's ledger, keep them). One row per key: ``requests`` (provider rounds),
``input_tokens``, ``output_tokens``, ``cached_input_tokens`` (part of the
input, served from the provider's prompt cache), ``cost_usd``.

Cost: what the record says (priced by ``prices`` when the round was spent);
a round recorded before its model had a price is priced by today's
``prices``. Runtime steps never print: :func:`usage` returns the data.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from holon_cli import clock
from holon_cli.errors import UsageError

if TYPE_CHECKING:
    from holon_cli.model.budget import SpendRecord
    from holon_cli.model.config import HolonConfig

By = Literal["agent", "model", "day"]
BY: tuple[By, ...] = ("agent", "model", "day")


class UsageRow(TypedDict):
    key: str
    requests: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cost_usd: float


class UsageReport(TypedDict):
    """``holon usage``: one row per key (sorted), and the total."""

    by: By
    rows: list[UsageRow]
    total: UsageRow
    agent_id: NotRequired[str | None]  # the report's filters
    since: NotRequired[str | None]


def _row(key: str) -> UsageRow:
    return {
        "key": key,
        "requests": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "cost_usd": 0.0,
    }


def _key(r: SpendRecord, by: By) -> str:
    if by == "agent":
        return str(r.get("agent_id") or "?")
    if by == "model":
        return str(r.get("model_ref") or "(unknown)")
    return clock.iso(float(r.get("ts", 0)))[:10]


def _cost(r: SpendRecord, cfg: HolonConfig) -> float:
    recorded = float(r.get("cost_usd") or 0)
    if recorded:
        return recorded
    from holon_cli.runtime.budgets.spend import _cost as price

    tin, tout = int(r.get("input_tokens", 0)), int(r.get("output_tokens", 0))
    return price(cfg, r.get("model_ref"), tin, tout)


def _add(row: UsageRow, r: SpendRecord, cost: float) -> None:
    row["requests"] += 1
    row["input_tokens"] += int(r.get("input_tokens", 0))
    row["output_tokens"] += int(r.get("output_tokens", 0))
    row["cached_input_tokens"] += int(r.get("cached_input_tokens", 0))
    row["cost_usd"] += cost


def summarize(records: Iterable[SpendRecord], cfg: HolonConfig, by: By = "agent") -> UsageReport:
    """``rows`` (sorted by key) and ``total``, each a :class:`UsageRow`."""
    rows: dict[str, UsageRow] = {}
    total = _row("total")
    for r in records:
        cost = _cost(r, cfg)
        key = _key(r, by)
        _add(rows.setdefault(key, _row(key)), r, cost)
        _add(total, r, cost)
    out = [rows[k] for k in sorted(rows)]
    for row in (*out, total):
        row["cost_usd"] = round(row["cost_usd"], 9)
    return {"by": by, "rows": out, "total": total}


def _by(by: str) -> By:
    for b in BY:
        if b == by:
            return b
    raise UsageError(f"--by must be one of {', '.join(BY)}, not {by!r}")


def usage(
    home: Path,
    cfg: HolonConfig,
    *,
    agent_id: str | None = None,
    since_s: float | None = None,
    by: str = "agent",
) -> dict[str, Any]:
    """The usage report of the home (``agent_id``: that agent's own rounds;
    ``since_s``: the last so many seconds): a :class:`UsageReport`, as a
    plain dict."""
    from holon_cli.runtime.budgets.spend import all_records

    if by not in BY:
        raise UsageError(f"--by must be one of {', '.join(BY)}, not {by!r}")
    if agent_id is not None:
        from holon_cli.store.layout import validate_agent_id

        validate_agent_id(agent_id)  # a removed agent's rounds still count: no existence check
    since = clock.now() - since_s if since_s is not None else None
    records = all_records(home, since)
    if agent_id is not None:
        records = [r for r in records if r.get("agent_id") == agent_id]
    out = summarize(records, cfg, _by(by))
    out["agent_id"] = agent_id
    out["since"] = clock.iso(since) if since is not None else None
    return dict(out)
