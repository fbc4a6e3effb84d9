"""Prompt projection of the work queue: the ``## Work queue`` context block
of a turn (:func:`project_work_queue`) and the small text helpers the
reminders share.

The current item is projected in full (plan preview read from the file, the
file being the truth); other items appear as compact candidates by class,
bounded by :data:`~holon_cli.model.workitem.PROMPT_LIMITS` and the character
budget. Completed items appear only through promoted reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from holon_cli.model import workitem as wm
from holon_cli.model import workitem_readiness as wr
from holon_cli.model.workitem import WorkItemRecord
from holon_cli.runtime.workitems.access import current_id as _current_id
from holon_cli.runtime.workitems.hints import (
    NO_CURRENT_ITEM,
    NOT_RUNNABLE_NOTE,
    PRIORITY_NOTE,
    SECTION_OMITTED,
    SECTION_TITLES,
)
from holon_cli.runtime.workitems.views import completion_report, wait_brief
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.workitem_index import WorkItemIndex, describe_file, load

DEFAULT_PROJECTION_CHARS = 12_000
DEFAULT_TRACE_ENTRIES = 6
TRACE_SCAN_RECORDS = 200


def _one_line(text: Any, limit: int) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: max(0, limit - 1)] + "…"


def _short_hash(h: Any) -> str:
    return str(h).split(":", 1)[-1][:12] if h else "-"


def todo_mark(state: str) -> str:
    return {"completed": "[x]", "in_progress": "[>]"}.get(state, "[ ]")


def _trace(
    store: AgentStore, wid: str, limit: int, exclude_turn_id: str | None = None
) -> list[str]:
    """Recent process trace bound to ``wid``: assistant text, tool executions
    and briefs (tail reads only; provider thinking is never included). The
    running turn's own records (``exclude_turn_id``) are left out: its
    conversation already carries them, and the block stays byte-stable
    between its rounds (prompt caching)."""
    if limit <= 0:
        return []
    entries: list[tuple[str, str]] = []

    def bound(r: Mapping[str, Any]) -> bool:
        if exclude_turn_id is not None and r.get("turn_id") == exclude_turn_id:
            return False
        return (r.get("work_item_id") or r.get("workItemId")) == wid

    for r in store.ledger("transcript").tail_previews(TRACE_SCAN_RECORDS):
        if not bound(r):
            continue
        kind = str(r.get("kind"))
        at = str(r.get("at", ""))
        if kind in ("assistant_round", "assistant_message", "assistant"):
            text = r.get("text")
            if isinstance(text, str) and text.strip():
                entries.append((at, f"assistant: {_one_line(text, 240)}"))
        elif kind in ("tool_result", "tool_execution"):
            name = r.get("tool_name") or r.get("name") or "tool"
            failed = r.get("is_error") or r.get("ok") is False or r.get("error")
            summary = r.get("summary") or r.get("text") or ""
            entries.append(
                (
                    at,
                    f"tool {name}: {'error' if failed else 'ok'}"
                    + (f" - {_one_line(summary, 120)}" if summary else ""),
                )
            )
    for b in store.ledger("briefs").tail(50):
        text = b.get("text")
        if bound(b) and isinstance(text, str):
            entries.append((b.get("at", ""), f"brief ({b['kind']}): {_one_line(text, 240)}"))
    entries.sort(key=lambda e: e[0])
    return [f"  - {at[11:19] if len(at) >= 19 else at} {line}" for at, line in entries[-limit:]]


def _current_section(
    store: AgentStore,
    idx: WorkItemIndex,
    rec: WorkItemRecord | None,
    *,
    focused: bool,
    preview_chars: int,
    trace_limit: int,
    exclude_turn_id: str | None = None,
) -> str:
    if rec is None:
        return NO_CURRENT_ITEM
    waits = idx.waits_for(rec)
    sched = wr.scheduling_state(rec, waits)
    desc = describe_file(Path(rec["plan_artifact"]["path"]))  # the file is the truth
    lines = [
        f"Current work item: {rec['id']} ({'focus' if focused else 'bound to this turn'}; "
        f"readiness: {wr.readiness(rec, waits)}; scheduling: {sched})"
    ]
    lines.append(f"- objective: {rec['objective']}")
    lines.append(f"- state: {rec['state']}; plan_status: {rec['plan_status']}")
    if desc["exists"]:
        complete = desc["preview_complete"] and len(desc["preview"]) <= preview_chars
        lines.append(
            f"- plan: {desc['path']} ({desc['bytes']} bytes, "
            f"sha256 {_short_hash(desc['hash'])}, updated {desc['updated_at']}; "
            + (
                "preview complete)"
                if complete
                else "preview truncated: read the file for the full plan)"
            )
        )
        preview = desc["preview"][:preview_chars].rstrip("\n")
        lines.extend(f"  | {ln}".rstrip() for ln in preview.splitlines())
    else:
        lines.append(
            f"- plan: {desc['path']} is MISSING (deleted?). "
            "Recreate it with the task interpretation before continuing."
        )
    todos = list(rec.get("todo_list") or [])
    if todos:
        counts = wm.todo_counts(todos)
        cur = wm.current_todo(todos)
        lines.append(
            f"- todo ({counts['completed']}/{counts['total']} completed"
            + (f"; current: {cur['text']}" if cur else "")
            + "):"
        )
        lines.extend(f"  {todo_mark(t['state'])} {t['text']}" for t in todos)
    else:
        lines.append("- todo: (empty)")
    if rec.get("blocked_by"):
        lines.append(
            f"- blocked_by: {rec['blocked_by']}"
            + (f" (recheck at {rec['recheck_at']})" if rec.get("recheck_at") else "")
        )
    if waits.active:
        lines.append(
            f"- waits: {len(waits.active)} active "
            f"({waits.active_task} task, {waits.active_external} external)"
            + (f"; triggered at {waits.last_triggered_at} (review it)" if waits.triggered else "")
        )
        for w in waits.active[:3]:
            lines.append("  - " + ", ".join(f"{k}={v}" for k, v in wait_brief(w).items()))
    if sched != "runnable":
        lines.append(NOT_RUNNABLE_NOTE)
    trace = _trace(store, rec["id"], trace_limit, exclude_turn_id)
    if trace:
        lines.append("- recent process trace:")
        lines.extend(trace)
    lines.append(PRIORITY_NOTE)
    return "\n".join(lines)


def item_snapshot(
    store: AgentStore,
    work_item_id: str,
    *,
    preview_chars: int = wm.PREVIEW_CHARS,
    trace_limit: int = DEFAULT_TRACE_ENTRIES,
) -> str | None:
    """One open item projected as the current item is (objective, plan
    descriptor and preview, todos, blocker, waits, recent process trace), for
    a forked child's inherited context; ``None`` when it is not open."""
    idx = load(store)
    rec = idx.get(work_item_id)
    if rec is None or rec.get("state") != "open":
        return None
    text = _current_section(
        store, idx, rec, focused=True, preview_chars=preview_chars, trace_limit=trace_limit
    )
    head, _, rest = text.partition("\n")
    head = head.replace("Current work item: ", "Work item: ", 1).replace("(focus; ", "(", 1)
    lines = [ln for ln in rest.split("\n") if ln != PRIORITY_NOTE]
    return "\n".join([head, *lines])


def item_line(store: AgentStore, work_item_id: str) -> str | None:
    """One item as a compact candidate line (any class), or ``None``."""
    idx = load(store)
    rec = idx.get(work_item_id)
    if rec is None:
        return None
    cls = wr.candidate_class(rec, current_id=None, waits=idx.waits_for(rec))
    return _candidate_line(idx, cls, rec)


def _candidate_line(idx: WorkItemIndex, cls: str, rec: WorkItemRecord) -> str:
    waits = idx.waits_for(rec)
    head = f'- {rec["id"]} "{_one_line(rec["objective"], 120)}"'
    if cls == "completed_recent":
        rep = completion_report(idx, rec)
        return f"{head} - report: {_one_line(rep['text'] if rep else '', 300)}"
    bits = [f"plan_status {rec.get('plan_status')}"]
    if rec.get("blocked_by"):
        bits.append(f"blocked by: {_one_line(rec['blocked_by'], 160)}")
    if cls == "triggered_blocked":
        total = sum(int(w.get("trigger_count") or 0) for w in waits.active)
        bits.append(
            f"wait triggered at {waits.last_triggered_at} ({total} event(s)); blocker NOT cleared"
        )
    elif cls == "blocked" and not rec.get("blocked_by"):
        bits.append(
            f"waiting on {waits.active_task} task / {waits.active_external} external wait(s)"
        )
    todo = wm.current_todo(rec.get("todo_list") or [])
    if todo:
        bits.append(f"next todo: {_one_line(todo['text'], 100)}")
    preview = plan_gist(rec)
    if preview:
        bits.append(f"plan: {preview}")
    return f"{head} - " + "; ".join(bits)


def plan_gist(rec: WorkItemRecord) -> str:
    """First meaningful line of the stored preview (headers and comments skipped)."""
    desc = rec.get("plan_artifact") or {}
    if not desc.get("exists", True):
        return "(plan file missing)"
    in_comment = False
    for ln in str(desc.get("preview") or "").splitlines():
        s = ln.strip()
        if s.startswith("<!--"):
            in_comment = "-->" not in s
            continue
        if in_comment:
            in_comment = "-->" not in s
            continue
        if (
            not s
            or s.startswith("#")
            and s.lstrip("#").strip() == str(rec.get("objective", "")).strip()
        ):
            continue
        return _one_line(s.lstrip("# "), 120)
    return ""


def _section(idx: WorkItemIndex, cand: wr.Candidates, cls: str) -> tuple[str, str] | None:
    items = cand.classes[cls]
    if not items:
        return None
    top = cand.top(cls)
    title = SECTION_TITLES[cls]
    shown = f"{len(top)} of {len(items)}" if len(top) < len(items) else f"{len(items)}"
    if cls == "completed_recent" and cand.completed_total > len(items):
        shown += f"; {cand.completed_total} completed in total"
    full = "\n".join([f"{title} - {shown}:"] + [_candidate_line(idx, cls, r) for r in top])
    compact = SECTION_OMITTED.format(title=title, count=len(items))
    return full, compact


def project_work_queue(
    store: AgentStore,
    *,
    bound_work_item_id: str | None = None,
    max_chars: int = DEFAULT_PROJECTION_CHARS,
    trace_limit: int = DEFAULT_TRACE_ENTRIES,
    exclude_turn_id: str | None = None,
) -> str | None:
    """The turn's work-queue context block, or ``None`` when the agent has no
    work items (the message-driven prompt path stays unchanged).

    The current item (``bound_work_item_id`` when given and open, else the
    focus pointer) is projected in full: objective, plan descriptor with a
    bounded preview read from the file, todo list, blocker, waits and recent
    bound process trace. Other items appear as compact candidates by class,
    each within :data:`~holon_cli.model.workitem.PROMPT_LIMITS`. Completed
    items appear only through promoted reports. When ``max_chars`` is tight,
    classes are kept in priority order (current, triggered, queued,
    waiting for operator, blocked, completed): once a class has to shrink to
    its count line, every lower class is at most a count line, and the first
    class that does not fit even as a count ends the projection.
    """
    idx = load(store)
    if not idx.has_items():
        return None
    focus_id = _current_id(store)
    current_id = focus_id
    bound = idx.get(bound_work_item_id) if bound_work_item_id else None
    if bound is not None and bound["state"] == "open":
        current_id = bound_work_item_id
    current = idx.get(current_id) if current_id is not None else None
    if current_id is not None and (current is None or current["state"] != "open"):
        current_id = None
    # open items plus just enough recent completions to fill the completed class
    recent_done = idx.recent_completed_with_report(wr.PROMPT_LIMITS.get("completed_recent", 3) + 1)
    records = idx.open_records() + recent_done
    cand = wr.classify(
        records,
        current_id=current_id,
        waits=idx.wait_summaries(),
        has_report={r["id"]: True for r in recent_done},
    )
    cand.completed_total = idx.completed_count()
    header = "## Work queue"
    cur = _current_section(
        store,
        idx,
        cand.current,
        focused=current_id == focus_id,
        preview_chars=wm.PREVIEW_CHARS,
        trace_limit=trace_limit,
        exclude_turn_id=exclude_turn_id,
    )
    if len(header) + len(cur) + 1 > max_chars:
        cur = _current_section(
            store,
            idx,
            cand.current,
            focused=current_id == focus_id,
            preview_chars=400,
            trace_limit=min(trace_limit, 2),
            exclude_turn_id=exclude_turn_id,
        )
    parts = [header, cur]
    used = sum(len(p) + 1 for p in parts)
    detailed = True  # once a class is cut to its count, lower classes get counts at most
    for cls in wr.CANDIDATE_CLASSES[1:]:
        sec = _section(idx, cand, cls)
        if sec is None:
            continue
        full, compact = sec
        if detailed and used + len(full) + 2 <= max_chars:
            text = full
        elif used + len(compact) + 2 <= max_chars:
            text, detailed = compact, False
        else:
            break  # a lower class never displaces a higher one
        parts += ["", text]
        used += len(text) + 2
    return "\n".join(parts)
