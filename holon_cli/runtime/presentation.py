"""The operator event presentation layer (spec "Local Operator Console
Contract"): one pure function from a raw runtime event to what a person sees.

Every human-facing surface (``holon tail --presented``, ``holon tui``, logs)
renders events through :func:`present` and filters them with
:func:`shown_at`; none formats raw events itself.

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
    if mode not in _SHOWN:
        raise ValueError(f"unknown display mode {text!r} (use info, verbose, debug or 3, 4, 5)")
    return mode  # type: ignore[return-value]


def shown_at(row: Presented, mode: DisplayMode) -> bool:
    """Whether a presented row belongs in the conversation at ``mode``."""
    return row["category"] != "state_sync" and row["visibility"] in _SHOWN[mode]


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


def _brief(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
    vis = d.get("visibility")
    visibility: Visibility = vis if vis in ("action_required", "work_done") else "turn_result"
    label = {"ack": "Acknowledged", "result": "Result", "failure": "Failed"}.get(
        str(d.get("kind")), "Brief"
    )
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


def _fixed(visibility: Visibility, category: Category, title: str, text: str) -> Presenter:
    def present_fixed(kind: str, e: Mapping[str, Any], d: Mapping[str, Any]) -> Presented:
        return _row(visibility, category, title, text.format_map(_Default(d, e)), kind)

    return present_fixed


class _Default(dict[str, Any]):
    """``str.format_map`` over event data then envelope, ``?`` when absent."""

    def __init__(self, d: Mapping[str, Any], e: Mapping[str, Any]) -> None:
        super().__init__({**e, **d})

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
        "progress", "task", "Child agent", "Spawned child {child_agent_id} ({task_id})"
    ),
    "child_agent_result_reported": _fixed(
        "progress", "task", "Child agent", "Child {child_agent_id} {task_status}"
    ),
    "child_agent_archived": _fixed("progress", "runtime", "Archived", "Archived: {reason}"),
    "worktree_retained": _fixed(
        "action_required", "task", "Worktree kept", "Worktree {path} kept: {reason}"
    ),
    "timer_created": _fixed("progress", "waiting", "Timer", "Timer set for {next_fire_at}"),
    "timer_fired": _fixed("progress", "waiting", "Timer", "Timer {timer_id} fired"),
    "timer_cancelled": _fixed("trace", "waiting", "Timer", "Timer {timer_id} cancelled"),
    "external_trigger_delivered": _fixed(
        "progress", "waiting", "Trigger", "External trigger delivered ({disposition})"
    ),
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
    "workspace_bound": _fixed("progress", "workspace", "Workspace", "Workspace {workspace_anchor}"),
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
