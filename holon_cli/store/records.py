"""Schema checks for the records the store reads back: one small validator
per record kind, looked up by ledger name or snapshot file.

Valid JSON is not enough: an ``admitted`` queue record without ``message``,
an ``agent.json`` without ``state`` or a string ``offset`` in ``queue.json``
used to end in a ``KeyError``/``TypeError`` traceback far from the file.
Every ledger line (``Ledger`` looks its validator up by file name) and every
known snapshot (``fsio.read_snapshot`` by file name) is checked when it is
read, so a damaged record is a ``CorruptStateError`` that names the file (and
the line), in ``holon home check`` and in every other command alike.

A validator returns ``None`` for a good record or a short reason. Checks are
structural (the fields readers index into, with their types), not semantic,
and accept both spellings of envelope keys (camelCase on disk from older
versions, snake_case). To cover a new record kind, add a function and one
line to ``LEDGERS`` or ``SNAPSHOTS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from holon_cli.model.agent import AGENT_STATUSES
from holon_cli.model.envelope import PRIORITIES

Validator = Callable[[Mapping[str, Any]], "str | None"]

QUEUE_STATUSES = ("queued", "dequeued", "processed", "aborted", "interrupted")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _type(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _need(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> str | None:
    if key not in obj:
        return f"{what} has no `{key}`"
    v = obj[key]
    ok = _is_int(v) if kind is int else isinstance(v, kind)
    if not ok:
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        return f"{what}: `{key}` must be {want}, got {_type(v)}"
    return None


def _opt(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> str | None:
    if obj.get(key) is None:
        return None
    return _need(obj, key, kind, what)


def _first(*reasons: str | None) -> str | None:
    return next((r for r in reasons if r), None)


# ---------------------------------------------------------------- envelope


def envelope_problem(env: Any, what: str = "message") -> str | None:
    """The fields every reader of an envelope relies on."""
    if not isinstance(env, Mapping):
        return f"{what} must be an object, got {_type(env)}"
    reason = _first(
        _need(env, "id", str, what),
        _opt(env, "kind", str, what),
        _opt(env, "body", dict, what),
        _opt(env, "origin", dict, what),
    )
    if reason:
        return reason
    if not env["id"]:
        return f"{what}: `id` is empty"
    prio = env.get("priority")
    if prio is not None and (not isinstance(prio, str) or prio not in PRIORITIES):
        return f"{what}: `priority` must be one of {', '.join(PRIORITIES)}, got {prio!r}"[:200]
    return None


def envelope_ref_problem(env: Any, what: str = "message") -> str | None:
    """What a record that *carries* an envelope needs so readers can fold it:
    an object with an id. Other fields of an already-admitted envelope (a bad
    priority or body from an older holon) are tolerated by the queue itself,
    which runs or aborts such a message instead of wedging."""
    if not isinstance(env, Mapping):
        return f"{what} must be an object, got {_type(env)}"
    reason = _need(env, "id", str, what)
    if reason:
        return reason
    return f"{what}: `id` is empty" if not env["id"] else None


# ----------------------------------------------------------------- ledgers


def queue_record(rec: Mapping[str, Any]) -> str | None:
    op = rec.get("op")
    if op == "admitted":
        return _first(
            _opt(rec, "seq", int, "admitted record"),
            _need(rec, "message", dict, "admitted record")
            or envelope_ref_problem(rec["message"], "admitted record's message"),
        )
    if op == "status":
        reason = _first(
            _need(rec, "message_id", str, "status record"),
            _need(rec, "status", str, "status record"),
        )
        if reason:
            return reason
        if rec["status"] not in QUEUE_STATUSES:
            return f"status record: unknown status {rec['status']!r}"[:200]
        return None
    return None  # other ops are ignored by readers


def event_record(rec: Mapping[str, Any]) -> str | None:
    return _first(
        _need(rec, "event_seq", int, "event"),
        _need(rec, "kind", str, "event"),
        _opt(rec, "data", dict, "event"),
    )


def transcript_record(rec: Mapping[str, Any]) -> str | None:
    return _need(rec, "kind", str, "transcript entry")


def spend_record(rec: Mapping[str, Any]) -> str | None:
    reason = _first(
        _need(rec, "ts", (int, float), "spend record"),
        _need(rec, "agent_id", str, "spend record"),
        _need(rec, "turn_id", str, "spend record"),
        _need(rec, "input_tokens", int, "spend record"),
        _need(rec, "output_tokens", int, "spend record"),
        _opt(rec, "cost_usd", (int, float), "spend record"),
        _opt(rec, "cached_input_tokens", int, "spend record"),
    )
    if reason:
        return reason
    if rec["input_tokens"] < 0 or rec["output_tokens"] < 0 or rec.get("cached_input_tokens", 0) < 0:
        return "spend record: negative token count"
    return None


def brief_record(rec: Mapping[str, Any]) -> str | None:
    return _first(_need(rec, "kind", str, "brief"), _opt(rec, "text", str, "brief"))


def work_item_record(rec: Mapping[str, Any]) -> str | None:
    return _first(
        _need(rec, "id", str, "work item record"),
        _need(rec, "state", str, "work item record"),
        _opt(rec, "objective", str, "work item record"),
    )


def delivery_summary_record(rec: Mapping[str, Any]) -> str | None:
    return _first(
        _need(rec, "work_item_id", str, "delivery summary"),
        _opt(rec, "text", str, "delivery summary"),
    )


def waiting_intent_record(rec: Mapping[str, Any]) -> str | None:
    return _first(
        _need(rec, "id", str, "waiting intent"),
        _opt(rec, "work_item_id", str, "waiting intent"),
        _opt(rec, "status", str, "waiting intent"),
    )


def timer_ledger_record(rec: Mapping[str, Any]) -> str | None:
    reason = _first(
        _need(rec, "op", str, "timer record"), _need(rec, "timer", dict, "timer record")
    )
    return reason or timer_problem(rec["timer"], "timer record's timer")


def timer_problem(t: Any, what: str) -> str | None:
    if not isinstance(t, Mapping):
        return f"{what} must be an object, got {_type(t)}"
    return _first(
        _need(t, "id", str, what),
        _need(t, "status", str, what),
        _opt(t, "next_fire_at", str, what),
        _opt(t, "every_ms", int, what),
        _opt(t, "fire_count", int, what),
    )


def trigger_ledger_record(rec: Mapping[str, Any]) -> str | None:
    reason = _first(
        _need(rec, "op", str, "trigger record"), _opt(rec, "trigger", dict, "trigger record")
    )
    if reason or rec.get("trigger") is None:
        return reason
    return trigger_snapshot(rec["trigger"])


def task_ledger_record(rec: Mapping[str, Any]) -> str | None:
    return _first(_need(rec, "id", str, "task record"), _need(rec, "status", str, "task record"))


def delegation_record(rec: Mapping[str, Any]) -> str | None:
    """A delegation record (runtime/children: started, completed)."""
    return _first(
        _need(rec, "event", str, "delegation record"),
        _need(rec, "delegation_id", str, "delegation record"),
        _need(rec, "supervision_task_id", str, "delegation record"),
        _need(rec, "child_agent_id", str, "delegation record"),
    )


def episode_record(rec: Mapping[str, Any]) -> str | None:
    """A finalized context episode (runtime/memory/episodes.py)."""
    return _first(
        _need(rec, "episode_id", str, "episode"),
        _need(rec, "summary", str, "episode"),
        _need(rec, "turn_range", list, "episode"),
        _opt(rec, "work_item_id", str, "episode"),
        _opt(rec, "touched_files", list, "episode"),
        _opt(rec, "commands", list, "episode"),
    )


def turn_record(rec: Mapping[str, Any]) -> str | None:
    """A settled turn's record (runtime/replay/records.py): its ids, and the
    compressed record or the reason there is none."""
    return _first(
        _need(rec, "turn_id", str, "turn record"),
        _opt(rec, "message_id", str, "turn record"),
        _opt(rec, "codec", str, "turn record"),
        _opt(rec, "data", str, "turn record"),
        _opt(rec, "broken", str, "turn record"),
    )


LEDGERS: dict[str, Validator] = {
    "context_episodes": episode_record,
    "turn_records": turn_record,
    "queue": queue_record,
    "events": event_record,
    "transcript": transcript_record,
    "spend": spend_record,
    "briefs": brief_record,
    "work_items": work_item_record,
    "delivery_summaries": delivery_summary_record,
    "waiting_intents": waiting_intent_record,
    "timers": timer_ledger_record,
    "triggers": trigger_ledger_record,
    "tasks": task_ledger_record,
    "delegations": delegation_record,
}


def ledger_validator(name: str) -> Validator | None:
    return LEDGERS.get(name)


# --------------------------------------------------------------- snapshots


def agent_snapshot(rec: Mapping[str, Any]) -> str | None:
    reason = _first(
        _need(rec, "identity", dict, "agent record"),
        _need(rec, "state", dict, "agent record"),
    )
    if reason:
        return reason
    ident, state = rec["identity"], rec["state"]
    reason = _first(
        _need(ident, "agent_id", str, "agent record identity"),
        _need(ident, "kind", str, "agent record identity"),
        _opt(ident, "visibility", str, "agent record identity"),
        _need(state, "status", str, "agent record state"),
        _opt(state, "turn_index", int, "agent record state"),
        _opt(state, "current_work_item_id", str, "agent record state"),
        _opt(state, "model_override", str, "agent record state"),
    )
    if reason:
        return reason
    if state["status"] not in AGENT_STATUSES:
        return f"agent record state: unknown status {state['status']!r}"[:200]
    return None


def queue_snapshot(snap: Mapping[str, Any]) -> str | None:
    reason = _first(
        _opt(snap, "offset", int, "queue snapshot"),
        _opt(snap, "next_seq", int, "queue snapshot"),
        _opt(snap, "processed", int, "queue snapshot"),
        _opt(snap, "aborted", int, "queue snapshot"),
        _opt(snap, "entries", list, "queue snapshot"),
        _opt(snap, "recent_final", list, "queue snapshot"),
    )
    if reason:
        return reason
    if int(snap.get("offset") or 0) < 0:
        return "queue snapshot: `offset` is negative"
    for i, e in enumerate(snap.get("entries") or []):
        what = f"queue snapshot entries[{i}]"
        if not isinstance(e, Mapping):
            return f"{what} must be an object, got {_type(e)}"
        reason = _first(
            _need(e, "message_id", str, what),
            _need(e, "seq", int, what),
            _need(e, "status", str, what),
            _opt(e, "priority", str, what),
            _opt(e, "attempts", int, what),
        )
        if reason:
            return reason
        if "envelope" in e:
            reason = envelope_ref_problem(e["envelope"], f"{what}.envelope")
            if reason:
                return reason
    if not all(isinstance(x, str) for x in snap.get("recent_final") or []):
        return "queue snapshot: `recent_final` must hold message ids"
    return None


def home_marker(rec: Mapping[str, Any]) -> str | None:
    return _opt(rec, "created_at", str, "home marker")


def timers_snapshot(snap: Mapping[str, Any]) -> str | None:
    reason = _first(
        _need(snap, "offset", int, "timers snapshot"),
        _need(snap, "timers", list, "timers snapshot"),
    )
    if reason:
        return reason
    for i, t in enumerate(snap["timers"]):
        reason = timer_problem(t, f"timers snapshot timers[{i}]")
        if reason:
            return reason
    return None


def trigger_snapshot(rec: Mapping[str, Any]) -> str | None:
    return _first(
        _need(rec, "external_trigger_id", str, "trigger record"),
        _need(rec, "status", str, "trigger record"),
        _opt(rec, "token_sha256", str, "trigger record"),
        _opt(rec, "token_generation", int, "trigger record"),
        _opt(rec, "trigger_count", int, "trigger record"),
    )


def work_items_snapshot(snap: Mapping[str, Any]) -> str | None:
    reason = _first(
        _need(snap, "offset", int, "work item index"),
        _opt(snap, "ds_offset", int, "work item index"),
        _opt(snap, "wait_offset", int, "work item index"),
        _need(snap, "items", dict, "work item index"),
        _opt(snap, "reports", dict, "work item index"),
        _opt(snap, "waits", dict, "work item index"),
        _opt(snap, "archive", dict, "work item index"),
    )
    if reason:
        return reason
    arch = snap.get("archive")
    if isinstance(arch, Mapping):
        reason = _first(
            _opt(arch, "generation", str, "work item index archive"),
            _opt(arch, "bytes", int, "work item index archive"),
            _opt(arch, "items", int, "work item index archive"),
            _opt(arch, "lines", int, "work item index archive"),
        )
        if reason:
            return reason
        if any(isinstance(arch.get(k), int) and arch[k] < 0 for k in ("bytes", "items", "lines")):
            return "work item index archive: `bytes`, `items` and `lines` must not be negative"
    for wid, item in snap["items"].items():
        if not isinstance(item, Mapping):
            return f"work item index items[{wid!r}] must be an object, got {_type(item)}"
        reason = work_item_record(item)
        if reason:
            return f"work item index items[{wid!r}]: {reason}"
    return None


def template_snapshot(rec: Mapping[str, Any]) -> str | None:
    return _first(
        _opt(rec, "kind", str, "template record"), _opt(rec, "skills", list, "template record")
    )


SNAPSHOTS: dict[tuple[str, str], Validator] = {
    ("state", "agent.json"): agent_snapshot,
    ("state", "queue.json"): queue_snapshot,
    ("state", "timers.json"): timers_snapshot,
    ("state", "trigger.json"): trigger_snapshot,
    ("state", "work_items.json"): work_items_snapshot,
    ("state", "template.json"): template_snapshot,
    ("", "home.json"): home_marker,
}


def snapshot_validator(path: Path) -> Validator | None:
    hit = SNAPSHOTS.get((path.parent.name, path.name))
    if hit is None and path.name == "home.json":
        return SNAPSHOTS[("", "home.json")]
    return hit
