"""A path's workspace anchor and execution root, read from the git layout
on disk (no git process: ``holon run`` binds its directory on every run).

- not in a git repository: the directory is both anchor and root;
- in a repository's main working tree: its top level is both;
- in a linked worktree (``.git`` is a file naming a gitdir that has a
  ``commondir``): the root is the worktree's top level, the anchor is the
  main repository's (the parent of the common ``.git``), so every worktree of
  a repository shares its id;
- a ``.git`` file without ``commondir`` (a submodule, ``--separate-git-dir``)
  is a repository of its own: its top level is both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class Located(NamedTuple):
    anchor: Path
    execution_root: Path
    git: bool
    linked_worktree: bool


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _common_dir(dotgit_file: Path) -> Path | None:
    """The common git dir a worktree's ``.git`` file leads to (``None``: not
    a linked worktree)."""
    text = _read(dotgit_file)
    if not text or not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:") :].strip())
    if not gitdir.is_absolute():
        gitdir = dotgit_file.parent / gitdir
    common = _read(gitdir / "commondir")
    if not common:
        return None
    cdir = Path(common)
    if not cdir.is_absolute():
        cdir = gitdir / cdir
    return Path(os.path.realpath(cdir))


def locate(directory: Path) -> Located:
    """Where ``directory`` (an existing, resolved directory) belongs."""
    for d in (directory, *directory.parents):
        dotgit = d / ".git"
        if dotgit.is_dir():
            return Located(d, d, True, False)
        if dotgit.is_file():
            common = _common_dir(dotgit)
            if common is None:
                return Located(d, d, True, False)
            anchor = common.parent if common.name == ".git" else common
            return Located(anchor, d, True, anchor != d)
    return Located(directory, directory, False, False)
