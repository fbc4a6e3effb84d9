"""Where an agent works and which instruction files apply to it.

The workspace binding (anchor, execution root, cwd) and the instruction
sources a turn loads (``AGENTS.md`` in the agent home; ``AGENTS.md`` or
``CLAUDE.md`` at the workspace anchor). Kept apart from prompt assembly so
``holon status`` can report them without loading the prompt builder.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from holon_cli.digest import sha256_hex

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState


class WorkspaceBinding(NamedTuple):
    workspace_id: str
    workspace_anchor: Path
    execution_root: Path
    cwd: Path

    def to_dict(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "workspace_anchor": str(self.workspace_anchor),
            "execution_root": str(self.execution_root),
            "cwd": str(self.cwd),
            "projection_kind": "canonical_root",
        }


def workspace_for(agent_home: Path, state: AgentState) -> WorkspaceBinding:
    anchor = state.get("workspace_anchor")
    if anchor:
        root = Path(anchor)
        cwd = Path(state.get("cwd") or anchor)
        return WorkspaceBinding(
            state.get("active_workspace_id") or workspace_id(root), root, root, cwd
        )
    return WorkspaceBinding("agent_home", agent_home, agent_home, agent_home)


def workspace_id(root: Path) -> str:
    return "ws_" + sha256_hex(str(root).encode())[:12]


class InstructionSource(NamedTuple):
    scope: str  # agent | workspace
    kind: str  # AGENTS.md | CLAUDE.md
    path: str
    bytes: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


def _load(scope: str, path: Path) -> tuple[str, InstructionSource] | None:
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, PermissionError):
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
