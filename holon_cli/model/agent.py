"""Agent identity and state records (the spec's Agent Identity And Visibility
Contract and AgentState), as plain dicts with defaults and validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

if TYPE_CHECKING:
    from holon_cli.model.continuation import ContinuationRecord
    from holon_cli.model.failure import LastFailure
    from holon_cli.model.memory import WorkingMemoryState
    from holon_cli.model.turn import ClosureDecision, NoProgressStreak
    from holon_cli.model.workitem import ContinuationHold
    from holon_cli.model.workspace import ProjectionKind, WorktreeSession

# the record's parts, imported when an agent record is first checked
# (model/typed.py reads the annotations through __getattr__ below): `holon
# enqueue` imports this module and pays for them only when it reads a record
_PARTS = {
    "ContinuationRecord": "holon_cli.model.continuation",
    "WorkingMemoryState": "holon_cli.model.memory",
    "LastFailure": "holon_cli.model.failure",
    "ClosureDecision": "holon_cli.model.turn",
    "NoProgressStreak": "holon_cli.model.turn",
    "ContinuationHold": "holon_cli.model.workitem",
    "ProjectionKind": "holon_cli.model.workspace",
    "WorktreeSession": "holon_cli.model.workspace",
}


def __getattr__(name: str) -> Any:
    module = _PARTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


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


AgentStatus = Literal[
    "booting", "awake_idle", "awake_running", "awaiting_task", "asleep", "paused", "stopped"
]


class ToolLatencyMetrics(TypedDict):
    """One entry of ``AgentState.tool_latency`` (the spec's per-tool
    timing metrics), folded in when a turn settles."""

    tool_name: str
    calls: int
    errors: int
    total_ms: float
    mean_ms: float
    max_ms: float
    last_ms: float
    last_at: str


class ExecutionProfile(TypedDict):
    """``AgentState.execution_profile``: descriptive metadata about how the
    agent's turns have run so far (the spec: not a control input)."""

    turns: int
    aborted_turns: int
    model_rounds: int
    tool_calls: int
    total_turn_ms: int
    mean_turn_ms: float
    max_turn_ms: int
    last_turn_ms: int
    mean_rounds_per_turn: float
    mean_tool_calls_per_turn: float
    compacted_turns: int
    last_turn_id: str | None
    updated_at: str | None


class AgentIdentity(TypedDict):
    agent_id: str
    kind: str  # one of AGENT_KINDS
    visibility: str  # one of VISIBILITIES
    ownership: str  # one of OWNERSHIPS
    profile_preset: str
    lineage_parent_agent_id: str | None
    created_at: str
    template: dict[str, Any] | None
    # a spawned private child: who supervises it and through which handle
    supervisor_agent_id: NotRequired[str | None]
    supervision_task_id: NotRequired[str | None]
    # a child made from a profile file (runtime/agents/profiles.py):
    # name, source, path, model, tools (None: all), budgets
    profile: NotRequired[dict[str, Any] | None]


class AgentState(TypedDict):
    """The spec's AgentState as stored in ``state/agent.json``."""

    status: AgentStatus
    status_changed_at: str
    sleeping_until: str | None
    current_run_id: str | None
    current_work_item_id: str | None
    last_wake_reason: str | None
    last_brief_at: str | None
    last_turn_at: str | None
    total_message_count: int
    total_input_tokens: int
    total_output_tokens: int
    total_model_rounds: int
    last_turn_token_usage: dict[str, int] | None
    model_override: str | None
    # workspace ids (older homes held anchor paths: read and upgraded)
    attached_workspaces: list[str]
    active_workspace_id: str | None  # None: AgentHome (older records)
    workspace_anchor: str | None
    cwd: str | None
    pending_wake_hint: Any
    sleep_reason: str | None
    last_closure: ClosureDecision | None
    turn_index: int
    # written once a turn or a skill needs them
    current_run_pid: NotRequired[int | None]
    active_skills: NotRequired[list[dict[str, Any]]]
    # the last failed turn (not an operator's abort): occurred_at (= at),
    # turn_id, summary, category, failure_kind, phase, detail_hint;
    # `holon status` and `holon daemon status` read it
    last_failure: NotRequired[LastFailure | None]
    # set by the work plane after a context_length_exceeded turn
    work_continuation_hold: NotRequired[ContinuationHold | None]
    # what the runtime did with the last dequeued message (waiting.continuation)
    last_continuation: NotRequired[ContinuationRecord]
    # the no-progress guard's streak (runtime/budgets/guard.py)
    no_progress: NotRequired[NoProgressStreak | None]
    # a supervised child whose handle ended (TaskStop, cleanup): kept, not erased
    archived_at: NotRequired[str | None]
    # the active workspace entry beyond its anchor (runtime/workspace);
    # absent in older records: the anchor is then the execution root
    execution_root: NotRequired[str | None]
    projection_kind: NotRequired[ProjectionKind | None]
    worktree_session: NotRequired[WorktreeSession | None]
    # managed worktrees by workspace id, reused when isolation is resumed
    worktree_sessions: NotRequired[dict[str, WorktreeSession]]
    # working memory, episodes and compaction (runtime/memory/working.py)
    working_memory: NotRequired[WorkingMemoryState]
    # the spec's Additional State Fields, folded in once per settled turn
    # (runtime/turn/stats.py): messages compacted out of active windows,
    # the last compaction's summary (the legacy fallback beside working
    # memory), per-tool timing and the descriptive execution profile
    compacted_message_count: NotRequired[int]
    context_summary: NotRequired[str | None]
    tool_latency: NotRequired[list[ToolLatencyMetrics]]
    execution_profile: NotRequired[ExecutionProfile]


class AgentRecord(TypedDict):
    """``state/agent.json``."""

    v: int
    identity: AgentIdentity
    state: AgentState


class HomeMarker(TypedDict):
    """``$HOLON_HOME/home.json``: the home exists (``repaired``: rebuilt by
    ``home check --repair``)."""

    v: NotRequired[int]
    created_at: NotRequired[str]
    repaired: NotRequired[bool]


class TemplateProvenance(TypedDict):
    """``state/template.json``: what the agent was seeded from."""

    v: NotRequired[int]
    kind: NotRequired[str]
    skills: NotRequired[list[Any]]


# what each profile preset means (runtime spec: Agent Identity And Visibility)
PRESET_PROFILE = {
    "public_named": ("public", "self_owned"),
    "private_child": ("private", "parent_supervised"),
}


def profile_is_coherent(identity: Mapping[str, Any]) -> bool:
    """Visibility and ownership agree with the profile preset, and only a
    child is parent-supervised (the default and named agents own themselves)."""
    want = PRESET_PROFILE.get(str(identity.get("profile_preset")))
    if want is not None and (identity.get("visibility"), identity.get("ownership")) != want:
        return False
    return identity.get("ownership") != "parent_supervised" or identity.get("kind") == "child"


def is_supervised_child(identity: Mapping[str, Any]) -> bool:
    """A child spawned by another agent (``SpawnAgent`` private_child): it
    takes no operator or external ingress and reports to its parent. ``holon
    run``'s temporary agent has the same profile but no parent."""
    return (
        identity.get("kind") == "child"
        and identity.get("ownership") == "parent_supervised"
        and bool(identity.get("lineage_parent_agent_id"))
    )


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
    supervision_task_id: str | None = None,
) -> AgentRecord:
    assert kind in AGENT_KINDS and visibility in VISIBILITIES and ownership in OWNERSHIPS
    assert profile_is_coherent(
        {
            "kind": kind,
            "visibility": visibility,
            "ownership": ownership,
            "profile_preset": profile_preset,
        }
    ), (kind, visibility, ownership, profile_preset)
    identity: AgentIdentity = {
        "agent_id": agent_id,
        "kind": kind,
        "visibility": visibility,
        "ownership": ownership,
        "profile_preset": profile_preset,
        "lineage_parent_agent_id": lineage_parent_agent_id,
        "created_at": created_at,
        "template": template,
    }
    if supervision_task_id is not None:
        identity["supervisor_agent_id"] = lineage_parent_agent_id
        identity["supervision_task_id"] = supervision_task_id
    return {
        "v": AGENT_RECORD_VERSION,
        "identity": identity,
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
            "compacted_message_count": 0,
            "context_summary": None,
            "tool_latency": [],
            "execution_profile": empty_execution_profile(),
        },
    }


def empty_execution_profile() -> ExecutionProfile:
    return {
        "turns": 0,
        "aborted_turns": 0,
        "model_rounds": 0,
        "tool_calls": 0,
        "total_turn_ms": 0,
        "mean_turn_ms": 0.0,
        "max_turn_ms": 0,
        "last_turn_ms": 0,
        "mean_rounds_per_turn": 0.0,
        "mean_tool_calls_per_turn": 0.0,
        "compacted_turns": 0,
        "last_turn_id": None,
        "updated_at": None,
    }


def lifecycle_hint(status: str) -> str | None:
    if status == "stopped":
        return (
            "agent is stopped: resume is required before new prompts (`holon agent start "
            "<id>`); wake does not override the stopped boundary"
        )
    if status == "paused":
        return "agent is paused: `holon agent start <id>` resumes processing"
    return None
