"""``holon home audit``: a read-only liveness audit of the whole home.

Three properties, checked per agent from its ledgers and state files only:

1. **Every admitted message has exactly one recorded outcome or is still
   queued.** The outcome of a message is its final status record
   (``processed`` or ``aborted``) in the ``queue`` ledger. An admission (the
   first ``admitted`` record, or an operator's ``requeued`` one) with no final
   status must still be unfinished in the queue state (``state/queue.json``
   plus the ledger tail); one with two or more is a duplicate outcome.
   Messages delivered to the inbox but not ingested yet count as queued. A
   message taken by a turn that is no longer running (killed) is an
   ``interrupted_turn``: the next ``holon turn --agent A`` (or ``serve``)
   replays it, but ``holon turn --all`` only looks for queued messages, so a
   cron-driven agent would hold it forever. Whether a turn runs is read from
   ``/proc/locks`` (the turn lock's inode), so the audit takes no lock.
2. **Every agent with runnable work has a future wake.** Runnable work is a
   work item the scheduler would act on (the current item when runnable, a
   triggered blocked item, a queued runnable item). A future wake is one of:
   a queued (or in-flight) message, an active timer or a sleep deadline, a
   pending work-item recheck, a pending wake hint, a running command task, a
   running turn, or, for an awake agent, the activation the next ``tick``
   makes (a work signal not held back). An agent holding runnable work with
   none of these never runs again by itself: a finding.
3. **A held agent with runnable work is a finding of its own** (``held``):
   queued messages or runnable work items waiting on a hold
   (:mod:`holon_cli.runtime.agents.holds`: stopped or paused by the operator, a
   budget, the no-progress guard), named with its reason and until when.
   ``holon home audit --allow-held`` lists these without failing.

Nothing here takes a lock or writes a file: the readers are the same
snapshot-plus-ledger-tail folds ``status`` uses, so a busy agent is audited
as it was a moment ago, and a daemon keeps running meanwhile. A damaged agent
(an unreadable record, a ledger damaged in the middle) is a ``damaged``
finding naming the file, never a crash; the other agents are still audited.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal, TypedDict

from holon_cli.model.agent import HELD_STATUSES
from holon_cli.model.envelope import is_admitted, is_status
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState
    from holon_cli.model.config import HolonConfig
    from holon_cli.runtime.queue import QueueState

FindingKind = Literal[
    "damaged",
    "missing_outcome",
    "duplicate_outcome",
    "interrupted_turn",
    "no_future_wake",
    "cleanup_pending",
    "held",
]
FINDING_KINDS: tuple[FindingKind, ...] = (
    "damaged",
    "missing_outcome",
    "duplicate_outcome",
    "interrupted_turn",
    "no_future_wake",
    "cleanup_pending",
    "held",
)


class AuditFinding(TypedDict):
    agent_id: str
    kind: FindingKind
    detail: str


class AuditReport(TypedDict):
    home: str
    ok: bool
    agents: int
    messages: int
    findings: list[AuditFinding]


class _Counts:
    """What the queue ledger says about each admission: its final statuses."""

    __slots__ = ("outcomes", "statuses")

    def __init__(self) -> None:
        self.outcomes: dict[str, int] = {}  # message id -> final statuses of its admission
        self.statuses: dict[str, list[str]] = {}

    def admitted(self, mid: str, requeued: bool) -> None:
        if requeued or mid not in self.outcomes:
            self.outcomes[mid] = 0
            self.statuses[mid] = []

    def final(self, mid: str, status: str) -> None:
        if mid in self.outcomes:  # an outcome of an admission older than the ledger: not ours
            self.outcomes[mid] += 1
            self.statuses[mid].append(status)


def _scan_queue(store: AgentStore) -> _Counts:
    from holon_cli.runtime.queue import FINAL

    counts = _Counts()
    for _, _, rec in store.ledger("queue").scan(0):
        if is_admitted(rec):
            counts.admitted(rec["message"]["id"], bool(rec.get("requeued")))
        elif is_status(rec) and rec["status"] in FINAL:
            counts.final(rec["message_id"], rec["status"])
    return counts


def _outcome_findings(store: AgentStore, st: QueueState, counts: _Counts) -> list[AuditFinding]:
    aid = store.agent_id
    out: list[AuditFinding] = []
    for mid, n in counts.outcomes.items():
        if n == 0 and mid not in st.entries:
            out.append(
                {
                    "agent_id": aid,
                    "kind": "missing_outcome",
                    "detail": (
                        f"message {mid} was admitted to {store.ledger('queue').path} but has "
                        f"no outcome there and is not queued in {store.layout.queue_file}"
                    ),
                }
            )
        elif n > 1:
            out.append(
                {
                    "agent_id": aid,
                    "kind": "duplicate_outcome",
                    "detail": (
                        f"message {mid} has {n} outcomes ({', '.join(counts.statuses[mid])}) "
                        f"in {store.ledger('queue').path}; exactly one is expected"
                    ),
                }
            )
    return out


def _locked_inodes() -> set[str] | None:
    """``dev:ino`` of every file with a lock held (Linux ``/proc/locks``), or
    ``None`` when that cannot be read (then every turn counts as running)."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    out = set()
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and parts[1] != "->":
            out.add(parts[5])
    return out


def _turn_running(store: AgentStore, locks: set[str] | None) -> bool:
    if locks is None:
        return True
    try:
        st = os.stat(store.layout.turn_lock)
    except FileNotFoundError:
        return False
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}" in locks


def _interrupted(store: AgentStore, st: QueueState) -> list[AuditFinding]:
    """Messages taken by a turn that no longer runs (its process was killed)."""
    in_flight = st.in_flight()
    if not in_flight or _turn_running(store, _locked_inodes()):
        return []
    aid = store.agent_id
    return [
        {
            "agent_id": aid,
            "kind": "interrupted_turn",
            "detail": (
                f"message {e['message_id']} was taken by turn {e.get('turn_id') or '?'}, "
                f"which is no longer running; `holon turn --agent {aid}` (or `holon serve`) "
                "replays it, `holon turn --all` does not look for it"
            ),
        }
        for e in in_flight
    ]


def _runnable_work(store: AgentStore, state: AgentState) -> list[str]:
    """Ids of the work items the scheduler would act on (current runnable,
    triggered blocked, queued runnable)."""
    from holon_cli.model import workitem_readiness as wr
    from holon_cli.runtime import workitems as wi

    idx = wi.load(store)
    if not idx.has_items():
        return []
    cand = wr.classify(
        idx.open_records(),
        current_id=state.get("current_work_item_id"),
        waits=idx.wait_summaries(),
    )
    return [
        r["id"]
        for cls in ("current_runnable", "triggered_blocked", "queued_runnable")
        for r in cand.classes[cls]
    ]


def _future_wake(store: AgentStore, state: AgentState) -> str | None:
    """The first future wake found (its name), or ``None``. Queued messages
    are checked by the caller (it already holds the queue's fold)."""
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.waiting import hints, timers

    if state.get("pending_wake_hint"):
        return "a pending wake hint"
    if state["status"] == "awake_running" and hints.turn_running(state):
        return "a running turn"
    if state["status"] == "asleep" and state.get("sleeping_until"):
        return "the sleep deadline"
    if timers.next_deadline(store):
        return "a timer"
    for r in wi.load(store).open_records():
        if (
            r.get("state") == "open"
            and r.get("blocked_by")
            and r.get("recheck_at")
            and not r.get("recheck_consumed_at")
        ):
            return f"the recheck of {r['id']}"
    from holon_cli.runtime.tasks.recovery import unsettled_tasks

    if unsettled_tasks(store):
        return "a running task"
    if state["status"] != "asleep" and wi.activation_signal(store) is not None:
        return "the next tick's activation"
    return None


def _held_finding(
    store: AgentStore, state: AgentState, queued: int, work: list[str], cfg: HolonConfig | None
) -> AuditFinding | None:
    """A held agent (operator, budget, no-progress guard) with runnable work:
    the work waits for the hold to lift, which the finding names."""
    from holon_cli.runtime.agents.holds import agent_holds, hold_line

    if not queued and not work:
        return None
    holds = agent_holds(store, cfg)
    if queued and not work:
        # queued messages run under the no-progress guard (it holds activations only)
        holds = [h for h in holds if h["kind"] != "no_progress"]
    if not holds:
        return None
    what = []
    if queued:
        what.append(f"{queued} queued message(s)")
    if work:
        what.append(f"runnable work item(s) {', '.join(work[:5])}{' ...' if len(work) > 5 else ''}")
    return {
        "agent_id": store.agent_id,
        "kind": "held",
        "detail": f"{' and '.join(what)} wait: " + "; ".join(hold_line(h) for h in holds),
    }


def _wake_finding(
    store: AgentStore, state: AgentState, st: QueueState, cfg: HolonConfig | None
) -> AuditFinding | None:
    from holon_cli.runtime import queue as q

    queued = q.pending_count(store, st)
    work = _runnable_work(store, state) if not st.in_flight() else []
    held = _held_finding(store, state, queued, work, cfg)
    if held is not None or state["status"] in HELD_STATUSES:
        return held  # the hold is the finding; `agent start` / a reset wakes it
    if st.in_flight() or queued:
        return None
    if not work or _future_wake(store, state) is not None:
        return None
    why = (
        "it is asleep"
        if state["status"] == "asleep"
        else "its continuation is held"
        if state.get("work_continuation_hold")
        else f"it is {state['status']}"
    )
    return {
        "agent_id": store.agent_id,
        "kind": "no_future_wake",
        "detail": (
            f"runnable work item(s) {', '.join(work[:5])}{' ...' if len(work) > 5 else ''} "
            f"but {why} with no queued message, timer, recheck, wake hint, running task "
            f"or tick activation; wake it with `holon enqueue --agent {store.agent_id} ...` "
            f"or `holon timer add --agent {store.agent_id} --after 1m`"
        ),
    }


def audit_agent(
    store: AgentStore, cfg: HolonConfig | None = None
) -> tuple[int, list[AuditFinding]]:
    """One agent: the number of admissions seen and its findings. Raises on
    damage (the caller turns that into a ``damaged`` finding)."""
    from holon_cli.runtime import queue as q

    state = store.read_record()["state"]
    st = q.load(store)
    counts = _scan_queue(store)
    findings = _outcome_findings(store, st, counts) + _interrupted(store, st)
    wake = _wake_finding(store, state, st, cfg)
    if wake is not None:
        findings.append(wake)
    findings += _cleanup_findings(store)
    # delivered to the inbox, not ingested yet: acknowledged, and still queued
    waiting = sum(1 for p in store.inbox.pending() if p.stem not in counts.outcomes)
    return len(counts.outcomes) + waiting, findings


def _cleanup_findings(store: AgentStore) -> list[AuditFinding]:
    """Durable steps a killed process left undone: a child handle's worktree
    cleanup, an isolated worktree a killed
    ``workspace use --isolated`` made (each finished by the next ``tick``,
    ``serve`` pass or ``home check --repair``)."""
    from holon_cli.model.task import is_child_task
    from holon_cli.runtime.children.supervision import cleanup_pending, is_final
    from holon_cli.runtime.tasks.records import iter_records
    from holon_cli.runtime.workspace.heal import leftovers

    out: list[AuditFinding] = []
    then = (
        f"the next `holon tick --agent {store.agent_id}`, `holon serve` pass or "
        "`holon home check --repair` finishes it"
    )
    for _d, rec in iter_records(store):
        if not is_child_task(rec) or not is_final(rec) or not rec.get("result_message_id"):
            continue
        if cleanup_pending(rec):
            wt = dict((rec.get("child") or {}).get("worktree") or {})
            out.append(
                {
                    "agent_id": store.agent_id,
                    "kind": "cleanup_pending",
                    "detail": f"the worktree {wt.get('path')} of ended child task {rec['id']} "
                    f"is not cleaned up (cleanup_status pending); {then}",
                }
            )
    for left in leftovers(HomeLayout.current(), store.agent_id):
        out.append(
            {
                "agent_id": store.agent_id,
                "kind": "cleanup_pending",
                "detail": f"the isolated worktree {left.path} was made by a killed command "
                f"and never bound; {then}",
            }
        )
    return out


def _damaged(aid: str, exc: Exception) -> AuditFinding:
    from holon_cli.errors import as_holon_error

    return {"agent_id": aid, "kind": "damaged", "detail": as_holon_error(exc).message}


def audit_home() -> AuditReport:
    """Audit every agent folder under the home (read-only)."""
    home = HomeLayout.current()
    try:
        names = sorted(
            n
            for n in os.listdir(home.agents_dir)
            if not n.startswith(".") and (home.agents_dir / n).is_dir()
        )
    except FileNotFoundError:
        names = []
    findings: list[AuditFinding] = []
    messages = 0
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        cfg: HolonConfig | None = load_config(home)
    except ConfigError:
        cfg = None  # no budget can be read: `home check` names the config's problem
    for aid in names:
        layout = home.agent(aid)
        if not layout.agent_file.exists():
            findings.append(
                {
                    "agent_id": aid,
                    "kind": "damaged",
                    "detail": f"{layout.agent_file} is missing: the agent's state is lost",
                }
            )
            continue
        try:
            n, found = audit_agent(AgentStore(layout), cfg)
        except Exception as exc:  # noqa: BLE001 - one damaged agent must not hide the others
            findings.append(_damaged(aid, exc))
            continue
        messages += n
        findings.extend(found)
    return {
        "home": str(home.root),
        "ok": not findings,
        "agents": len(names),
        "messages": messages,
        "findings": findings,
    }
