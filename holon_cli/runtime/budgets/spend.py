"""The spend plane: what each agent spent, and the budgets that bound it.

Spend is one ledger per agent, ``.holon/ledger/spend.jsonl``: one record per
provider round (:func:`record_spend`), appended to the ledger of the agent
that sent the request, of every ancestor on its lineage chain
(``identity.lineage_parent_agent_id``) *and* to the home's spend record,
``$HOLON_HOME/budgets/spend.jsonl``. A parent's ledger therefore holds what
its whole subtree spent, and the home's what every agent spent: removing an
agent (a child, a temporary ``holon run`` agent) loses none of it, and a
restart or a crash resets nothing (the ledgers are the truth; nothing is
cached in memory or in a snapshot).

Budgets (``config.yaml`` ``budgets``, over which ``agents.<id>.budgets``
sets keys of its own; ``budgets.home`` bounds the sum over all agents) are
checked before every provider request (``check.py``; ``reserve.py`` adds
the reservations that keep concurrent requests from overshooting together),
against the agent's ledger and each ancestor's ledger with that ancestor's
budgets, and the home's record with ``budgets.home``:

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

This module holds the records and what they add up to; ``check.py`` decides.
Runtime steps never print; nothing here holds a lock beyond a ledger append.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from holon_cli import clock
from holon_cli.errors import UsageError
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import AgentLayout, HomeLayout, validate_agent_id
from holon_cli.store.ledger import Ledger
from holon_cli.store.records import ledger_validator

if TYPE_CHECKING:
    from holon_cli.errors import ConfigError
    from holon_cli.model.budget import BudgetName, BudgetUse, SpendRecord
    from holon_cli.model.config import HolonConfig

DAY_S = 86400.0
HOUR_S = 3600.0
LEDGER: Final = "spend"
SPEND_VERSION = 1
TAIL_STEP = 256  # records read from the end at a time
FOLD_FILE = "spend_by_work_item.json"
FOLD_EVERY = 64  # new records that make a check write the fold again
MAX_LINEAGE = 32  # a cycle in hand-edited records must not loop forever
WAITING_REASON = "budget_exhausted"
HOME_KEY = "home"  # budgets.home: the sum over all agents


# ------------------------------------------------------------------ config


def _numbers(section: Mapping[str, object]) -> dict[str, float]:
    """A budgets section's limits that are set (``home`` is a section, not one)."""
    return {
        k: v
        for k, v in section.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k != HOME_KEY
    }


def limits(cfg: HolonConfig, agent_id: str) -> dict[str, float]:
    """The agent's budgets: ``agents.<id>.budgets`` key by key over ``budgets``."""
    out = _numbers(cfg.get("budgets") or {})
    out.update(_numbers(((cfg.get("agents") or {}).get(agent_id) or {}).get("budgets") or {}))
    return out


def profile_limits(store: AgentStore) -> dict[str, float]:
    """A child made from a profile file: its profile's ``budgets``
    (runtime/agents/profiles.py), which only tighten the configured ones."""
    prof = store.read_record()["identity"].get("profile") or {}
    return {k: v for k, v in (prof.get("budgets") or {}).items() if v is not None}


def tightened(lim: dict[str, float], own: dict[str, float]) -> dict[str, float]:
    """``lim`` with a profile's budgets over it, each the smaller of the two."""
    return {**lim, **{k: min(v, lim[k]) if k in lim else v for k, v in own.items()}}


def home_limits(cfg: HolonConfig) -> dict[str, float]:
    """``budgets.home``: the budgets of the sum over all agents."""
    return _numbers((cfg.get("budgets") or {}).get("home") or {})


def configured(cfg: HolonConfig) -> bool:
    """Whether any budget is set anywhere (no ledger is read otherwise)."""
    if any(v is not None for v in (cfg.get("budgets") or {}).values()):
        return True
    return any(
        v is not None
        for sect in (cfg.get("agents") or {}).values()
        for v in ((sect or {}).get("budgets") or {}).values()
    )


def price_error(cfg: HolonConfig, agent_id: str, models: list[str]) -> ConfigError | None:
    """A cost budget applies to the agent (its own, the default, or
    ``budgets.home``) and a model of its chain has no price: the error
    naming ``prices.<ref>``."""
    from holon_cli.store.config_schema import missing_price

    own = ((cfg.get("agents") or {}).get(agent_id) or {}).get("budgets") or {}
    if own.get("cost_usd_per_day") is not None:
        key = f"agents.{agent_id}.budgets.cost_usd_per_day"
    elif limits(cfg, agent_id).get("cost_usd_per_day") is not None:
        key = "budgets.cost_usd_per_day"
    elif home_limits(cfg).get("cost_usd_per_day") is not None:
        key = "budgets.home.cost_usd_per_day"
    else:
        return None
    return missing_price(cfg, models, key)


def config_errors(cfg: HolonConfig) -> list[ConfigError]:
    """Every agent of the home whose cost budget cannot be kept: a model of
    its chain (``--model`` aside: HOLON_MODEL, config, its override) has no
    price. For ``holon home check`` and ``holon serve`` start-up."""
    if not configured(cfg):
        return []
    from holon_cli.errors import HolonError
    from holon_cli.runtime.agents.lifecycle import agent_ids, open_agent
    from holon_cli.runtime.agents.models import candidates

    home_cost = home_limits(cfg).get("cost_usd_per_day") is not None
    out: list[ConfigError] = []
    for aid in agent_ids():
        if limits(cfg, aid).get("cost_usd_per_day") is None and not home_cost:
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


def prices(cfg: HolonConfig, model_ref: str | None) -> tuple[float, float]:
    """USD per input and per output token of a model (0 when unpriced)."""
    price = (cfg.get("prices") or {}).get(model_ref or "")
    if not price:
        return 0.0, 0.0
    return float(price.get("input", 0)) / 1e6, float(price.get("output", 0)) / 1e6


def _cost(cfg: HolonConfig, model_ref: str | None, tin: int, tout: int) -> float:
    pin, pout = prices(cfg, model_ref)
    return tin * pin + tout * pout


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


def home_of(store: AgentStore) -> HomeLayout:
    """The home an agent store lives in (``<home>/agents/<id>``)."""
    return HomeLayout(store.layout.home.parent.parent)


def home_ledger(home: HomeLayout, *, for_writing: bool = False) -> Ledger[SpendRecord]:
    """The home's spend record: every agent's rounds, kept after an agent is
    removed (``budgets.home`` reads it). ``for_writing``: its folder is made
    (0700) first."""
    if for_writing and not home.budgets_dir.exists():
        from holon_cli.store.held_records import private_dir

        private_dir(home.budgets_dir)
    return Ledger(home.spend_ledger, home.spend_lock, validate=ledger_validator(LEDGER))


class SpendWriter:
    """One turn's spend appends, to the agent's ledger, each ancestor's and
    the home's.

    Each record is written at once (readers, and the check before the next
    request, see it; a killed process loses nothing) and fsync'd once per
    turn, by :meth:`sync` at its settlement: a round's own durable batch
    stays at its three fsyncs (events, transcript, journal)."""

    def __init__(self, store: AgentStore) -> None:
        self.store = store
        self._ledgers: list[Ledger[SpendRecord]] | None = None

    def _targets(self) -> list[Ledger[SpendRecord]]:
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
            home = home_ledger(home_of(self.store), for_writing=True)
            home.defer_sync = True
            self._ledgers.append(home)
        return self._ledgers

    def record(
        self,
        cfg: HolonConfig,
        *,
        turn_id: str,
        message_id: str | None,
        work_item_id: str | None,
        model_ref: str | None,
        input_tokens: int,
        output_tokens: int,
        estimated: bool = False,
        request_est: int | None = None,
        cached_input_tokens: int = 0,
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
        if request_est is not None:
            rec["request_est"] = int(request_est)
        if cached_input_tokens > 0:  # optional (v1): records without a cache keep their shape
            rec["cached_input_tokens"] = int(cached_input_tokens)
        for led in self._targets():
            led.append({**rec})
        return rec

    def sync(self, *, home: bool = True) -> None:
        """The records so far become durable: the agent's and its ancestors'
        ledgers, and the home's when ``home`` (a turn passes whether a
        ``budgets.home`` budget reads it: otherwise the home's copy of a
        record is one the agent's own ledger holds durably, and `holon
        usage` reads both; it is written back by the kernel, and a kill
        loses nothing)."""
        from holon_cli.store.fsio import deferred

        ledgers = self._ledgers or []
        for led in ledgers[:-1]:
            led.sync()
        # the home's record is synced with the agent's own ledger: a temporary
        # `holon run` agent's writes are not fsync'd (fsio's deferred fsyncs;
        # a completed run makes no fsync), and neither is its line in the
        # home's record (in the page cache: a killed process loses nothing)
        if ledgers and home and not deferred(ledgers[0].path):
            ledgers[-1].sync()


def record_spend(store: AgentStore, cfg: HolonConfig, **kw: Any) -> SpendRecord:
    """Append one provider round's spend (durable when this returns)."""
    writer = SpendWriter(store)
    rec = writer.record(cfg, **kw)
    writer.sync()
    return rec


def _records(store: AgentStore, since: float | None = None) -> list[SpendRecord]:
    """The agent's spend records; with ``since``, at least those from then on
    (read backwards from the end: a long history costs nothing here)."""
    return records_of(store.ledger(LEDGER), since)


def records_of(led: Ledger[SpendRecord], since: float | None = None) -> list[SpendRecord]:
    """A spend ledger's records; with ``since``, at least those from then on."""
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


def all_records(home: Path, since: float | None = None) -> list[SpendRecord]:
    """Every provider round's spend record in the home, once each (from
    ``since`` on, when given): each agent's ledger holds its own rounds and
    copies of its descendants', so a removed child's rounds are still found
    in its parent's; copies are the same record and count once. Damaged
    lines are skipped (a report, not a check). For ``holon usage``."""
    from holon_cli.store.layout import HomeLayout

    seen: set[tuple[object, ...]] = set()
    out: list[SpendRecord] = []
    hl = HomeLayout(home)
    try:
        names = sorted(p.name for p in hl.agents_dir.iterdir() if p.is_dir())
    except FileNotFoundError:
        names = []
    # the home's own spend record (``budgets/spend.jsonl``, where a home keeps
    # every agent's rounds, a removed temporary agent's included), when it has
    # one, then each agent's ledger (a home from before it, removed children)
    paths = [hl.spend_ledger]
    paths += [AgentLayout(hl.agents_dir / n, n).ledger_path(LEDGER) for n in names]
    for path in paths:
        if not path.exists():
            continue
        # reading takes no lock: the lock path is never opened
        led = Ledger(path, path.with_suffix(".lock"), validate=ledger_validator(LEDGER))
        records, _damaged = led.records_skipping_damaged()
        for r in records:
            ts = float(r.get("ts", 0))
            if since is not None and ts < since:
                continue
            key = (
                r.get("agent_id"),
                r.get("turn_id"),
                ts,
                r.get("model_ref"),
                r.get("input_tokens"),
                r.get("output_tokens"),
            )
            if key in seen:
                continue
            seen.add(key)
            out.append(r)
    out.sort(key=lambda r: float(r.get("ts", 0)))
    return out


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


def tokens_of(r: SpendRecord) -> int:
    return _tokens(r)


def _tokens(r: SpendRecord) -> int:
    return int(r.get("input_tokens", 0)) + int(r.get("output_tokens", 0))


# ------------------------------------------------------------------- usage


def _turn_starts(records: list[SpendRecord], since: float) -> dict[tuple[str, str], float]:
    starts: dict[tuple[str, str], float] = {}
    for r in records:
        key = (str(r.get("agent_id")), str(r.get("turn_id")))
        if key not in starts:
            starts[key] = float(r.get("ts", 0))
    return {k: t for k, t in starts.items() if t > since}


def use_of(
    name: BudgetName,
    limit: float,
    records: list[SpendRecord],
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
    records: list[SpendRecord],
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


def home_status(cfg: HolonConfig, home: HomeLayout | None = None) -> dict[str, BudgetUse]:
    """Each ``budgets.home`` budget: what all agents spent of it."""
    from holon_cli.model.budget import BUDGET_NAMES

    lim = home_limits(cfg)
    if not lim:
        return {}
    now = clock.now()
    records = records_of(home_ledger(home or HomeLayout.current()), _window(now))
    return {
        n: use_of(n, lim[n], records, now)
        for n in BUDGET_NAMES
        if n in lim and n != "tokens_per_work_item"
    }


def status(store: AgentStore, cfg: HolonConfig) -> dict[str, BudgetUse]:
    """``holon status`` data ``budget``: each budget set for the agent."""
    from holon_cli.model.budget import BUDGET_NAMES

    lim = tightened(limits(cfg, store.agent_id), profile_limits(store))
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
