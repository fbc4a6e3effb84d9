"""Workspace values (runtime spec "Execution Binding", "Worktree Session"):
the ids, the home-level registry entry, a worktree session and the execution
snapshot, as plain dicts. Pure: no I/O.

Every agent always has exactly one active workspace; before any project is
selected it is AgentHome (``workspace_id: "agent_home"``, whose anchor,
execution root and cwd are the agent home). Other workspaces get ``ws_…``
ids, one per anchor (the directory, or a git repository's main top level
for any of its worktrees), recorded in the home's registry.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from holon_cli.errors import Said

AGENT_HOME = "agent_home"
WS_ID_PREFIX = "ws_"
REGISTRY_VERSION = 1

ProjectionKind = Literal["canonical_root", "git_worktree_root"]
WorkspaceMode = Literal["direct", "isolated"]
PROJECTION_KINDS = ("canonical_root", "git_worktree_root")
MODES = ("direct", "isolated")

# the way each surface asks for a workspace used in place (no worktree), for
# hints of the workspace plane, which the CLI, HTTP and UseWorkspace all call
IN_PLACE = Said(
    "use it without --isolated (in place)",
    http='send "mode": "direct" (in place)',
    tool='use mode "direct" (in place)',
)


class RegistryEntry(TypedDict):
    """One workspace the home knows (``$HOLON_HOME/workspaces.json``)."""

    workspace_id: str
    workspace_anchor: str
    registered_at: str


class WorktreeSession(TypedDict):
    """A runtime-managed git worktree the agent executes in (isolated mode)."""

    original_working_directory: str
    original_branch: str
    worktree_path: str
    worktree_branch: str


class WorkspaceSnapshot(TypedDict):
    """The execution snapshot's workspace part (``holon status`` ``workspace``)."""

    workspace_id: str
    workspace_anchor: str
    execution_root: str
    execution_root_id: str
    cwd: str
    projection_kind: ProjectionKind


def looks_like_id(value: str) -> bool:
    """A workspace id (``agent_home`` or ``ws_…``), as opposed to a path."""
    return value == AGENT_HOME or (
        value.startswith(WS_ID_PREFIX) and "/" not in value and len(value) > len(WS_ID_PREFIX)
    )
