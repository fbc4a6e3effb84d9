"""Agent-local skills: install one from GitHub, a builtin or a folder, and list
what an agent discovers (spec "Skill Discovery And Activation Contract").

An installed skill is an ordinary folder ``<agent_home>/skills/<name>/``
holding ``SKILL.md``: the live truth, as for templates. Its source is
recorded in ``.holon/state/installed_skills.json`` (name → provenance) so
``holon skills list`` can say where it came from. An install is staged next
to its final place and renamed in one step: a failed fetch leaves nothing.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, TypedDict

from holon_cli import clock
from holon_cli.errors import RejectedError, UsageError
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import fsync_dir, privatize_tree, read_snapshot, write_snapshot

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
INSTALLED_FILE = "installed_skills.json"


class RemovedSkill(TypedDict):
    """What :func:`remove_skill` removed."""

    agent_id: str
    name: str
    path: str
    removed: bool
    source: str | None  # where an installed one came from


class SkillList(TypedDict):
    """``holon skills list``: the discovered skills in prompt order (each
    with ``source``: where an installed one came from), the builtin refs."""

    agent_id: str
    skills: list[dict[str, str | None]]
    builtin: list[str]


def _installed_path(store: AgentStore) -> Path:
    return store.layout.state_dir / INSTALLED_FILE


def _read_installed(store: AgentStore) -> dict[str, object]:
    """Name → provenance; informational only, so a damaged record reads as empty
    (the skills themselves are the folders, which nothing here touches)."""
    from holon_cli.errors import CorruptStateError

    try:
        data = read_snapshot(_installed_path(store))
    except CorruptStateError:
        return {}
    skills = data.get("skills") if isinstance(data, dict) else None
    return skills if isinstance(skills, dict) else {}


def install_skill(store: AgentStore, source: str, *, name: str | None = None) -> dict[str, str]:
    """Install ``source`` (a GitHub tree URL, ``builtin:<name>`` or an absolute
    folder holding ``SKILL.md``) as ``<agent_home>/skills/<name>``."""
    from holon_cli.runtime.agents.templates import builtin_skill

    if source.startswith(("http://", "https://")):  # fetch_tree refuses all but GitHub
        from holon_cli.runtime.agents import remote_git

        with remote_git.fetch_tree(source) as f:
            prov = {"kind": "github", "source": source, "ref": f.ref, "commit": f.commit}
            return _install_folder(store, f.path, name or f.name, prov)
    if source.startswith("builtin:"):
        path = builtin_skill(source)
        return _install_folder(
            store, path, name or path.name, {"kind": "builtin", "source": source}
        )
    from holon_cli.runtime.agents.templates import user_path

    p = user_path(source, "skill source")
    if not p.is_absolute():
        raise UsageError(
            f"skill source {source!r} is neither a GitHub URL, builtin:<name>, "
            "nor an absolute folder",
            hint="e.g. --remote https://github.com/<owner>/<repo> (or .../tree/<ref>/<path>), "
            "or builtin:verify-before-done (see `holon skills list`)",
        )
    if not p.is_dir():
        from holon_cli.errors import NotFoundError

        raise NotFoundError(f"skill folder not found: {p}", hint="check the path")
    return _install_folder(store, p, name or p.name, {"kind": "path", "source": str(p)})


def _install_folder(
    store: AgentStore, folder: Path, name: str, provenance: dict[str, str]
) -> dict[str, str]:
    if not (folder / "SKILL.md").is_file():
        raise RejectedError(
            f"{provenance['source']} has no SKILL.md at its top",
            hint="a skill is a folder with SKILL.md; point at that folder",
        )
    if not _NAME.match(name):
        raise UsageError(
            f"{name!r} is not a usable skill name",
            hint="pass --name with letters, digits, '.', '_' or '-' (at most 64)",
        )
    skills_dir = store.layout.home / "skills"
    skills_dir.mkdir(exist_ok=True)
    dest = skills_dir / name
    if dest.exists() or dest.is_symlink():
        raise RejectedError(
            f"agent {store.agent_id!r} already has a skill {name!r} at {dest}",
            hint=f"`holon skills rm {name} --agent {store.agent_id}` first to replace it, "
            "or pass --name to install it beside",
        )
    staging = skills_dir / f".installing-{name}-{os.getpid()}-{os.urandom(4).hex()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shutil.copytree(folder, staging, symlinks=False, ignore=shutil.ignore_patterns(".git"))
        privatize_tree(staging)
        os.rename(staging, dest)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if dest.exists():  # a concurrent install of the same name won
            raise RejectedError(
                f"agent {store.agent_id!r} already has a skill {name!r} at {dest}",
                hint=f"`holon skills rm {name} --agent {store.agent_id}` first to replace it, "
                "or pass --name to install it beside",
            ) from None
        raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(skills_dir)
    record = {**provenance, "name": name, "installed_at": clock.now_iso()}
    installed = _read_installed(store)
    installed[name] = record
    write_snapshot(_installed_path(store), {"v": 1, "skills": installed})
    return {"agent_id": store.agent_id, "name": name, "path": str(dest / "SKILL.md"), **record}


def remove_skill(store: AgentStore, name: str) -> RemovedSkill:
    """Remove the agent's skill ``name`` (``<agent_home>/skills/<name>/``):
    renamed aside in one step (a prompt built meanwhile sees it whole or
    not at all), then deleted; its provenance record and its entry among
    the agent's active skills go too. A link is removed, never followed.
    Workspace and builtin skills are not the agent's to remove."""
    from holon_cli.errors import NotFoundError

    if not _NAME.match(name):
        raise UsageError(
            f"{name!r} is not a skill name",
            hint="letters, digits, '.', '_' or '-' (see `holon skills list`)",
        )
    skills_dir = store.layout.home / "skills"
    dest = skills_dir / name
    if not (dest.is_dir() or dest.is_symlink()):
        have = sorted(
            p.name for p in (skills_dir.iterdir() if skills_dir.is_dir() else ()) if p.is_dir()
        )
        raise NotFoundError(
            f"agent {store.agent_id!r} has no skill {name!r} in {skills_dir}",
            hint=f"its skills: {', '.join(n for n in have if not n.startswith('.')) or 'none'} "
            f"(`holon skills list --agent {store.agent_id}`; workspace skills live in the "
            "project, builtin ones in holon)",
        )
    if dest.is_symlink():
        dest.unlink()
    else:
        aside = skills_dir / f".removing-{name}-{os.getpid()}-{os.urandom(4).hex()}"
        os.rename(dest, aside)
        fsync_dir(skills_dir)
        shutil.rmtree(aside, ignore_errors=True)
    installed = _read_installed(store)
    record = installed.pop(name, None)
    if record is not None:
        write_snapshot(_installed_path(store), {"v": 1, "skills": installed})
    gone = str(dest) + os.sep

    def forget(state: Any) -> None:
        active = state.get("active_skills") or []
        kept = [a for a in active if not str(a.get("entrypoint_path") or "").startswith(gone)]
        if len(kept) != len(active):
            state["active_skills"] = kept

    store.update_state(forget, reason="skill_removed")
    return {
        "agent_id": store.agent_id,
        "name": name,
        "path": str(dest),
        "removed": True,
        "source": record.get("source") if isinstance(record, dict) else None,
    }


def list_skills(store: AgentStore) -> SkillList:
    """What the agent's prompt would list (scope order, first root per scope),
    each with where an installed one came from, and the builtin refs."""
    from holon_cli.runtime.agents.templates import builtin_skill_names
    from holon_cli.runtime.prompt import discover_skills
    from holon_cli.runtime.workspace import workspace_for
    from holon_cli.store.layout import default_agent_id

    rec = store.read_record()
    ws = workspace_for(store.layout.home, rec["state"])
    is_default = rec["identity"]["kind"] == "default" or store.agent_id == default_agent_id()
    installed = _read_installed(store)
    skills: list[dict[str, str | None]] = []
    for s in discover_skills(store.layout.home, ws, is_default_agent=is_default):
        folder = Path(s["path"]).parent.name
        src = installed.get(folder) if s["scope"] == "agent" else None
        skills.append({**s, "source": src.get("source") if isinstance(src, dict) else None})
    return {
        "agent_id": store.agent_id,
        "skills": skills,
        "builtin": [f"builtin:{n}" for n in builtin_skill_names()],
    }
