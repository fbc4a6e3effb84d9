"""Agent templates and skill refs: which folder a selector names, and the
builtin templates seeded into the user's template folder.

Owns (spec "Agent Initialization Contract"):
- template selectors: a template id (``~/.agents/templates/<id>/``, or the
  bundled copy of a builtin id not seeded yet), an absolute folder, or a
  GitHub tree URL fetched with git (:mod:`holon_cli.runtime.agents.remote_git`);
- skill refs in a template's ``skills.json``: ``builtin:<name>``, an
  absolute folder, a GitHub tree URL, or a name under the template's
  ``skills/``;
- seeding: ``holon-default`` and ``holon-developer`` are copied into the
  user's template folder with a managed marker (``.holon-managed.json``: the
  digest of what holon wrote). A copy whose content still matches its
  marker is refreshed when the bundled template changes; a copy the user
  edited, or a folder without a marker, is never overwritten.

Resolution yields a :class:`Resolved` whose folder stays valid inside the
``with`` block (a remote selector is a temporary checkout).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypedDict

from holon_cli import __version__
from holon_cli.digest import sha256_hex
from holon_cli.errors import NotFoundError, RejectedError, UsageError

MARKER = ".holon-managed.json"
MARKER_VERSION = 1
BUILTIN_TEMPLATE_IDS = ("holon-default", "holon-developer")
GITHUB_PREFIXES = ("https://github.com/", "http://github.com/")  # see remote_git
_COPY_IGNORE = (".holon", "__pycache__", "*.pyc", MARKER)

SeedStatus = Literal["created", "refreshed", "unchanged", "diverged", "unmanaged"]


class SeedResult(TypedDict):
    template_id: str
    path: str
    status: SeedStatus


class Resolved(NamedTuple):
    path: Path
    provenance: dict[str, str]


def _package_dir() -> Path:
    import holon_cli

    return Path(holon_cli.__file__).resolve().parent


def bundled_template_dir(template_id: str = "holon-default") -> Path:
    """The copy of a builtin template shipped with this installation."""
    pkg = _package_dir()
    if template_id == "holon-default":
        cands = [pkg / "agent_home_template", pkg.parent / "agent_home_template"]
    else:
        cands = [pkg / "assets" / "templates" / template_id]
    for cand in cands:
        if (cand / "AGENTS.md").is_file():
            return cand
    raise RejectedError(
        f"the bundled template {template_id!r} is missing from this installation",
        hint="reinstall holon-cli (`pip install --force-reinstall holon-cli`)",
    )


def builtin_skills_dir() -> Path:
    return _package_dir() / "assets" / "skills"


def builtin_skill_names() -> list[str]:
    d = builtin_skills_dir()
    return sorted(p.name for p in d.iterdir() if (p / "SKILL.md").is_file()) if d.is_dir() else []


def user_templates_dir() -> Path:
    return Path(os.environ.get("HOLON_TEMPLATES_DIR") or (Path.home() / ".agents" / "templates"))


# ------------------------------------------------------------------ seeding


def tree_digest(folder: Path) -> str:
    """A digest of a folder's files (relative paths and bytes), marker excluded."""
    parts: list[bytes] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in (".holon", "__pycache__"))
        for name in sorted(filenames):
            if name == MARKER or name.endswith(".pyc"):
                continue
            p = Path(dirpath) / name
            rel = p.relative_to(folder).as_posix().encode()
            parts.append(rel + b"\0" + sha256_hex(p.read_bytes()).encode() + b"\n")
    return sha256_hex(b"".join(parts))


def _marker_digest(folder: Path) -> str | None:
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    digest = data.get("digest") if isinstance(data, dict) else None
    return digest if isinstance(digest, str) else None


SEED_LOCK = ".seed.lock"


def _install_copy(source: Path, dest: Path, template_id: str) -> None:
    """Copy ``source`` to ``dest`` through a staging folder and one rename
    (an old ``dest`` is swapped out, then removed): never half a template."""
    from holon_cli import clock
    from holon_cli.store.fsio import write_snapshot

    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.seeding-{os.getpid()}-{os.urandom(4).hex()}"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns(*_COPY_IGNORE))
    write_snapshot(
        staging / MARKER,
        {
            "v": MARKER_VERSION,
            "template_id": template_id,
            "holon_version": __version__,
            "digest": tree_digest(staging),
            "seeded_at": clock.now_iso(),
        },
    )
    old = dest.parent / f".{dest.name}.old-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        if dest.exists():
            os.rename(dest, old)
        os.rename(staging, dest)
    except OSError:
        # another holon seeded it at the same moment: theirs stands
        shutil.rmtree(staging, ignore_errors=True)
        if old.exists() and not dest.exists():
            os.rename(old, dest)
        if not dest.exists():
            raise
    shutil.rmtree(old, ignore_errors=True)


def seed_builtin_templates(target: Path | None = None) -> list[SeedResult]:
    """Seed (or refresh) the builtin templates into the user's template folder.
    One seeder at a time (``.seed.lock`` in that folder, across processes and
    threads): a second one reads a folder the first was swapping."""
    from holon_cli.store.locks import locked

    target = target or user_templates_dir()
    target.mkdir(parents=True, exist_ok=True)
    with locked(target / SEED_LOCK, what="template seeding", timeout=60.0):
        return _seed_locked(target)


def _seed_locked(target: Path) -> list[SeedResult]:
    out: list[SeedResult] = []
    for tid in BUILTIN_TEMPLATE_IDS:
        source = bundled_template_dir(tid)
        dest = target / tid
        status: SeedStatus
        if not dest.exists():
            _install_copy(source, dest, tid)
            status = "created"
        else:
            recorded = _marker_digest(dest)
            if recorded is None:
                status = "unmanaged"
            elif tree_digest(dest) != recorded:
                status = "diverged"
            elif tree_digest(source) == recorded:
                status = "unchanged"
            else:
                _install_copy(source, dest, tid)
                status = "refreshed"
        out.append({"template_id": tid, "path": str(dest), "status": status})
    return out


# --------------------------------------------------------------- resolution


def _checked_template(path: Path, provenance: dict[str, str]) -> Resolved:
    from holon_cli.runtime.workspace.guard import check_root

    if not path.is_dir():
        raise NotFoundError(f"template not found: {path}", hint="check the template id or path")
    if not (path / "AGENTS.md").is_file():
        raise RejectedError(
            f"template {path} has no AGENTS.md", hint="a template directory must contain AGENTS.md"
        )
    if provenance.get("kind") != "builtin":
        # copied into the new agent's home: never the holon home or a part of it
        check_root(path, what="a template")
    return Resolved(path, provenance)


@contextmanager
def resolve_template(selector: str | None) -> Iterator[Resolved]:
    """The template folder a selector names, and its provenance record."""
    selector = selector or "holon-default"
    if selector.startswith(GITHUB_PREFIXES):
        from holon_cli.runtime.agents import remote_git  # git and temp folders only for a URL

        with remote_git.fetch_tree(selector) as f:
            prov = {
                "kind": "github",
                "selector": selector,
                "ref": f.ref,
                "commit": f.commit,
                "path": f.subpath,
            }
            yield _checked_template(f.path, prov)
        return
    if selector.startswith(("http://", "https://")):
        raise RejectedError(
            f"remote template {selector!r} is not a GitHub repository or tree URL",
            hint="use https://github.com/<owner>/<repo>[/tree/<ref>/<path>], or clone it "
            "yourself and pass the template directory as an absolute path",
        )
    p = user_path(selector, "template")
    if p.is_absolute():
        yield _checked_template(p, {"kind": "path", "selector": selector, "path": str(p)})
        return
    if "/" in selector or selector in (".", ".."):
        raise UsageError(
            f"template {selector!r} is neither a template id nor an absolute path",
            hint="pass a template id (a folder under ~/.agents/templates/), an absolute "
            "directory path, or a GitHub tree URL",
        )
    seeded = user_templates_dir() / selector
    if selector in BUILTIN_TEMPLATE_IDS and not seeded.exists():
        path = bundled_template_dir(selector)
        yield _checked_template(path, {"kind": "builtin", "selector": selector, "path": str(path)})
        return
    yield _checked_template(
        seeded, {"kind": "template_id", "selector": selector, "path": str(seeded)}
    )


class SkillSource(NamedTuple):
    ref: str
    path: Path
    provenance: dict[str, str]


def builtin_skill(ref: str) -> Path:
    name = ref.removeprefix("builtin:")
    p = builtin_skills_dir() / name
    if not name or "/" in name or not (p / "SKILL.md").is_file():
        known = ", ".join(f"builtin:{n}" for n in builtin_skill_names()) or "(none)"
        raise NotFoundError(f"unknown builtin skill {ref!r}", hint=f"builtin skills: {known}")
    return p


@contextmanager
def resolve_skill_refs(template: Path) -> Iterator[list[SkillSource]]:
    """The skills a template's ``skills.json`` names, each checked for a
    ``SKILL.md``; remote ones are fetched (and removed after the block)."""
    sj = template / "skills.json"
    refs: list[Any] = []
    if sj.exists():
        try:
            data = json.loads(sj.read_text(encoding="utf-8"))
            listed = data["skill_refs"] if isinstance(data, dict) else None
            if not isinstance(listed, list):
                raise ValueError
            refs = listed
        except (ValueError, KeyError, UnicodeDecodeError):
            raise RejectedError(
                f'{sj}: expected {{"skill_refs": [...]}}', hint="fix skills.json in the template"
            ) from None
    with ExitStack() as stack:
        out: list[SkillSource] = []
        for ref in refs:
            if not isinstance(ref, str) or not ref:
                raise RejectedError(f"{sj}: skill ref {ref!r} is not a string")
            if ref.startswith("builtin:"):
                try:
                    p = builtin_skill(ref)
                except NotFoundError as exc:
                    raise RejectedError(f"{sj}: {exc.message}", hint=exc.hint) from None
                out.append(SkillSource(ref, p, {"kind": "builtin", "ref": ref}))
                continue
            if ref.startswith(GITHUB_PREFIXES):
                from holon_cli.runtime.agents import remote_git

                f = stack.enter_context(remote_git.fetch_tree(ref))
                prov = {"kind": "github", "ref": ref, "commit": f.commit}
                out.append(SkillSource(ref, _checked_skill(f.path, sj, ref), prov))
                continue
            if ref.startswith(("http://", "https://")):
                raise RejectedError(
                    f"{sj}: remote skill ref {ref!r} is not a GitHub repository or tree URL",
                    hint="use https://github.com/<owner>/<repo>[/tree/<ref>/<path>] "
                    "or a local path",
                )
            p = user_path(ref, "skill ref")
            if not p.is_absolute():
                p = template / "skills" / ref
            out.append(SkillSource(ref, _checked_skill(p, sj, ref), {"kind": "path", "ref": ref}))
        yield out


def user_path(raw: str, what: str) -> Path:
    """``raw`` with ``~`` / ``~user`` expanded; a user this machine does not
    know is a usage error naming it (``Path.expanduser`` raises
    ``RuntimeError`` there)."""
    try:
        return Path(raw).expanduser()
    except RuntimeError:
        user = raw[1:].split("/", 1)[0]
        raise UsageError(
            f"{what} {raw!r} starts with ~{user}, but there is no user {user!r} here",
            hint="pass an absolute path (or ~/... for your own home folder)",
            details={"field": what},
        ) from None


def _checked_skill(p: Path, sj: Path, ref: str) -> Path:
    from holon_cli.runtime.workspace.guard import check_root

    if not (p / "SKILL.md").is_file():
        raise RejectedError(
            f"{sj}: skill ref {ref!r} has no SKILL.md at {p}", hint="fix the ref or remove it"
        )
    check_root(p, what=f"a skill folder ({sj}: {ref!r})")
    return p
