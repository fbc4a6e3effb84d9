"""Reservations: concurrent requests cannot pass a budget together.

Before a provider request is sent, :func:`admit` checks it against every
scope that bounds it (``check.py``) counting the requests other turns have
in flight, and reserves what it may take: its input estimate plus its
``max_output_tokens`` (capped to what the tightest budget leaves), at its
model's prices. The check and the reservation happen under one home-wide
lock (``run/locks/budgets.lock``), so three children asking at once see each
other's reservations. After the round, its spend is recorded and the
reservation released (:meth:`Admission.release`): the difference between
what was reserved and what was spent goes back.

A request refused only because of others' reservations waits (polling,
up to :data:`WAIT_S`) for them to be released, instead of stopping its turn:
the budget is not spent, only held.

Waiting is first come, first served (:func:`_ahead`): a request that is not
let through takes a place in line (a held record in ``budgets/waiters/``
naming the budgets it waits on), and a request is let through only when no
request of another round has waited longer on a budget it would spend (a
request that only shares the home's budget with one waiting on its parent's
does not wait for it). Without the line, a child going straight on to its
next turn reserved again before its siblings' next poll and could take most
rounds of a parent's budget while they waited. A place in line goes with
its process like a reservation; after :data:`WAIT_S` a request that fits no
longer defers.

Crash-safe: a reservation is a record held by its process's ``flock``
(``store/held_records.py``); when the process dies, however it dies, the
kernel drops the lock and the next check removes the record. A record older
than :data:`LEASE_S` (longer than any request: provider timeouts are minutes)
is ignored too, so not even a hung process holds one for ever.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.runtime.budgets import check as ck
from holon_cli.runtime.budgets import spend as sp
from holon_cli.store import held_records
from holon_cli.store.held_records import HeldRecord

if TYPE_CHECKING:
    from holon_cli.model.budget import BudgetHit
    from holon_cli.model.config import HolonConfig
    from holon_cli.store.agent_store import AgentStore
    from holon_cli.store.layout import HomeLayout

LEASE_S = 1800.0  # a reservation older than this is dropped whoever holds it
WAIT_S = 600.0  # how long a request waits for others' reservations to go
POLL_S = 0.1


class Admission:
    """A request allowed through: its output cap and its reservation."""

    def __init__(self, record: HeldRecord | None, cap: int | None) -> None:
        self.record = record
        self.cap = cap

    def release(self) -> None:
        if self.record is not None:
            self.record.release()
            self.record = None


def live_reservations(home: HomeLayout, now: float | None = None) -> list[dict[str, Any]]:
    """The reservations of requests in flight (dead owners' are removed);
    call under the budget lock."""
    return held_records.live_records(
        home.reservations_dir, now=clock.now() if now is None else now, lease_s=LEASE_S
    )


def admit(
    store: AgentStore,
    cfg: HolonConfig,
    *,
    round_id: str,
    new_turn: bool,
    work_item_id: str | None,
    est_in: int,
    model_ref: str | None,
    max_output: int | None,
    sleep: Callable[[float], None] = time.sleep,
    wait_s: float = WAIT_S,
) -> Admission:
    """Check one request and reserve what it may spend; raises
    :class:`~holon_cli.runtime.budgets.check.BudgetStop` when a budget
    refuses it. ``round_id``: the turn round it belongs to (an earlier
    attempt of the same round does not count against it)."""
    from holon_cli.store.locks import locked

    home = sp.home_of(store)
    if not ck.active(cfg, home, store):
        return Admission(None, None)
    pin, pout = sp.prices(cfg, model_ref)
    req = ck.Request(store.agent_id, max(0, int(est_in)), pin, pout, new_turn, work_item_id)
    deadline = time.monotonic() + wait_s
    place: HeldRecord | None = None  # this request's place in line, once it waits
    try:
        while True:
            with locked(home.budget_lock, what="the budget check", timeout=60.0):
                now = clock.now()
                others = [r for r in live_reservations(home, now) if r.get("round_id") != round_id]
                scopes = ck.scopes(store, cfg, now, reservations=others)
                if not scopes:
                    return Admission(None, None)
                d = ck.decide(scopes, req, now, max_output)
                waited = time.monotonic() >= deadline
                ahead = set() if waited else _ahead(home, now, place, scope_keys(scopes), round_id)
                if not d.hits and not ahead:
                    out = d.cap or 0
                    data = {
                        "v": 1,
                        "at": now,
                        "round_id": round_id,
                        "agent_id": store.agent_id,
                        "lineage": [s.agent_id for s in sp.lineage(store)],
                        "tokens": req.est_in + out,
                        "cost_usd": round(req.est_in * pin + out * pout, 9),
                        "new_turn": new_turn,
                        "pid": os.getpid(),
                    }
                    rec = held_records.hold(home.reservations_dir, clock.new_id("rsv"), data)
                    return Admission(rec, d.cap)
                if d.hits and (not d.by_reservations or waited):
                    raise ck.BudgetStop(d.hits[0])
                if place is None:  # in line for the budgets it waits on
                    keys = sorted(ahead | {hit_key(h) for h in d.hits})
                    place = _take_place(home, now, store.agent_id, round_id, keys)
            sleep(POLL_S)
    finally:
        if place is not None:
            place.release()


def scope_keys(scopes: list[ck.Scope]) -> list[str]:
    """The budgets a request is checked against, by name: two requests
    compete for a budget when their keys meet."""
    return sorted({f"{s.kind}:{s.run_id if s.kind == 'run' else s.owner}" for s in scopes})


def hit_key(hit: BudgetHit) -> str:
    """The name (:func:`scope_keys`) of the budget that refused a request."""
    kind = hit.get("scope", "agent")
    owner = hit.get("run_id") if kind == "run" else "home" if kind == "home" else hit["agent_id"]
    return f"{kind}:{owner}"


def _take_place(
    home: HomeLayout, now: float, agent_id: str, round_id: str, keys: list[str]
) -> HeldRecord:
    # the id orders the line: clock ids sort by the time they were made
    name = clock.new_id("bwt")
    data = {"v": 1, "at": now, "id": name, "round_id": round_id, "agent_id": agent_id}
    return held_records.hold(home.budget_waiters_dir, name, {**data, "scopes": keys})


def _ahead(
    home: HomeLayout, now: float, place: HeldRecord | None, keys: list[str], round_id: str
) -> set[str]:
    """The budgets among ``keys`` (those this request would spend) that a
    request of another round has waited on longer (its place in line is
    older than ``place``, or this request has none yet); empty: none is
    ahead. Call under the budget lock."""
    mine = str(place.data.get("id")) if place is not None else None
    wanted = set(keys)
    shared: set[str] = set()
    for w in held_records.live_records(home.budget_waiters_dir, now=now, lease_s=WAIT_S + 60):
        theirs = w.get("scopes")
        if w.get("round_id") == round_id or not isinstance(theirs, list):
            continue
        if mine is None or str(w.get("id")) < mine:
            shared |= wanted.intersection(str(k) for k in theirs)
    return shared
