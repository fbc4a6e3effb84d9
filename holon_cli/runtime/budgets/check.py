"""Budget decisions: may a provider request be sent, how much output may it
ask for, and which budgets hold an agent back.

A request is checked against every *scope* that bounds it (:func:`scopes`):

- ``agent``: the budgets of the requesting agent and of each ancestor on its
  lineage chain, over that agent's ledger (which holds its subtree's spend);
- ``run``: the bounds of a running ``holon run`` (``--max-tokens``,
  ``--max-cost``) set on any of them, over that agent's ledger from the
  run's start (``runs.py``);
- ``home``: ``budgets.home``, over the home's spend record (every agent's
  spend, removed agents' included).

In each scope a token budget leaves ``limit - spent - reserved`` tokens
(``reserved``: other requests in flight, ``reserve.py``); the request is
sent only when that covers its input estimate plus at least one output
token, and its ``max_output_tokens`` is capped to the smallest of what each
budget leaves after the input (:func:`decide`); a cost budget likewise at
the model's prices. The output cannot pass a budget, so a token budget is
passed by at most the error of one request's input estimate. ``turns_per_hour``
counts turns that sent a request in the rolling hour (and turns starting
now in other processes); only a request that would start a new turn is
refused. ``tokens_per_work_item`` counts the requesting agent's work item.

Runtime steps never print.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from holon_cli import clock
from holon_cli.runtime.budgets import runs
from holon_cli.runtime.budgets import spend as sp
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.model.budget import BudgetHit, BudgetHold, BudgetName, BudgetScope, SpendRecord
    from holon_cli.model.config import HolonConfig

WAITING_REASON = sp.WAITING_REASON
MIN_OUTPUT = 1  # a request that cannot get one output token is not sent
# max_output_tokens of a budgeted request when neither the model nor config
# sets one (it is also what the request reserves for its output)
DEFAULT_OUTPUT_RESERVE = 8192
_TOKENS = ("tokens_per_day", "tokens_per_work_item", "max_tokens")
_COSTS = ("cost_usd_per_day", "max_cost_usd")


class Scope(NamedTuple):
    kind: BudgetScope
    owner: str  # the agent whose budgets (or whose run's bound); "home"
    limits: dict[str, float]
    records: list[SpendRecord]
    reserved: list[dict[str, Any]]  # other requests in flight that count here
    store: AgentStore | None  # the agent's store (work-item totals)
    run_id: str | None = None
    # a child made from a profile file: the file and the budgets it set
    profile: tuple[str, frozenset[str]] | None = None


class Request(NamedTuple):
    agent_id: str
    est_in: int  # input tokens the request is expected to take
    price_in: float  # USD per input token of its model
    price_out: float
    new_turn: bool  # its turn has sent no request yet (turns_per_hour)
    work_item_id: str | None


class Decision(NamedTuple):
    hits: list[BudgetHit]  # empty: send it
    cap: int | None  # its max_output_tokens (None: no token or cost budget applies)
    by_reservations: bool  # refused only because of requests in flight: wait


def active(cfg: HolonConfig, home: HomeLayout, store: AgentStore | None = None) -> bool:
    """Whether anything bounds spend: a budget in config, a run's bound, or
    (for ``store``'s agent) the budgets of the profile it was made from."""
    if sp.configured(cfg):
        return True
    if store is not None and sp.profile_limits(store):
        return True
    import os

    try:
        return bool(os.listdir(home.run_bounds_dir))
    except FileNotFoundError:
        return False


def scopes(
    store: AgentStore,
    cfg: HolonConfig,
    now: float,
    *,
    reservations: list[dict[str, Any]],
    agent_wide: bool = False,
) -> list[Scope]:
    """Every scope that bounds a request of ``store``'s agent."""
    window = sp._window(now)
    home = sp.home_of(store)
    bounds = runs.live_bounds(home) if home.run_bounds_dir.exists() else []
    out: list[Scope] = []
    for i, s in enumerate(sp.lineage(store)):
        lim = sp.limits(cfg, s.agent_id)
        prof: tuple[str, frozenset[str]] | None = None
        own = sp.profile_limits(s) if i == 0 else {}
        if own:  # a profile's budgets only tighten the configured ones
            lim = sp.tightened(lim, own)
            path = str((s.read_record()["identity"].get("profile") or {}).get("path") or "")
            prof = (path, frozenset(k for k, v in own.items() if lim.get(k) == v))
        if i or agent_wide:
            lim.pop("tokens_per_work_item", None)
        res = [r for r in reservations if s.agent_id in (r.get("lineage") or ())]
        own_bounds = [b for b in bounds if b.get("agent_id") == s.agent_id]
        if lim:
            recs = sp._records(s, window)
            out.append(Scope("agent", s.agent_id, lim, recs, res, s, None, prof))
        for b in own_bounds:
            since = float(b.get("at") or 0)
            recs = [r for r in sp._records(s, since) if float(r.get("ts", 0)) >= since]
            blim: dict[str, float] = {
                k: float(b[k]) for k in ("max_tokens", "max_cost_usd") if k in b
            }
            out.append(Scope("run", s.agent_id, blim, recs, res, s, str(b.get("run_id"))))
    hlim = sp.home_limits(cfg)
    if hlim:
        hlim.pop("tokens_per_work_item", None)
        records = sp.records_of(sp.home_ledger(home), window)
        out.append(Scope("home", "home", hlim, records, list(reservations), None))
    return out


def _resets(name: str, use_resets: str | None, kind: str) -> str | None:
    return None if kind == "run" else use_resets


def _budget_name(name: str) -> BudgetName | None:
    from holon_cli.model.budget import BUDGET_NAMES, RUN_BUDGET_NAMES

    for known in (*BUDGET_NAMES, *RUN_BUDGET_NAMES):
        if name == known:
            return known
    return None


def evaluate(
    scope: Scope, req: Request, now: float, *, count_reserved: bool = True
) -> tuple[list[BudgetHit], list[int]]:
    """The budgets of ``scope`` the request would pass, and the output each
    of the others leaves it."""
    reserved = scope.reserved if count_reserved else []
    r_tokens = sum(int(r.get("tokens") or 0) for r in reserved)
    r_cost = sum(float(r.get("cost_usd") or 0) for r in reserved)
    r_turns = sum(1 for r in reserved if r.get("new_turn"))
    hits: list[BudgetHit] = []
    caps: list[int] = []
    for name, limit in scope.limits.items():
        n = _budget_name(name)
        if n is None:
            continue  # a key no budget reads (config checks them all)
        if name == "turns_per_hour":
            use = sp.use_of(n, limit, scope.records, now)
            if req.new_turn and use["used"] + r_turns >= limit:
                hits.append(_hit(scope, req, n, limit, use["used"], use["resets_at"], r_turns, 1))
            continue
        if name == "tokens_per_work_item":
            if not req.work_item_id or scope.store is None:
                continue
            used = float(sp.work_item_tokens(scope.store, req.work_item_id))
            resets, rsv = None, 0.0  # one agent's turns never run at once
        elif name in ("max_tokens", "max_cost_usd"):
            field = "cost_usd" if name == "max_cost_usd" else None
            used = (
                round(sum(float(r.get("cost_usd", 0)) for r in scope.records), 9)
                if field
                else float(sum(sp.tokens_of(r) for r in scope.records))
            )
            resets, rsv = None, (r_cost if field else float(r_tokens))
        elif name in ("tokens_per_day", "cost_usd_per_day"):
            use = sp.use_of(n, limit, scope.records, now)
            used, resets = float(use["used"]), use["resets_at"]
            rsv = r_cost if name == "cost_usd_per_day" else float(r_tokens)
        else:
            continue
        left = limit - used - rsv
        if name in _COSTS:
            need = req.est_in * req.price_in + MIN_OUTPUT * req.price_out
            if used >= limit or left < need - 1e-12:
                hits.append(_hit(scope, req, n, limit, used, resets, rsv, need))
            elif req.price_out > 0:
                caps.append(int((left - req.est_in * req.price_in) / req.price_out))
        else:
            need = float(req.est_in + MIN_OUTPUT)
            if used >= limit or left < need:
                hits.append(_hit(scope, req, n, limit, used, resets, rsv, need))
            else:
                caps.append(int(left - req.est_in))
    return hits, caps


def _hit(
    scope: Scope,
    req: Request,
    name: BudgetName,
    limit: float,
    used: float,
    resets_at: str | None,
    reserved: float,
    needed: float,
) -> BudgetHit:
    hit: BudgetHit = {
        "budget": name,
        "agent_id": req.agent_id if scope.kind == "home" else scope.owner,
        "limit": limit,
        "used": round(used, 9),
        "resets_at": None if limit <= 0 else _resets(name, resets_at, scope.kind),
        "scope": scope.kind,
        "needed": round(needed, 9),
    }
    if reserved:
        hit["reserved"] = round(reserved, 9)
    if name == "tokens_per_work_item":
        hit["work_item_id"] = req.work_item_id
    if scope.run_id:
        hit["run_id"] = scope.run_id
    if scope.profile is not None and name in scope.profile[1]:
        hit["profile"] = scope.profile[0]
    return hit


def decide(all_scopes: list[Scope], req: Request, now: float, max_output: int | None) -> Decision:
    hits: list[BudgetHit] = []
    caps: list[int] = []
    for sc in all_scopes:
        h, c = evaluate(sc, req, now)
        hits.extend(h)
        caps.extend(c)
    if hits:
        bare = [h for sc in all_scopes for h in evaluate(sc, req, now, count_reserved=False)[0]]
        return Decision(hits, None, not bare)
    if not caps:
        return Decision([], None, False)
    return Decision([], max(MIN_OUTPUT, min(caps + [max_output or DEFAULT_OUTPUT_RESERVE])), False)


# ------------------------------------------------------------- holds


def _previous(store: AgentStore, cfg: HolonConfig) -> tuple[int, float, float]:
    """The estimate of an agent's next request when nothing better is known:
    its previous request's input tokens, at that request's model's prices."""
    last = store.ledger(sp.LEDGER).last() if store.layout.ledger_path(sp.LEDGER).exists() else None
    if not last:
        return 0, 0.0, 0.0
    pin, pout = sp.prices(cfg, last.get("model_ref"))
    return int(last.get("input_tokens") or 0), pin, pout


def check(
    store: AgentStore,
    cfg: HolonConfig,
    *,
    turn_id: str | None,
    work_item_id: str | None,
    agent_wide: bool = False,
) -> BudgetHit | None:
    """The budget the next provider request of ``turn_id`` (``None``: a new
    turn) would pass, or ``None`` to send it (requests in flight aside:
    their reservations are :func:`reserve.admit`'s). ``agent_wide`` leaves
    out the work-item budget (the question "may this agent start anything?")."""
    hits = _hits(store, cfg, turn_id=turn_id, work_item_id=work_item_id, agent_wide=agent_wide)
    return hits[0] if hits else None


def _hits(
    store: AgentStore,
    cfg: HolonConfig,
    *,
    turn_id: str | None,
    work_item_id: str | None,
    agent_wide: bool,
) -> list[BudgetHit]:
    home = sp.home_of(store)
    if not active(cfg, home, store):
        return []
    now = clock.now()
    all_scopes = scopes(store, cfg, now, reservations=[], agent_wide=agent_wide)
    if not all_scopes:
        return []
    est, pin, pout = _previous(store, cfg)
    new_turn = turn_id is None or not any(
        r.get("turn_id") == turn_id and r.get("agent_id") == store.agent_id
        for r in all_scopes[0].records
    )
    req = Request(store.agent_id, est, pin, pout, new_turn, work_item_id)
    out: list[BudgetHit] = []
    for sc in all_scopes:
        out.extend(evaluate(sc, req, now)[0])
    return out


def exhausted(
    store: AgentStore, cfg: HolonConfig, work_item_id: str | None = None
) -> BudgetHit | None:
    """The budget that holds this agent back: its last turn closed
    ``budget_exhausted`` (the operator has been told) and a budget is still
    spent. For tick and serve: no activation (of ``work_item_id``, when
    given), no new turn; the agent wakes at ``resets_at``."""
    closure = store.read_record()["state"].get("last_closure")
    if not closure or closure.get("waiting_reason") != WAITING_REASON:
        return None
    return check(
        store, cfg, turn_id=None, work_item_id=work_item_id, agent_wide=work_item_id is None
    )


def holds(store: AgentStore, cfg: HolonConfig) -> list[BudgetHold]:
    """Every budget holding the agent back now, each with its reason and
    when it resets (for ``holon status`` holds, ``home audit``, ``enqueue
    --wait``): empty unless its last turn was stopped by a budget that is
    still spent (as :func:`exhausted`)."""
    closure = store.read_record()["state"].get("last_closure")
    if not closure or closure.get("waiting_reason") != WAITING_REASON:
        return []
    hits = _hits(store, cfg, turn_id=None, work_item_id=None, agent_wide=True)
    out: list[BudgetHold] = []
    for h in hits:
        out.append(
            {
                "kind": "budget",
                "budget": h["budget"],
                "scope": h.get("scope", "agent"),
                "owner": "home" if h.get("scope") == "home" else h["agent_id"],
                "reason": reason_text(h, store.agent_id),
                "until": h["resets_at"],
                "limit": h["limit"],
                "used": h["used"],
            }
        )
    return out


def wake_at(store: AgentStore, cfg: HolonConfig) -> float | None:
    """When an agent held by a budget should be looked at again."""
    hit = exhausted(store, cfg)
    return clock.parse_iso(hit["resets_at"]) if hit and hit["resets_at"] else None


# ------------------------------------------------------------- words


def _amount(name: str, value: float) -> str:
    return f"${value:.6g}" if name in _COSTS else f"{value:g}"


def key_of(hit: BudgetHit) -> str:
    """The config key (or flag) that sets the budget of ``hit``."""
    name, scope = hit["budget"], hit.get("scope", "agent")
    if scope == "home":
        return f"budgets.home.{name}"
    if scope == "run":
        return "--max-tokens" if name == "max_tokens" else "--max-cost"
    if hit.get("profile"):
        return f"budgets.{name} in its profile {hit['profile']}"
    return f"agents.{hit['agent_id']}.budgets.{name} or budgets.{name}"


def reason_text(hit: BudgetHit, agent_id: str) -> str:
    """One sentence: which budget, how far it is spent, what the next request needs."""
    name, scope = hit["budget"], hit.get("scope", "agent")
    if scope == "home":
        what = f"the home's budget {name} (all agents together)"
    elif scope == "run":
        flag = key_of(hit)
        what = f"the run's {flag} bound" + (
            "" if hit["agent_id"] == agent_id else f" (set on {hit['agent_id']})"
        )
    else:
        whose = "" if hit["agent_id"] == agent_id else f" of its ancestor {hit['agent_id']}"
        what = f"budget {name}{whose}"
    used = f"{_amount(name, hit['used'])} used of {_amount(name, hit['limit'])}"
    if name == "tokens_per_work_item":
        used += f" on work item {hit.get('work_item_id')}"
    if hit["used"] >= hit["limit"]:
        return f"{what} is exhausted: {used}"
    extra = (
        f", {_amount(name, hit['reserved'])} held by requests in flight"
        if hit.get("reserved")
        else ""
    )
    needed = hit.get("needed")
    need = f" (about {_amount(name, needed)})" if needed and name != "turns_per_hour" else ""
    return f"{what} would be passed by the next request{need}: {used}{extra}"


def brief_text(hit: BudgetHit, agent_id: str) -> str:
    """The ``action_required`` brief of a turn stopped by a budget."""
    name, scope = hit["budget"], hit.get("scope", "agent")
    if hit["resets_at"]:
        when = f"It resets at {hit['resets_at']}; no provider request is sent until then"
    elif scope == "run":
        when = "It bounds this run only; no provider request is sent while the run lasts"
    elif name == "tokens_per_work_item":
        when = (
            "It does not reset; no provider request is sent while this work item is "
            "current (`holon workitem pick` another one, or complete it)"
        )
    else:
        when = "It does not reset (a limit of 0); no provider request is sent"
    if scope == "run":
        raise_it = f"start the run again with a higher {key_of(hit)}"
    elif hit.get("profile"):
        raise_it = f"raise {key_of(hit)}"
    else:
        raise_it = f"raise {key_of(hit)} in config.yaml"
    return (
        f"Stopped before a provider request: {reason_text(hit, agent_id)}. "
        f"{when}, unless you {raise_it}."
    )


class BudgetStop(Exception):
    """Raised before a provider request a budget refuses (the turn closes
    ``waiting``/``budget_exhausted``); never leaves the turn loop."""

    def __init__(self, hit: BudgetHit) -> None:
        super().__init__(hit["budget"])
        self.hit = hit
