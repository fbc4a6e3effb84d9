"""Task-owned git worktrees of ``workspace_mode: "worktree"`` children
(runtime spec: Worktree-Isolated Child Delegation).

The worktree is an artifact of the supervision handle, not of the child:
it is made at spawn on a unique branch ``holon/child/<task_id>`` from the
HEAD of the parent's execution root (the workspace plane's git helpers,
:mod:`holon_cli.runtime.workspace.gitops`), under the home's managed
worktrees (``$HOLON_HOME/worktrees/<child_id>/``), and bound as the child's
``git_worktree_root`` projection of the parent's workspace. At terminal
cleanup or ``TaskStop`` a clean worktree still on its branch is removed with
its branch; a dirty or mismatched one (other branch, moved, changed files)
is kept and a ``worktree_retained`` event is written in the parent's events.
The handle's ``child.worktree`` carries path, branch, changed files and
``cleanup_status`` (pending | removed | retained). This module is the one
place a worktree is removed: the workspace plane never removes one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli.errors import HolonError, RejectedError
from holon_cli.runtime.tasks.records import read_record_file, tasks_root, update_task
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    import subprocess

    from holon_cli.model.events import WorktreeRetainedData
    from holon_cli.model.task import TaskRecord, WorktreeInfo
    from holon_cli.model.workspace import WorktreeSession
    from holon_cli.runtime.workspace import WorkspaceBinding

BRANCH_PREFIX = "holon/child/"


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    from holon_cli.runtime.workspace.gitops import git

    return git(*args, cwd=repo, check=check)


def create(parent_binding: WorkspaceBinding, child_id: str, task_id: str) -> WorktreeInfo:
    """A new worktree for the handle ``task_id`` on a unique branch, from the
    HEAD of the parent's execution root (RejectedError when that is no git
    checkout with a commit, or has uncommitted tracked changes)."""
    from holon_cli.runtime.workspace import gitops
    from holon_cli.runtime.workspace.locate import locate

    checkout = parent_binding.execution_root
    if not locate(checkout.resolve()).git:
        raise RejectedError(
            f"workspace_mode 'worktree': {checkout} is not a git repository",
            hint="bind a git workspace first (UseWorkspace), or spawn with workspace_mode "
            "'inherit'",
        )
    base = gitops.head_commit(checkout)
    dirty = gitops.uncommitted(checkout)
    if dirty:
        raise RejectedError(
            f"workspace_mode 'worktree': {checkout} has uncommitted changes "
            f"({', '.join(dirty[:5])}); the child's worktree would start without them",
            hint="commit or stash them first, or spawn with workspace_mode 'inherit'",
        )
    branch = BRANCH_PREFIX + task_id
    path = HomeLayout.current().worktrees_dir / child_id / checkout.name
    gitops.add_worktree(checkout, path, branch)
    return {
        "path": str(path),
        "branch": branch,
        "repo": str(checkout),
        "base_commit": base,
        "changed_files": [],
        "cleanup_status": "pending",
    }


def binding(parent_binding: WorkspaceBinding, wt: WorktreeInfo) -> WorkspaceBinding:
    """The child's active entry: the parent's workspace, projected onto the
    task's worktree."""
    from holon_cli.runtime.workspace import gitops

    path = Path(wt["path"])
    session: WorktreeSession = {
        "original_working_directory": wt["repo"],
        "original_branch": gitops.current_branch(Path(wt["repo"])),
        "worktree_path": wt["path"],
        "worktree_branch": wt["branch"],
    }
    return parent_binding._replace(
        execution_root=path,
        cwd=path,
        projection_kind="git_worktree_root",
        worktree_session=session,
    )


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
    try:
        Path(wt["path"]).parent.rmdir()  # the child's folder under worktrees/, if empty
    except OSError:
        pass


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
        except HolonError as exc:
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
