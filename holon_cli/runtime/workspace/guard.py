"""The one check that keeps the holon home out of every workspace.

The home holds every agent's queue, trigger tokens, ``config.yaml`` (the
control token) and other agents' ``AGENTS.md``: a command whose execution
root is the home, a folder containing it, or a folder inside it could read
or rewrite all of that (a sandbox binds the root writable over the tmpfs
that hides the home). So none of them can become a workspace anchor, an
execution root or a working directory, by any path: ``holon workspace use``,
``POST /control/agents/{id}/workspace``, ``UseWorkspace``, ``holon run``'s
binding, a child's ``workspace_mode``, a template or a skill folder, and a
command's launch (a binding recorded before this check existed).

Allowed inside the home: the agent's own agent home (its default root: a
path inside it binds AgentHome, whose ``.holon/`` the sandbox hides) and the
git worktrees holon manages (``worktrees/<agent>/<worktree>/``). Paths are
compared with symlinks resolved (``os.path.realpath``), on both sides.
Refused: :class:`ForbiddenWorkspace` (``forbidden_workspace``, exit 4, HTTP
409).
"""

from __future__ import annotations

import os
from pathlib import Path

from holon_cli.errors import RejectedError, Said
from holon_cli.kinds import ErrorKind
from holon_cli.store.layout import home_root


class ForbiddenWorkspace(RejectedError):
    kind: ErrorKind = "forbidden_workspace"


def _real(p: Path | str) -> Path:
    return Path(os.path.realpath(p))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def forbidden_reason(
    path: Path | str, *, agent_home: Path | None = None, home: Path | None = None
) -> str | None:
    """Why ``path`` may not be a workspace or execution root (None: it may).
    ``agent_home``: the agent whose own home (and its inside) is allowed."""
    h = _real(home or home_root())
    p = _real(path)
    if p == h:
        return f"it is the holon home ({h})"
    if p in h.parents:
        return f"it contains the holon home ({h})"
    if h not in p.parents:
        return None
    if agent_home is not None and _within(p, _real(agent_home)):
        return None
    rel = p.relative_to(h).parts
    if len(rel) >= 3 and rel[0] == "worktrees":
        return None  # a managed worktree (worktrees/<agent>/<name>/...)
    return f"it is inside the holon home ({h})"


def check_root(
    path: Path | str,
    *,
    agent_home: Path | None = None,
    home: Path | None = None,
    what: str = "a workspace",
) -> None:
    """Raise :class:`ForbiddenWorkspace` when ``path`` may not be ``what``."""
    why = forbidden_reason(path, agent_home=agent_home, home=home)
    if why is None:
        return
    raise ForbiddenWorkspace(
        f"{path} cannot be {what}: {why}, which holds every agent's queue, secrets and config.yaml",
        hint=Said(
            "choose a project folder outside the holon home, or `holon workspace use "
            "agent_home` for the agent's own home",
            http='choose a project folder outside the holon home, or {"workspace_id": '
            '"agent_home"} for the agent\'s own home',
            tool="choose a project folder outside the holon home, or "
            '`workspace_id: "agent_home"` for your home',
        ),
        details={"field": "path", "path": str(path), "home": str(_real(home or home_root()))},
    )
