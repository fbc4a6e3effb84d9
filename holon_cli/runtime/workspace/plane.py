"""UseWorkspace, DetachWorkspace, the workspace list and ``holon run``'s
binding: the one place an agent's workspace entry changes.

A change is decided first (paths checked, anchor located, a managed
worktree made when isolated) and written last, in one agent-record update
plus one ``workspace_bound``/``workspace_detached`` event: any failure
leaves the previous binding intact. The registry
(``store/workspace_registry.py``) only ever gains entries; nothing here
deletes a directory, a worktree, a branch or a registry entry. The holon
home, a folder containing it or one inside it (but the agent's own home and
the worktrees holon manages) is refused on every path, before anything is
made and again in :func:`bind` (``guard.check_root``: ``forbidden_workspace``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from holon_cli import clock
from holon_cli.errors import NotFoundError, RejectedError, Said, UsageError
from holon_cli.model.workspace import AGENT_HOME, IN_PLACE, MODES
from holon_cli.runtime.workspace import (
    WorkspaceBinding,
    agent_home_binding,
    attached_ids,
    legacy_anchors,
    workspace_for,
    workspace_id,
)
from holon_cli.runtime.workspace.guard import check_root
from holon_cli.runtime.workspace.locate import Located, locate
from holon_cli.runtime.workspace.worktree import worktree_session
from holon_cli.store.layout import HomeLayout
from holon_cli.store.workspace_registry import read_registry, update_registry

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState
    from holon_cli.model.events import (
        WorkspaceBoundData,
        WorkspaceDetachedData,
        WorktreeCreatedData,
    )
    from holon_cli.model.workspace import ProjectionKind, RegistryEntry, WorktreeSession
    from holon_cli.store.agent_store import AgentStore


def _home(store: AgentStore) -> HomeLayout:
    return HomeLayout(store.layout.home.parent.parent)


def _invalid(message: str, field: str, hint: str | Said | None = None) -> UsageError:
    return UsageError(message, kind="invalid_arguments", hint=hint, details={"field": field})


# ------------------------------------------------------------------ registry


def register(home: HomeLayout, anchor: Path) -> str:
    """The id of ``anchor``, registered on first use."""
    wid = workspace_id(anchor)

    def add(rows: list[RegistryEntry]) -> bool:
        if any(r["workspace_id"] == wid for r in rows):
            return False
        rows.append(
            {"workspace_id": wid, "workspace_anchor": str(anchor), "registered_at": clock.now_iso()}
        )
        return True

    update_registry(home, add)
    return wid


def anchors(store: AgentStore) -> dict[str, str]:
    """Known anchors by id: the registry, then an older record's paths."""
    state = store.read_record()["state"]
    found = {r["workspace_id"]: r["workspace_anchor"] for r in read_registry(_home(store))}
    for wid, path in legacy_anchors(state).items():
        found.setdefault(wid, path)
    active = workspace_for(store.layout.home, state)
    if active.workspace_id != AGENT_HOME:  # a temporary run's agent is not registered
        found.setdefault(active.workspace_id, str(active.workspace_anchor))
    return found


# ------------------------------------------------------------------ paths


def resolve_path(raw: str, base: Path) -> Path:
    """An existing directory for ``raw`` (relative to ``base``), or a clear error."""
    if not raw or "\0" in raw:
        raise _invalid("path is empty", "path")
    path = Path(os.path.realpath(base / Path(raw).expanduser()))
    if not path.exists():
        raise _invalid(f"{raw}: no such directory ({path})", "path", "give an existing directory")
    if not path.is_dir():
        raise _invalid(
            f"{raw} is a file, not a directory ({path})",
            "path",
            "give the directory of the project (a file's folder, not the file)",
        )
    return path


def check_attachable(store: AgentStore, path: Path, *, own: bool = True) -> None:
    """What an agent may not attach by itself: the filesystem root and the
    runtime's home (other agents' homes and worktrees, the registry).
    ``own=False``: the agent's own home and worktrees are refused too (a
    path chosen for another agent, such as a child's ``explicit_root``)."""
    home = Path(os.path.realpath(_home(store).root))
    for mine_raw in (store.layout.home, _home(store).worktrees_dir / store.agent_id):
        mine = Path(os.path.realpath(mine_raw))
        if own and (path == mine or mine in path.parents):
            return  # its own home, its own managed worktrees
    if path == Path(path.anchor) or path == home or home in path.parents:
        raise RejectedError(
            f"{path} may not be attached as a workspace: it is "
            + ("the filesystem root" if path == Path(path.anchor) else f"inside {home}"),
            hint=Said(
                "choose a project directory, or `holon workspace use agent_home` for the "
                "agent's own home",
                http='choose a project directory, or {"workspace_id": "agent_home"} for the '
                "agent's own home",
                tool='choose a project directory, or `workspace_id: "agent_home"` for your home',
            ),
            details={"field": "path", "path": str(path)},
        )


# ---------------------------------------------------------------- targets


class Target(NamedTuple):
    binding: WorkspaceBinding
    mode: str
    guidance: str | None = None
    worktree_created: bool = False


def _remembered(store: AgentStore, wid: str) -> WorktreeSession | None:
    sessions = store.read_record()["state"].get("worktree_sessions") or {}
    return sessions.get(wid)


def _isolated(store: AgentStore, wid: str, loc: Located, cwd: Path | None) -> Target:
    if not loc.git:
        raise _invalid(
            f"{loc.anchor} is not a git repository: isolated mode makes a git worktree",
            "mode",
            IN_PLACE.fmt("{d}, or `git init` it first", d=IN_PLACE),
        )
    checkout = loc.execution_root
    session, created = worktree_session(
        store.agent_id, _home(store).worktrees_dir, checkout, _remembered(store, wid)
    )
    wt = Path(session["worktree_path"])
    inner = wt
    if cwd is not None and cwd != checkout and checkout in cwd.parents:
        inner = wt / cwd.relative_to(checkout)
    b = WorkspaceBinding(
        wid, loc.anchor, wt, inner if inner.is_dir() else wt, "git_worktree_root", session
    )
    return Target(b, "isolated", None, created)


def _by_id(store: AgentStore, wid: str, mode: str) -> Target:
    if wid == AGENT_HOME:
        if mode == "isolated":
            raise _invalid("AgentHome has no isolated mode", "mode", IN_PLACE)
        return Target(agent_home_binding(store.layout.home), "direct")
    aid = store.agent_id
    if wid not in attached_ids(store.read_record()["state"]):
        raise NotFoundError(
            f"workspace {wid} is not attached to agent {aid}",
            hint=Said(
                f"attach it by path: `holon workspace use PATH --agent {aid}`; "
                f"`holon workspace list --agent {aid} --all` shows the known ones",
                http='attach it by path: {"path": "/abs/dir"}; '
                f"GET /agents/{aid}/workspaces?all=1 shows the known ones",
                tool="attach it by path (UseWorkspace path)",
            ),
            details={"field": "workspace_id"},
        )
    anchor = anchors(store).get(wid)
    if not anchor or not Path(anchor).is_dir():
        raise RejectedError(
            f"workspace {wid}'s directory {anchor or '(unknown)'} no longer exists",
            hint=Said(
                f"detach it (`holon workspace detach {wid} --agent {aid}`) or restore it",
                tool=f'detach it (DetachWorkspace workspace_id "{wid}") or restore its directory',
            ),
            details={"field": "workspace_id"},
        )
    root = Path(anchor)
    check_root(root, agent_home=store.layout.home)
    if mode == "isolated":
        return _isolated(store, wid, locate(root)._replace(anchor=root), None)
    return Target(WorkspaceBinding(wid, root, root, root), "direct")


def _by_path(store: AgentStore, raw: str, mode: str, base: Path, source: str) -> Target:
    path = resolve_path(raw, base)
    own = Path(os.path.realpath(store.layout.home))
    if path == own or own in path.parents:
        return _by_id(store, AGENT_HOME, mode)
    check_root(path, agent_home=store.layout.home)
    if source == "tool":
        check_attachable(store, path)
    loc = locate(path)
    check_root(loc.anchor, agent_home=store.layout.home)
    wid = workspace_id(loc.anchor)
    if mode == "isolated":
        return _isolated(store, wid, loc, path)
    root = loc.execution_root
    kind: ProjectionKind = "canonical_root" if root == loc.anchor else "git_worktree_root"
    guidance = None
    if loc.linked_worktree:
        guidance = (
            f"{root} is a git worktree of {loc.anchor}: it keeps that repository's id {wid} "
            "and is used as an external execution root. For a worktree the runtime manages, "
            f'use UseWorkspace(workspace_id="{wid}", mode="isolated").'
        )
    return Target(WorkspaceBinding(wid, loc.anchor, root, path, kind), "direct", guidance)


def explicit_root_target(store: AgentStore, raw: str, base: Path) -> Target:
    """A child's ``workspace_mode: explicit_root`` (control-plane RFC:
    Workspace Projection Model), decided before the child exists: an
    existing directory (relative to ``base``, the parent's cwd) that the
    parent ``store`` could attach, and not its home either (the check every
    workspace path an agent names passes: :func:`check_attachable`), bound
    direct like UseWorkspace's path."""
    path = resolve_path(raw, base)
    check_attachable(store, path, own=False)
    loc = locate(path)
    wid = workspace_id(loc.anchor)
    root = loc.execution_root
    kind: ProjectionKind = "canonical_root" if root == loc.anchor else "git_worktree_root"
    return Target(WorkspaceBinding(wid, loc.anchor, root, path, kind), "explicit_root")


# ---------------------------------------------------------------- writing


def _store_binding(st: AgentState, b: WorkspaceBinding) -> None:
    ids = attached_ids(st)
    home = b.workspace_id == AGENT_HOME
    if not home and b.workspace_id not in ids:
        ids.append(b.workspace_id)
    st["attached_workspaces"] = ids
    st["active_workspace_id"] = b.workspace_id
    st["workspace_anchor"] = None if home else str(b.workspace_anchor)
    st["execution_root"] = None if home else str(b.execution_root)
    st["cwd"] = None if home else str(b.cwd)
    st["projection_kind"] = None if home else b.projection_kind
    st["worktree_session"] = b.worktree_session
    if b.worktree_session is not None:
        st.setdefault("worktree_sessions", {})[b.workspace_id] = b.worktree_session


def _upgrade_legacy(store: AgentStore) -> None:
    """An older record's anchor paths enter the registry before the record
    is rewritten with ids (so no anchor is ever lost)."""
    legacy = legacy_anchors(store.read_record()["state"])
    for path in legacy.values():
        register(_home(store), Path(path))


def bind(
    store: AgentStore, target: Target, *, source: str, register_anchor: bool = True
) -> dict[str, Any]:
    """Write ``target`` as the active entry; returns the UseWorkspace result.
    ``register_anchor=False``: a temporary run's agent (its id is derived
    from the anchor all the same; a home-level write would cost the run its
    no-fsync path)."""
    b = target.binding
    if b.workspace_id != AGENT_HOME:
        for p in (b.workspace_anchor, b.execution_root, b.cwd):
            check_root(p, agent_home=store.layout.home)
    _upgrade_legacy(store)
    if b.workspace_id != AGENT_HOME and register_anchor:
        register(_home(store), b.workspace_anchor)
    seen: list[tuple[str, bool]] = []  # (the previous workspace, newly attached)

    def write(st: AgentState) -> None:
        seen.append(
            (
                workspace_for(store.layout.home, st).workspace_id,
                b.workspace_id not in attached_ids(st),
            )
        )
        _store_binding(st, b)

    store.update_state(write)
    previous, attached = seen[-1]
    if target.worktree_created and b.worktree_session is not None:
        s = b.worktree_session
        from holon_cli.runtime.workspace.heal import clear_intent

        clear_intent(Path(s["worktree_path"]))  # bound: no longer a leftover
        created: WorktreeCreatedData = {
            "workspace_id": b.workspace_id,
            "worktree_path": s["worktree_path"],
            "worktree_branch": s["worktree_branch"],
            "original_branch": s["original_branch"],
        }
        store.emit("worktree_created", created)
    bound: WorkspaceBoundData = {
        "workspace_anchor": str(b.workspace_anchor),
        "cwd": str(b.cwd),
        "workspace_id": b.workspace_id,
        "execution_root": str(b.execution_root),
        "projection_kind": b.projection_kind,
        "mode": target.mode,
        "previous_workspace_id": previous,
        "source": source,
    }
    store.emit("workspace_bound", bound)
    out: dict[str, Any] = {
        **b.to_dict(),
        "mode": target.mode,
        "previous_workspace_id": previous,
        "newly_attached": attached and b.workspace_id != AGENT_HOME,
    }
    if target.guidance:
        out["guidance"] = target.guidance
    return out


# ---------------------------------------------------------------- surfaces


def use_workspace(
    store: AgentStore,
    *,
    path: str | None = None,
    workspace_id: str | None = None,
    mode: str | None = None,
    base: Path | None = None,
    source: str = "tool",
) -> dict[str, Any]:
    """UseWorkspace: make a workspace active (exactly one of ``path`` and
    ``workspace_id``; ``mode`` direct (default) or isolated). Relative paths
    are taken from ``base`` (the caller's cwd)."""
    chosen = mode or "direct"
    if chosen not in MODES:
        raise _invalid(f"mode must be direct or isolated, not {mode!r}", "mode")
    if (path is None) == (workspace_id is None):
        raise _invalid(
            "give exactly one of path and workspace_id"
            + (" (both were given)" if path is not None else ""),
            "path",
            'a directory to attach, or a known id such as "agent_home"',
        )
    if workspace_id is not None:
        target = _by_id(store, workspace_id, chosen)
    else:
        assert path is not None
        target = _by_path(store, path, chosen, base or Path(os.getcwd()), source)
    return bind(store, target, source=source)


def bind_for_run(
    store: AgentStore, root_raw: str | None, cwd_raw: str | None, *, temporary: bool = False
) -> dict[str, Any]:
    """``holon run``'s binding: the directory (``--workspace-root``, else the
    current one) in direct mode, ``cwd`` inside it."""
    root = Path(os.path.realpath(root_raw or os.getcwd()))
    if not root.is_dir():
        raise UsageError(f"workspace root {root} is not a directory")
    c = Path(os.path.realpath(cwd_raw)) if cwd_raw else root
    if not c.is_dir():
        raise UsageError(f"--cwd {c} is not a directory")
    if c != root and root not in c.parents:
        raise UsageError(
            f"--cwd {c} is outside the workspace root {root}",
            hint="cwd must stay inside the execution root",
        )
    own = Path(os.path.realpath(store.layout.home))
    if root == own or own in root.parents:
        return bind(store, Target(agent_home_binding(store.layout.home), "direct"), source="run")
    check_root(root, agent_home=store.layout.home, what="the workspace of `holon run`")
    loc = locate(root)
    kind: ProjectionKind = (
        "canonical_root" if loc.execution_root == loc.anchor else "git_worktree_root"
    )
    b = WorkspaceBinding(workspace_id(loc.anchor), loc.anchor, loc.execution_root, c, kind)
    return bind(store, Target(b, "direct"), source="run", register_anchor=not temporary)


def detach_workspace(store: AgentStore, wid: str, *, source: str = "tool") -> dict[str, Any]:
    """DetachWorkspace: remove ``wid`` from the agent's attached set. The
    active workspace is refused (switch first: AgentHome is the fallback); a
    stale one (its directory gone) detaches fine; nothing on disk changes."""
    aid = store.agent_id
    if wid == AGENT_HOME:
        raise RejectedError(
            "AgentHome cannot be detached: it is every agent's fallback workspace",
            details={"field": "workspace_id"},
        )

    def refuse_active() -> RejectedError:
        return RejectedError(
            f"{wid} is agent {aid}'s active workspace: switch to another one first",
            hint=Said(
                f"`holon workspace use agent_home --agent {aid}`, then detach it",
                http=f"POST /control/agents/{aid}/workspace "
                '{"workspace_id": "agent_home"}, then detach it',
                tool='UseWorkspace workspace_id "agent_home", then DetachWorkspace it',
            ),
            details={"field": "workspace_id"},
        )

    state = store.read_record()["state"]
    if wid not in attached_ids(state):
        raise NotFoundError(
            f"workspace {wid} is not attached to agent {aid}",
            hint=f"`holon workspace list --agent {aid}` shows the attached ones",
            details={"field": "workspace_id"},
        )
    if workspace_for(store.layout.home, state).workspace_id == wid:
        raise refuse_active()
    _upgrade_legacy(store)
    anchor = anchors(store).get(wid)

    def drop(st: AgentState) -> None:
        if workspace_for(store.layout.home, st).workspace_id == wid:
            raise refuse_active()  # switched to it meanwhile
        st["attached_workspaces"] = [i for i in attached_ids(st) if i != wid]

    rec = store.update_state(drop)
    stale = not anchor or not Path(anchor).is_dir()
    data: WorkspaceDetachedData = {
        "workspace_id": wid,
        "workspace_anchor": anchor,
        "stale": stale,
        "source": source,
    }
    store.emit("workspace_detached", data)
    return {
        "workspace_id": wid,
        "workspace_anchor": anchor,
        "detached": True,
        "stale": stale,
        "attached_workspaces": list(rec["state"]["attached_workspaces"]),
    }


def list_workspaces(store: AgentStore, *, include_all: bool = False) -> list[dict[str, Any]]:
    """AgentHome, then the attached workspaces (``--all``: then every other
    workspace the home knows, ``attached: false``)."""
    state = store.read_record()["state"]
    active = workspace_for(store.layout.home, state)
    known = anchors(store)

    def row(wid: str, anchor: str | None, attached: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "workspace_id": wid,
            "workspace_anchor": anchor,
            "active": wid == active.workspace_id,
            "exists": bool(anchor) and Path(cast(str, anchor)).is_dir(),
            "attached": attached,
        }
        if out["active"]:
            out["execution_root"] = str(active.execution_root)
            out["projection_kind"] = active.projection_kind
        return out

    rows = [row(AGENT_HOME, str(store.layout.home), True)]
    ids = attached_ids(state)
    rows += [row(w, known.get(w), True) for w in ids]
    if include_all:
        rows += [row(w, a, False) for w, a in known.items() if w not in ids]
    return rows
