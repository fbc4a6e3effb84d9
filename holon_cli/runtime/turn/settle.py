"""Settling a turn: deciding its ending once (closure, brief, final text:
the settlement saved in the journal), its terminal records (written exactly
once per message, also when a replay finds a settlement saved before a kill)
and the settled turn recorded on the agent (never over an operator's stop or
pause)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.model.agent import HELD_STATUSES
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.briefs import write_brief
from holon_cli.runtime.turn import stats
from holon_cli.runtime.turn.closure import derive_closure
from holon_cli.runtime.turn.journal import Journal
from holon_cli.runtime.turn.recorder import TurnRecorder
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState
    from holon_cli.model.budget import BudgetHit
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.events import TurnTerminalData
    from holon_cli.model.failure import FailureArtifact, LastFailure
    from holon_cli.model.memory import WorkingMemoryState
    from holon_cli.model.tool import SleepRequest
    from holon_cli.model.turn import (
        BriefPlan,
        ClosureDecision,
        SleepRequestDict,
        TurnProgress,
        TurnSettlement,
    )


def decide_settlement(
    store: AgentStore,
    *,
    turn_id: str,
    turn_index: int,
    bound_work_item_id: str | None,
    focus: str | None,
    final_text: str,
    failed: bool,
    failure_artifact: FailureArtifact | None,
    failure_kind: str | None,
    sleep_req: SleepRequest | None,
    wrote_completion_brief: bool,
    turn_skills: dict[str, dict[str, Any]],
    budget_hit: BudgetHit | None = None,
    progress: TurnProgress | None = None,
    abort_reason: str | None = None,
    message_id: str | None = None,
    turn_ids: Collection[str] = (),
) -> TurnSettlement:
    """How the turn ends: the work plane's turn-end commit, the closure, and
    the brief to write (none when the final round completed a work item: its
    ``work_done`` brief already carries this text). A turn a budget stopped
    before a request closes ``waiting``/``budget_exhausted`` with an
    ``action_required`` brief naming the budget; the no-progress streak it
    leaves (and the guard's brief, when it trips) is decided here too. A turn
    that leaves work running in the background (tasks or children
    ``message_id`` started, waits ``turn_ids`` recorded: ``turn/handoff.py``)
    writes an ``ack`` brief instead of its result: "continuing in the
    background", linked to the first task."""
    wi.refresh_all(store)
    # runtime facts of blocking waits come from the task plane; none is known
    # at this layer yet. How the turn ended decides the continuation hold.
    wi.turn_end_commit(
        store,
        bound_work_item_id,
        {
            "turn_status": "aborted" if failed else "completed",
            "failure_kind": failure_kind,
            "turn_id": turn_id,
        },
    )
    sleep: SleepRequestDict | None = (
        {"duration_ms": sleep_req.duration_ms, "reason": sleep_req.reason}
        if sleep_req is not None
        else None
    )
    closure, brief = _closure_and_brief(
        store,
        derive_closure(store, failed=failed, sleep_req=sleep),
        bound_work_item_id=bound_work_item_id,
        focus=focus,
        final_text=final_text,
        failed=failed,
        failure_artifact=failure_artifact,
        wrote_completion_brief=wrote_completion_brief,
        budget_hit=budget_hit,
        abort_reason=abort_reason,
    )
    if brief is not None and brief["kind"] == "result" and budget_hit is None:
        from holon_cli.runtime.turn import handoff

        work = handoff.background_work(store, message_id, turn_ids)
        if work:
            brief = {
                **brief,
                "kind": "ack",
                "text": handoff.ack_text(final_text, work),
                "related_task_id": handoff.first_task_id(work),
            }
    from holon_cli.runtime.budgets import guard

    prev = store.read_record()["state"].get("no_progress")
    streak = guard.next_streak(prev, progress) if progress is not None else prev
    out: TurnSettlement = {
        "turn_id": turn_id,
        "turn_index": turn_index,
        "status": "aborted" if failed else "completed",
        "no_progress": streak,
        "notice": guard.notice(prev, streak),
        "budget": budget_hit.copy() if budget_hit is not None else None,
        "closure": closure,
        "final_text": final_text,
        "brief": brief,
        "failure_artifact": failure_artifact,
        "failure_kind": failure_kind,
        "sleep": sleep,
        "turn_skills": {} if failed else turn_skills,
    }
    if abort_reason is not None:
        out["reason"] = abort_reason
    return out


def _closure_and_brief(
    store: AgentStore,
    closure: ClosureDecision,
    *,
    bound_work_item_id: str | None,
    focus: str | None,
    final_text: str,
    failed: bool,
    failure_artifact: FailureArtifact | None,
    wrote_completion_brief: bool,
    budget_hit: BudgetHit | None,
    abort_reason: str | None,
) -> tuple[ClosureDecision, BriefPlan | None]:
    """The brief the turn leaves, by how it ended (operator abort, budget stop,
    failure, plain result); a budget stop also closes the turn ``waiting``."""
    if abort_reason is not None:
        return closure, {
            "kind": "failure",
            "text": "Turn aborted by the operator (`holon agent abort`); the agent is paused.",
            "visibility": "turn_result",
            "work_item_id": bound_work_item_id,
        }
    if budget_hit is not None and not failed:
        from holon_cli.runtime.budgets.check import WAITING_REASON, brief_text

        text = brief_text(budget_hit, store.agent_id)
        waiting: ClosureDecision = {
            "outcome": "waiting",
            "waiting_reason": WAITING_REASON,
            "runtime_posture": "awake",
        }
        return waiting, {
            "kind": "result",
            "text": f"{final_text}\n\n{text}" if final_text else text,
            "visibility": "action_required",
            "work_item_id": focus,
        }
    if failed:
        fa = failure_artifact or {}
        return closure, {
            "kind": "failure",
            "text": f"Turn failed: {fa.get('summary', 'provider failure')}",
            "visibility": "turn_result",
            "work_item_id": bound_work_item_id,
        }
    if wrote_completion_brief:
        return closure, None
    return closure, {
        "kind": "result",
        "text": final_text,
        "visibility": "action_required"
        if closure.get("waiting_reason") == "awaiting_operator_input"
        else "turn_result",
        "work_item_id": focus,
    }


def _already(store: AgentStore, ledger: str, match: Callable[[Mapping[str, object]], bool]) -> bool:
    return any(match(r) for r in store.ledger(ledger).tail(64))


def write_terminal(
    store: AgentStore,
    msg: Envelope,
    s: TurnSettlement,
    journal: Journal,
    t_cleanup: float,
    t_start: float,
    replaying: bool,
) -> None:
    """The terminal records of a settled turn: the brief, the transcript's
    ``turn_terminal`` and the ``turn_terminal`` event. When ``replaying`` a
    settlement found in the journal, a record already written is not
    written again (exactly once per message under any kill)."""
    tid = s["turn_id"]
    mid = msg["id"]
    rec = TurnRecorder(store, msg, tid)
    brief = s.get("brief")
    if brief and not (
        replaying
        and _already(
            store,
            "briefs",
            lambda r: (
                r.get("turn_id") == tid and r.get("kind") == brief["kind"] and not r.get("title")
            ),
        )
    ):
        write_brief(
            store,
            kind=brief["kind"],
            text=brief["text"],
            visibility=brief["visibility"],
            related_message_id=mid,
            # an ack names the work it handed off; a task-driven turn's brief
            # names the task whose result or status woke it
            related_task_id=brief.get("related_task_id") or msg.get("task_id"),
            turn_id=tid,
            work_item_id=brief.get("work_item_id"),
        )
    notice = s.get("notice")
    if notice and not (
        replaying
        and _already(
            store,
            "briefs",
            lambda r: r.get("turn_id") == tid and r.get("title") == notice.get("title"),
        )
    ):
        write_brief(
            store,
            kind=notice["kind"],
            text=notice["text"],
            visibility=notice["visibility"],
            related_message_id=mid,
            related_task_id=msg.get("task_id"),
            turn_id=tid,
            work_item_id=notice.get("work_item_id"),
            title=notice.get("title"),
        )
    cleanup_ms = round((time.monotonic() - t_cleanup) * 1000, 3)
    if "duration_ms" not in s:
        s["duration_ms"] = int((time.monotonic() - t_start) * 1000)
        s["completed_at"] = clock.now_iso()
    completed_at = s["completed_at"]
    duration_ms = s["duration_ms"]
    is_terminal = lambda r: r.get("kind") == "turn_terminal" and r.get("turn_id") == tid  # noqa: E731
    if not (replaying and _already(store, "transcript", is_terminal)):
        rec.transcript(
            "turn_terminal",
            turn_index=s["turn_index"],
            completed_at=completed_at,
            duration_ms=duration_ms,
            status=s["status"],
            text=s["final_text"],
            closure=s["closure"],
            reason=s.get("reason"),
        )
    if not (replaying and _already(store, "events", is_terminal)):
        terminal: TurnTerminalData = {
            "turn_index": s["turn_index"],
            "status": s["status"],
            "completed_at": completed_at,
            "duration_ms": duration_ms,
            "cleanup_ms": cleanup_ms,
            "last_assistant_message": s["final_text"][:2000],
            "closure": s["closure"],
            "model_rounds": journal.rounds,
            "token_usage": journal.usage,
            "failure_kind": s.get("failure_kind"),
        }
        if s.get("reason"):
            terminal["reason"] = s["reason"]
        rec.event("turn_terminal", terminal)


def _settle_memory(
    store: AgentStore, s: TurnSettlement, completed_at: str
) -> WorkingMemoryState | None:
    """The working memory after this turn (its finalized episodes appended
    first, each once); ``None`` for a settlement without a memory delta."""
    delta = s.get("memory")
    if delta is None:
        return None
    from holon_cli.runtime.memory.working import settle_memory

    return settle_memory(store, delta, completed_at)


def memory_applies(st: AgentState, memory: WorkingMemoryState) -> bool:
    """Not applied yet: the state's last applied turn is not this one."""
    cur = st.get("working_memory")
    return cur is None or cur.get("last_applied_turn_id") != memory["last_applied_turn_id"]


def finish_agent_state(
    store: AgentStore, s: TurnSettlement, journal: Journal, *, sync_dir: bool = True
) -> None:
    """Record the settled turn on the agent. Status moves from running to idle
    or asleep only; an operator's stop or pause made meanwhile holds.
    ``sync_dir=False``: the caller fsyncs ``state/`` (the turn's last batch)."""
    sleep = s.get("sleep")
    completed_at = s.get("completed_at") or clock.now_iso()
    turn_skills: dict[str, dict[str, Any]] = s.get("turn_skills") or {}

    counted = journal.counted
    memory = _settle_memory(store, s, completed_at)

    last_brief = store.ledger("briefs").last()

    def finish(st: AgentState) -> None:
        if not stats.already_counted(st, s["turn_id"]):
            # the turn's successful rounds join the agent's totals once, here
            # (a settle replayed after this update adds nothing again)
            st["total_input_tokens"] = (
                int(st.get("total_input_tokens", 0)) + counted["input_tokens"]
            )
            st["total_output_tokens"] = (
                int(st.get("total_output_tokens", 0)) + counted["output_tokens"]
            )
            st["total_model_rounds"] = int(st.get("total_model_rounds", 0)) + counted["rounds"]
            stats.fold(
                st,
                turn_id=s["turn_id"],
                aborted=s["status"] == "aborted",
                rounds=counted["rounds"],
                duration_ms=int(s.get("duration_ms") or 0),
                calls=journal.latency,
                compaction=journal.compaction,
                at=completed_at,
            )
        if st["status"] not in HELD_STATUSES:
            st["status"] = "asleep" if sleep else "awake_idle"
            st["status_changed_at"] = completed_at
        # the newest brief's time: the turn's own, a work item's report, a notice
        at = (last_brief.get("at") if last_brief else None) or ""
        if at and at > str(st.get("last_brief_at") or ""):
            st["last_brief_at"] = at
        elif s.get("brief"):
            st["last_brief_at"] = completed_at
        if s["status"] == "aborted" and s.get("reason") != "operator_aborted":
            # the daemon's last runtime failure (spec L521-523) and `holon
            # status`'s "last failure" come from here: it outlives the turn
            # and a restart of serve
            st["last_failure"] = _failure_record(store.agent_id, s, completed_at)
        st["current_run_id"] = None
        st["current_run_pid"] = None
        st["last_turn_at"] = completed_at
        st["last_closure"] = s["closure"]
        if "no_progress" in s:
            st["no_progress"] = s["no_progress"]
        if memory is not None and memory_applies(st, memory):
            st["working_memory"] = memory
        if s["status"] == "completed" and journal.usage_reported:
            # the spec: the most recent completed turn that reported token data
            st["last_turn_token_usage"] = dict(journal.usage)
        if turn_skills or st.get("active_skills"):
            # skills this turn resumed from earlier ones are `restored`; a
            # successful turn promotes its turn-active skills to session-active
            merged = {a["skill"]: {**a, "state": "restored"} for a in st.get("active_skills") or []}
            for name, a in turn_skills.items():
                merged[name] = {**a, "state": "session_active"}
            st["active_skills"] = list(merged.values())
        if sleep:
            st["sleep_reason"] = sleep.get("reason") or "model_sleep"
            duration = sleep.get("duration_ms")
            if duration:
                st["sleeping_until"] = clock.iso(clock.now() + int(duration) / 1000)

    reason = "turn_aborted" if s["status"] == "aborted" else "turn_settled"
    store.update_state(
        finish,
        reason="turn_slept" if sleep else reason,
        turn_id=s["turn_id"],
        sync_dir=sync_dir,
    )


def _failure_record(agent_id: str, s: TurnSettlement, at: str) -> LastFailure:
    fa = s.get("failure_artifact") or {}
    kind = s.get("failure_kind") or "failed"
    return {
        "occurred_at": at,
        "at": at,
        "summary": f"{agent_id}: turn {s['turn_id']} aborted ({kind}): "
        f"{fa.get('summary', 'provider failure')}"[:500],
        "phase": "runtime_turn",
        "detail_hint": f"see `holon tail --agent {agent_id}`",
        "turn_id": s["turn_id"],
        "category": fa.get("category"),
        "failure_kind": s.get("failure_kind"),
    }
