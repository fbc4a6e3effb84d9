"""Fetch one folder of a GitHub repository with the user's own git.

Owns the GitHub URLs (a repository, ``https://github.com/<owner>/<repo>``: its
default branch's root; a folder, ``.../tree/<ref>/<path>``) and how the folder
reaches this machine: ``git ls-remote`` picks the ref (the default branch
HEAD names, or the longest branch or tag that prefixes ``<ref>/<path>``,
else a commit id), a shallow ``git fetch`` of that one ref, and a checkout of
that one path into a private temporary folder (without ``.git``). A git
failure is reported with everything git said. Going through git means what users already set up
applies: ``url.<base>.insteadOf`` mirrors, credential helpers, proxies.

Invariants:
- Never prompts (``GIT_TERMINAL_PROMPT=0``); every git call has a time limit.
- The fetched tree holds no symbolic links (checked out with
  ``core.symlinks=false``, and refused when git's tree lists one): a
  template must not copy ``~/.ssh`` into an agent home by pointing at it.
- Errors: a malformed URL or a refused tree → :class:`RejectedError` (exit 4);
  an unknown repository, ref or path → :class:`NotFoundError` (exit 3); no
  git → :class:`RejectedError` naming the package.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from holon_cli.errors import NotFoundError, RejectedError

GIT_TIMEOUT_S = 180.0
_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


class TreeUrl(NamedTuple):
    """A parsed GitHub URL: a repository (``https://github.com/<owner>/<repo>``,
    its default branch's root) or ``.../tree/<rest>``."""

    url: str
    owner: str
    repo: str
    rest: list[str]  # <ref>/<path> segments; which ones are the ref is decided remotely

    @property
    def clone_url(self) -> str:
        return f"https://github.com/{self.owner}/{self.repo}"


class Fetched(NamedTuple):
    path: Path  # the folder, inside a temporary checkout
    ref: str
    commit: str
    subpath: str  # "" for the repository's root
    name: str  # the folder's own name: the path's last part, else the repository's


SHAPES = (
    "https://github.com/<owner>/<repo> (its default branch) or "
    "https://github.com/<owner>/<repo>/tree/<ref>/<path>"
)


def parse_tree_url(url: str) -> TreeUrl:
    """Check the URL's shape; says exactly what a usable URL looks like. A
    repository's own address names the root of its default branch."""
    if not url.startswith("https://github.com/"):
        raise RejectedError(
            f"{url!r} is not a GitHub repository or tree URL",
            hint=f"use {SHAPES} (https only)",
        )
    parts = url[len("https://github.com/") :].split("?")[0].split("#")[0].strip("/").split("/")
    if (
        len(parts) < 2
        or not parts[1]
        or (len(parts) > 2 and (parts[2] != "tree" or len(parts) < 4))
    ):
        raise RejectedError(
            f"{url!r} does not name a repository or a folder of one",
            hint=f"use {SHAPES}: open the repository or folder on GitHub and copy its address",
        )
    owner, repo, rest = parts[0], parts[1].removesuffix(".git"), parts[3:]
    for seg in (owner, repo, *rest):
        if not _SEGMENT.match(seg) or seg in (".", ".."):
            raise RejectedError(
                f"{url!r}: the path segment {seg!r} is not allowed",
                hint="letters, digits, '.', '_' and '-' only; no '..'",
            )
    return TreeUrl(url, owner, repo, rest)


def _git(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    if shutil.which("git") is None:
        raise RejectedError(
            "git is not installed; remote templates and skills are fetched with git",
            hint="install git (Debian/Ubuntu: apt-get install git) and try again",
        )
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", SSH_ASKPASS="")
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise RejectedError(
            f"git {args[0]} did not finish in {GIT_TIMEOUT_S:.0f} s",
            hint="check the network or the mirror (`git ls-remote <url>`)",
        ) from None


def _said(proc: subprocess.CompletedProcess[str]) -> str:
    """What git said, whole, on one line (its last line alone, "and the
    repository exists.", says nothing)."""
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
    text = " ".join(lines) or f"git exited {proc.returncode}"
    return text if len(text) <= 600 else text[:597] + "..."


def _unreadable(tree: TreeUrl, proc: subprocess.CompletedProcess[str]) -> NotFoundError:
    return NotFoundError(
        f"cannot read repository {tree.owner}/{tree.repo}: git said: {_said(proc)}",
        hint="check the owner and repository name, and that `git ls-remote "
        f"{tree.clone_url}` works here (credentials, insteadOf mirrors)",
    )


def _default_branch(tree: TreeUrl) -> str:
    """The branch the repository's HEAD names (its default branch)."""
    proc = _git(["ls-remote", "--symref", "--", tree.clone_url, "HEAD"])
    if proc.returncode != 0:
        raise _unreadable(tree, proc)
    for line in proc.stdout.splitlines():
        head, _, name = line.partition("\t")
        if name == "HEAD" and head.startswith("ref: refs/heads/"):
            return head[len("ref: refs/heads/") :]
    raise NotFoundError(
        f"{tree.owner}/{tree.repo} names no default branch (an empty repository?)",
        hint=f"name a branch: {tree.clone_url}/tree/<ref>",
    )


def _pick_ref(tree: TreeUrl) -> tuple[str, list[str]]:
    """(ref, path segments): the default branch for a repository's own URL;
    else the longest branch or tag prefixing the URL's rest, else a commit
    id as the first segment."""
    if not tree.rest:
        return _default_branch(tree), []
    proc = _git(["ls-remote", "--heads", "--tags", "--", tree.clone_url])
    if proc.returncode != 0:
        raise _unreadable(tree, proc)
    names: set[str] = set()
    for line in proc.stdout.splitlines():
        _, _, name = line.partition("\t")
        for prefix in ("refs/heads/", "refs/tags/"):
            if name.startswith(prefix):
                names.add(name[len(prefix) :].removesuffix("^{}"))
    for n in range(len(tree.rest), 0, -1):
        candidate = "/".join(tree.rest[:n])
        if candidate in names:
            return candidate, tree.rest[n:]
    if _COMMIT.match(tree.rest[0]):
        return tree.rest[0], tree.rest[1:]
    raise NotFoundError(
        f"{tree.owner}/{tree.repo} has no branch or tag {tree.rest[0]!r}",
        hint="check the ref in the URL (a branch, a tag or a full commit id)",
    )


@contextmanager
def fetch_tree(url: str) -> Iterator[Fetched]:
    """The folder named by a GitHub tree URL, checked out into a temporary
    folder that is removed when the ``with`` block ends."""
    tree = parse_tree_url(url)
    ref, segments = _pick_ref(tree)
    subpath = "/".join(segments)
    tmp = Path(tempfile.mkdtemp(prefix="holon-fetch-"))
    repo, work = tmp / "repo", tmp / "tree"  # the checkout holds no .git of its own
    try:
        repo.mkdir()
        work.mkdir()
        for args in (["init", "-q"], ["config", "core.symlinks", "false"]):
            _check(_git(args, cwd=repo), url)
        fetched = _git(["fetch", "-q", "--depth", "1", "--no-tags", tree.clone_url, ref], cwd=repo)
        if fetched.returncode != 0:
            raise NotFoundError(
                f"cannot fetch {ref!r} of {tree.owner}/{tree.repo}: git said: {_said(fetched)}",
                hint="check the ref in the URL; a commit id must be the full 40 characters "
                "when the server does not advertise it",
            )
        out = _git(
            ["--work-tree", str(work), "checkout", "-q", "FETCH_HEAD", "--", subpath or "."],
            cwd=repo,
        )
        if out.returncode != 0:
            raise NotFoundError(
                f"{tree.owner}/{tree.repo}@{ref} has no folder {subpath!r}",
                hint="check the path in the URL (it is case-sensitive)",
            )
        commit = _git(["rev-parse", "FETCH_HEAD"], cwd=repo).stdout.strip()
        folder = work / subpath if subpath else work
        if not folder.is_dir():
            raise RejectedError(f"{url!r} names a file, not a folder", hint="point at a folder")
        _refuse_links(repo, subpath, url)
        yield Fetched(folder, ref, commit, subpath, segments[-1] if segments else tree.repo)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check(proc: subprocess.CompletedProcess[str], url: str) -> None:
    if proc.returncode != 0:
        raise RejectedError(f"cannot prepare a checkout for {url!r}: git said: {_said(proc)}")


def _refuse_links(checkout: Path, subpath: str, url: str) -> None:
    """Refuse a tree holding symbolic links (git mode 120000), which the
    checkout wrote as plain files (``core.symlinks=false``)."""
    listing = _git(["ls-tree", "-r", "FETCH_HEAD", "--", subpath or "."], cwd=checkout).stdout
    for line in listing.splitlines():
        meta, _, name = line.partition("\t")
        if meta.startswith("120000 "):
            raise RejectedError(
                f"{url!r} contains a symbolic link ({name}); remote templates and skills "
                "may not hold links",
                hint="replace the link with the file it points to in the repository",
            )
