"""Working-memory records that cross layers (runtime spec: Additional State
Fields, ``workingMemory``; TurnMemoryDelta; archived episodes).

TypedDicts: zero runtime cost, the JSON is unchanged. The agent state keeps
one :class:`WorkingMemoryState` under ``working_memory``; a settled turn's
:class:`TurnMemoryDelta` is saved in its settlement (so a replay applies the
same delta); finalized :class:`EpisodeRecord` lines go to
``.holon/ledger/context_episodes.jsonl``.
"""

from __future__ import annotations

from typing import Literal, TypedDict

EPISODE_VERSION = 1

EpisodeBoundary = Literal[
    "work_item_switch", "completion_checkpoint", "waiting_boundary", "hard_cap"
]


class CommandRun(TypedDict):
    """A command a tool ran to its end: the line and how it exited."""

    cmd: str
    exit_status: int | None


class WorkFocus(TypedDict):
    """The current work item as working memory keeps it."""

    id: str
    objective: str
    state: str
    plan_status: str
    plan_preview: str
    open_todos: list[str]
    blocked_by: str | None
    waits: list[str]


class CurrentWorkingMemory(TypedDict):
    """The structured working state, derived deterministically at settle."""

    active_work_item: WorkFocus | None
    open_work_items: list[str]
    operator_requests: list[str]
    recent_files: list[str]
    recent_commands: list[CommandRun]
    last_result: str | None
    waiting: str | None


class TurnMemoryDelta(TypedDict):
    """What one settled turn adds to working memory (saved in the settlement)."""

    turn_id: str
    turn_index: int
    message_id: str
    message_kind: str | None
    authority_class: str | None
    input_excerpt: str
    status: str
    work_item_id: str | None
    workspace_id: str | None
    work_focus: WorkFocus | None
    open_work_items: list[str]
    files_touched: list[str]
    commands: list[CommandRun]
    completed_work_item: bool
    waiting: str | None
    final_excerpt: str
    prompted_revision: int
    compacted_message_count: int


class EpisodeBuilder(TypedDict):
    """The open episode: turn evidence of the current work chunk."""

    episode_id: str
    work_item_id: str | None
    workspace_id: str | None
    first_turn_index: int
    last_turn_index: int
    first_message_id: str
    last_message_id: str
    message_count: int
    touched_files: list[str]
    commands: list[CommandRun]
    verification: list[CommandRun]
    decisions: list[str]
    carry_forward: list[str]
    waiting: str | None
    lines: list[str]
    started_at: str


class EpisodeRecord(TypedDict):
    """One immutable line of ``context_episodes.jsonl`` (memory search indexes
    ``episode_id, work_item_id, workspace_id, turn_range, touched_files,
    commands, summary``)."""

    v: int
    episode_id: str
    agent_id: str
    work_item_id: str | None
    workspace_id: str | None
    turn_range: list[int]
    message_range: list[str]
    message_count: int
    touched_files: list[str]
    commands: list[str]
    verification: list[CommandRun]
    decisions: list[str]
    carry_forward: list[str]
    waiting: str | None
    summary: str
    boundary: EpisodeBoundary
    started_at: str
    finalized_at: str


class WorkingMemoryState(TypedDict):
    """Agent state ``working_memory``: updated only when a turn settles."""

    current_working_memory: CurrentWorkingMemory | None
    working_memory_revision: int
    pending_working_memory_delta: str | None
    last_prompted_working_memory_revision: int
    active_episode_id: str | None
    archived_episode_count: int
    active_episode_builder: EpisodeBuilder | None
    compacted_message_count: int
    # the turn whose delta was applied last (a replayed settle applies nothing twice)
    last_applied_turn_id: str | None
