"""Real git repositories for workspace tests: a committed repository in a
temp dir, with git kept off the user's and the system's configuration (and
so off the network): ``GIT_CONFIG_NOSYSTEM=1`` and a temp ``GIT_CONFIG_GLOBAL``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

needs_git = pytest.mark.skipif(
    shutil.which("git") is None, reason="git not installed (Debian package: git)"
)


def isolate_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "gitconfig"
    cfg.write_text(
        "[user]\n\tname = t\n\temail = t@example.invalid\n[init]\n\tdefaultBranch = main\n"
    )
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    for name, text in (files or {"README.md": "hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git("add", "-A", cwd=path)
    git("commit", "-qm", "first", cwd=path)
    return path.resolve()


def worktree_list(repo: Path) -> list[dict[str, str]]:
    """``git worktree list --porcelain`` as rows {worktree, HEAD, branch}."""
    rows: list[dict[str, str]] = []
    for block in git("worktree", "list", "--porcelain", cwd=repo).strip().split("\n\n"):
        row: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            row[key] = value
        rows.append(row)
    return rows
