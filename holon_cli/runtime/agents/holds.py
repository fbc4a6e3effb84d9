"""What holds an agent back, in one place: ``holon status`` (``holds[]``),
``home audit`` (finding ``held``), ``enqueue --wait``'s notice and ``holon
turn``'s refusal all read :func:`agent_holds`.

A hold is something that keeps queued work from running by itself, with
why and until when (``until``: an ISO time, or ``None`` when only an
operator lifts it):

- ``stopped`` / ``paused``: the operator's lifecycle (``holon agent
  start`` lifts both; a stopped agent also rejects new messages);
- ``budget``: a budget that stopped the agent's last turn and that its next
  request would still pass (spent, or too little left for it; read through
  the budget plane's public :func:`holon_cli.runtime.budgets.check.holds`,
  the check ``tick`` and ``turn`` make); it lifts at its reset or when the
  operator raises the limit;
- ``no_progress``: the no-progress guard keeps tick and serve from
  re-activating the agent's work (queued messages still run; operator
  input lifts it).

Read-only; no lock is taken. A config that does not load holds nothing
here (``status`` and ``home check`` report the config itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState
    from holon_cli.model.budget import BudgetHit
    from holon_cli.model.config import HolonConfig
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


def until_text(hit: BudgetHit) -> str:
    """When the budget of ``hit`` lets a request through again, in words."""
    if hit["resets_at"]:
        return f"it resets at {hit['resets_at']}"
    if hit.get("scope") == "run":
        return "it bounds this run only"
    if hit["budget"] == "tokens_per_work_item":
        return "it does not reset while this work item is current"
    return "it does not reset (a limit of 0)"


def budget_line(hit: BudgetHit, agent_id: str | None = None) -> str:
    """A budget hit in one line: the budget plane's own words for it (spent,
    or what the next request would pass) and when it lifts. ``agent_id``:
    the agent asking (``None``: the budget's agent is named)."""
    from holon_cli.runtime.budgets.check import reason_text

    text = reason_text(hit, agent_id or hit["agent_id"])
    if agent_id is None and hit.get("scope", "agent") == "agent":
        name = hit["budget"]
        text = text.replace(f"budget {name}", f"budget {name} of {hit['agent_id']}", 1)
    return f"{text}; {until_text(hit)}"


def _budget(store: AgentStore, cfg: HolonConfig) -> list[Hold]:
    """The budget plane's holds (:func:`holon_cli.runtime.budgets.check.holds`:
    a budget that stopped the agent's last turn and is still spent)."""
    from holon_cli.runtime.budgets.check import holds

    out: list[Hold] = []
    for h in holds(store, cfg):
        key = (
            f"budgets.home.{h['budget']}"
            if h["scope"] == "home"
            else f"agents.{h['owner']}.budgets.{h['budget']} (or budgets.{h['budget']})"
        )
        lift = f"it resets at {h['until']}" if h["until"] else "it does not reset"
        out.append(
            {
                "kind": "budget",
                "reason": f"{h['reason']}: no provider request is sent and queued messages "
                f"wait; {lift}, or raise {key} in config.yaml",
                "until": h["until"],
            }
        )
    return out


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


def _config() -> HolonConfig | None:
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        return load_config()
    except ConfigError:
        return None


def agent_holds(store: AgentStore, cfg: HolonConfig | None = None) -> list[Hold]:
    """Every hold on the agent now, in :data:`HOLD_KINDS` order (see the
    module docstring). ``cfg``: the loaded config, when the caller has it."""
    state = store.read_record()["state"]
    out: list[Hold] = []
    life = _lifecycle(store.agent_id, state["status"])
    if life is not None:
        out.append(life)
    if cfg is None:
        cfg = _config()
    if cfg:
        out.extend(_budget(store, cfg))
    guard = _no_progress(store.agent_id, state)
    if guard is not None:
        out.append(guard)
    return out


def queue_hold(store: AgentStore, cfg: HolonConfig | None = None) -> Hold | None:
    """The hold that keeps the agent's queued messages where they are (no
    turn dequeues one: ``holon turn`` refuses, tick and serve pass the
    agent by), or ``None``. A budget counts once it has stopped a turn (the
    turn before a message is dequeued checks the same): until then the next
    turn settles its message as waiting for the budget."""
    state = store.read_record()["state"]
    life = _lifecycle(store.agent_id, state["status"])
    if life is not None:
        return life
    if cfg is None:
        cfg = _config()
    budget = _budget(store, cfg) if cfg else []
    return budget[0] if budget else None


def hold_line(h: Hold) -> str:
    """One hold as a line of text (``until`` appended when it has one)."""
    return h["reason"] + (f" (until {h['until']})" if h["until"] else "")
