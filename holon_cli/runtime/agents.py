"""Home and agent lifecycle: init, create (from a template, fail-closed),
resolve, list, stop/start.

Agent creation materializes the whole agent home in a hidden staging folder
next to its final place and renames it in one step: a failed template (no
``AGENTS.md``, a missing skill ref) leaves nothing half-made.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from holon_cli import __version__, clock
from holon_cli.errors import (
    CorruptStateError,
    HolonError,
    NotFoundError,
    RejectedError,
    UsageError,
)
from holon_cli.model.agent import lifecycle_hint, new_agent_record
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import (
    PRIVATE_DIR_MODE,
    defer_fsyncs,
    deferred,
    fsync_dir,
    read_snapshot,
    write_snapshot,
)
from holon_cli.store.layout import AgentLayout, HomeLayout, default_agent_id, validate_agent_id
from holon_cli.store.locks import pid_alive

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord, AgentState, AgentStatus
    from holon_cli.model.events import AgentCreatedData, AgentModelChangedData

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


def bundled_template_dir() -> Path:
    import holon_cli

    pkg = Path(holon_cli.__file__).resolve().parent
    for cand in (pkg / "agent_home_template", pkg.parent / "agent_home_template"):
        if (cand / "AGENTS.md").is_file():
            return cand
    raise RejectedError(
        "the bundled agent home template is missing from this installation",
        hint="reinstall holon-cli (`pip install --force-reinstall holon-cli`)",
    )


def user_templates_dir() -> Path:
    return Path(os.environ.get("HOLON_TEMPLATES_DIR") or (Path.home() / ".agents" / "templates"))


BUILTIN_TEMPLATES = ("holon-default",)


def resolve_template(selector: str | None) -> tuple[Path, dict[str, Any]]:
    """Return the template directory and its provenance record."""
    if selector is None or selector in BUILTIN_TEMPLATES:
        path = bundled_template_dir()
        return path, {"kind": "builtin", "selector": selector or "holon-default", "path": str(path)}
    if selector.startswith(("http://", "https://")):
        raise RejectedError(
            (
                f"remote template {selector!r} cannot be used: this build installs templates "
                "from local directories only"
            ),
            hint=(
                "clone the repository yourself and pass the template directory as an absolute path"
            ),
        )
    p = Path(selector).expanduser()
    if p.is_absolute():
        kind = "path"
    elif "/" in selector or selector in (".", ".."):
        raise UsageError(
            f"template {selector!r} is neither a template id nor an absolute path",
            hint=(
                "pass a template id (a folder under ~/.agents/templates/) or an absolute "
                "directory path"
            ),
        )
    else:
        p = user_templates_dir() / selector
        kind = "template_id"
    if not p.is_dir():
        raise NotFoundError(f"template not found: {p}", hint="check the template id or path")
    if not (p / "AGENTS.md").is_file():
        raise RejectedError(
            f"template {p} has no AGENTS.md", hint="a template directory must contain AGENTS.md"
        )
    return p, {"kind": kind, "selector": selector, "path": str(p)}


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


def _skill_refs(template: Path) -> list[Path]:
    sj = template / "skills.json"
    if not sj.exists():
        return []
    try:
        data = json.loads(sj.read_text())
        refs = data.get("skill_refs", [])
        assert isinstance(refs, list)
    except (ValueError, AssertionError, AttributeError):
        raise RejectedError(
            f'{sj}: expected {{"skill_refs": [...]}}', hint="fix skills.json in the template"
        ) from None
    out: list[Path] = []
    for ref in refs:
        if not isinstance(ref, str):
            raise RejectedError(f"{sj}: skill ref {ref!r} is not a string")
        p = Path(ref).expanduser()
        if ref.startswith(("http://", "https://")):
            raise RejectedError(
                f"{sj}: remote skill ref {ref!r} cannot be installed by this build",
                hint="use an absolute local path",
            )
        if not p.is_absolute():
            p = template / "skills" / ref
        if not (p / "SKILL.md").is_file():
            raise RejectedError(
                f"{sj}: skill ref {ref!r} has no SKILL.md at {p}", hint="fix the ref or remove it"
            )
        out.append(p)
    return out


def _materialize(
    dest: Path, template: Path, provenance: dict[str, Any], record: AgentRecord
) -> None:
    import shutil  # only agent creation copies trees: `holon enqueue` skips bz2/lzma

    ignore = shutil.ignore_patterns(".holon", "__pycache__", "*.pyc", "skills.json")
    shutil.copytree(template, dest, ignore=ignore, symlinks=False)
    skills = _skill_refs(template)
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
        target = dest / "skills" / skill.name
        if not target.exists():
            shutil.copytree(skill, target)
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
    write_snapshot(
        layout.template_file,
        {"v": 1, **provenance, "applied_at": clock.now_iso(), "skills": [str(s) for s in skills]},
    )
    write_snapshot(layout.agent_file, cast(dict[str, Any], record))


STAGING_PREFIX = ".creating-"
STAGING_MAX_AGE_S = 3600.0


def stale_staging(home: HomeLayout, *, max_age_s: float = STAGING_MAX_AGE_S) -> list[Path]:
    """``.creating-<id>-<pid>`` folders a killed ``agent create`` left behind:
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
            age = now - e.stat(follow_symlinks=False).st_mtime
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
        hint=f"restore {layout.agent_file} from a backup; or move {layout.home} aside "
        f"and run `holon agent create {layout.agent_id}` again",
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
) -> AgentStore:
    """Create an agent home from a template. ``unsynced``: ``holon run``'s
    temporary agent, whose files are fsync'd only if the run keeps it (see
    :func:`holon_cli.store.fsio.defer_fsyncs`; the run ends the deferral)."""
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
        from holon_cli.runtime.models import normalize_model_ref

        model = normalize_model_ref(model)
    tpl, provenance = resolve_template(template)
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
    )
    import shutil

    sweep_staging(home)
    staging = home.agents_dir / f"{STAGING_PREFIX}{agent_id}-{os.getpid()}"
    if unsynced:
        defer_fsyncs(layout.home, staging)
    if staging.exists():
        shutil.rmtree(staging)
    try:
        _materialize(staging, tpl, provenance, record)
        try:
            os.rename(staging, layout.home)
        except OSError:
            if layout.exists and exist_ok:  # lost a creation race: fine
                shutil.rmtree(staging, ignore_errors=True)
                return AgentStore(layout)
            raise RejectedError(f"agent {agent_id!r} already exists at {layout.home}") from None
        if not deferred(layout.home):  # holon run's temporary agent: synced if kept
            fsync_dir(home.agents_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    store = AgentStore(layout)
    data: AgentCreatedData = {
        "kind": kind,
        "visibility": visibility,
        "ownership": ownership,
        "profile_preset": profile_preset,
        "template": provenance,
        "model_override": model,
    }
    store.emit(
        "agent_created",
        data,
    )
    return store


def open_agent(agent_id: str | None = None, *, create_default: bool = True) -> AgentStore:
    """Resolve an agent; the default agent is created on first use, others are not."""
    aid = default_agent_id() if agent_id is None else agent_id
    validate_agent_id(aid)
    home = HomeLayout.current()
    layout = home.agent(aid)
    if layout.exists:
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
    status: str
    agent_home: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


def agent_ids() -> list[str]:
    """Every agent folder of the home, without reading any record (so one
    damaged agent cannot hide the others)."""
    home = HomeLayout.current()
    try:
        names = sorted(os.listdir(home.agents_dir))
    except FileNotFoundError:
        return []
    return [n for n in names if not n.startswith(".") and home.agent(n).agent_file.exists()]


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
        snap = read_snapshot(layout.agent_file)
        if snap is None:
            continue
        rec = cast("AgentRecord", snap)
        ident = rec["identity"]
        if ident.get("visibility") == "private" and not include_private:
            continue
        out.append(
            AgentListEntry(
                name, ident["kind"], ident["visibility"], rec["state"]["status"], str(layout.home)
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


def set_lifecycle(agent_id: str | None, action: str) -> dict[str, Any]:
    """``stop``, ``pause`` or ``start`` an agent. Returns ``{agent_id,
    previous, status, changed}``. A pause lets a running turn finish; a paused
    agent still accepts messages, which wait until ``start``."""
    assert action in ("stop", "pause", "start")
    store = open_agent(agent_id)
    out: dict[str, Any] = {}

    def mutate(state: AgentState) -> None:
        prev = state["status"]
        new = _lifecycle_target(action, prev)
        out.update(previous=prev, status=new, changed=new != prev)
        state["status"] = new

    store.update_state(mutate, reason=f"operator_{action}")
    out["agent_id"] = store.agent_id
    out["lifecycle_hint"] = lifecycle_hint(out["status"])
    return out


def set_model_override(agent_id: str | None, model: str | None) -> dict[str, Any]:
    """Set (or, with ``None``, clear) an agent's model override. Future turns only;
    an in-flight turn keeps the model it started with."""
    if model is not None:
        from holon_cli.runtime.models import normalize_model_ref

        model = normalize_model_ref(model)
    store = open_agent(agent_id)
    out: dict[str, Any] = {}

    def mutate(state: AgentState) -> None:
        out["previous"] = state.get("model_override")
        state["model_override"] = model

    store.update_state(mutate)
    model_changed: AgentModelChangedData = {"from": out["previous"], "to": model}
    store.emit("agent_model_changed", model_changed)
    from holon_cli.runtime.models import model_state

    return {
        "agent_id": store.agent_id,
        "previous_override": out["previous"],
        "model": model_state(store.read_record()["state"]),
    }


def last_runtime_failure() -> dict[str, Any] | None:
    """The newest runtime-turn failure persisted on any agent (``state.
    last_failure``, written when a turn ends in a failure): what ``holon
    daemon status`` reports, also after a restart of the daemon."""
    newest: dict[str, Any] | None = None
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
