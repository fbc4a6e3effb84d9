"""What holds an agent back, in one place: ``holon status`` (``holds[]``),
``home audit`` (finding ``held``), ``enqueue --wait``'s notice and ``holon
turn``'s refusal all read :func:`agent_holds`.

A hold is something that keeps queued work from running by itself, with
why and until when (``until``: an ISO time, or ``None`` when only an
operator lifts it):

- ``stopped`` / ``paused``: the operator's lifecycle (``holon agent
  start`` lifts both; a stopped agent also rejects new messages);
- ``budget``: a budget the next provider request would pass (read through
  :mod:`holon_cli.runtime.budgets`' public :func:`~budgets.check`, the same
  check made before every request); it lifts at ``resets_at`` or when the
  operator raises the limit;
- ``no_progress``: the no-progress guard keeps tick and serve from
  re-activating the agent's work (queued messages still run; operator
  input lifts it).

Read-only; no lock is taken. A config that does not load holds nothing
here (``status`` and ``home check`` report the config itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState
    from holon_cli.model.budget import BudgetHit
    from holon_cli.store.agent_store import AgentStore

HoldKind = Literal["paused", "budget", "no_progress", "stopped"]
HOLD_KINDS: tuple[HoldKind, ...] = ("stopped", "paused", "budget", "no_progress")


class Hold(TypedDict):
    kind: HoldKind
    reason: str
    until: str | None


def _lifecycle(agent_id: str, status: str) -> Hold | None:
    if status == "stopped":
        return {
            "kind": "stopped",
            "reason": f"stopped by the operator: new messages are refused and nothing runs; "
            f"`holon agent start {agent_id}` resumes it",
            "until": None,
        }
    if status == "paused":
        return {
            "kind": "paused",
            "reason": f"paused by the operator: messages wait in the queue and no turn starts; "
            f"`holon agent start {agent_id}` resumes it",
            "until": None,
        }
    return None


def budget_hit(store: AgentStore, cfg: dict[str, Any] | None = None) -> BudgetHit | None:
    """The budget the agent's next turn would be refused by (its first
    provider request would pass it), or ``None``."""
    from holon_cli.runtime.budgets import spend as budgets

    if cfg is None:
        cfg = _config()
    if not cfg or not budgets.configured(cfg):
        return None
    state = store.read_record()["state"]
    hit = budgets.check(store, cfg, turn_id=None, work_item_id=None, agent_wide=True)
    if hit is None:
        wid = state.get("current_work_item_id")
        if wid:  # the work item's own budget holds that item's activation
            hit = budgets.check(store, cfg, turn_id=None, work_item_id=wid)
    return hit


def _budget(store: AgentStore, hit: BudgetHit) -> Hold:
    from holon_cli.runtime.budgets import spend as budgets

    aid = store.agent_id
    key = f"agents.{hit['agent_id']}.budgets.{hit['budget']}"
    if hit["budget"] == "tokens_per_work_item":
        what = (
            f"no provider request is sent for work item {hit.get('work_item_id')} "
            f"(`holon workitem pick --agent {aid}` another one, or raise {key} in config.yaml)"
        )
    else:
        what = (
            f"no provider request is sent and queued messages wait; "
            f"{budgets.until_text(hit)}, or raise {key} (or budgets.{hit['budget']}) in config.yaml"
        )
    return {
        "kind": "budget",
        "reason": f"{budgets.describe(hit, aid)}: {what}",
        "until": hit["resets_at"],
    }


def _no_progress(agent_id: str, state: AgentState) -> Hold | None:
    from holon_cli.runtime.budgets.guard import GUARD_TURNS, held_streak

    streak = held_streak(state)
    if streak is None:
        return None
    wid = streak.get("work_item_id")
    what = f"work item {wid}" if wid else "the work queue"
    return {
        "kind": "no_progress",
        "reason": f"no-progress guard: the last {GUARD_TURNS} turns activated for {what} made "
        "no tool call and changed no work item, so tick and serve do not activate it again; "
        f"a message (`holon enqueue --agent {agent_id} ...`) lifts it",
        "until": None,
    }


def _config() -> dict[str, Any] | None:
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        return load_config()
    except ConfigError:
        return None


def agent_holds(store: AgentStore, cfg: dict[str, Any] | None = None) -> list[Hold]:
    """Every hold on the agent now, in :data:`HOLD_KINDS` order (see the
    module docstring). ``cfg``: the loaded config, when the caller has it."""
    state = store.read_record()["state"]
    out: list[Hold] = []
    life = _lifecycle(store.agent_id, state["status"])
    if life is not None:
        out.append(life)
    hit = budget_hit(store, cfg)
    if hit is not None:
        out.append(_budget(store, hit))
    guard = _no_progress(store.agent_id, state)
    if guard is not None:
        out.append(guard)
    return out


def queue_hold(store: AgentStore, cfg: dict[str, Any] | None = None) -> Hold | None:
    """The hold that keeps the agent's queued messages where they are (no
    turn dequeues one: ``holon turn`` refuses, tick and serve pass the
    agent by), or ``None``. A budget counts once it has stopped a turn (the
    turn before a message is dequeued checks the same): until then the next
    turn settles its message as waiting for the budget."""
    from holon_cli.runtime.budgets import spend as budgets

    state = store.read_record()["state"]
    life = _lifecycle(store.agent_id, state["status"])
    if life is not None:
        return life
    if cfg is None:
        cfg = _config()
    if not cfg or not budgets.configured(cfg):
        return None
    hit = budgets.exhausted(store, cfg)
    return _budget(store, hit) if hit is not None else None


def hold_line(h: Hold) -> str:
    """One hold as a line of text (``until`` appended when it has one)."""
    return h["reason"] + (f" (until {h['until']})" if h["until"] else "")
