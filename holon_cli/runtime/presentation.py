"""The operator event presentation layer (spec "Local Operator Console
Contract"): one pure function from a raw runtime event to what a person sees.

Every human-facing surface (``holon tail --presented``, ``holon tui``, the
web console, logs) renders events through :func:`present`, takes a row's
text from :func:`row_text` and filters rows with :func:`shown_at` (or tags
them with :func:`shown_modes`); none formats raw events itself.

- ``visibility`` orders operator relevance: ``action_required`` >
  ``work_done`` > ``turn_result`` > ``progress`` > ``trace``.
- ``category`` is one of :data:`CATEGORIES`. There is no ``severity``:
  each surface decides delivery from visibility, category and context.
- Display modes: ``info`` (3) shows results, ``verbose`` (4) adds progress,
  ``debug`` (5) adds curated trace rows. State-sync events are never
  conversation rows; raw inspection (``trace``) is ``holon tail`` / ``/events``.
- Provider rounds read ``Assistant progress: <preview>`` when the model
  wrote text, ``Model requested tools: A, B`` when it only called tools.

Text here is data: surfaces still strip terminal control characters before
printing (event text can come from a model or a webhook).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypedDict, get_args

Visibility = Literal["action_required", "work_done", "turn_result", "progress", "trace"]
Category = Literal[
    "operator_notification",
    "brief",
    "message",
    "work_item",
    "task",
    "waiting",
    "workspace",
    "runtime",
    "assistant_progress",
    "tool",
    "state_sync",
    "trace",
]
DisplayMode = Literal["info", "verbose", "debug"]

VISIBILITIES: tuple[str, ...] = get_args(Visibility)
CATEGORIES: tuple[str, ...] = get_args(Category)
DISPLAY_MODES: tuple[DisplayMode, ...] = ("info", "verbose", "debug")
DISPLAY_ALIASES = {"3": "info", "4": "verbose", "5": "debug"}
_SHOWN: dict[str, frozenset[str]] = {
    "info": frozenset({"action_required", "work_done", "turn_result"}),
    "verbose": frozenset({"action_required", "work_done", "turn_result", "progress"}),
    "debug": frozenset(VISIBILITIES),
}
PREVIEW = 280


class Presented(TypedDict):
    visibility: Visibility
    category: Category
    title: str
    body: str | None
    summary: str
    source_event_kind: str


def display_mode(text: str) -> DisplayMode:
    """``info``/``verbose``/``debug`` or their numeric aliases 3/4/5."""
    mode = DISPLAY_ALIASES.get(text.strip(), text.strip().lower())
    for known in DISPLAY_MODES:
        if mode == known:
            return known
    raise ValueError(f"unknown display mode {text!r} (use info, verbose, debug or 3, 4, 5)")


def shown_at(row: Presented, mode: DisplayMode) -> bool:
    """Whether a presented row belongs in the conversation at ``mode``."""
    return row["category"] != "state_sync" and row["visibility"] in _SHOWN[mode]


def shown_modes(row: Presented) -> tuple[DisplayMode, ...]:
    """The display modes whose conversation shows ``row`` (none for a state
    sync): what a surface that switches modes without re-presenting (the web
    console) tags each row with."""
    return tuple(m for m in DISPLAY_MODES if shown_at(row, m))


def row_text(row: Presented) -> str:
    """The text a conversation shows for a row: a brief's or a message's
    whole body, anything else's one-line summary."""
    body = row["body"]
    return body if row["category"] in ("brief", "message") and body else row["summary"]


def _short(text: Any, limit: int = PREVIEW) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _row(
    visibility: Visibility,
    category: Category,
    title: str,
    summary: str,
    kind: str,
    body: str | None = None,
) -> Presented:
    return {
        "visibility": visibility,
        "category": category,
        "title": title,
        "body": body,
        "summary": summary,
        "source_event_kind": kind,
    }


Presenter = Callable[[str, Mapping[str, Any], Mapping[str, Any]], Presented]


# named notices a brief can carry (``title``): the guard's, ...
BRIEF_TITLES = {"no_progress_guard": "No progress"}


def _brief(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    """A brief; one that needs the operator (a budget stop, the no-progress
    guard, a question) says so in its title whatever its kind."""
    vis = d.get("visibility")
    visibility: Visibility = vis if vis in ("action_required", "work_done") else "turn_result"
    label = {"ack": "Acknowledged", "result": "Result", "failure": "Failed"}.get(
        str(d.get("kind")), "Brief"
    )
    if visibility == "action_required" and label != "Failed":
        label = "Needs you"
    title = d.get("title")
    if isinstance(title, str) and title:
        label = BRIEF_TITLES.get(title, title.replace("_", " ").capitalize())
    text = str(d.get("text_preview") or "")
    return _row(visibility, "brief", label, _short(text) or label, kind, text or None)


def _origin_label(origin: Any) -> str:
    """``webhook:github``, ``timer:tmr_1``: the origin's kind and its id field."""
    if not isinstance(origin, Mapping):
        return str(origin or "?")
    kind = str(origin.get("kind") or "?")
    ident = next((str(v) for k, v in origin.items() if k != "kind" and v), "")
    return f"{kind}:{ident}" if ident else kind


def _message(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    """Operator messages are conversation rows; evidence is progress; the
    runtime's own messages (timers, task results) are trace."""
    authority = e.get("authority_class")
    text = str(d.get("text_preview") or "")
    origin = _origin_label(e.get("origin"))
    if authority == "operator_instruction":
        return _row("turn_result", "message", "Operator", _short(text) or "(message)", kind, text)
    if authority in ("external_evidence", "integration_signal"):
        title = f"Evidence from {origin}"
        return _row("progress", "message", title, _short(text) or origin, kind, text or None)
    what = str(d.get("kind") or "message")
    return _row("trace", "message", "Runtime message", f"{what} from {origin}", kind)


def _assistant_round(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    preview = _short(d.get("text_preview"))
    tools = [
        str(t.get("name") if isinstance(t, Mapping) else t) for t in d.get("tool_requests") or []
    ]
    if preview:
        summary = f"Assistant progress: {preview}"
    elif tools:
        summary = "Model requested tools: " + ", ".join(tools)
    else:
        summary = f"Model round {d.get('round', '?')} finished"
    return _row("progress", "assistant_progress", "Assistant", summary, kind)


def _tool(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    name = str(d.get("tool_name") or "tool")
    ms = d.get("duration_ms")
    took = f" ({ms:.0f} ms)" if isinstance(ms, (int, float)) else ""
    if d.get("ok", True):
        return _row("trace", "tool", name, f"{name} ran{took}", kind)
    err = d.get("tool_error") or {}
    why = err.get("kind") if isinstance(err, Mapping) else None
    return _row("trace", "tool", name, f"{name} failed: {why or d.get('error') or '?'}{took}", kind)


def _turn_terminal(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    status = str(d.get("status") or "?")
    if status in ("failed", "aborted"):
        why = d.get("failure_kind") or (d.get("closure") or {}).get("reason") or status
        return _row("turn_result", "runtime", "Turn " + status, f"Turn {status}: {why}", kind)
    return _row("trace", "runtime", "Turn " + status, f"Turn {status}", kind)


def _work_item(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    wid = e.get("work_item_id") or "?"
    if kind == "work_item_completed":
        obj = _short(d.get("objective"), 120)
        return _row("work_done", "work_item", "Work done", f"Completed {wid}: {obj}", kind)
    if kind == "work_item_created":
        obj = _short(d.get("objective"), 120)
        return _row("progress", "work_item", "Work item", f"Created {wid}: {obj}", kind)
    if kind == "work_item_picked":
        return _row("progress", "work_item", "Work item", f"Now working on {wid}", kind)
    verb = kind.removeprefix("work_item_").replace("_", " ")
    return _row("trace", "work_item", "Work item", f"{wid}: {verb}", kind)


def _workspace(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    """Where the agent works now (bound), what it dropped (detached), the
    isolated worktree the runtime made for it (created)."""
    wid = d.get("workspace_id") or "?"
    if kind == "workspace_detached":
        gone = " (its directory was already gone)" if d.get("stale") else ""
        text = f"Detached {wid} {d.get('workspace_anchor') or ''}".rstrip() + gone
        return _row("progress", "workspace", "Workspace", text, kind)
    if kind == "worktree_created":
        text = (
            f"Isolated worktree for {wid}: branch {d.get('worktree_branch', '?')} from "
            f"{d.get('original_branch', '?')} at {d.get('worktree_path', '?')}"
        )
        return _row("progress", "workspace", "Worktree", text, kind)
    if wid == "agent_home":
        return _row("progress", "workspace", "Workspace", "Working in the agent's home", kind)
    root = d.get("execution_root") or d.get("workspace_anchor") or "?"
    mode = f", {d['mode']}" if d.get("mode") else ""
    text = f"Working in {wid} {root} ({d.get('projection_kind') or 'canonical_root'}{mode})"
    return _row("progress", "workspace", "Workspace", text, kind)


def _repaired(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    """A stale run settled at the next turn, or a damaged state file or
    ledger rebuilt by ``holon home check --repair``."""
    if "stale_run_id" in d or "to" in d:
        text = (
            f"Stale run {d.get('stale_run_id') or '?'} repaired: {d.get('from')} -> {d.get('to')}"
        )
    elif "lost_event_seq" in d:
        text = f"{d.get('file')} repaired; events from {d.get('lost_event_seq')} were lost"
    else:
        text = f"{d.get('file', '?')} rebuilt from {d.get('rebuilt_from', '?')}"
    return _row("progress", "runtime", "Repaired", text, kind)


def _counted(
    visibility: Visibility, category: Category, title: str, text: str, key: str
) -> Presenter:
    """A fixed row whose ``{n}`` is the length of the list ``data[key]``."""

    def present_counted(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
        items = d.get(key)
        n = len(items) if isinstance(items, list) else 0
        return _row(visibility, category, title, text.format_map(_Default({**d, "n": n}, e)), kind)

    return present_counted


def _started(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    what = "Replaying" if d.get("replayed") else "Working on"
    attempt = d.get("attempt")
    parts = [str(d["trigger_kind"])] if d.get("trigger_kind") else []
    if isinstance(attempt, int) and attempt > 1:
        parts.append(f"attempt {attempt}")
    why = f" ({', '.join(parts)})" if parts else ""
    return _row("trace", "runtime", "Turn", f"{what} a message{why}", kind)


def _plan(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    path = d.get("path") or "?"
    if kind == "plan_artifact_missing":
        return _row("progress", "work_item", "Plan", f"Plan file {path} is missing", kind)
    how = "restored" if d.get("restored") else "changed"
    return _row("trace", "work_item", "Plan", f"Plan file {path} {how}", kind)


def _delivered(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    """An external trigger delivery; the work items it made triggered (the
    ``triggered_blocked`` candidate class: reviewed by the agent, blocker kept)."""
    text = f"External trigger delivered ({d.get('disposition') or '?'})"
    items = [str(w) for w in d.get("work_item_ids") or [] if w]
    if items:
        text += f"; triggered: {', '.join(items[:5])}" + (" …" if len(items) > 5 else "")
        text += " (blocker kept until the agent reviews it)"
    return _row("progress", "waiting", "Trigger", text, kind)


# ``holon status`` / console work-item counts: how each bucket reads
WORK_COUNT_LABELS = {"triggered_blocked": "triggered_blocked (wait fired, review)"}


def work_counts(counts: Mapping[str, Any]) -> str:
    """The work-item counts of ``holon status`` and the console, non-zero
    ones in the order given (``triggered_blocked``: items whose wait fired,
    still blocked until the agent reviews them), or ``none``."""
    return ", ".join(f"{WORK_COUNT_LABELS.get(k, k)} {v}" for k, v in counts.items() if v) or "none"


def _fixed(visibility: Visibility, category: Category, title: str, text: str) -> Presenter:
    def present_fixed(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
        return _row(visibility, category, title, text.format_map(_Default(d, e)), kind)

    return present_fixed


class _Default(dict[str, object]):
    """``str.format_map`` over event data then envelope, ``?`` when absent."""

    def __init__(self, d: Mapping[str, Any], e: Mapping[str, Any]) -> None:
        super().__init__({k: v for k, v in {**e, **d}.items() if v is not None})

    def __missing__(self, key: str) -> str:
        return "?"


_PRESENTERS: dict[str, Presenter] = {
    "brief_recorded": _brief,
    "message_admitted": _message,
    "assistant_round_recorded": _assistant_round,
    "tool_executed": _tool,
    "turn_terminal": _turn_terminal,
    "agent_state_changed": _fixed("trace", "state_sync", "State", "{from} -> {to}"),
    "session_state_changed": _fixed("trace", "state_sync", "State", "session state changed"),
    "provider_round_completed": _fixed(
        "trace", "trace", "Provider", "Round {round} of {model_ref}: {provider_round_ms} ms"
    ),
    "runtime_error": _fixed("turn_result", "runtime", "Runtime error", "{failure_kind}: {error}"),
    "turn_interrupted": _fixed(
        "turn_result", "runtime", "Interrupted", "Turn interrupted: {reason}"
    ),
    "turn_round_limit_reached": _fixed(
        "action_required", "runtime", "Round limit", "Turn stopped after {rounds} rounds"
    ),
    "context_compacted": _fixed(
        "trace",
        "runtime",
        "Compacted",
        "Compacted {compacted_message_count} older message(s) (epoch {compression_epoch})",
    ),
    "context_window_rolled": _fixed(
        "trace",
        "runtime",
        "Window rolled",
        "{dropped_message_count} message(s) of earlier turns left the prompt "
        "(epoch {compression_epoch})",
    ),
    "inbox_message_quarantined": _fixed(
        "action_required", "runtime", "Quarantined", "A message was quarantined: {reason}"
    ),
    "inbox_message_rejected": _fixed(
        "action_required", "runtime", "Rejected", "A message was rejected: {reason}"
    ),
    "queue_ledger_truncated": _fixed(
        "action_required", "runtime", "Queue repaired", "The queue ledger was cut and repaired"
    ),
    "task_recovery_failed": _fixed(
        "action_required", "task", "Task recovery", "Task recovery failed: {error}"
    ),
    "tasks_recovered": _fixed("progress", "task", "Tasks", "Recovered tasks after a restart"),
    "child_agent_spawned": _fixed(
        "progress",
        "task",
        "Child agent",
        "Spawned child {child_agent_id} ({task_id}, {workspace_mode} workspace)",
    ),
    "child_agent_result_reported": _fixed(
        "progress", "task", "Child agent", "Child {child_agent_id} {task_status}"
    ),
    "child_agent_archived": _fixed("progress", "runtime", "Archived", "Archived: {reason}"),
    "worktree_retained": _counted(
        "action_required",
        "task",
        "Worktree kept",
        "Child worktree {path} (branch {branch}) kept with {n} changed file(s): {reason}",
        "changed_files",
    ),
    "timer_created": _fixed("progress", "waiting", "Timer", "Timer set for {next_fire_at}"),
    "timer_fired": _fixed("progress", "waiting", "Timer", "Timer {timer_id} fired"),
    "timer_cancelled": _fixed("trace", "waiting", "Timer", "Timer {timer_id} cancelled"),
    "external_trigger_delivered": _delivered,
    "wake_hint_converted": _fixed("trace", "waiting", "Wake", "Wake hint became a message"),
    "waiting_intent_recorded": _fixed("progress", "waiting", "Waiting", "Waiting on {source}"),
    "waiting_intent_cancelled": _fixed("trace", "waiting", "Waiting", "Stopped waiting: {reason}"),
    "continuation_resolved": _fixed("trace", "waiting", "Waiting", "Continuation resolved"),
    "message_settled_without_turn": _fixed(
        "trace", "waiting", "Settled", "Settled without a turn ({resolution})"
    ),
    "trigger_provisioned": _fixed("progress", "waiting", "Trigger", "Trigger provisioned"),
    "trigger_rotated": _fixed("progress", "waiting", "Trigger", "Trigger token rotated"),
    "trigger_revoked": _fixed("progress", "waiting", "Trigger", "Trigger revoked"),
    "workspace_bound": _workspace,
    "workspace_detached": _workspace,
    "worktree_created": _workspace,
    "agent_state_repaired": _repaired,
    "inbox_message_corrected": _fixed(
        "trace", "runtime", "Inbox", "Inbox message {file} corrected: {reason}"
    ),
    "queue_rebuilt_from_inbox": _counted(
        "progress",
        "runtime",
        "Queue repaired",
        "The queue was rebuilt from the inbox ({n} message(s) restored): {reason}",
        "restored_message_ids",
    ),
    "message_requeued": _fixed(
        "progress", "runtime", "Requeued", "Message {message_id} requeued (queue #{queue_seq})"
    ),
    "message_replayed": _fixed(
        "trace", "runtime", "Replayed", "Message {message_id} replayed (attempt {attempts})"
    ),
    "message_interjected": _fixed(
        "progress", "message", "Interjected", "A new message joined the running turn"
    ),
    "message_processing_started": _started,
    "turn_context_built": _fixed(
        "trace", "trace", "Context", "Context built: {tool_count} tools in {context_build_ms} ms"
    ),
    "turn_abort_requested": _fixed(
        "progress", "runtime", "Abort", "Abort requested for run {run_id}"
    ),
    "tick_completed": _counted("trace", "runtime", "Tick", "Tick: {n} action(s)", "actions"),
    "plan_artifact_changed": _plan,
    "plan_artifact_missing": _plan,
    "history_trimmed": _fixed(
        "progress",
        "runtime",
        "History trimmed",
        "Events through #{through_seq} were removed by retention (before {before})",
    ),
    "agent_created": _fixed("progress", "runtime", "Agent", "Agent {agent_id} created"),
    "agent_model_changed": _fixed("progress", "runtime", "Model", "Model changed"),
    "skill_activated": _fixed("trace", "tool", "Skill", "Skill {skill} active ({load_reason})"),
}
for _k in ("work_item_created", "work_item_updated", "work_item_picked", "work_item_completed"):
    _PRESENTERS[_k] = _work_item
for _k in ("work_item_focus_released", "work_item_recheck_due", "work_item_stale_reminder"):
    _PRESENTERS[_k] = _work_item
for _k in ("work_item_turn_end_commit", "work_item_continuation_held"):
    _PRESENTERS[_k] = _work_item


# kinds whose row (visibility, title) depends on the event's data, and on what;
# every other kind is shown as it is with no data (the generated events
# reference, docs/reference/events.md, prints both)
DEPENDS_ON_DATA = {
    "brief_recorded": "a brief's own visibility: action_required (titled Needs you, or "
    "its notice) and work_done as they are, anything else turn_result",
    "message_admitted": "the message's authority: an operator instruction is a "
    "turn_result row, evidence (a channel, a webhook) progress, the runtime's own "
    "messages (timers, task results) trace",
    "turn_terminal": "the status: a failed or aborted turn is a turn_result row, a "
    "completed one trace",
}


def present(event: Mapping[str, Any]) -> Presented:
    """One raw event as a person sees it; unknown kinds are trace rows."""
    kind = str(event.get("kind") or "?")
    data = event.get("data")
    d: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
    fn = _PRESENTERS.get(kind)
    if fn is None:
        return _row("trace", "trace", kind, kind.replace("_", " "), kind)
    return fn(kind, event, d)


class Activity:
    """What the agent is doing now, scoped to one turn: a new operator
    message or a new turn clears the previous turn's preview and tool."""

    def __init__(self) -> None:
        self.turn_id: str | None = None
        self.text = ""

    def update(self, event: Mapping[str, Any], row: Presented) -> str:
        kind = event.get("kind")
        turn = (
            (event.get("data") or {}).get("turn_id")
            if isinstance(event.get("data"), Mapping)
            else None
        )
        if kind == "message_processing_started" or (
            kind == "message_admitted"
            and row["category"] == "message"
            and row["visibility"] != "trace"
        ):
            self.turn_id, self.text = turn, ""
        elif kind == "turn_terminal":
            self.turn_id, self.text = None, ""
        elif row["category"] in ("assistant_progress", "tool") and (
            turn is None or turn == self.turn_id or self.turn_id is None
        ):
            self.turn_id, self.text = turn, row["summary"]
        return self.text
