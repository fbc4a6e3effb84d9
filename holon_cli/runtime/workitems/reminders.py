"""The provider-only work-item progress reminder: after N provider rounds
without a successful work-item mutation, remind the model of its current
item (derived text, bounded, never recorded).

Settings: environment > ``config.yaml`` ``runtime.*`` > defaults.
"""

from __future__ import annotations

import os

from holon_cli.errors import UsageError
from holon_cli.runtime.workitems.access import config_runtime, current_id
from holon_cli.runtime.workitems.hints import STALE_REMINDER_CLOSING
from holon_cli.runtime.workitems.projection import plan_gist, todo_mark
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.workitem_index import load

STALE_REMINDER_DEFAULTS = {"rounds": 8, "cooldown_rounds": 8, "max_tokens": 400}


def _int_setting(env: str, key: str, default: int) -> int:
    raw = os.environ.get(env)
    if raw is not None and raw.strip():
        try:
            return int(raw)
        except ValueError:
            raise UsageError(
                f"{env} must be an integer (got {raw!r})",
                hint=f"unset {env} or set it to a whole number",
            ) from None
    value = config_runtime().get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def stale_reminder_settings() -> dict[str, int]:
    """Threshold, cooldown and token budget of the progress reminder:
    environment > ``config.yaml`` ``runtime.*`` > defaults."""
    return {
        "rounds": _int_setting(
            "HOLON_WORK_ITEM_STALE_REMINDER_ROUNDS",
            "work_item_stale_reminder_rounds",
            STALE_REMINDER_DEFAULTS["rounds"],
        ),
        "cooldown_rounds": _int_setting(
            "HOLON_WORK_ITEM_STALE_REMINDER_COOLDOWN_ROUNDS",
            "work_item_stale_reminder_cooldown_rounds",
            STALE_REMINDER_DEFAULTS["cooldown_rounds"],
        ),
        "max_tokens": _int_setting(
            "HOLON_WORK_ITEM_STALE_REMINDER_MAX_TOKENS",
            "work_item_stale_reminder_max_tokens",
            STALE_REMINDER_DEFAULTS["max_tokens"],
        ),
    }


def stale_reminder(store: AgentStore, rounds_without_mutation: int) -> str | None:
    """A provider-only progress reminder, or ``None``.

    Fires when ``rounds_without_mutation`` (consecutive provider rounds with
    no successful work-item mutation; the engine counts) reaches the
    threshold, then every ``cooldown`` rounds after it (cooldown <= 0: once).
    A threshold <= 0 disables it. The text is derived from the current item
    (completed todos omitted) and bounded to ``max_tokens`` (~4 chars each).
    It records nothing.
    """
    cfg = stale_reminder_settings()
    threshold, cooldown = cfg["rounds"], cfg["cooldown_rounds"]
    if threshold <= 0 or rounds_without_mutation < threshold:
        return None
    over = rounds_without_mutation - threshold
    if over and (cooldown <= 0 or over % cooldown):
        return None
    cur_id = current_id(store)
    if cur_id is None:
        return None
    rec = load(store).get(cur_id)
    if rec is None or rec.get("state") != "open":
        return None
    lines = [
        f"Work-item progress reminder: {rounds_without_mutation} provider rounds "
        "without a work-item update.",
        f"Current work item {rec['id']}: {rec['objective']}",
        f"plan_status: {rec['plan_status']}; plan: {rec['plan_artifact']['path']}",
    ]
    gist = plan_gist(rec)
    if gist:
        lines.append(f"plan gist: {gist}")
    active = [t for t in rec.get("todo_list") or [] if t.get("state") != "completed"]
    if active:
        lines.append(
            "active todos: " + "; ".join(f"{todo_mark(t['state'])} {t['text']}" for t in active)
        )
    if rec.get("blocked_by"):
        lines.append(f"blocked_by: {rec['blocked_by']}")
    lines.append(STALE_REMINDER_CLOSING)
    text = "\n".join(lines)
    limit = max(80, cfg["max_tokens"] * 4)
    return text if len(text) <= limit else text[: limit - 1] + "…"
