"""Task-owned git worktrees of ``workspace_mode: "worktree"`` children
(runtime spec: Worktree-Isolated Child Delegation).

The worktree is an artifact of the supervision handle, not of the child:
it is made at spawn on a unique branch ``holon/child/<task_id>`` from the
parent's workspace HEAD, in the parent's ``.holon/worktrees/<task_id>``, so
nothing appears in the user's repository but the branch. At terminal
cleanup or ``TaskStop`` a clean worktree still on its branch is removed
with its branch; a dirty or mismatched one (other branch, moved, changed
files) is kept and a ``worktree_retained`` event is written in the
parent's events. The handle's ``child.worktree`` carries path, branch,
changed files and ``cleanup_status`` (pending | removed | retained).

Self-contained (``git worktree add/remove``, ``git branch -D``) until the
workspace plane's worktree sessions land in main.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli.errors import RejectedError
from holon_cli.runtime.tasks.records import read_record_file, tasks_root, update_task
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.events import WorktreeRetainedData
    from holon_cli.model.task import TaskRecord, WorktreeInfo

BRANCH_PREFIX = "holon/child/"
GIT_TIMEOUT_S = 60.0


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=GIT_TIMEOUT_S,
        check=False,
    )
    if check and proc.returncode != 0:
        raise RejectedError(
            f"git {' '.join(args[:2])} failed in {repo}: {proc.stderr.strip()[:300]}",
            hint="workspace_mode 'worktree' needs the parent's workspace to be a git "
            "repository with at least one commit",
        )
    return proc


def repo_root(workspace: Path) -> Path:
    """The top of the git repository holding ``workspace`` (RejectedError if none)."""
    try:
        out = _git(workspace, "rev-parse", "--show-toplevel").stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise RejectedError(
            f"workspace_mode 'worktree': cannot run git ({exc})",
            hint="install git, or spawn with workspace_mode 'inherit'",
        ) from None
    return Path(out)


def create(parent: AgentStore, workspace: Path, task_id: str) -> WorktreeInfo:
    """A new worktree for the handle ``task_id`` on a unique branch."""
    repo = repo_root(workspace)
    base = _git(repo, "rev-parse", "HEAD").stdout.strip()
    branch = BRANCH_PREFIX + task_id
    root = Path(parent.layout.runtime) / "worktrees"
    root.mkdir(parents=True, exist_ok=True)
    path = root / task_id
    _git(repo, "worktree", "add", "-b", branch, str(path), base)
    return {
        "path": str(path),
        "branch": branch,
        "repo": str(repo),
        "base_commit": base,
        "changed_files": [],
        "cleanup_status": "pending",
    }


def changed_files(wt: WorktreeInfo) -> list[str]:
    """Files changed in the worktree: uncommitted, and committed since its base."""
    path = Path(wt["path"])
    out: set[str] = set()
    status = _git(path, "status", "--porcelain", "-uall", check=False)
    for line in status.stdout.splitlines():
        if len(line) > 3:
            out.add(line[3:].split(" -> ")[-1])
    if wt.get("base_commit"):
        diff = _git(path, "diff", "--name-only", f"{wt['base_commit']}..HEAD", check=False)
        out.update(ln for ln in diff.stdout.splitlines() if ln)
    return sorted(out)


def _mismatch(wt: WorktreeInfo) -> str | None:
    """Why the worktree is not the one the handle made, or None."""
    path = Path(wt["path"])
    if not path.is_dir():
        return "the worktree folder is gone"
    head = _git(path, "rev-parse", "--abbrev-ref", "HEAD", check=False).stdout.strip()
    if head != wt["branch"]:
        return f"the worktree is on {head!r}, not its task branch {wt['branch']!r}"
    top = _git(path, "rev-parse", "--show-toplevel", check=False).stdout.strip()
    if top and Path(top).resolve() != path.resolve():
        return f"the worktree path moved ({top})"
    return None


def _remove(wt: WorktreeInfo) -> None:
    repo = Path(wt["repo"])
    _git(repo, "worktree", "remove", wt["path"])
    _git(repo, "branch", "-D", wt["branch"], check=False)


def cleanup_for(parent: AgentStore, task_id: str) -> WorktreeInfo | None:
    """Terminal cleanup of the handle's worktree: a clean one (nothing
    changed, still on its branch) is removed with its branch; anything else
    is kept (``retained``) with a ``worktree_retained`` event."""
    d = tasks_root(parent) / task_id
    rec = read_record_file(d)
    wt = (rec.get("child") or {}).get("worktree")
    if not wt or wt.get("cleanup_status") != "pending":
        return wt
    files = changed_files(wt) if Path(wt["path"]).is_dir() else []
    why = _mismatch(wt) or (f"{len(files)} changed file(s)" if files else None)
    if why is None:
        try:
            _remove(wt)
        except RejectedError as exc:
            why = exc.message
    new: WorktreeInfo = {
        **wt,
        "changed_files": files,
        "cleanup_status": "removed" if why is None else "retained",
    }

    def put(r: TaskRecord) -> None:
        r.setdefault("child", {})["worktree"] = new

    update_task(d, put)
    if why is not None:
        data: WorktreeRetainedData = {"task_id": task_id, "reason": why, **new}
        parent.emit("worktree_retained", data, task_id=task_id)
    return new


def live_view(wt: WorktreeInfo | None) -> WorktreeInfo | None:
    """The task detail's ``worktree``: changed files read now while pending."""
    if not wt or wt.get("cleanup_status") != "pending" or not Path(wt["path"]).is_dir():
        return wt
    return {**wt, "changed_files": changed_files(wt)}


def cleanup_for_failed_spawn(wt: WorktreeInfo) -> None:
    """A spawn that failed after making its worktree: nothing was done in it."""
    repo = Path(wt["repo"])
    _git(repo, "worktree", "remove", "--force", wt["path"], check=False)
    _git(repo, "branch", "-D", wt["branch"], check=False)
