"""Home and agent lifecycle: init, create (from a template, fail-closed),
resolve, list, stop/start.

Agent creation materializes the whole agent home in a hidden staging folder
next to its final place and renames it in one step: a failed template (no
``AGENTS.md``, a missing skill ref) leaves nothing half-made.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from holon_cli import __version__, clock
from holon_cli.errors import (
    CorruptStateError,
    HolonError,
    NotFoundError,
    RejectedError,
)
from holon_cli.model.agent import lifecycle_hint, new_agent_record
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import (
    PRIVATE_DIR_MODE,
    defer_fsyncs,
    deferred,
    fsync_dir,
    privatize_tree,
    read_snapshot,
    write_snapshot,
)
from holon_cli.store.layout import AgentLayout, HomeLayout, default_agent_id, validate_agent_id
from holon_cli.store.locks import pid_alive

if TYPE_CHECKING:
    from collections.abc import Callable

    from holon_cli.model.agent import AgentRecord, AgentState, AgentStatus
    from holon_cli.model.events import (
        AgentCreatedData,
        AgentModelChangedData,
    )
    from holon_cli.model.typed import JsonObject
    from holon_cli.runtime.agents.templates import SkillSource

HOME_VERSION = 1

AGENTS_GUIDANCE = """
<!-- holon: agent-home guidance (runtime-managed section) -->
## Your agent home

- `memory/self.md` and `memory/operator.md` hold durable notes about yourself
  and your operator; keep them short and current.
- `notes/` is for working notes, `work/` for scratch output, `skills/` for
  skills (each a folder with a `SKILL.md`).
- `work-items/<id>/plan.md` is the plan of each work item; edit it directly.
- `.holon/` belongs to the runtime; never edit it.
"""


def ensure_home(layout: HomeLayout | None = None) -> HomeLayout:
    """Create the home (mode 0700: it holds message content) and its marker."""
    layout = layout or HomeLayout.current()
    if not layout.marker.exists():
        if layout.root.exists() and not layout.root.is_dir():
            raise HolonError(
                f"HOLON_HOME {layout.root} is a file, not a folder",
                kind="io_error",
                hint="point HOLON_HOME at a folder (it is created when missing), "
                "or unset it to use ~/.holon",
            )
        if not layout.root.exists():
            layout.root.parent.mkdir(parents=True, exist_ok=True)
            try:
                layout.root.mkdir(mode=PRIVATE_DIR_MODE)
                os.chmod(layout.root, PRIVATE_DIR_MODE)  # whatever the umask
            except FileExistsError:
                pass  # another process made it first
        for d in (layout.agents_dir, layout.run_dir):
            d.mkdir(parents=True, exist_ok=True)
        if not layout.marker.exists():
            write_snapshot(
                layout.marker,
                {
                    "v": HOME_VERSION,
                    "created_at": clock.now_iso(),
                    "created_by": f"holon-cli {__version__}",
                },
            )
    return layout


def _materialize(
    dest: Path,
    template: Path,
    provenance: dict[str, str],
    record: AgentRecord,
    skills: list[SkillSource],
) -> None:
    import shutil  # only agent creation copies trees: `holon enqueue` skips bz2/lzma

    from holon_cli.runtime.agents.templates import MARKER

    ignore = shutil.ignore_patterns(".holon", "__pycache__", "*.pyc", "skills.json", MARKER)
    shutil.copytree(template, dest, ignore=ignore, symlinks=False)
    for d in ("memory", "notes", "work", "skills", "work-items"):
        (dest / d).mkdir(exist_ok=True)
    for name, text in (("self.md", "# Self\n"), ("operator.md", "# Operator\n")):
        f = dest / "memory" / name
        if not f.exists():
            f.write_text(text)
    agents_md = dest / "AGENTS.md"
    body = agents_md.read_text()
    if "holon: agent-home guidance" not in body:
        agents_md.write_text(body.rstrip() + "\n" + AGENTS_GUIDANCE)
    for skill in skills:
        target = dest / "skills" / skill.path.name
        if not target.exists():
            shutil.copytree(skill.path, target, symlinks=False)
    layout = AgentLayout(dest, record["identity"]["agent_id"])
    for runtime_dir in (
        layout.state_dir,
        layout.ledger_dir,
        layout.locks_dir,
        layout.inbox_dir / "tmp",
        layout.inbox_dir / "new",
        layout.inbox_dir / "cur",
        layout.tasks_dir,
    ):
        runtime_dir.mkdir(parents=True, exist_ok=True)
    privatize_tree(dest)  # the template's own modes (0644, 0755) were copied
    write_snapshot(
        layout.template_file,
        {
            "v": 1,
            **provenance,
            "applied_at": clock.now_iso(),
            "skills": [s.ref for s in skills],
            "skill_sources": [s.provenance for s in skills],
        },
    )
    write_snapshot(layout.agent_file, record)


STAGING_PREFIX = ".creating-"
STAGING_MAX_AGE_S = 3600.0


def staging_folder(home: HomeLayout, agent_id: str) -> Path:
    """A creation's own staging folder, ``.creating-<id>-<token>-<pid>``: one
    per call, not per process (two threads creating the same agent at once,
    serve's or a command's and a call's, shared one: the second removed the
    first one's half-made copy, whose rename then failed as "already
    exists"). The pid comes last, for :func:`stale_staging`."""
    return home.agents_dir / f"{STAGING_PREFIX}{agent_id}-{os.urandom(4).hex()}-{os.getpid()}"


def stale_staging(home: HomeLayout, *, max_age_s: float = STAGING_MAX_AGE_S) -> list[Path]:
    """``.creating-<id>-[<token>-]<pid>`` folders a killed ``agent create`` left behind:
    their pid is gone, or they are older than ``max_age_s`` (a reused pid)."""
    import time

    out: list[Path] = []
    try:
        entries = list(os.scandir(home.agents_dir))
    except (FileNotFoundError, NotADirectoryError):
        return out
    now = time.time()
    for e in entries:
        if not e.name.startswith(STAGING_PREFIX):
            continue
        pid = e.name.rpartition("-")[2]
        try:
            # ctime, not mtime: the staging copy carries the template's mtime
            # (copytree copies it), so a live creation looked hours old and a
            # concurrent one swept it away mid-copy
            age = now - e.stat(follow_symlinks=False).st_ctime
        except FileNotFoundError:
            continue
        mine = pid == str(os.getpid())
        dead = not pid.isdigit() or not pid_alive(int(pid))
        if not mine and (dead or age > max_age_s):
            out.append(Path(e.path))
    return out


def sweep_staging(home: HomeLayout) -> list[Path]:
    """Remove what :func:`stale_staging` finds; returns the removed folders."""
    import shutil

    removed = []
    for p in stale_staging(home):
        if p.is_symlink() or not p.is_dir():
            p.unlink(missing_ok=True)
        else:
            shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def _record_missing(layout: AgentLayout) -> CorruptStateError:
    """An agent folder without its record: deleted or never finished, not "exists"."""
    return CorruptStateError(
        f"agent {layout.agent_id!r}: the folder {layout.home} exists but its record "
        f"{layout.agent_file} is missing (deleted?)",
        hint="run `holon home check --repair`: it rebuilds the record from the copy kept "
        "before its last change or from the agent's ledgers (nothing is lost); "
        f"or move {layout.home} aside and run `holon agent create {layout.agent_id}` again",
        details={"path": str(layout.agent_file)},
    )


def create_agent(
    agent_id: str,
    *,
    template: str | None = None,
    model: str | None = None,
    kind: str = "named",
    visibility: str = "public",
    ownership: str = "self_owned",
    profile_preset: str = "public_named",
    lineage_parent_agent_id: str | None = None,
    exist_ok: bool = False,
    unsynced: bool = False,
    supervision_task_id: str | None = None,
    profile: JsonObject | None = None,
    finish: Callable[[AgentLayout], None] | None = None,
) -> AgentStore:
    """Create an agent home from a template. ``unsynced``: ``holon run``'s
    temporary agent, whose files are fsync'd only if the run keeps it (see
    :func:`holon_cli.store.fsio.defer_fsyncs`; the run ends the deferral).
    ``profile``: a child profile's record (identity ``profile``); ``finish``
    adds files to the new home before it is renamed into place (a child's
    profile instructions and inherited context: all there or none)."""
    validate_agent_id(agent_id)
    home = ensure_home()
    layout = home.agent(agent_id)
    if layout.home.exists():
        if exist_ok and layout.exists:
            return AgentStore(layout)
        if not layout.exists:
            raise _record_missing(layout)
        raise RejectedError(
            f"agent {agent_id!r} already exists at {layout.home}",
            hint=f"pick another id, or inspect it with `holon agent status {agent_id}`",
        )
    if model is not None:
        from holon_cli.runtime.agents.models import normalize_model_ref

        model = normalize_model_ref(model)
    from holon_cli.runtime.agents.templates import resolve_skill_refs, resolve_template

    # resolved (and fetched, for a GitHub selector) before anything is made
    with resolve_template(template) as tpl, resolve_skill_refs(tpl.path) as skills:
        provenance = tpl.provenance
        record = new_agent_record(
            agent_id=agent_id,
            kind=kind,
            created_at=clock.now_iso(),
            visibility=visibility,
            ownership=ownership,
            profile_preset=profile_preset,
            lineage_parent_agent_id=lineage_parent_agent_id,
            model_override=model,
            template=provenance,
            supervision_task_id=supervision_task_id,
        )
        if profile is not None:
            record["identity"]["profile"] = profile
        if not _stage_and_rename(
            home, layout, unsynced, exist_ok, tpl.path, record, skills, finish
        ):
            return AgentStore(layout)  # lost a creation race to an identical request
    store = AgentStore(layout)
    data: AgentCreatedData = {
        "kind": kind,
        "visibility": visibility,
        "ownership": ownership,
        "profile_preset": profile_preset,
        "template": provenance,
        "model_override": model,
    }
    if lineage_parent_agent_id is not None:
        data["lineage_parent_agent_id"] = lineage_parent_agent_id
    if supervision_task_id is not None:
        data["supervision_task_id"] = supervision_task_id
    store.emit(
        "agent_created",
        data,
    )
    return store


def _stage_and_rename(
    home: HomeLayout,
    layout: AgentLayout,
    unsynced: bool,
    exist_ok: bool,
    template: Path,
    record: AgentRecord,
    skills: list[SkillSource],
    finish: Callable[[AgentLayout], None] | None = None,
) -> bool:
    """Materialize the agent home in a staging folder, then rename it into
    place; False when another process created the agent first (``exist_ok``)."""
    import shutil

    sweep_staging(home)
    staging = staging_folder(home, layout.agent_id)
    if unsynced:
        defer_fsyncs(layout.home, staging)
    try:
        _materialize(staging, template, record["identity"]["template"] or {}, record, skills)
        if finish is not None:
            finish(AgentLayout(staging, layout.agent_id))
        try:
            os.rename(staging, layout.home)
        except OSError:
            if layout.exists and exist_ok:  # lost a creation race: fine
                shutil.rmtree(staging, ignore_errors=True)
                return False
            raise RejectedError(
                f"agent {layout.agent_id!r} already exists at {layout.home}"
            ) from None
        if not deferred(layout.home):  # holon run's temporary agent: synced if kept
            fsync_dir(home.agents_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return True


def restore_default_agents_md(layout: AgentLayout) -> None:
    """Re-create the default agent's deleted ``AGENTS.md`` from the
    ``holon-default`` template (spec: never over an existing one)."""
    from holon_cli.runtime.agents.templates import resolve_template
    from holon_cli.store.fsio import create_new_bytes

    with resolve_template("holon-default") as tpl:
        body = (tpl.path / "AGENTS.md").read_text(encoding="utf-8")
    if "holon: agent-home guidance" not in body:
        body = body.rstrip() + "\n" + AGENTS_GUIDANCE
    create_new_bytes(layout.home / "AGENTS.md", body.encode("utf-8"), mode=0o644)


def open_agent(agent_id: str | None = None, *, create_default: bool = True) -> AgentStore:
    """Resolve an agent; the default agent is created on first use, others are not."""
    aid = default_agent_id() if agent_id is None else agent_id
    validate_agent_id(aid)
    home = HomeLayout.current()
    layout = home.agent(aid)
    if layout.exists:
        if aid == default_agent_id() and not os.path.lexists(layout.home / "AGENTS.md"):
            restore_default_agents_md(layout)
        return AgentStore(layout)
    if layout.home.exists():
        raise _record_missing(layout)
    if create_default and aid == default_agent_id():
        return create_agent(aid, kind="default", exist_ok=True)
    raise NotFoundError(
        f"unknown agent {aid!r}",
        hint=f"create it with `holon agent create {aid}`, or list agents with `holon agent list`",
    )


class AgentListEntry(NamedTuple):
    agent_id: str
    kind: str
    visibility: str
    status: str  # "damaged": the record cannot be read (see ``problem``)
    agent_home: str
    problem: str | None = None
    # a child: its parent, and whether it was archived (its handle ended)
    lineage_parent_agent_id: str | None = None
    archived: bool = False

    def to_dict(self) -> JsonObject:
        d: JsonObject = dict(self._asdict())
        if d["problem"] is None:
            del d["problem"]  # the contract's shape for a sound agent
        if self.kind != "child":
            del d["lineage_parent_agent_id"], d["archived"]
        return d


def _damaged_entry(name: str, home: str, exc: CorruptStateError) -> AgentListEntry:
    return AgentListEntry(name, "?", "?", "damaged", home, exc.message)


def agent_ids() -> list[str]:
    """Every agent folder of the home, without reading any record (so one
    damaged agent cannot hide the others)."""
    home = HomeLayout.current()
    try:
        names = sorted(os.listdir(home.agents_dir))
    except FileNotFoundError:
        return []
    # plain strings, not Path objects: `tick --all` over 10,000 agents asks this
    # (pathlib's joins cost ~0.1 ms an agent)
    root = str(home.agents_dir)
    exists = os.path.exists
    return [n for n in names if n[:1] != "." and exists(f"{root}/{n}/.holon/state/agent.json")]


def list_agents(*, include_private: bool = False) -> list[AgentListEntry]:
    home = HomeLayout.current()
    out: list[AgentListEntry] = []
    try:
        names = sorted(os.listdir(home.agents_dir))
    except FileNotFoundError:
        return out
    for name in names:
        if name.startswith(".") or not (home.agents_dir / name).is_dir():
            continue  # staging folders of a crashed creation, stray files
        layout = home.agent(name)
        try:
            snap = read_snapshot(layout.agent_file)
        except CorruptStateError as exc:
            # one damaged record must not hide the other agents: list it, marked
            out.append(_damaged_entry(name, str(layout.home), exc))
            continue
        if snap is None:
            if layout.ledger_dir.is_dir() and any(layout.ledger_dir.glob("*.jsonl")):
                why = CorruptStateError(f"{layout.agent_file}: the agent record is missing")
                out.append(_damaged_entry(name, str(layout.home), why))
            continue
        rec = cast("AgentRecord", snap)
        ident = rec["identity"]
        if ident.get("visibility") == "private" and not include_private:
            continue
        out.append(
            AgentListEntry(
                name,
                ident["kind"],
                ident["visibility"],
                rec["state"]["status"],
                str(layout.home),
                lineage_parent_agent_id=ident.get("lineage_parent_agent_id"),
                archived=bool(rec["state"].get("archived_at")),
            )
        )
    return out


def _lifecycle_target(action: str, prev: AgentStatus) -> AgentStatus:
    """``stop`` holds everything; ``pause`` holds a live agent (a stopped one
    stays stopped); ``start`` releases either hold and nothing else."""
    if action == "stop":
        return "stopped"
    if action == "pause":
        return prev if prev == "stopped" else "paused"
    return "awake_idle" if prev in ("stopped", "paused") else prev


def set_lifecycle(agent_id: str | None, action: str) -> JsonObject:
    """``stop``, ``pause`` or ``start`` an agent. Returns ``{agent_id,
    previous, status, changed}``. A pause lets a running turn finish; a paused
    agent still accepts messages, which wait until ``start``."""
    assert action in ("stop", "pause", "start")
    store = open_agent(agent_id)
    seen: list[tuple[AgentStatus, AgentStatus]] = []

    def mutate(state: AgentState) -> None:
        prev = state["status"]
        new = _lifecycle_target(action, prev)
        seen.append((prev, new))
        state["status"] = new

    store.update_state(mutate, reason=f"operator_{action}")
    prev, new = seen[-1]
    return {
        "previous": prev,
        "status": new,
        "changed": new != prev,
        "agent_id": store.agent_id,
        "lifecycle_hint": lifecycle_hint(new),
    }


def set_model_override(agent_id: str | None, model: str | None) -> dict[str, Any]:
    """Set (or, with ``None``, clear) an agent's model override. Future turns only;
    an in-flight turn keeps the model it started with."""
    if model is not None:
        from holon_cli.runtime.agents.models import normalize_model_ref

        model = normalize_model_ref(model)
    store = open_agent(agent_id)
    previous: list[str | None] = []

    def mutate(state: AgentState) -> None:
        previous.append(state.get("model_override"))
        state["model_override"] = model

    store.update_state(mutate)
    model_changed: AgentModelChangedData = {"from": previous[-1], "to": model}
    store.emit("agent_model_changed", model_changed)
    from holon_cli.runtime.agents.models import model_state

    return {
        "agent_id": store.agent_id,
        "previous_override": previous[-1],
        "model": model_state(store.read_record()["state"]),
    }


def last_runtime_failure() -> JsonObject | None:
    """The newest runtime-turn failure persisted on any agent (``state.
    last_failure``, written when a turn ends in a failure): what ``holon
    daemon status`` reports, also after a restart of the daemon."""
    newest: JsonObject | None = None
    for aid in agent_ids():
        try:
            snap = read_snapshot(HomeLayout.current().agent(aid).agent_file)
        except HolonError:
            continue  # a damaged agent: `holon home check` reports it
        lf = ((snap or {}).get("state") or {}).get("last_failure")
        if isinstance(lf, dict) and str(lf.get("occurred_at", "")) > str(
            (newest or {}).get("occurred_at", "")
        ):
            newest = lf
    return newest
