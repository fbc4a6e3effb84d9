"""Isolated mode's managed git worktrees: one per agent and workspace, on a
branch of its own (``holon/<agent>/<id>``), under
``$HOLON_HOME/worktrees/<agent>/`` (outside the agent home, so removing a
temporary agent never removes work). An existing one is resumed; a new one
needs a checkout with a commit and no uncommitted tracked changes. Nothing
here removes a worktree or a branch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli import clock
from holon_cli.errors import RejectedError
from holon_cli.model.workspace import IN_PLACE

if TYPE_CHECKING:
    from holon_cli.model.workspace import WorktreeSession


def _branch_name(agent_id: str, suffix: str) -> str:
    safe = re.sub(r"\.{2,}", "-", agent_id).rstrip(".")
    if safe.endswith(".lock"):
        safe += "-"
    return f"holon/{safe}/{suffix}"


def worktree_session(
    agent_id: str, worktrees_dir: Path, checkout: Path, remembered: WorktreeSession | None
) -> tuple[WorktreeSession, bool]:
    """The managed worktree of one workspace: the agent's earlier one
    (``remembered``) while it exists, else a new one on its own branch from
    ``checkout``'s HEAD under ``worktrees_dir/<agent_id>/``. Returns the
    session and whether it was created now."""
    from holon_cli.runtime.workspace import gitops

    if remembered and Path(remembered["worktree_path"]).is_dir():
        wt = Path(remembered["worktree_path"])
        if not gitops.branch_exists(wt, remembered["worktree_branch"]):
            raise RejectedError(
                f"the worktree {wt} lost its branch {remembered['worktree_branch']!r} "
                "(deleted by hand?); the worktree and its files are kept",
                hint=IN_PLACE.fmt(
                    "recreate the branch (`git -C {wt} checkout -b {branch}`), or {d}",
                    wt=str(wt),
                    branch=remembered["worktree_branch"],
                    d=IN_PLACE,
                ),
                details={"worktree_path": str(wt)},
            )
        return remembered, False
    gitops.head_commit(checkout)
    dirty = gitops.uncommitted(checkout)
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" (+{len(dirty) - 5} more)" if len(dirty) > 5 else "")
        raise RejectedError(
            f"{checkout} has uncommitted changes ({shown}); an isolated worktree would "
            "start without them",
            hint=IN_PLACE.fmt("commit or stash them first, or {d} to work on them", d=IN_PLACE),
            details={"uncommitted": dirty[:50]},
        )
    raw = clock.new_id("wt")[3:]  # 10 chars of ms, 4 of counter, 6 random
    suffix = (raw[6:10] + raw[14:]).lower()
    path = worktrees_dir / agent_id / f"{checkout.name}-{suffix}"
    session: WorktreeSession = {
        "original_working_directory": str(checkout),
        "original_branch": gitops.current_branch(checkout),
        "worktree_path": str(path),
        "worktree_branch": _branch_name(agent_id, suffix),
    }
    from holon_cli.runtime.workspace.heal import write_intent

    # a kill from here until the binding is written leaves the intent: the
    # next tick, serve pass or `home check --repair` finishes it
    write_intent(path, session["worktree_branch"], checkout)
    gitops.add_worktree(checkout, path, session["worktree_branch"])
    return session, True
