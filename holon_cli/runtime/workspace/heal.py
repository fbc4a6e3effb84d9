"""Isolated worktrees left by a killed command, finished as a durable step.

``workspace use --isolated`` (and UseWorkspace in isolated mode) makes a
worktree first and binds it last. Before ``git worktree add`` it writes an
intent beside the agent's worktrees (``worktrees/<agent>/.<name>.intent``:
pid, path, branch, repository); the binding removes it. A command killed in
between leaves the intent with a dead pid, and the worktree half made (git
locks a worktree while it is added: a kill there leaves it ``locked``) or
made and never bound. The next ``tick``, ``serve`` pass or ``home check
--repair`` finishes it (:func:`heal`): a worktree with no change of its own
is removed with its branch (unlocked first); one with changes is kept and
named. ``home audit`` reports every leftover until then (:func:`leftovers`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple, NotRequired, TypedDict

from holon_cli.store.layout import HomeLayout


class Leftover(NamedTuple):
    intent: Path
    path: Path
    branch: str
    repo: Path


def intent_path(worktree: Path) -> Path:
    return worktree.parent / f".{worktree.name}.intent"


def write_intent(worktree: Path, branch: str, repo: Path) -> Path:
    from holon_cli.store.fsio import atomic_write_bytes

    worktree.parent.mkdir(parents=True, exist_ok=True)
    rec = {"v": 1, "pid": os.getpid(), "path": str(worktree), "branch": branch, "repo": str(repo)}
    path = intent_path(worktree)
    atomic_write_bytes(path, json.dumps(rec).encode() + b"\n")
    return path


def clear_intent(worktree: Path) -> None:
    intent_path(worktree).unlink(missing_ok=True)


class WorktreeIntent(TypedDict):
    """``<name>.intent``: a worktree being made, and by which process."""

    v: NotRequired[object]
    pid: NotRequired[object]  # pid_alive decides what it is worth
    path: str
    branch: str
    repo: str


def _read(p: Path) -> WorktreeIntent | None:
    from holon_cli.model.typed import CheckError, check

    try:
        return check(json.loads(p.read_bytes()), WorktreeIntent)
    except (OSError, ValueError, CheckError):
        return None


def leftovers(home: HomeLayout, agent_id: str) -> list[Leftover]:
    """Intents whose command is gone (read-only)."""
    from holon_cli.store.locks import pid_alive

    folder = home.worktrees_dir / agent_id
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".intent"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for n in names:
        rec = _read(folder / n)
        if rec is None:
            out.append(Leftover(folder / n, folder / n[1 : -len(".intent")], "", Path("/")))
            continue
        if pid_alive(rec.get("pid")):
            continue  # being made right now
        out.append(Leftover(folder / n, Path(rec["path"]), rec["branch"], Path(rec["repo"])))
    return out


def heal(home: HomeLayout, agent_id: str) -> list[dict[str, str]]:
    """Finish what killed commands left: each leftover removed (no change of
    its own) or kept and named (changes); its intent cleared either way."""
    from holon_cli.runtime.workspace.gitops import git

    out: list[dict[str, str]] = []
    for left in leftovers(home, agent_id):
        if not left.branch or not left.repo.is_dir():
            left.intent.unlink(missing_ok=True)
            out.append({"action": "worktree_intent_dropped", "path": str(left.path)})
            continue
        kept = None
        if left.path.is_dir() and (left.path / ".git").exists():
            status = git("status", "--porcelain", cwd=left.path, check=False)
            ahead = git("rev-list", "--count", f"HEAD..{left.branch}", cwd=left.repo, check=False)
            if status.returncode == 0 and status.stdout.strip():
                kept = "it has uncommitted changes"
            elif ahead.returncode == 0 and ahead.stdout.strip() not in ("", "0"):
                kept = "its branch has commits of its own"
        if kept is None:
            git("worktree", "unlock", str(left.path), cwd=left.repo, check=False)
            git("worktree", "remove", "--force", str(left.path), cwd=left.repo, check=False)
            git("worktree", "prune", cwd=left.repo, check=False)
            if not left.path.exists():
                git("branch", "-D", left.branch, cwd=left.repo, check=False)
            else:
                kept = "git could not remove it"
        if kept is None:
            out.append({"action": "worktree_removed", "path": str(left.path)})
        else:
            git("worktree", "unlock", str(left.path), cwd=left.repo, check=False)
            out.append({"action": "worktree_kept", "path": str(left.path), "reason": kept})
        left.intent.unlink(missing_ok=True)
    return out
