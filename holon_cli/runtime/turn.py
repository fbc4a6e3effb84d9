"""One turn: dequeue the next message, run the provider/tool loop, record
everything, settle.

Invariants:
- one turn per agent at a time (the turn lock; a second caller gets exit 75);
- every provider round, tool call and terminal is an event, a transcript
  entry, or both; the queue entry is settled last;
- a crash mid-turn leaves the message ``dequeued``; the next turn replays it
  from the turn journal (``state/turn_journal.json``), so tool calls already
  recorded are not run again, and a call that was in flight when the process
  died is reported to the model as interrupted instead of being re-run;
- a tool failure is a tool result, never the end of the turn; a provider
  failure ends the turn as ``aborted`` with a failure brief.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from holon_cli import clock
from holon_cli.errors import HolonError, RejectedError
from holon_cli.model.agent import lifecycle_hint
from holon_cli.model.envelope import body_text, origin_label
from holon_cli.providers.base import ConversationItem, ProviderRequest, ToolCall
from holon_cli.runtime import queue as q
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents import open_agent
from holon_cli.runtime.briefs import write_brief, write_transcript
from holon_cli.runtime.models import candidates
from holon_cli.runtime.prompt import (
    WorkspaceBinding,
    build_frame,
    first_user_item,
    render_message,
    render_recent,
    workspace_for,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot, write_snapshot
from holon_cli.store.layout import default_agent_id

DEFAULT_MAX_ROUNDS = 50
RECENT_CHARS = 4000


@dataclass
class TurnResult:
    agent_id: str
    ran: bool
    turn_id: str | None = None
    message_id: str | None = None
    status: str = "idle"  # idle | completed | aborted
    closure: dict[str, Any] | None = None
    final_text: str = ""
    model_rounds: int = 0
    token_usage: dict[str, int] = field(
        default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    )
    provider_attempt_timeline: list[dict[str, Any]] = field(default_factory=list)
    failure_artifact: dict[str, Any] | None = None
    failure_kind: str | None = None
    slept: bool = False
    duration_ms: int = 0
    replayed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ------------------------------------------------------------------ journal


def _journal_path(store: AgentStore) -> Path:
    return store.layout.state_dir / "turn_journal.json"


def _item_to_dict(it: ConversationItem) -> dict[str, Any]:
    return {
        "role": it.role,
        "text": it.text,
        "tool_calls": [c.to_dict() | {"raw_arguments": c.raw_arguments} for c in it.tool_calls],
        "call_id": it.call_id,
        "name": it.name,
        "is_error": it.is_error,
    }


def _item_from_dict(d: dict[str, Any]) -> ConversationItem:
    calls = [
        ToolCall(
            c["id"],
            c["name"],
            c.get("arguments") or {},
            c.get("raw_arguments"),
            c.get("arguments_error"),
        )
        for c in d.get("tool_calls", [])
    ]
    return ConversationItem(
        d["role"],
        d.get("text", ""),
        calls,
        d.get("call_id"),
        d.get("name"),
        bool(d.get("is_error")),
    )


class Journal:
    """The in-flight turn's conversation, rewritten atomically after every step."""

    def __init__(self, store: AgentStore, turn_id: str, message_id: str) -> None:
        self.store = store
        self.turn_id = turn_id
        self.message_id = message_id
        self.items: list[ConversationItem] = []
        self.provider_only: set[int] = set()
        self.rounds = 0
        self.usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        self.timeline: list[dict[str, Any]] = []
        self.interject_ids: list[str] = []

    @classmethod
    def resume(cls, store: AgentStore, turn_id: str, message_id: str) -> Journal | None:
        snap = read_snapshot(_journal_path(store))
        if not snap or snap.get("message_id") != message_id:
            return None
        j = cls(store, turn_id, message_id)
        j.items = [_item_from_dict(d) for d in snap.get("items", [])]
        j.rounds = int(snap.get("rounds", 0))
        j.usage = dict(snap.get("usage") or j.usage)
        j.timeline = list(snap.get("timeline") or [])
        j.interject_ids = list(snap.get("interject_ids") or [])
        return j

    def save(self) -> None:
        write_snapshot(
            _journal_path(self.store),
            {
                "v": 1,
                "turn_id": self.turn_id,
                "message_id": self.message_id,
                "rounds": self.rounds,
                "usage": self.usage,
                "timeline": self.timeline,
                "interject_ids": self.interject_ids,
                "items": [
                    _item_to_dict(it)
                    for i, it in enumerate(self.items)
                    if i not in self.provider_only
                ],
            },
        )

    def clear(self) -> None:
        try:
            _journal_path(self.store).unlink()
        except FileNotFoundError:
            pass

    def recorded_results(self) -> dict[str, ConversationItem]:
        return {it.call_id: it for it in self.items if it.role == "tool" and it.call_id}


# ------------------------------------------------------------- work plane


def derive_closure(
    store: AgentStore, *, failed: bool, sleep_req: dict[str, Any] | None
) -> dict[str, Any]:
    """The spec's ClosureDecision for the settled turn."""
    posture = "asleep" if sleep_req else "awake"
    if failed:
        return {"outcome": "failed", "runtime_posture": "awake"}
    waiting = wi.closure_waiting_reason(store)
    if waiting:
        return {"outcome": "waiting", "waiting_reason": waiting, "runtime_posture": posture}
    if sleep_req:
        if sleep_req.get("duration_ms"):
            return {
                "outcome": "waiting",
                "waiting_reason": "awaiting_timer",
                "runtime_posture": posture,
            }
        return {"outcome": "completed", "runtime_posture": posture}
    signal = wi.activation_signal(store)
    if signal:
        work_signal = {
            "work_item_id": signal.get("work_item_id"),
            "status": "active"
            if signal.get("reactivation_mode") == "continue_active"
            else "queued",
            "reactivation_mode": signal.get("reactivation_mode"),
            "text": signal.get("text"),
            "fingerprint": signal.get("fingerprint"),
        }
        return {"outcome": "continuable", "work_signal": work_signal, "runtime_posture": posture}
    return {"outcome": "completed", "runtime_posture": posture}


# ------------------------------------------------------------------ recent


def recent_conversation(store: AgentStore, exclude_message_id: str | None) -> str | None:
    """Operator-visible history from the transcript tail (bounded; O(1) in history).
    Rendering (fences, escaping) lives in :func:`prompt.render_recent`."""
    return render_recent(
        store.ledger("transcript").tail(40), exclude_message_id, max_chars=RECENT_CHARS
    )


# -------------------------------------------------------------------- turn


def _transcript_message(store: AgentStore, env: dict[str, Any], turn_id: str, **extra: Any) -> None:
    """An admitted message as a transcript entry, provenance preserved."""
    write_transcript(
        store,
        "message",
        message_id=env["id"],
        turn_id=turn_id,
        message_kind=env.get("kind"),
        origin=env.get("origin"),
        origin_label=origin_label(env.get("origin", {})),
        authority_class=env.get("authorityClass"),
        trust=env.get("trust"),
        priority=env.get("priority"),
        work_item_id=env.get("workItemId"),
        text=body_text(env.get("body", {})),
        **extra,
    )


def tool_catalog() -> tuple[dict[str, Any], list[Any], dict[str, str]]:
    from holon_cli.tools.base import registry

    defs = registry()
    specs = [d.spec() for d in defs.values()]
    guidance = {d.name: d.guidance for d in defs.values() if d.guidance}
    return defs, specs, guidance


def _runtime_cfg() -> dict[str, Any]:
    from holon_cli.store.config import load_config

    return load_config()


def run_turn(
    agent_id: str | None = None,
    *,
    store: AgentStore | None = None,
    cli_model: str | None = None,
    cli_fallbacks: list[str] | None = None,
    sleep: Any = time.sleep,
    max_rounds: int | None = None,
) -> TurnResult:
    """Run one turn for the agent if it has queued work. Raises BusyError (75)
    when another turn holds the agent, RejectedError (4) when it is stopped."""
    store = store or open_agent(agent_id)
    lock = store.turn_lock()
    lock.try_acquire()
    try:
        rec = store.read_record()
        status = rec["state"]["status"]
        if status in ("stopped", "paused"):
            raise RejectedError(
                f"agent {store.agent_id!r} is {status}; no turn was run",
                hint=lifecycle_hint(status) or "",
                kind=f"agent_{status}",
            )
        models = candidates(rec["state"], cli_model=cli_model, cli_fallbacks=cli_fallbacks)
        turn_id = clock.new_id("turn")
        entry = q.dequeue_next(store, turn_id)
        if entry is None:
            return TurnResult(store.agent_id, ran=False)
        try:
            return _execute(store, entry, turn_id, models, sleep=sleep, max_rounds=max_rounds)
        except KeyboardInterrupt:
            # Ctrl-C: the message stays dequeued and the next turn replays it
            # from the journal; the agent must not look busy meanwhile
            store.emit(
                "turn_interrupted",
                {"turn_id": turn_id, "reason": "keyboard_interrupt"},
                message=entry["envelope"],
                turn_id=turn_id,
            )
            store.update_state(lambda st: st.update(status="awake_idle", current_run_id=None))
            raise
        except Exception as exc:
            # an internal failure: record it and leave the message dequeued, so
            # the next turn replays it (bounded by queue.MAX_ATTEMPTS)
            store.emit(
                "runtime_error",
                {
                    "turn_id": turn_id,
                    "error": f"{type(exc).__name__}: {exc}",
                    "failure_kind": "internal",
                },
                message=entry["envelope"],
                turn_id=turn_id,
            )
            store.update_state(lambda st: st.update(status="awake_idle", current_run_id=None))
            raise
    finally:
        lock.release()


def _execute(
    store: AgentStore,
    entry: dict[str, Any],
    turn_id: str,
    models: list[str],
    *,
    sleep: Any,
    max_rounds: int | None,
) -> TurnResult:
    from holon_cli.providers.chain import ChainFailure, call_with_fallback
    from holon_cli.tools.base import ToolContext, execute, render_error

    t_start = time.monotonic()
    msg = entry["envelope"]
    mid = msg["id"]
    cfg = _runtime_cfg()
    rt_cfg = cfg.get("runtime") or {}
    max_rounds = max_rounds or int(rt_cfg.get("max_provider_rounds") or DEFAULT_MAX_ROUNDS)
    result = TurnResult(store.agent_id, ran=True, turn_id=turn_id, message_id=mid)

    journal = Journal.resume(store, turn_id, mid)
    result.replayed = journal is not None or int(entry.get("interrupted", 0)) > 0

    def start(state: dict[str, Any]) -> None:
        state["status"] = "awake_running"
        state["status_changed_at"] = clock.now_iso()
        state["current_run_id"] = turn_id
        state["current_run_pid"] = os.getpid()
        state["last_wake_reason"] = msg.get("triggerKind") or msg.get("kind")
        state["sleeping_until"] = None
        state["turn_index"] = int(state.get("turn_index", 0)) + 1
        state["total_message_count"] = int(state.get("total_message_count", 0)) + (
            0 if result.replayed else 1
        )

    agent_rec = store.update_state(start)
    state = agent_rec["state"]
    turn_index = state["turn_index"]
    queue_wait_ms = None
    try:
        queue_wait_ms = max(0, int((clock.now() - clock.parse_iso(msg["createdAt"])) * 1000))
    except (KeyError, ValueError):
        pass
    store.emit(
        "message_processing_started",
        {
            "turn_id": turn_id,
            "turn_index": turn_index,
            "attempt": entry.get("attempts", 1),
            "queue_wait_ms": queue_wait_ms,
            "trigger_kind": msg.get("triggerKind"),
            "replayed": result.replayed,
        },
        message=msg,
        turn_id=turn_id,
    )
    if journal is None:
        journal = Journal(store, turn_id, mid)
        journal.items.append(first_user_item(msg))
        _transcript_message(store, msg, turn_id)
        journal.save()
    else:
        journal.turn_id = turn_id

    ws: WorkspaceBinding = workspace_for(store.layout.home, state)
    is_default = agent_rec["identity"]["kind"] == "default" or store.agent_id == default_agent_id()
    bound_wi = state.get("current_work_item_id")
    focus = bound_wi  # the current work item as it changes during the turn
    completion_briefs: list[str] = []  # work_done briefs written in the final round
    defs, specs, guidance = tool_catalog()
    session_skills: list[dict[str, Any]] = list(state.get("active_skills") or [])
    turn_skills: dict[str, dict[str, Any]] = {}
    recent = recent_conversation(store, mid)

    failed = False
    sleep_req: dict[str, Any] | None = None
    rounds_since_mutation = 0
    final_text = ""
    effects: dict[str, Any] = {}

    # a replayed turn whose last step was a final answer only needs settling
    last = journal.items[-1] if journal.items else None
    done = last is not None and last.role == "assistant" and not last.tool_calls
    if done and last is not None:
        final_text = last.text
    # calls of the last recorded round with no recorded result were in flight when we died
    if last is not None and last.role == "assistant" and last.tool_calls:
        recorded = journal.recorded_results()
        for call in last.tool_calls:
            if call.id not in recorded:
                content = render_error(
                    call.name,
                    {
                        "kind": "interrupted",
                        "message": "this call was in flight when the runtime stopped; it was not re-run",
                        "recovery_hint": "check its effects (e.g. with ExecCommand) before running it again",
                        "retryable": True,
                        "details": None,
                    },
                )
                journal.items.append(
                    ConversationItem(
                        "tool", content, call_id=call.id, name=call.name, is_error=True
                    )
                )
                write_transcript(
                    store,
                    "tool_result",
                    turn_id=turn_id,
                    message_id=mid,
                    call_id=call.id,
                    tool_name=call.name,
                    ok=False,
                    output=content,
                    error={"kind": "interrupted"},
                )
        journal.save()

    round_no = journal.rounds
    context_reported = False
    while not done:
        t_ctx = time.monotonic()
        work_queue = wi.project_work_queue(store, bound_work_item_id=focus)
        built = build_frame(
            agent_id=store.agent_id,
            agent_home=store.layout.home,
            is_default_agent=is_default,
            ws=ws,
            message=msg,
            tools=specs,
            guidance=guidance,
            work_queue=work_queue,
            recent=recent,
            active_skills=[
                *(
                    {**a, "state": "session_active"}
                    for a in session_skills
                    if a["skill"] not in turn_skills
                ),
                *turn_skills.values(),
            ],
        )
        context_build_ms = round((time.monotonic() - t_ctx) * 1000, 3)
        if not context_reported:
            context_reported = True
            store.emit(
                "turn_context_built",
                {
                    "turn_id": turn_id,
                    "context_build_ms": context_build_ms,
                    "prompt_cache_key": built.frame.prompt_cache_key,
                    "context_fingerprint": built.frame.context_fingerprint,
                    "sections": built.sections,
                    "tool_count": len(specs),
                    "bound_work_item_id": bound_wi,
                },
                message=msg,
                turn_id=turn_id,
            )
        request = ProviderRequest(
            frame=built.frame,
            conversation=list(journal.items),
            tools=specs,
            state_dir=store.layout.state_dir,
            agent_id=store.agent_id,
        )
        started_at = clock.now_iso()
        t0 = time.monotonic()
        try:
            chain = call_with_fallback(models, request, sleep=sleep)
        except ChainFailure as failure:
            provider_ms = round((time.monotonic() - t0) * 1000, 3)
            failed = True
            result.failure_artifact = failure.failure_artifact()
            result.failure_kind = getattr(failure.last, "kind", None)
            tl = failure.timeline
            journal.timeline.extend(tl.get("attempts", []))
            usage = failure.usage.to_dict() if failure.usage is not None else None
            if usage:
                for k in journal.usage:
                    journal.usage[k] += int(usage.get(k, 0))
            summary = result.failure_artifact.get("summary", str(failure))
            store.emit(
                "runtime_error",
                {
                    "turn_id": turn_id,
                    "error": summary,
                    "failure_kind": result.failure_kind,
                    "failure_artifact": result.failure_artifact,
                    "provider_attempt_timeline": tl,
                    "token_usage": usage,
                    "provider_round_ms": provider_ms,
                },
                message=msg,
                turn_id=turn_id,
            )
            write_transcript(
                store,
                "runtime_failure",
                turn_id=turn_id,
                message_id=mid,
                text=summary,
                failure_artifact=result.failure_artifact,
                provider_attempt_timeline=tl,
                token_usage=usage,
            )
            break
        provider_ms = round((time.monotonic() - t0) * 1000, 3)
        resp = chain.response
        tl = chain.timeline
        journal.timeline.extend(tl.get("attempts", []))
        usage = (
            resp.usage.to_dict()
            if resp.usage
            else {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        )
        for k in journal.usage:
            journal.usage[k] += int(usage.get(k, 0))
        round_no += 1
        journal.rounds = round_no
        calls = resp.tool_calls
        store.emit(
            "provider_round_completed",
            {
                "turn_id": turn_id,
                "round": round_no,
                "token_usage": usage,
                "context_build_ms": context_build_ms,
                "provider_round_ms": provider_ms,
                "provider_started_at": started_at,
                "provider_completed_at": clock.now_iso(),
                "provider_attempt_timeline": tl,
                "stop_reason": resp.stop_reason,
                "model_ref": tl.get("winning_model_ref"),
            },
            message=msg,
            turn_id=turn_id,
        )
        store.emit(
            "assistant_round_recorded",
            {
                "turn_id": turn_id,
                "round": round_no,
                "text_preview": resp.text[:280],
                "tool_requests": [c.name for c in calls],
            },
            message=msg,
            turn_id=turn_id,
        )
        write_transcript(
            store,
            "assistant_round",
            turn_id=turn_id,
            message_id=mid,
            round=round_no,
            text=resp.text,
            tool_calls=[c.to_dict() for c in calls],
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
            data={"token_usage": usage},
            provider_attempt_timeline=tl,
            stop_reason=resp.stop_reason,
            model_ref=tl.get("winning_model_ref"),
            work_item_id=focus,
        )

        def add_usage(st: dict[str, Any], u: dict[str, int] = usage) -> None:
            st["total_input_tokens"] = int(st.get("total_input_tokens", 0)) + u["input_tokens"]
            st["total_output_tokens"] = int(st.get("total_output_tokens", 0)) + u["output_tokens"]
            st["total_model_rounds"] = int(st.get("total_model_rounds", 0)) + 1

        store.update_state(add_usage)
        journal.items.append(ConversationItem("assistant", resp.text, list(calls)))
        journal.save()
        if not calls:
            final_text = resp.text
            break

        ctx = ToolContext(
            store=store,
            agent_id=store.agent_id,
            execution_root=ws.execution_root,
            cwd=ws.cwd,
            workspace_anchor=ws.workspace_anchor,
            turn_id=turn_id,
            message=msg,
            round_text=resp.text,
            round_calls=list(calls),
            config=cfg,
            effects=effects,
        )
        mutated = False
        completion_briefs = []
        for call in calls:
            t_tool = time.monotonic()
            res = execute(defs.get(call.name), ctx, call)
            tool_ms = round((time.monotonic() - t_tool) * 1000, 3)
            if res.ok and wi.is_work_item_mutation(call.name):
                mutated = True
                if call.name == "CompleteWorkItem" and (res.data or {}).get("brief_id"):
                    completion_briefs.append(res.data["brief_id"])
            call_wi = (res.data or {}).get("work_item_id") or focus
            if (
                res.ok
                and call.name in ("ExecCommand", "ExecCommandBatch")
                and built.sources.get("skills")
            ):
                from holon_cli.runtime.prompt import skill_activations

                cmds = [str(call.arguments.get("cmd", ""))] + [
                    str(c.get("cmd", ""))
                    for c in call.arguments.get("commands") or []
                    if isinstance(c, dict)
                ]
                for act in (
                    a
                    for c in cmds
                    if c
                    for a in skill_activations(c, ws.cwd, built.sources["skills"])
                ):
                    if act["skill"] not in turn_skills:
                        turn_skills[act["skill"]] = {**act, "state": "turn_active"}
                        store.emit("skill_activated", act, message=msg, turn_id=turn_id)
            store.emit(
                "tool_executed",
                {
                    "turn_id": turn_id,
                    "round": round_no,
                    "tool_name": call.name,
                    "call_id": call.id,
                    "ok": res.ok,
                    "duration_ms": tool_ms,
                    "error": None if res.ok else res.content[:500],
                    "tool_error": res.error,
                    "warnings": res.warnings or None,
                },
                message=msg,
                turn_id=turn_id,
                work_item_id=call_wi,
            )
            write_transcript(
                store,
                "tool_result",
                turn_id=turn_id,
                message_id=mid,
                round=round_no,
                call_id=call.id,
                tool_name=call.name,
                ok=res.ok,
                output=res.content,
                error=res.error,
                warnings=res.warnings or None,
                duration_ms=tool_ms,
                work_item_id=call_wi,
            )
            journal.items.append(
                ConversationItem(
                    "tool", res.content, call_id=call.id, name=call.name, is_error=not res.ok
                )
            )
            journal.save()
        rounds_since_mutation = 0 if mutated else rounds_since_mutation + 1
        if mutated:
            focus = store.read_record()["state"].get("current_work_item_id")
        # safe point: trusted operator interjections join the running turn
        for ie in q.take_interjects(store, turn_id):
            env = ie["envelope"]
            journal.interject_ids.append(env["id"])
            journal.items.append(ConversationItem("user", render_message(env)))
            _transcript_message(store, env, turn_id, interject=True)
            store.emit(
                "message_interjected",
                {"turn_id": turn_id, "into_message_id": mid},
                message=env,
                turn_id=turn_id,
            )
            journal.save()
        if "sleep" in effects:
            sleep_req = effects["sleep"]
            final_text = resp.text
            break
        if round_no >= max_rounds:
            final_text = resp.text
            store.emit(
                "turn_round_limit_reached",
                {"turn_id": turn_id, "rounds": round_no, "max_rounds": max_rounds},
                message=msg,
                turn_id=turn_id,
            )
            break
        reminder = wi.stale_reminder(store, rounds_since_mutation)
        if reminder:
            journal.provider_only.add(len(journal.items))
            journal.items.append(ConversationItem("user", reminder))
            store.emit(
                "work_item_stale_reminder",
                {"turn_id": turn_id, "rounds_without_mutation": rounds_since_mutation},
                message=msg,
                turn_id=turn_id,
            )

    # ---------------------------------------------------------- settle
    t_cleanup = time.monotonic()
    wi.refresh_all(store)
    if bound_wi:
        # runtime facts of blocking waits come from the task plane; none is
        # known at this layer yet, so the commit only refreshes the bound item
        wi.turn_end_commit(store, bound_wi, {})
    closure = derive_closure(store, failed=failed, sleep_req=sleep_req)
    result.closure = closure
    result.final_text = final_text
    result.model_rounds = journal.rounds
    result.token_usage = dict(journal.usage)
    result.provider_attempt_timeline = journal.timeline
    result.status = "aborted" if failed else "completed"
    result.slept = sleep_req is not None
    if failed:
        fa = result.failure_artifact or {}
        write_brief(
            store,
            kind="failure",
            text=f"Turn failed: {fa.get('summary', 'provider failure')}",
            related_message_id=mid,
            turn_id=turn_id,
            work_item_id=bound_wi,
        )
    elif not completion_briefs:
        # a final round that completed a work item already wrote its work_done
        # brief with this same text; a turn_result brief would repeat it
        vis = (
            "action_required"
            if closure.get("waiting_reason") == "awaiting_operator_input"
            else "turn_result"
        )
        write_brief(
            store,
            kind="result",
            text=final_text,
            visibility=vis,
            related_message_id=mid,
            turn_id=turn_id,
            work_item_id=focus,
        )
    cleanup_ms = round((time.monotonic() - t_cleanup) * 1000, 3)
    duration_ms = int((time.monotonic() - t_start) * 1000)
    result.duration_ms = duration_ms
    completed_at = clock.now_iso()
    write_transcript(
        store,
        "turn_terminal",
        turn_id=turn_id,
        message_id=mid,
        turn_index=turn_index,
        completed_at=completed_at,
        duration_ms=duration_ms,
        status=result.status,
        text=final_text,
        closure=closure,
    )
    store.emit(
        "turn_terminal",
        {
            "turn_id": turn_id,
            "turn_index": turn_index,
            "status": result.status,
            "completed_at": completed_at,
            "duration_ms": duration_ms,
            "cleanup_ms": cleanup_ms,
            "last_assistant_message": final_text[:2000],
            "closure": closure,
            "model_rounds": journal.rounds,
            "token_usage": journal.usage,
            "failure_kind": result.failure_kind,
        },
        message=msg,
        turn_id=turn_id,
    )
    final_status = "aborted" if failed else "processed"
    q.settle(store, mid, final_status, turn_id=turn_id)
    for iid in journal.interject_ids:
        q.settle(store, iid, "processed", turn_id=turn_id, reason="interject")

    def finish(st: dict[str, Any]) -> None:
        st["status"] = "asleep" if sleep_req else "awake_idle"
        st["status_changed_at"] = completed_at
        st["current_run_id"] = None
        st["current_run_pid"] = None
        st["last_turn_at"] = completed_at
        st["last_closure"] = closure
        st["last_turn_token_usage"] = dict(journal.usage)
        if turn_skills and not failed:
            # successful turn completion promotes turn-active skills to session-active
            merged = {a["skill"]: a for a in st.get("active_skills") or []}
            for name, a in turn_skills.items():
                merged[name] = {k: v for k, v in a.items() if k != "state"}
            st["active_skills"] = list(merged.values())
        if sleep_req:
            st["sleep_reason"] = sleep_req.get("reason") or "model_sleep"
            if sleep_req.get("duration_ms"):
                st["sleeping_until"] = clock.iso(clock.now() + int(sleep_req["duration_ms"]) / 1000)

    store.update_state(finish)
    journal.clear()
    return result


def agents_with_work() -> list[str]:
    from holon_cli.runtime.agents import list_agents

    out = []
    for a in list_agents(include_private=True):
        if a.status in ("stopped", "paused"):
            continue
        st = open_agent(a.agent_id, create_default=False)
        if q.pending_count(st) > 0:
            out.append(a.agent_id)
    return out


def run_turns_all(**kw: Any) -> list[TurnResult | HolonError]:
    """One turn for every agent with queued work; busy agents are skipped."""
    out: list[TurnResult | HolonError] = []
    for aid in agents_with_work():
        try:
            out.append(run_turn(aid, **kw))
        except HolonError as err:
            out.append(err)
    return out
