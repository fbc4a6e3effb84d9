"""The spend plane: what each agent spent, and the budgets that bound it.

Spend is one ledger per agent, ``.holon/ledger/spend.jsonl``: one record per
provider round (:func:`record_spend`), appended to the ledger of the agent
that sent the request *and* of every ancestor on its lineage chain
(``identity.lineage_parent_agent_id``). A parent's ledger therefore holds
what its whole subtree spent: removing a child loses none of it, and a
restart or a crash resets nothing (the ledgers are the truth; nothing is
cached in memory or in a snapshot).

Budgets (``config.yaml`` ``budgets``, over which ``agents.<id>.budgets``
sets keys of its own) are checked before every provider request
(:func:`check`), against the agent's ledger and each ancestor's ledger
with that ancestor's budgets:

- ``tokens_per_day`` / ``cost_usd_per_day``: input + output tokens / USD
  (priced by ``prices.<model ref>``) since 00:00 UTC; they reset at the next
  00:00 UTC.
- ``turns_per_hour``: turns that sent a request in the last 60 minutes
  (rolling); only a request that would start a new turn is refused.
- ``tokens_per_work_item``: tokens spent on the current work item, ever; it
  does not reset (the operator raises it, or the work moves on). Its totals
  are folded into ``state/spend_by_work_item.json`` (:func:`work_item_tokens`).

Day and hour budgets read the ledger back from its end only as far as they
look, so a long history does not slow the check before each request.

A request is refused when what is spent already reaches the limit, or when
spent + the size of the agent's previous request would pass it (the
estimate of the next request; the provider reports a request's size only
after it is sent). So a budget is not passed by one request of the usual
size; a request much larger than the one before can still end above it.

Runtime steps never print; nothing here holds a lock beyond a ledger append.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.errors import UsageError
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import AgentLayout, validate_agent_id
from holon_cli.store.ledger import Ledger
from holon_cli.store.records import ledger_validator

if TYPE_CHECKING:
    from holon_cli.errors import ConfigError
    from holon_cli.model.budget import BudgetHit, BudgetName, BudgetUse, SpendRecord

DAY_S = 86400.0
HOUR_S = 3600.0
LEDGER = "spend"
SPEND_VERSION = 1
TAIL_STEP = 256  # records read from the end at a time
FOLD_FILE = "spend_by_work_item.json"
FOLD_EVERY = 64  # new records that make a check write the fold again
MAX_LINEAGE = 32  # a cycle in hand-edited records must not loop forever
WAITING_REASON = "budget_exhausted"
_TOKEN_BUDGETS = ("tokens_per_day", "tokens_per_work_item")


# ------------------------------------------------------------------ config


def limits(cfg: dict[str, Any], agent_id: str) -> dict[str, float]:
    """The agent's budgets: ``agents.<id>.budgets`` key by key over ``budgets``."""
    out = {k: v for k, v in (cfg.get("budgets") or {}).items() if v is not None}
    own = ((cfg.get("agents") or {}).get(agent_id) or {}).get("budgets") or {}
    out.update({k: v for k, v in own.items() if v is not None})
    return out


def configured(cfg: dict[str, Any]) -> bool:
    """Whether any budget is set anywhere (no ledger is read otherwise)."""
    if any(v is not None for v in (cfg.get("budgets") or {}).values()):
        return True
    return any(
        v is not None
        for sect in (cfg.get("agents") or {}).values()
        for v in ((sect or {}).get("budgets") or {}).values()
    )


def price_error(cfg: dict[str, Any], agent_id: str, models: list[str]) -> ConfigError | None:
    """A cost budget applies to the agent and a model of its chain has no
    price: the error naming ``prices.<ref>``."""
    if limits(cfg, agent_id).get("cost_usd_per_day") is None:
        return None
    from holon_cli.store.config_schema import missing_price

    own = ((cfg.get("agents") or {}).get(agent_id) or {}).get("budgets") or {}
    key = (
        f"agents.{agent_id}.budgets.cost_usd_per_day"
        if own.get("cost_usd_per_day") is not None
        else "budgets.cost_usd_per_day"
    )
    return missing_price(cfg, models, key)


def config_errors(cfg: dict[str, Any]) -> list[ConfigError]:
    """Every agent of the home whose cost budget cannot be kept: a model of
    its chain (``--model`` aside: HOLON_MODEL, config, its override) has no
    price. For ``holon home check`` and ``holon serve`` start-up."""
    if not configured(cfg):
        return []
    from holon_cli.errors import HolonError
    from holon_cli.runtime.agents.lifecycle import agent_ids, open_agent
    from holon_cli.runtime.agents.models import candidates

    out: list[ConfigError] = []
    for aid in agent_ids():
        if limits(cfg, aid).get("cost_usd_per_day") is None:
            continue
        try:
            models = candidates(open_agent(aid, create_default=False).read_record()["state"])
        except HolonError:
            continue  # no model or a damaged agent: reported by their own checks
        err = price_error(cfg, aid, models)
        if err is not None:
            err.message = f"agent {aid}: {err.message}"
            out.append(err)
    return out


def _cost(cfg: dict[str, Any], model_ref: str | None, tin: int, tout: int) -> float:
    price = (cfg.get("prices") or {}).get(model_ref or "") or {}
    return (tin * float(price.get("input", 0)) + tout * float(price.get("output", 0))) / 1e6


# ----------------------------------------------------------------- ledgers


def lineage(store: AgentStore) -> list[AgentStore]:
    """The agent, then its parent, grandparent, ... (ancestors that no longer
    exist end the chain: their spend went with them)."""
    out = [store]
    seen = {store.agent_id}
    cur = store
    while len(out) < MAX_LINEAGE:
        try:
            parent = cur.read_record()["identity"].get("lineage_parent_agent_id")
        except Exception:  # noqa: BLE001 - a damaged ancestor ends the chain
            break
        if not isinstance(parent, str) or not parent or parent in seen:
            break
        try:
            validate_agent_id(parent)
        except UsageError:
            break
        layout = AgentLayout(store.layout.home.parent / parent, parent)
        if not layout.exists:
            break
        cur = AgentStore(layout)
        seen.add(parent)
        out.append(cur)
    return out


class SpendWriter:
    """One turn's spend appends, to the agent's ledger and each ancestor's.

    Each record is written at once (readers, and the check before the next
    request, see it; a killed process loses nothing) and fsync'd once per
    turn, by :meth:`sync` at its settlement: a round's own durable batch
    stays at its three fsyncs (events, transcript, journal)."""

    def __init__(self, store: AgentStore) -> None:
        self.store = store
        self._ledgers: list[Ledger] | None = None

    def _targets(self) -> list[Ledger]:
        if self._ledgers is None:
            self._ledgers = []
            for s in lineage(self.store):
                led = Ledger(
                    s.layout.ledger_path(LEDGER),
                    s.layout.ledger_lock(LEDGER),
                    validate=ledger_validator(LEDGER),
                )
                led.defer_sync = True
                self._ledgers.append(led)
        return self._ledgers

    def record(
        self,
        cfg: dict[str, Any],
        *,
        turn_id: str,
        message_id: str | None,
        work_item_id: str | None,
        model_ref: str | None,
        input_tokens: int,
        output_tokens: int,
        estimated: bool = False,
    ) -> SpendRecord:
        now = clock.now()
        rec: SpendRecord = {
            "v": SPEND_VERSION,
            "at": clock.iso(now),
            "ts": now,
            "agent_id": self.store.agent_id,
            "turn_id": turn_id,
            "message_id": message_id,
            "work_item_id": work_item_id,
            "model_ref": model_ref,
            "input_tokens": int(input_tokens),
            "output_tokens": int(output_tokens),
            "cost_usd": round(_cost(cfg, model_ref, input_tokens, output_tokens), 9),
            "estimated": estimated,
        }
        for led in self._targets():
            led.append(dict(rec))
        return rec

    def sync(self) -> None:
        for led in self._ledgers or ():
            led.sync()


def record_spend(store: AgentStore, cfg: dict[str, Any], **kw: Any) -> SpendRecord:
    """Append one provider round's spend (durable when this returns)."""
    writer = SpendWriter(store)
    rec = writer.record(cfg, **kw)
    writer.sync()
    return rec


def _records(store: AgentStore, since: float | None = None) -> list[dict[str, Any]]:
    """The agent's spend records; with ``since``, at least those from then on
    (read backwards from the end: a long history costs nothing here)."""
    led = store.ledger(LEDGER)
    if not led.path.exists():
        return []
    if since is None:
        return led.records()
    n = TAIL_STEP
    while True:
        recs = led.tail(n)
        if len(recs) < n or float(recs[0].get("ts", 0)) < since:
            return recs
        n *= 4


def _window(now: float) -> float:
    """How far back the day and hour budgets look."""
    return min(now - now % DAY_S, now - HOUR_S)


def _fold_path(store: AgentStore) -> Path:
    return store.layout.state_dir / FOLD_FILE


def work_item_tokens(store: AgentStore, work_item_id: str) -> int:
    """Tokens the agent's ledger holds for one work item, ever. The totals per
    work item are folded into ``state/spend_by_work_item.json`` (derived
    data: the ledger's inode and the offset folded so far; rebuilt from the
    ledger when missing, damaged, or the ledger was replaced), so a check
    reads only what was appended since the last fold."""
    from holon_cli.store.fsio import read_snapshot, write_snapshot

    led = store.ledger(LEDGER)
    try:
        st = os.stat(led.path)
    except FileNotFoundError:
        return 0
    totals: dict[str, int] = {}
    offset = 0
    try:
        snap = read_snapshot(_fold_path(store))
    except Exception:  # noqa: BLE001 - derived data: rebuild it
        snap = None
    if snap and snap.get("inode") == st.st_ino and 0 < int(snap.get("offset", 0)) <= st.st_size:
        totals, offset = dict(snap.get("totals") or {}), int(snap["offset"])
    new, end = led.read_from(offset)
    for r in new:
        wid = r.get("work_item_id")
        if wid:
            totals[wid] = totals.get(wid, 0) + _tokens(r)
    if len(new) >= FOLD_EVERY:
        write_snapshot(
            _fold_path(store), {"v": 1, "inode": st.st_ino, "offset": end, "totals": totals}
        )
    return totals.get(work_item_id, 0)


def _tokens(r: dict[str, Any]) -> int:
    return int(r.get("input_tokens", 0)) + int(r.get("output_tokens", 0))


# ------------------------------------------------------------------- usage


def _turn_starts(records: list[dict[str, Any]], since: float) -> dict[tuple[str, str], float]:
    starts: dict[tuple[str, str], float] = {}
    for r in records:
        key = (str(r.get("agent_id")), str(r.get("turn_id")))
        if key not in starts:
            starts[key] = float(r.get("ts", 0))
    return {k: t for k, t in starts.items() if t > since}


def use_of(
    name: BudgetName,
    limit: float,
    records: list[dict[str, Any]],
    now: float,
    work_item_id: str | None = None,
    work_item_used: int = 0,
) -> BudgetUse:
    """What ``records`` (the day and hour budgets) or ``work_item_used`` (the
    work-item budget) spent of one budget, and when that budget resets (a
    limit of 0 never does: only raising it lets a request through)."""
    use = _use_of(name, limit, records, now, work_item_id, work_item_used)
    if limit <= 0:
        use["resets_at"] = None
    return use


def _use_of(
    name: BudgetName,
    limit: float,
    records: list[dict[str, Any]],
    now: float,
    work_item_id: str | None,
    work_item_used: int,
) -> BudgetUse:
    if name == "turns_per_hour":
        firsts = sorted(_turn_starts(records, now - HOUR_S).values())
        used = len(firsts)
        # when spent, the window frees a turn once the (used - limit + 1)th
        # oldest turn leaves it; otherwise report when the oldest one does
        at = firsts[used - int(limit)] if 1 <= limit <= used else (firsts[0] if firsts else None)
        return {"limit": limit, "used": used, "resets_at": clock.iso(at + HOUR_S) if at else None}
    if name == "tokens_per_work_item":
        used_wi = work_item_used if work_item_id else 0
        return {"limit": limit, "used": used_wi, "resets_at": None, "work_item_id": work_item_id}
    day = now - now % DAY_S  # POSIX time has no leap seconds: days are exact
    today = [r for r in records if float(r.get("ts", 0)) >= day]
    if name == "cost_usd_per_day":
        used_c = round(sum(float(r.get("cost_usd", 0)) for r in today), 9)
        return {"limit": limit, "used": used_c, "resets_at": clock.iso(day + DAY_S)}
    return {
        "limit": limit,
        "used": sum(_tokens(r) for r in today),
        "resets_at": clock.iso(day + DAY_S),
    }


def status(store: AgentStore, cfg: dict[str, Any]) -> dict[str, BudgetUse]:
    """``holon status`` data ``budget``: each budget set for the agent."""
    from holon_cli.model.budget import BUDGET_NAMES

    lim = limits(cfg, store.agent_id)
    if not lim:
        return {}
    now = clock.now()
    records = _records(store, _window(now))
    wid = store.read_record()["state"].get("current_work_item_id")
    wi_used = work_item_tokens(store, wid) if wid and "tokens_per_work_item" in lim else 0
    return {n: use_of(n, lim[n], records, now, wid, wi_used) for n in BUDGET_NAMES if n in lim}


def spent_today(store: AgentStore) -> dict[str, Any]:
    """What the agent (its subtree included: children's rounds are in its
    ledger too) spent since 00:00 UTC: ``requests``, ``input_tokens``,
    ``output_tokens``, ``cost_usd`` (priced by ``prices`` when the round was
    recorded; 0 without prices). Read backwards from the ledger's end."""
    now = clock.now()
    day = now - now % DAY_S
    today = [r for r in _records(store, day) if float(r.get("ts", 0)) >= day]
    return {
        "requests": len(today),
        "input_tokens": sum(int(r.get("input_tokens", 0)) for r in today),
        "output_tokens": sum(int(r.get("output_tokens", 0)) for r in today),
        "cost_usd": round(sum(float(r.get("cost_usd", 0)) for r in today), 9),
    }


# ------------------------------------------------------------------- check


def _next_request(records: list[dict[str, Any]], agent_id: str) -> tuple[int, float]:
    """The estimate of the next request: the agent's previous one."""
    for r in reversed(records):
        if r.get("agent_id") == agent_id:
            return _tokens(r), float(r.get("cost_usd", 0))
    return 0, 0.0


def _hit_of(
    name: BudgetName,
    use: BudgetUse,
    est: float,
    *,
    new_turn: bool,
) -> bool:
    if name == "turns_per_hour":
        return new_turn and use["used"] >= use["limit"]
    if name == "tokens_per_work_item" and not use.get("work_item_id"):
        return False
    return use["used"] >= use["limit"] or use["used"] + est > use["limit"]


def check(
    store: AgentStore,
    cfg: dict[str, Any],
    *,
    turn_id: str | None,
    work_item_id: str | None,
    agent_wide: bool = False,
) -> BudgetHit | None:
    """The budget the next provider request of ``turn_id`` (``None``: a new
    turn) would exceed, or ``None`` to send it. ``agent_wide`` leaves out the
    work-item budget (the question "may this agent start anything?")."""
    from holon_cli.model.budget import BUDGET_NAMES

    if not configured(cfg):
        return None
    now = clock.now()
    for i, s in enumerate(lineage(store)):
        lim = limits(cfg, s.agent_id)
        if not lim:
            continue
        records = _records(s, _window(now))
        est_tokens, est_cost = _next_request(records, store.agent_id)
        new_turn = turn_id is None or not any(
            r.get("turn_id") == turn_id and r.get("agent_id") == store.agent_id for r in records
        )
        for name in BUDGET_NAMES:
            if name not in lim or (name == "tokens_per_work_item" and (i or agent_wide)):
                continue
            wi_used = (
                work_item_tokens(s, work_item_id)
                if name == "tokens_per_work_item" and work_item_id
                else 0
            )
            use = use_of(name, lim[name], records, now, work_item_id, wi_used)
            est = est_cost if name == "cost_usd_per_day" else est_tokens
            if _hit_of(name, use, est if name != "turns_per_hour" else 0, new_turn=new_turn):
                hit: BudgetHit = {
                    "budget": name,
                    "agent_id": s.agent_id,
                    "limit": use["limit"],
                    "used": use["used"],
                    "resets_at": use["resets_at"],
                }
                if name == "tokens_per_work_item":
                    hit["work_item_id"] = work_item_id
                return hit
    return None


def exhausted(
    store: AgentStore, cfg: dict[str, Any], work_item_id: str | None = None
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


def wake_at(store: AgentStore, cfg: dict[str, Any]) -> float | None:
    """When an agent held by a budget should be looked at again."""
    hit = exhausted(store, cfg)
    return clock.parse_iso(hit["resets_at"]) if hit and hit["resets_at"] else None


def brief_text(hit: BudgetHit, agent_id: str) -> str:
    """The ``action_required`` brief of a turn stopped by a budget."""
    name = hit["budget"]
    whose = "" if hit["agent_id"] == agent_id else f" of its ancestor {hit['agent_id']}"
    what = f"budget {name}{whose} is exhausted: {hit['used']:g} used of {hit['limit']:g}"
    if name == "tokens_per_work_item":
        what += f" on work item {hit.get('work_item_id')}"
    key = f"agents.{hit['agent_id']}.budgets.{name} or budgets.{name}"
    if hit["resets_at"]:
        when = f"It resets at {hit['resets_at']}; no provider request is sent until then"
    elif name == "tokens_per_work_item":
        when = (
            "It does not reset; no provider request is sent while this work item is "
            "current (`holon workitem pick` another one, or complete it)"
        )
    else:
        when = "It does not reset (a limit of 0); no provider request is sent"
    return (
        f"Stopped before a provider request: {what}. {when}, unless you raise {key} in config.yaml."
    )


class BudgetStop(Exception):
    """Raised before a provider request a budget refuses (the turn closes
    ``waiting``/``budget_exhausted``); never leaves the turn loop."""

    def __init__(self, hit: BudgetHit) -> None:
        super().__init__(hit["budget"])
        self.hit = hit


def gate(store: AgentStore, cfg: dict[str, Any], turn_id: str, work_item_id: str | None) -> None:
    """The check before one provider request: raises :class:`BudgetStop`."""
    hit = check(store, cfg, turn_id=turn_id, work_item_id=work_item_id)
    if hit is not None:
        raise BudgetStop(hit)
