"""What a scheduling pass needs to know of an agent without ticking it: its
wake index entry (``store/wake.py``), from its files, read-only.

:func:`assess` says whether an agent has work now or in flight (``run``) and
the earliest time a tick could find something (``due``). It errs towards
looking: a pass skips an agent only when ``assess`` found it quiet, nothing
marked it since, and its ``due`` has not come. Used by ``tick --all``
(:func:`tick_all_indexed`), serve's start-up, sweep and deadlines
(``serve/loop.py``), ``home check`` (:func:`findings`) and ``home check
--repair`` (:func:`rebuild`).

What keeps an agent ``run`` (looked at by every pass):
- a turn in flight or left by a killed turn (``awake_running``, a run id);
- anything in its inbox or queue (a paused agent's queued ``resume`` too);
- a pending wake hint;
- a task or child handle not settled (its supervisor or child can end
  without writing anything of this agent's), a child cleanup pending;
- a worktree intent (``workspace/heal.py``);
- runnable work (an activation a tick would queue);
- a child whose parent's handle ended (its tick archives it).

``due``: a sleep's end, a blocked work item's recheck, the next timer, a
budget's reset, the next finished command output to age out.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from holon_cli import clock
from holon_cli.store import wake as W
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig


def agent_deadline(agent: str | AgentStore, cfg: HolonConfig | None = None) -> float | None:
    """The earliest wall-clock time at which a tick could find something for
    this agent: sleep end, work-item recheck, timer, budget reset. Read-only."""
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.budgets.check import active, wake_at
    from holon_cli.runtime.budgets.spend import home_of
    from holon_cli.runtime.waiting import timers
    from holon_cli.store.config import load_config

    store = open_agent(agent, create_default=False) if isinstance(agent, str) else agent
    state = store.read_record()["state"]
    cands: list[float] = []
    until = state.get("sleeping_until")
    if state.get("status") == "asleep" and until:
        cands.append(clock.parse_iso(until))
    for r in wi.load(store).items.values():
        at = r.get("recheck_at")
        if (
            r.get("state") == "open"
            and r.get("blocked_by")
            and isinstance(at, str)
            and not r.get("recheck_consumed_at")
        ):
            cands.append(clock.parse_iso(at))
    cfg = load_config() if cfg is None else cfg
    if active(cfg, home_of(store), store) and (reset := wake_at(store, cfg)) is not None:
        cands.append(reset)  # a budget that stopped a turn resets: look again then
    nd = timers.next_deadline(store)
    if nd:
        cands.append(clock.parse_iso(nd))
    return min(cands) if cands else None


def _tasks_unsettled(store: AgentStore) -> str | None:
    """Why a task or child handle needs the next tick (as ``tick_tasks`` and
    ``sweep_parent`` see them), or None."""
    from holon_cli.model import task as tm
    from holon_cli.runtime.children.supervision import cleanup_pending, is_final
    from holon_cli.runtime.tasks.records import iter_records

    for _d, rec in iter_records(store):
        if tm.is_child_task(rec):
            if not rec.get("promoted"):
                continue
            if not (is_final(rec) and rec.get("result_message_id")):
                return "a child handle is live"
            if cleanup_pending(rec) or not (rec.get("child") or {}).get("child_archived"):
                return "an ended child handle is not cleaned up yet"
        elif not tm.is_terminal(rec.get("status")):
            return "a task is running"
        elif rec.get("promoted") and not (
            rec.get("result_message_id") or rec.get("result_undeliverable")
        ):
            return "a task result is not delivered yet"
    return None


def _child_ended(
    store: AgentStore, identity: Mapping[str, object], state: Mapping[str, object]
) -> bool:
    """A supervised child its own tick would archive (``sweep_child``)."""
    from holon_cli.model.agent import is_supervised_child

    if not is_supervised_child(identity) or state.get("archived_at"):
        return False
    from holon_cli.runtime.children import supervision as sv
    from holon_cli.runtime.tasks.records import read_record_file

    parent, task_id = sv.parent_of(store)
    handle = read_record_file(sv.handle_dir(parent, task_id)) if parent and task_id else {}
    if not handle:
        return True
    return sv.is_final(handle) and bool(handle.get("result_message_id"))


def activation_held(store: AgentStore, signal: dict[str, Any]) -> str | None:
    """Why the work signal is not queued: the no-progress guard holds this
    activation, or a budget that already stopped a turn is still spent."""
    from holon_cli.runtime.budgets import check as budgets
    from holon_cli.runtime.budgets.guard import GUARD_TURNS, activation_key, holds
    from holon_cli.runtime.budgets.spend import home_of

    if holds(store.read_record()["state"], activation_key(signal)):
        return (
            f"no-progress guard: the last {GUARD_TURNS} turns for this activation made no "
            "tool call and changed no work item; a message to the agent lifts it"
        )
    from holon_cli.store.config import load_config

    cfg = load_config()
    if not budgets.active(cfg, home_of(store), store):
        return None
    hit = budgets.exhausted(store, cfg, signal.get("work_item_id"))
    if hit is None:
        return None
    resets = f"it resets at {hit['resets_at']}" if hit["resets_at"] else "it does not reset"
    return f"{budgets.reason_text(hit, store.agent_id)}; {resets}"


def _outputs_due(store: AgentStore, cfg: HolonConfig) -> float | None:
    """When the oldest kept command output ages out (``prune_outputs``)."""
    from holon_cli.runtime.tasks.recovery import prune_due

    return prune_due(store, cfg)


def assess(
    store: AgentStore, cfg: HolonConfig | None = None, *, why: str = ""
) -> tuple[bool, float | None, str]:
    """``(run, due, why)`` of one agent (see the module). Read-only."""
    from holon_cli.runtime import queue as q
    from holon_cli.runtime import workitems as wi
    from holon_cli.store.config import load_config

    rec = store.read_record()
    state = rec["state"]
    status = state["status"]
    if status == "stopped":
        return False, None, why or "stopped"
    pending = store.inbox.pending_count() or q.pending_count(store)
    if status == "paused":  # a queued `resume` control is applied by its tick
        return bool(pending), None, why or "paused"
    if status == "awake_running" or state.get("current_run_id"):
        return True, None, "a turn is running"
    if pending:
        return True, None, "messages are queued"
    if state.get("pending_wake_hint"):
        return True, None, "a wake hint is pending"
    busy = _tasks_unsettled(store)
    if busy:
        return True, None, busy
    try:
        names = os.listdir(HomeLayout.current().worktrees_dir / store.agent_id)
    except (FileNotFoundError, NotADirectoryError):
        names = []
    if any(n.endswith(".intent") for n in names):  # workspace/heal.py
        return True, None, "a worktree is being made or was left half-made"
    if _child_ended(store, rec.get("identity") or {}, state):
        return True, None, "its supervision handle ended"
    cfg = load_config() if cfg is None else cfg
    if status != "asleep":
        signal = wi.activation_signal(store)
        if signal is not None and activation_held(store, signal) is None:
            return True, None, "runnable work"
    due = agent_deadline(store, cfg)
    out_due = _outputs_due(store, cfg)
    if out_due is not None:
        due = out_due if due is None else min(due, out_due)
    return False, due, why or ("asleep" if status == "asleep" else "nothing due")


def entry_of(
    store: AgentStore, at: int, cfg: HolonConfig | None = None, *, why: str = "", acted: bool
) -> W.Entry:
    """The index entry of an agent a pass just looked at (``acted``: the
    pass did something: look again next time, its effects are checked then)."""
    try:
        run, due, reason = assess(store, cfg, why=why)
    except Exception:  # noqa: BLE001 - a damaged agent: always looked at (tick reports it)
        return W.Entry(at, None, True, "could not be assessed")
    return W.Entry(at, due, run or acted, reason)


# ------------------------------------------------------------ tick --all


def tick_all_indexed(
    tick_one: Callable[[str], dict[str, Any]],
    *,
    on_skip: Callable[[str, dict[str, Any]], dict[str, Any]],
) -> list[dict[str, Any]]:
    """``holon tick --all`` through the wake index: agents that are marked,
    ``run``, due or unknown are ticked (``tick_one``), claimed first; the
    others get ``on_skip`` (their last idle reason). Then each ticked agent's
    entry goes into ``wake.json`` and its claims are released."""
    from holon_cli.runtime.agents.lifecycle import agent_ids
    from holon_cli.store.config import load_config

    home = HomeLayout.current()
    root = home.root
    valid = W.Validity.now(root)  # before anything is read
    entries = W.load(root, valid)
    full = entries is None
    entries = entries or {}
    marks = W.marked(root)
    now = clock.now()
    ids = agent_ids()
    out: list[dict[str, Any]] = []
    updates: dict[str, W.Entry] = {}
    stale: list[str] = []
    try:
        cfg: HolonConfig | None = load_config()
    except Exception:  # noqa: BLE001 - each tick reports a bad config its own way
        cfg = None
    for aid in ids:
        raw = entries.get(aid)
        if aid not in marks and W.quiet(raw, now):
            out.append(on_skip(aid, raw or {}))
            continue
        at = time.monotonic_ns()
        c = W.claim(root, aid)
        stale.extend(marks.get(aid, ()))
        if c.path is not None:
            stale.append(os.path.basename(c.path))
        agent_dir = home.agents_dir / aid
        with W.holding([agent_dir]):
            r = tick_one(aid)
            out.append(r)
            if r.get("ok") is False:
                updates[aid] = W.Entry(at, None, True, "could not be ticked")
                continue
            try:
                store = AgentStore(home.agent(aid))
                updates[aid] = entry_of(
                    store,
                    at,
                    cfg,
                    why=str(r.get("idle_reason") or r.get("skipped") or ""),
                    acted=bool(r.get("actions")),
                )
            except Exception:  # noqa: BLE001 - looked at again next time
                updates[aid] = W.Entry(at, None, True, "could not be assessed")
    gone = set(entries) - set(ids)
    if updates or gone or full:
        if W.merge(root, updates, valid, agents=ids, full=full):
            W.release(root, stale)
    for aid in set(marks) - set(ids):  # markers of removed agents
        W.release(root, marks[aid])
        _drop_marker(root, aid)
    return out


def _drop_marker(root: Any, aid: str) -> None:
    try:
        os.unlink(f"{W.wake_dir(root)}/{aid}")
    except FileNotFoundError:
        pass


# ------------------------------------------------------------ check / repair


def expected(ids: Iterable[str], cfg: HolonConfig | None = None) -> dict[str, W.Entry]:
    """Fresh entries of these agents from their files (``at``: now)."""
    home = HomeLayout.current()
    at = time.monotonic_ns()
    out: dict[str, W.Entry] = {}
    for aid in ids:
        store = AgentStore(home.agent(aid))
        out[aid] = entry_of(store, at, cfg, acted=False)
    return out


def findings(home: HomeLayout) -> list[Any]:
    """``home check``: entries that would let a pass skip an agent that has
    work, or sleep past its deadline (stale-late: lost wakes). An index in
    doubt is no finding (the next pass looks at every agent); nor is an
    entry that only makes a pass look too early."""
    from holon_cli.runtime.agents.lifecycle import agent_ids
    from holon_cli.store.ledger_lines import Problem

    root = home.root
    try:
        raw = W.read_raw(root)
    except (OSError, ValueError) as exc:
        return [
            Problem(
                str(W.snapshot_path(root)),
                None,
                f"the wake index is damaged ({exc}); `holon home check --repair` rebuilds it",
            )
        ]
    entries = W.load(root, W.Validity.now(root))
    if raw is None or entries is None:
        return []
    marks = W.marked(root)
    now = clock.now()
    quiet = [a for a in agent_ids() if a not in marks and W.quiet(entries.get(a), now)]
    want = expected(quiet)
    out = []
    for aid in quiet:
        have, fresh = W.entry(entries[aid]), want[aid]
        assert have is not None  # quiet() checked it
        late = fresh.run or (
            fresh.due is not None and (have.due is None or have.due > fresh.due + 1e-3)
        )
        if late:
            what = fresh.why if fresh.run else f"a deadline at {clock.iso(fresh.due or 0)}"
            out.append(
                Problem(
                    str(W.snapshot_path(root)),
                    None,
                    f"the wake index would let `tick --all` and serve skip agent {aid!r} "
                    f"({what}); `holon home check --repair` rebuilds the index",
                )
            )
    return out


class Rebuilt(TypedDict):
    """What ``rebuild`` did to the wake index (a ``home check --repair`` action)."""

    path: str
    action: str
    detail: str


def rebuild(home: HomeLayout) -> Rebuilt | None:
    """``home check --repair``: the index computed afresh from every agent's
    files (what a full pass would find, without ticking); markers left by
    dead passes are removed. Returns what was done, or None when the index
    was sound (no finding) and is left alone."""
    from holon_cli.runtime.agents.lifecycle import agent_ids

    if not findings(home):
        return None
    root = home.root
    valid = W.Validity.now(root)
    ids = agent_ids()
    marks = W.marked(root)
    fresh = expected(ids)
    W.drop(root)
    written = W.merge(root, fresh, valid, agents=ids, full=True)
    if written:
        W.release(root, [n for names in marks.values() for n in names])
    return {
        "path": str(W.snapshot_path(root)),
        "action": "rebuilt",
        "detail": f"the wake index, from {len(ids)} agent(s)' files",
    }
