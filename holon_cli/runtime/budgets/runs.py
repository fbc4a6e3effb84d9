"""The bounds of one ``holon run`` (``--max-tokens N``, ``--max-cost USD``):
what the run's agent and everything below it (its children, theirs) may
spend from the run's start, whoever runs their turns (the run itself, or a
``holon serve`` running the children).

A bound is a held record in ``$HOLON_HOME/budgets/runs/``
(``store/held_records.py``) naming the run's agent, its limits and its
start; ``check.py`` reads the live ones for every agent on a request's
lineage and counts the agent's ledger (which holds its subtree's spend)
from the start. The run releases it when it returns, whichever way. A run
that is killed: the bound of a temporary run agent stays while that agent
exists (its children cannot spend on without it); a named agent's bound
ends with the process that set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from holon_cli import clock
from holon_cli.store import held_records
from holon_cli.store.held_records import HeldRecord
from holon_cli.store.layout import HomeLayout


def set_bound(
    home: HomeLayout,
    agent_id: str,
    *,
    max_tokens: int | None,
    max_cost_usd: float | None,
    temporary: bool,
) -> HeldRecord | None:
    """Hold the run's bound (None when neither limit is given)."""
    if max_tokens is None and max_cost_usd is None:
        return None
    run_id = clock.new_id("runb")
    data: dict[str, object] = {
        "v": 1,
        "run_id": run_id,
        "agent_id": agent_id,
        "at": clock.now(),
        "temporary": temporary,
        "agent_home": str(home.agent(agent_id).home),
    }
    if max_tokens is not None:
        data["max_tokens"] = int(max_tokens)
    if max_cost_usd is not None:
        data["max_cost_usd"] = float(max_cost_usd)
    return held_records.hold(home.run_bounds_dir, f"{agent_id}--{run_id}", data)


def _orphan_kept(rec: Mapping[str, object]) -> bool:
    """A killed run's bound lives on while its temporary agent does."""
    import os

    home = rec.get("agent_home")
    return bool(rec.get("temporary")) and isinstance(home, str) and os.path.isdir(home)


def live_bounds(home: HomeLayout) -> list[dict[str, Any]]:
    """Every bound in force (by run start)."""
    recs = held_records.live_records(
        home.run_bounds_dir, now=clock.now(), lease_s=None, keep_orphan=_orphan_kept
    )
    return sorted(recs, key=lambda r: float(r.get("at") or 0))
