"""The git commands of isolated mode: the branch a checkout is on, whether
it has uncommitted changes, and adding a managed worktree. Each failure is a
:class:`~holon_cli.errors.HolonError` naming the repository and what git
said. Nothing here removes a worktree or a branch.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from holon_cli.errors import HolonError, RejectedError, UsageError
from holon_cli.model.workspace import IN_PLACE


def git(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        res = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    except FileNotFoundError:
        raise UsageError(
            "isolated mode needs git, which is not installed",
            kind="invalid_arguments",
            hint=IN_PLACE.fmt("install git (Debian package: git), or {d}", d=IN_PLACE),
        ) from None
    except subprocess.TimeoutExpired:
        raise HolonError(f"`git {' '.join(args)}` in {cwd} timed out") from None
    if check and res.returncode != 0:
        raise HolonError(
            f"`git {' '.join(args)}` failed in {cwd}: {res.stderr.strip()[:400]}",
            hint="check the repository with `git status`; nothing was changed",
        )
    return res


def current_branch(checkout: Path) -> str:
    """The branch ``checkout`` is on (a commit id when HEAD is detached)."""
    res = git("symbolic-ref", "--quiet", "--short", "HEAD", cwd=checkout, check=False)
    if res.returncode == 0 and res.stdout.strip():
        return res.stdout.strip()
    return head_commit(checkout)


def head_commit(checkout: Path) -> str:
    res = git("rev-parse", "--verify", "--quiet", "HEAD", cwd=checkout, check=False)
    if res.returncode != 0 or not res.stdout.strip():
        raise RejectedError(
            f"{checkout} has no commit yet: an isolated worktree starts from HEAD",
            hint=IN_PLACE.fmt("commit something first, or {d}", d=IN_PLACE),
        )
    return res.stdout.strip()


def uncommitted(checkout: Path) -> list[str]:
    """Tracked files with changes (staged or not); untracked files do not count."""
    res = git("status", "--porcelain", "--untracked-files=no", cwd=checkout)
    return [line[3:] for line in res.stdout.splitlines() if line.strip()]


def branch_exists(checkout: Path, branch: str) -> bool:
    res = git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=checkout, check=False)
    return res.returncode == 0


def add_worktree(checkout: Path, path: Path, branch: str) -> None:
    """A new worktree at ``path`` on a new ``branch`` from ``checkout``'s HEAD."""
    path.parent.mkdir(parents=True, exist_ok=True)
    git("worktree", "add", "--quiet", "-b", branch, str(path), "HEAD", cwd=checkout)
