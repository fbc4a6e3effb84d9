"""Agent identity and state records (the spec's Agent Identity And Visibility
Contract and AgentState), as plain dicts with defaults and validation."""

from __future__ import annotations

from typing import Any

AGENT_KINDS = ("default", "named", "child")
VISIBILITIES = ("public", "private")
OWNERSHIPS = ("self_owned", "parent_supervised")
PROFILE_PRESETS = ("public_named", "private_child")
AGENT_STATUSES = (
    "booting",
    "awake_idle",
    "awake_running",
    "awaiting_task",
    "asleep",
    "paused",
    "stopped",
)

# statuses only an operator leaves (``agent start``); a running turn, tick or
# any other runtime step never moves an agent out of them
HELD_STATUSES = ("stopped", "paused")

AGENT_RECORD_VERSION = 1


def new_agent_record(
    *,
    agent_id: str,
    kind: str,
    created_at: str,
    visibility: str = "public",
    ownership: str = "self_owned",
    profile_preset: str = "public_named",
    lineage_parent_agent_id: str | None = None,
    model_override: str | None = None,
    template: dict[str, Any] | None = None,
) -> dict[str, Any]:
    assert kind in AGENT_KINDS and visibility in VISIBILITIES and ownership in OWNERSHIPS
    return {
        "v": AGENT_RECORD_VERSION,
        "identity": {
            "agent_id": agent_id,
            "kind": kind,
            "visibility": visibility,
            "ownership": ownership,
            "profile_preset": profile_preset,
            "lineage_parent_agent_id": lineage_parent_agent_id,
            "created_at": created_at,
            "template": template,
        },
        "state": {
            "status": "awake_idle",
            "status_changed_at": created_at,
            "sleeping_until": None,
            "current_run_id": None,
            "current_work_item_id": None,
            "last_wake_reason": None,
            "last_brief_at": None,
            "last_turn_at": None,
            "total_message_count": 0,
            "total_input_tokens": 0,
            "total_output_tokens": 0,
            "total_model_rounds": 0,
            "last_turn_token_usage": None,
            "model_override": model_override,
            "attached_workspaces": [],
            "active_workspace_id": None,
            "workspace_anchor": None,
            "cwd": None,
            "pending_wake_hint": None,
            "sleep_reason": None,
            "last_closure": None,
            "turn_index": 0,
        },
    }


def lifecycle_hint(status: str) -> str | None:
    if status == "stopped":
        return "agent is stopped: resume is required before new prompts (`holon agent start <id>`); wake does not override the stopped boundary"
    if status == "paused":
        return "agent is paused: `holon agent start <id>` resumes processing"
    return None
