"""Skills in the prompt (spec: Skill Discovery And Activation): the skill
catalog a prompt lists (:func:`discover_skills`: the user's, the agent's and
the workspace's ``SKILL.md`` files), the active skills it shows
(:func:`active_skill_rows`), and the skills a command activated
(:func:`skill_activations`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from holon_cli.model.events import SkillActivatedData
    from holon_cli.runtime.workspace import WorkspaceBinding


USER_SKILL_ROOTS = (".agents/skills", ".codex/skills", ".claude/skills")
AGENT_SKILL_ROOTS = ("skills", ".agents/skills", ".codex/skills", ".claude/skills")
WORKSPACE_SKILL_ROOTS = (".agents/skills", ".codex/skills", ".claude/skills")


def _frontmatter(path: Path) -> dict[str, str]:
    try:
        head = path.read_text(errors="replace")[:4000]
    except OSError:
        return {}
    meta: dict[str, str] = {}
    lines = head.splitlines()
    if lines and lines[0].strip() == "---":
        for line in lines[1:]:
            if line.strip() == "---":
                break
            k, sep, v = line.partition(":")
            if sep:
                meta[k.strip()] = v.strip().strip("'\"")
    if "description" not in meta:
        body = [ln.strip() for ln in lines if ln.strip() and not ln.startswith(("#", "---"))]
        if body:
            meta["description"] = body[0][:200]
    return meta


def discover_skills(
    agent_home: Path, ws: WorkspaceBinding, *, is_default_agent: bool
) -> list[dict[str, str]]:
    scopes: list[tuple[str, Path, tuple[str, ...]]] = []
    if is_default_agent:
        scopes.append(("user", Path.home(), USER_SKILL_ROOTS))
    scopes.append(("agent", agent_home, AGENT_SKILL_ROOTS))
    if ws.workspace_anchor.resolve() != agent_home.resolve():
        scopes.append(("workspace", ws.workspace_anchor, WORKSPACE_SKILL_ROOTS))
    out: list[dict[str, str]] = []
    for scope, base, roots in scopes:
        for rel in roots:
            root = base / rel
            if root.is_dir():
                for d in sorted(root.iterdir()):
                    skill_md = d / "SKILL.md"
                    if skill_md.is_file():
                        meta = _frontmatter(skill_md)
                        out.append(
                            {
                                "scope": scope,
                                "name": meta.get("name", d.name),
                                "description": meta.get("description", ""),
                                "path": str(skill_md),
                            }
                        )
                break  # first existing root per scope only
    return out


def active_skill_rows(
    session: Sequence[Mapping[str, object]], turn: Mapping[str, Mapping[str, object]]
) -> list[Mapping[str, object]]:
    """The active skills a prompt lists: session-active skills of earlier turns
    resumed as ``restored`` (runtime spec: Skill Discovery And Activation),
    then this turn's ``turn_active`` ones."""
    return [
        *({**a, "state": "restored"} for a in session if a.get("skill") not in turn),
        *turn.values(),
    ]


def skill_activations(
    cmd: str, cwd: Path, skills: list[dict[str, str]]
) -> list[SkillActivatedData]:
    """Skills a successful command activated (spec: Skill Discovery And Activation):
    referencing a skill's SKILL.md is ``read_skill_md``; referencing a file under
    its ``scripts/`` is ``run_skill_script``."""
    import os
    import re

    out: list[SkillActivatedData] = []
    for sk in skills:
        entry = Path(sk["path"])
        root = entry.parent
        forms = {str(root)}
        try:
            forms.add(os.path.relpath(root, cwd))
        except ValueError:
            pass
        for form in sorted(forms, key=len, reverse=True):
            if form in (".", ""):
                continue
            m = re.search(re.escape(form.rstrip("/")) + r"/(SKILL\.md|scripts/[^\s'\";|&)]+)", cmd)
            if m:
                rel = m.group(1)
                reason: Literal["read_skill_md", "run_skill_script"] = (
                    "read_skill_md" if rel == "SKILL.md" else "run_skill_script"
                )
                out.append(
                    {
                        "skill": sk["name"],
                        "scope": sk["scope"],
                        "load_reason": reason,
                        "path": str(root / rel),
                        "entrypoint_path": str(entry),
                    }
                )
                break
    return out
