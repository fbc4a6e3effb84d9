"""``holon agent fork A --as B [--at TURN_ID]``: a new, independent agent
whose state is A's, now or as it was once ``TURN_ID`` settled.

B gets (A is only read):

- A's agent home files (``AGENTS.md``, ``memory/``, ``notes/``, ``skills/``,
  ``work/``, ``work-items/``), copied as they are now;
- A's agent record: identity as a public named agent ``B`` (its template
  provenance kept), state with working memory, current work item, active
  skills, totals, model override and workspace binding (paths inside A's
  home moved to B's); idle, nothing running, no sleep, no failure held;
- the ledgers of its work and memory: ``work_items``,
  ``delivery_summaries``, ``briefs``, ``context_episodes`` (A's paths and
  ownership moved to B) and the ``transcript`` (history, as it was);
- an empty queue, no tasks, timers, waits, triggers or children (B gets its
  own trigger capability on first use), no spend, no turn records; its
  ``events`` start with ``agent_created`` naming A (and the turn).

With ``--at``: the ledgers as they stood when that turn settled (its
record keeps where they were), the agent record as the turn left it (its
settlement applied by the same code a turn settles with), and the
``plan.md`` files the record kept. What cannot be rewound (the ledgers
are append-only, the files are not) is listed in the result's
``not_rewound``: the agent home's other files and ``plan.md`` files the
turn did not touch, and the workspace itself (B is bound to the same one:
commands of A and B change the same files).

B is built in a staging folder and renamed into place: a failure leaves no
agent B behind.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from holon_cli import clock
from holon_cli.errors import RejectedError
from holon_cli.runtime.replay import docs
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import write_snapshot
from holon_cli.store.layout import AgentLayout, validate_agent_id

if TYPE_CHECKING:
    from holon_cli.model.events import AgentCreatedData
    from holon_cli.runtime.replay.shapes import TurnRecordDoc

# copied and moved to B; the transcript is copied as it is
COPIED = ("work_items", "delivery_summaries", "briefs", "context_episodes")
RESET_STATE: dict[str, str | None] = {
    "status": "awake_idle",
    "sleeping_until": None,
    "current_run_id": None,
    "current_run_pid": None,
    "sleep_reason": None,
    "pending_wake_hint": None,
    "last_failure": None,
    "work_continuation_hold": None,
    "no_progress": None,
    "archived_at": None,
}


class _Forked(TypedDict):
    forked_from: str
    at: str | None
    copied: dict[str, int]
    not_copied: list[str]
    not_rewound: list[str]


class ForkResult(_Forked):
    """``holon agent fork --json``."""

    agent_id: str
    agent_home: str


def fork_agent(source_id: str, new_id: str, *, at: str | None = None) -> ForkResult:
    from holon_cli.runtime.agents.lifecycle import (
        ensure_home,
        open_agent,
        staging_folder,
        sweep_staging,
    )

    validate_agent_id(new_id)
    src = open_agent(source_id, create_default=False)
    home = ensure_home()
    dest = home.agent(new_id)
    if dest.home.exists():
        raise RejectedError(
            f"agent {new_id!r} already exists at {dest.home}",
            hint="pick another id for the fork (--as)",
        )
    record = None
    if at is not None:
        from holon_cli.runtime.replay import records

        record = records.load(src, at)
    sweep_staging(home)
    staging = staging_folder(home, new_id)
    try:
        result = _build(src, staging, new_id, record)
        try:
            os.rename(staging, dest.home)
        except OSError:
            raise RejectedError(
                f"agent {new_id!r} already exists at {dest.home}",
                hint="pick another id for the fork (--as)",
            ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    from holon_cli.store.fsio import fsync_dir

    fsync_dir(home.agents_dir)
    store = AgentStore(dest)
    rec = store.read_record()
    created: AgentCreatedData = {
        "kind": rec["identity"]["kind"],
        "visibility": rec["identity"]["visibility"],
        "ownership": rec["identity"]["ownership"],
        "profile_preset": rec["identity"]["profile_preset"],
        "template": rec["identity"]["template"],
        "model_override": rec["state"]["model_override"],
        "forked_from": {"agent_id": src.agent_id, "turn_id": at},
    }
    store.emit("agent_created", created)
    if record is not None:
        _settle_at(store, record)
    return {"agent_id": new_id, "agent_home": str(dest.home), **result}


def _build(src: AgentStore, staging: Path, new_id: str, record: TurnRecordDoc | None) -> _Forked:
    a_home = src.layout.home
    layout = AgentLayout(staging, new_id)
    shutil.copytree(a_home, staging, symlinks=True, ignore=shutil.ignore_patterns(".holon"))
    for d in (layout.state_dir, layout.ledger_dir, layout.locks_dir, layout.tasks_dir):
        d.mkdir(parents=True, exist_ok=True)
    for sub in ("tmp", "new", "cur"):
        (layout.inbox_dir / sub).mkdir(parents=True, exist_ok=True)
    if src.layout.template_file.is_file():
        shutil.copyfile(src.layout.template_file, layout.template_file)
    final_home = src.layout.home.parent / new_id

    def move(value: Any) -> Any:
        old = str(a_home)

        def fix(s: str) -> str:
            return str(final_home) + s[len(old) :] if s == old or s.startswith(old + "/") else s

        return docs.map_strings(value, fix)

    if record is None:
        with src.lock():  # the record and the sizes of one moment
            agent = src.read_record()
            sizes = {n: _size(src.layout.ledger_path(n)) for n in COPIED}
        transcript = None
        plans: dict[str, str] = {}
    else:
        blobs = record.get("blobs") or {}
        agent = docs.unpack(record["start"]["agent"], blobs)
        plans = dict(record["start"].get("plans") or {})
        for step in record.get("steps") or []:
            if step.get("agent") is not None:
                agent = docs.unpack(step["agent"], blobs)
            plans.update(step.get("plans") or {})
        end = record.get("end") or {}
        sizes = {n: int((end.get("ledgers") or {}).get(n, 0)) for n in COPIED}
        transcript = end.get("transcript") or {}
        for wid, key in plans.items():
            text = blobs.get(key)
            if isinstance(text, str) and "/" not in wid and wid not in ("", ".", ".."):
                f = layout.work_items_dir / wid / "plan.md"
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(text, encoding="utf-8", errors="surrogateescape")
    copied: dict[str, int] = {}
    for name in COPIED:
        n = _copy_ledger(src, layout, name, sizes.get(name, 0), src.agent_id, new_id, move)
        if n:
            copied[name] = n
    copied["transcript"] = _copy_transcript(src, layout, transcript)
    identity = dict(agent["identity"])
    identity.update(
        {
            "agent_id": new_id,
            "kind": "named",
            "visibility": "public",
            "ownership": "self_owned",
            "profile_preset": "public_named",
            "lineage_parent_agent_id": None,
            "created_at": clock.now_iso(),
        }
    )
    identity.pop("supervisor_agent_id", None)
    identity.pop("supervision_task_id", None)
    state: dict[str, object] = move(dict(agent["state"]))
    state.update(RESET_STATE)
    state["status_changed_at"] = identity["created_at"]
    state.pop("worktree_sessions", None)  # a worktree of A's stays A's to resume
    new_rec = {**agent, "identity": identity, "state": state}
    write_snapshot(layout.agent_file, new_rec)
    from holon_cli.model.workspace import AGENT_HOME

    not_rewound: list[str] = []
    if state.get("workspace_anchor") and state.get("active_workspace_id") != AGENT_HOME:
        not_rewound.append(
            f"the workspace {state['workspace_anchor']}: B is bound to the same one as A, "
            "so their commands change the same files"
        )
    if state.get("worktree_session"):
        not_rewound.append("B works in A's git worktree (detach or isolate it to separate them)")
    if record is not None:
        not_rewound[:0] = [
            "files of the agent home (AGENTS.md, memory/, notes/, skills/, work/) are as they "
            "are now",
            "plan.md files the turn did not touch are as they are now",
        ]
    return {
        "forked_from": src.agent_id,
        "at": record["turn_id"] if record is not None else None,
        "copied": copied,
        "not_copied": ["queue", "tasks", "timers", "waits", "triggers", "children", "spend"],
        "not_rewound": not_rewound,
    }


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _copy_ledger(
    src: AgentStore,
    layout: AgentLayout,
    name: str,
    size: int,
    old_id: str,
    new_id: str,
    move: Any,
) -> int:
    """The first ``size`` bytes of A's ledger, each record's ``agent_id`` and
    A's paths moved to B. Returns the records copied."""
    if size <= 0:
        return 0
    with open(src.layout.ledger_path(name), "rb") as f:
        data = f.read(size)
    lines = [ln for ln in data.split(b"\n")[:-1] if ln.strip()]  # whole lines only
    out = []
    for ln in lines:
        rec = json.loads(ln)
        rec = move(rec)
        _own(rec, old_id, new_id)
        out.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    path = layout.ledger_path(name)
    path.write_bytes(b"".join(out))
    os.chmod(path, 0o600)
    return len(out)


def _own(value: Any, old_id: str, new_id: str) -> None:
    """``agent_id`` fields naming A name B (records nested in records too)."""
    if isinstance(value, dict):
        if value.get("agent_id") == old_id:
            value["agent_id"] = new_id
        for v in value.values():
            _own(v, old_id, new_id)
    elif isinstance(value, list):
        for v in value:
            _own(v, old_id, new_id)


def _copy_transcript(src: AgentStore, layout: AgentLayout, pos: Mapping[str, int] | None) -> int:
    """A's transcript: whole (``pos`` None) or up to a recorded position
    (closed segments before it as they are, then that file's prefix).
    Returns the bytes of the open file copied."""
    from holon_cli.store.ledger_segments import open_segment, segment_number

    led = src.ledger("transcript")
    seg_dst = layout.ledger_dir / "segments"
    segs = {segment_number(p.name, "transcript") or 0: p for p in led.closed_segments()}
    if pos is None:
        if led.segments_dir.is_dir():
            seg_dst.mkdir(exist_ok=True)
            for p in led.segments_dir.iterdir():
                if p.name.startswith("transcript."):
                    shutil.copy2(p, seg_dst / p.name)
        data = led.path.read_bytes() if led.path.exists() else b""
    else:
        number, size = int(pos.get("segment") or 1), int(pos.get("size") or 0)
        older = [n for n in segs if n < number]
        if older:
            seg_dst.mkdir(exist_ok=True)
            for n in older:
                shutil.copy2(segs[n], seg_dst / segs[n].name)
        if number in segs:
            with open_segment(segs[number]) as f:
                data = bytes(f.read(size))
        else:
            data = led.path.read_bytes()[:size] if led.path.exists() else b""
    data = data[: data.rfind(b"\n") + 1]
    path = layout.ledger_path("transcript")
    path.write_bytes(data)
    os.chmod(path, 0o600)
    return len(data)


def _settle_at(store: AgentStore, record: TurnRecordDoc) -> None:
    """The recorded turn's settlement applied to B (working memory,
    episodes, totals, skills: :func:`finish_agent_state`), then B made idle."""
    from holon_cli.runtime.turn.journal import Journal
    from holon_cli.runtime.turn.settle import finish_agent_state

    blobs = record.get("blobs") or {}
    end = record.get("end") or {}
    settlement = docs.unpack(end.get("settlement") or {}, blobs)
    if not settlement:
        return
    journal = Journal(store, str(record["turn_id"]), str(record.get("message_id") or ""))
    journal.counted = dict(end.get("counted") or journal.counted)
    journal.usage = dict(end.get("usage") or journal.usage)
    journal.usage_reported = bool(end.get("usage_reported"))
    finish_agent_state(store, settlement, journal)

    def idle(st: Any) -> None:
        st.update(RESET_STATE)

    store.update_state(idle, reason="forked")
