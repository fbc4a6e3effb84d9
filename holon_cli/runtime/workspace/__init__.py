"""The workspace plane: where an agent works and which instruction files
apply to it (runtime spec "Execution Binding", "Worktree Session",
"UseWorkspace", "DetachWorkspace", "AGENTS.md Loading").

- this module: the active binding read from the agent record
  (:func:`workspace_for`; AgentHome when nothing else is bound), its
  execution snapshot, the ids of the attached workspaces (older records held
  anchor paths: read as ids here, rewritten as ids on the next change), and
  the instruction sources a turn loads (``AGENTS.md`` in the agent home;
  ``AGENTS.md`` or else ``CLAUDE.md`` at the workspace *anchor*, never at the
  execution root: a managed worktree changes where commands run, not whose
  guidance applies).
- :mod:`.locate`: a path's anchor and execution root (git layout read from
  the files, no git process).
- :mod:`.gitops`: the git commands of isolated mode (worktrees, branches);
  :mod:`.worktree`: the managed worktree of a workspace (made or resumed).
- :mod:`.plane`: UseWorkspace, DetachWorkspace, the list, and ``holon
  run``'s binding; the registry (``store/workspace_registry.py``).

Invariants: every agent always has exactly one active workspace; ``cwd``
stays inside ``execution_root``; nothing here deletes a directory, a
worktree, a branch or a registry entry. Light on purpose: ``holon status``
reads the snapshot without loading git or the plane.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from holon_cli.digest import sha256_hex
from holon_cli.model.workspace import (
    AGENT_HOME,
    WS_ID_PREFIX,
    WorkspaceSnapshot,
    WorktreeSession,
    looks_like_id,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from holon_cli.model.agent import AgentState
    from holon_cli.model.workspace import ProjectionKind


class WorkspaceView(WorkspaceSnapshot):
    """A binding as the workspace surfaces show it: the snapshot and the
    worktree session of an isolated one."""

    worktree_session: WorktreeSession | None


class WorkspaceBinding(NamedTuple):
    workspace_id: str
    workspace_anchor: Path
    execution_root: Path
    cwd: Path
    projection_kind: ProjectionKind = "canonical_root"
    worktree_session: WorktreeSession | None = None
    # the agent's other attached workspace ids (what UseWorkspace can return to)
    attached: tuple[str, ...] = ()

    @property
    def execution_root_id(self) -> str:
        """The canonical root is the workspace itself; another projection (a
        git worktree) is named by its path."""
        if self.projection_kind == "canonical_root":
            return self.workspace_id
        return "root_" + sha256_hex(str(self.execution_root).encode())[:12]

    def snapshot(self) -> WorkspaceSnapshot:
        return {
            "workspace_id": self.workspace_id,
            "workspace_anchor": str(self.workspace_anchor),
            "execution_root": str(self.execution_root),
            "execution_root_id": self.execution_root_id,
            "cwd": str(self.cwd),
            "projection_kind": self.projection_kind,
        }

    def to_dict(self) -> WorkspaceView:
        return {**self.snapshot(), "worktree_session": self.worktree_session}


def agent_home_binding(agent_home: Path) -> WorkspaceBinding:
    return WorkspaceBinding(AGENT_HOME, agent_home, agent_home, agent_home)


def workspace_for(agent_home: Path, state: Mapping[str, Any] | AgentState) -> WorkspaceBinding:
    """The active binding. Records written before workspaces (an anchor and a
    cwd, no execution root) read as a direct binding of that anchor."""
    anchor = state.get("workspace_anchor")
    wid = state.get("active_workspace_id")
    attached = tuple(attached_ids(state))
    if not anchor or wid == AGENT_HOME:
        return agent_home_binding(agent_home)._replace(attached=attached)
    root = Path(state.get("execution_root") or anchor)
    cwd = Path(state.get("cwd") or root)
    if cwd != root and root not in cwd.parents:
        cwd = root  # cwd must remain inside the execution root
    kind: ProjectionKind = state.get("projection_kind") or (
        "canonical_root" if root == Path(anchor) else "git_worktree_root"
    )
    return WorkspaceBinding(
        str(wid or workspace_id(Path(anchor))),
        Path(anchor),
        root,
        cwd,
        kind,
        state.get("worktree_session"),
        attached,
    )


def workspace_id(anchor: Path) -> str:
    """The id of an anchor: derived from its path, so concurrent first uses
    agree (the registry records it; older homes derived it the same way)."""
    return WS_ID_PREFIX + sha256_hex(str(anchor).encode())[:12]


def attached_ids(state: Mapping[str, Any] | AgentState) -> list[str]:
    """The attached workspace ids, in order. Older records listed anchor
    paths: each reads as its anchor's id (the records are rewritten by the
    next change, never refused)."""
    out: list[str] = []
    for entry in state.get("attached_workspaces") or []:
        if not isinstance(entry, str) or not entry:
            continue
        wid = entry if looks_like_id(entry) else workspace_id(Path(entry))
        if wid != AGENT_HOME and wid not in out:
            out.append(wid)
    return out


def legacy_anchors(state: Mapping[str, Any] | AgentState) -> dict[str, str]:
    """Anchor paths of an older record's ``attached_workspaces``, by id."""
    return {
        workspace_id(Path(e)): e
        for e in state.get("attached_workspaces") or []
        if isinstance(e, str) and e and not looks_like_id(e)
    }


class InstructionSource(NamedTuple):
    scope: str  # agent | workspace
    kind: str  # AGENTS.md | CLAUDE.md
    path: str
    bytes: int
    sha256: str

    def to_dict(self) -> dict[str, object]:
        return dict(self._asdict())


def _load(scope: str, path: Path) -> tuple[str, InstructionSource] | None:
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return None
    text = raw.decode("utf-8", errors="replace")
    return text, InstructionSource(scope, path.name, str(path), len(raw), sha256_hex(raw)[:16])


def load_instructions(
    agent_home: Path, ws: WorkspaceBinding
) -> list[tuple[str, InstructionSource]]:
    out = []
    a = _load("agent", agent_home / "AGENTS.md")
    if a:
        out.append(a)
    if ws.workspace_anchor.resolve() != agent_home.resolve():
        w = _load("workspace", ws.workspace_anchor / "AGENTS.md") or _load(
            "workspace", ws.workspace_anchor / "CLAUDE.md"
        )
        if w:
            out.append(w)
    return out
