"""``holon home check --repair``: rebuild what can be rebuilt, lose nothing.

The ledgers are the truth; snapshots are folds of them (``queue.json``,
``timers.json``, ``work_items.json``, ``trigger.json``) or, for
``agent.json``, a record whose previous version is kept as
``agent.json.prev``. A repair therefore:

- never deletes: a damaged file is renamed aside (``<name>.damaged-<time>``);
- rebuilds a damaged snapshot, or one that disagrees with its ledger, from
  the ledger; when the ledger lost records the snapshot still holds (it was
  emptied or cut), those records are appended back to the ledger first;
- restores a damaged ``agent.json`` from ``agent.json.prev``, else rebuilds it
  from the ``agent_created`` event and the later state and model changes;
- accepts what is gone for good (events cut from ``events.jsonl``): records
  the loss as an ``agent_state_repaired`` event and rewrites each ledger's
  mark, so ``home check`` is clean again;
- leaves damaged *lines* inside a ledger alone (which line to drop is the
  operator's call; ``home check`` names file and line).

Every step runs under the lock its writers take (agent lock, timer lock,
trigger lock). The result lists what was done, one action per change.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

from holon_cli import clock
from holon_cli.errors import CorruptStateError, HolonError
from holon_cli.store.agent_store import SEQ_KEYS, AgentStore
from holon_cli.store.fsio import fsync_dir, read_record, read_snapshot, write_snapshot
from holon_cli.store.layout import HomeLayout
from holon_cli.store.ledger import Ledger, read_mark, write_mark
from holon_cli.store.locks import locked
from holon_cli.store.records import (
    QUEUE_SNAPSHOT,
    TIMERS_SNAPSHOT,
    TRIGGER_SNAPSHOT,
    WORK_ITEMS_SNAPSHOT,
    RecordKind,
)

R = TypeVar("R")

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord
    from holon_cli.model.events import EventRecord
    from holon_cli.model.task import TaskLedgerRecord
    from holon_cli.model.typed_base import JsonObject
    from holon_cli.model.workitem import WorkItemLine


class RepairAction(TypedDict):
    path: str
    # restored | rebuilt | reappended | mark_rewritten | loss_recorded | set_aside | skipped
    action: str
    detail: str


def repair_home() -> list[RepairAction]:
    """Repair every agent of the home; returns what was done."""
    home = HomeLayout.current()
    try:
        names = sorted(n for n in os.listdir(home.agents_dir) if not n.startswith("."))
    except FileNotFoundError:
        return []
    actions: list[RepairAction] = _repair_marker(home)
    for name in names:
        layout = home.agent(name)
        if not layout.runtime.is_dir():
            continue
        store = AgentStore(layout)
        for step in STEPS:
            try:
                actions += step(store)
            except HolonError as exc:
                # e.g. a damaged line inside a ledger: named, left to the operator
                what = step.__name__.removeprefix("_repair_").replace("_", " ")
                actions.append(_act(layout.home, "skipped", f"{what}: {exc.message}"))
    return actions


def unrepaired(
    problems: Iterable[Mapping[str, object]], done: list[RepairAction]
) -> list[RepairAction]:
    """What a repair could not fix (the check after it still finds), one
    ``skipped`` action each, saying why and what to do: the repair never
    answers "nothing to repair" over a finding."""
    named = {a["path"] for a in done if a["action"] == "skipped"}
    return [
        _act(Path(str(p["path"])), "skipped", f"not repaired: {p['message']}")
        for p in problems
        if p["path"] not in named
    ]


def _repair_marker(home: HomeLayout) -> list[RepairAction]:
    got = _readable(home.marker)
    if not isinstance(got, str):
        return []
    aside = _set_aside(home.marker)
    write_snapshot(home.marker, {"v": 1, "created_at": clock.now_iso(), "repaired": True})
    return [
        _act(aside, "set_aside", f"the damaged home marker ({got})"),
        _act(home.marker, "rebuilt", "a new home marker"),
    ]


def _act(path: Path, action: str, detail: str) -> RepairAction:
    return {"path": str(path), "action": action, "detail": detail}


def _set_aside(path: Path) -> Path:
    """Rename a damaged file aside (never deleted)."""
    stamp = clock.now_iso().replace(":", "").replace("-", "")
    dest = path.with_name(f"{path.name}.damaged-{stamp}")
    os.replace(path, dest)
    fsync_dir(path.parent)
    return dest


def _was_cut(led: Ledger[Any]) -> bool:
    """The ledger holds less than its mark says was written: a snapshot that
    says more is then newer than the ledger, not wrong."""
    got = read_mark(led.mark_path)
    return isinstance(got, dict) and got["size"] > led.complete_size()


def _readable(path: Path, max_version: int = 1) -> JsonObject | None | str:
    """The snapshot, ``None`` when missing, or why it cannot be read."""
    try:
        return read_snapshot(path, max_version=max_version)
    except CorruptStateError as exc:
        return exc.message


def _readable_as(path: Path, kind: RecordKind[R], max_version: int = 1) -> R | None | str:
    """The snapshot as its record type, ``None`` when missing, or why it cannot be read."""
    try:
        return read_record(path, kind, max_version=max_version)
    except CorruptStateError as exc:
        return exc.message


# ------------------------------------------------------------ agent record


def _repair_agent_record(store: AgentStore) -> list[RepairAction]:
    path = store.layout.agent_file
    with store.lock():
        got = _readable(path)
        if isinstance(got, dict):
            return []
        if got is None and not store.events.path.exists():
            return []  # not an agent (a stray folder): nothing to rebuild from
        out: list[RepairAction] = []
        if isinstance(got, str):
            aside = _set_aside(path)
            out.append(_act(aside, "set_aside", f"the damaged record ({got})"))
        prev = path.with_name(path.name + ".prev")
        kept = _readable(prev)
        facts = _ledger_facts(store)
        if isinstance(kept, dict):
            rec = cast("AgentRecord", kept)
            source = "the copy kept before its last change (agent.json.prev) and the ledgers"
        else:
            rec = _rebuild_agent_record(store, facts)
            source = "the agent's ledgers (agent_created and later state and model changes)"
        _apply_facts(rec, facts)
        write_snapshot(path, rec)
    store.emit("agent_state_repaired", {"file": str(path), "rebuilt_from": source})
    return [*out, _act(path, "restored", f"rebuilt from {source}")]


class _Facts(TypedDict):
    created: EventRecord | None
    status: str | None  # the target of the last agent_state_changed
    model: tuple[Any] | None  # (the last model override,) when one was set or cleared
    input_tokens: int
    output_tokens: int


def _ledger_facts(store: AgentStore) -> _Facts:
    """What the events say about the record: creation, the last status
    change, the last model change, token totals."""
    facts: _Facts = {
        "created": None,
        "status": None,
        "model": None,
        "input_tokens": 0,
        "output_tokens": 0,
    }
    for ev in store.events.records_skipping_damaged()[0]:
        kind, data = ev.get("kind"), ev.get("data") or {}
        if kind == "agent_created" and facts["created"] is None:
            facts["created"] = ev
        elif kind == "agent_model_changed":
            facts["model"] = (data.get("to"),)
        elif kind == "agent_state_changed" and isinstance(data.get("to"), str):
            facts["status"] = data["to"]
        elif kind == "turn_terminal" and isinstance(data.get("token_usage"), dict):
            for k in ("input_tokens", "output_tokens"):
                facts[k] += int(data["token_usage"].get(k) or 0)
    return facts


def _apply_facts(rec: AgentRecord, facts: _Facts) -> None:
    """The ledgers win over a kept copy (one change behind at most): an
    operator's stop or pause holds, anything else starts idle; the newest
    model override applies."""
    state = rec["state"]
    status = facts["status"] or state["status"]
    state["status"] = (
        "stopped" if status == "stopped" else "paused" if status == "paused" else "awake_idle"
    )
    state["current_run_id"] = None
    if facts["model"] is not None:
        m = facts["model"][0]
        state["model_override"] = m if isinstance(m, str) else None


def _rebuild_agent_record(store: AgentStore, facts: _Facts) -> AgentRecord:
    from holon_cli.model.agent import new_agent_record

    created = facts["created"]
    if created is None:
        raise CorruptStateError(
            f"{store.layout.agent_file}: cannot be rebuilt: no readable agent.json.prev and "
            f"no agent_created event in {store.events.path}",
            hint=f"move {store.layout.home} aside and run "
            f"`holon agent create {store.agent_id}`; its ledgers stay in the folder you moved",
        )
    data = created.get("data") or {}
    model = data.get("model_override")
    rec = new_agent_record(
        agent_id=store.agent_id,
        kind=str(data.get("kind") or "named"),
        created_at=str(created.get("at") or clock.now_iso()),
        visibility=str(data.get("visibility") or "public"),
        ownership=str(data.get("ownership") or "self_owned"),
        profile_preset=str(data.get("profile_preset") or "public_named"),
        lineage_parent_agent_id=data.get("lineage_parent_agent_id"),
        supervision_task_id=data.get("supervision_task_id"),
        model_override=model if isinstance(model, str) else None,
        template=data.get("template") if isinstance(data.get("template"), dict) else None,
    )
    rec["state"]["total_input_tokens"] = facts["input_tokens"]
    rec["state"]["total_output_tokens"] = facts["output_tokens"]
    return rec


# ------------------------------------------------------------- snapshots


def _repair_timers(store: AgentStore) -> list[RepairAction]:
    from holon_cli.runtime.waiting import timers as tm
    from holon_cli.runtime.waiting.common import state_file

    path = state_file(store, tm.LEDGER)
    out: list[RepairAction] = []
    with tm._lock(store):
        got = _readable_as(path, TIMERS_SNAPSHOT, tm.SNAPSHOT_VERSION)
        led = store.ledger(tm.LEDGER)
        folded = {r["timer"]["id"]: r["timer"] for _, _, r in led.scan(0)}
        if isinstance(got, dict):
            offset_ok = got["offset"] <= led.size()
            upto = {}
            for _, end, r in led.scan(0):
                if end > got["offset"]:
                    break
                upto[r["timer"]["id"]] = r["timer"]
            mine = {t["id"]: t for t in got["timers"]}
            cut = _was_cut(led)
            if offset_ok and upto == mine and not cut:
                return []
            # what a cut or emptied ledger lost goes back into it first
            for tid, t in mine.items():
                if tid not in folded or (cut and folded[tid] != t):
                    led.append({"v": 1, "op": "restored", "at": clock.now_iso(), "timer": t})
                    out.append(_act(led.path, "reappended", f"timer {tid} from {path.name}"))
        elif got is None:
            return []
        else:
            out.append(_act(_set_aside(path), "set_aside", f"the damaged snapshot ({got})"))
        if path.exists():
            _set_aside(path)
        st = tm.load(store)  # no snapshot: folded from the whole ledger
        tm._save(store, st)
    return [*out, _act(path, "rebuilt", f"from {led.path.name} ({len(st.timers)} timer(s))")]


def _repair_work_items(store: AgentStore) -> list[RepairAction]:
    """The work item index: its head (``work_items.json``) and the archive it
    continues, rebuilt from the ledgers when either is damaged or disagrees
    with ``work_items.jsonl``; what a cut ledger lost and the index still
    holds (the archive's items included) is appended back first."""
    from holon_cli.store import workitem_archive as wa
    from holon_cli.store import workitem_index as wi

    path, apath = wi.index_path(store), wi.archive_path(store)
    out: list[RepairAction] = []
    with store.lock():
        got = _readable_as(path, WORK_ITEMS_SNAPSHOT, wi.INDEX_VERSION)
        led = store.ledger(wi.WORK_ITEMS_LEDGER)
        if got is None:
            return []
        if isinstance(got, dict):
            arch = got.get("archive") if got.get("v") == wi.INDEX_VERSION else None
            arch = arch if isinstance(arch, dict) else {}
            gen, damaged = arch.get("generation"), None
            archived: dict[str, WorkItemLine] = {}
            if isinstance(gen, str):
                try:
                    held = wa.read_archive(apath, gen, int(arch.get("bytes") or 0))
                    archived = {k: v for k, v in held.items.items() if k not in got["items"]}
                except CorruptStateError as exc:
                    damaged = exc.message
            full: dict[str, WorkItemLine] = {**archived, **got["items"]}
            done = sum(1 for v in archived.values() if v.get("state") == "completed")
            folded = {r["id"]: r for _, _, r in led.scan(0)}
            upto = {}
            for _, end, r in led.scan(0):
                if end > got["offset"]:
                    break
                upto[r["id"]] = r.get("state")
            mine = {k: v.get("state") for k, v in full.items()}
            cut = _was_cut(led)
            count_ok = done == int(arch.get("items") or 0)
            if damaged is None and count_ok and got["offset"] <= led.size() and upto == mine:
                if not cut:
                    return []
            for wid, item in full.items():
                if wid not in folded or (cut and folded[wid] != item):
                    led.append({**item})
                    folded[wid] = item
                    src = path.name if wid in got["items"] else apath.name
                    out.append(_act(led.path, "reappended", f"work item {wid} from {src}"))
            if cut:  # the index is checkpointed lazily: the events know the rest
                out += _work_items_from_events(store, led, folded)
            _set_aside(path)
            if damaged is not None and apath.exists():
                out.append(_act(_set_aside(apath), "set_aside", f"the damaged archive ({damaged})"))
            elif apath.exists():
                _set_aside(apath)  # replaced by the rebuilt one; kept, never deleted
        else:
            out.append(_act(_set_aside(path), "set_aside", f"the damaged index ({got})"))
            if apath.exists():  # the archive of an index that cannot be read
                _set_aside(apath)
        idx = wi.rebuild(store)
    return [*out, _act(path, "rebuilt", f"from {led.path.name} ({len(idx.items)} item(s))")]


def _work_items_from_events(
    store: AgentStore, led: Ledger[Any], known: Mapping[str, Mapping[str, object]]
) -> list[RepairAction]:
    """What a cut ledger lost and no snapshot held, from the work items'
    events: items created since (objective, plan status, plan file) and
    changes newer than the record the ledger kept (updates, completion)."""
    from holon_cli.model import workitem as wm
    from holon_cli.store import workitem_index as wi

    items: dict[str, dict[str, object]] = {k: dict(v) for k, v in known.items()}
    changed: set[str] = set()
    for ev in store.events.records_skipping_damaged()[0]:
        wid, kind, data = ev.get("work_item_id"), ev.get("kind"), ev.get("data") or {}
        at = str(ev.get("at") or "")
        if not isinstance(wid, str):
            continue
        if kind == "work_item_created" and wid not in items:
            if not isinstance(data.get("objective"), str):
                continue
            new = wm.new_work_item_record(
                work_item_id=wid,
                agent_id=store.agent_id,
                workspace_id=None,
                objective=data["objective"],
                plan_status=str(data.get("plan_status") or "draft"),
                todo_list=[],
                plan_artifact=wi.describe_file(wi.plan_path(store, wid)),
                created_at=at,
            )
            items[wid] = dict(new)
            changed.add(wid)
            continue
        rec = items.get(wid)
        if rec is None or at <= str(rec.get("updated_at") or ""):
            continue  # the ledger's record already reflects it
        if kind == "work_item_updated":
            if isinstance(data.get("plan_status"), str):
                rec["plan_status"] = data["plan_status"]
            rec["blocked_by"] = data.get("blocked_by")
        elif kind == "work_item_completed":
            rec.update(state="completed", completed_at=at)
        else:
            continue
        rec["updated_at"] = at
        changed.add(wid)
    out = []
    for wid in sorted(changed):
        led.append({**items[wid], "change": "recovered_from_events"})
        out.append(_act(led.path, "reappended", f"work item {wid} from its events"))
    return out


def _repair_trigger(store: AgentStore) -> list[RepairAction]:
    from holon_cli.model.trigger import TRIGGER_VERSION
    from holon_cli.runtime.waiting import triggers as tr
    from holon_cli.runtime.waiting.common import state_file

    path = state_file(store, tr.NAME)
    with tr._lock(store):
        got = _readable_as(path, TRIGGER_SNAPSHOT, TRIGGER_VERSION)
        led = store.ledger(tr.LEDGER)
        last = led.last()
        trig = last.get("trigger") if last else None
        if not isinstance(trig, dict):
            if isinstance(got, dict) and _was_cut(led):
                led.append({"v": 1, "op": "restored", "at": clock.now_iso(), "trigger": got})
                return [_act(led.path, "reappended", f"the capability from {path.name}")]
            return []
        keys = ("external_trigger_id", "status", "token_sha256", "token_generation")
        if isinstance(got, dict) and all(got.get(k) == trig.get(k) for k in keys):
            return []
        led = store.ledger(tr.LEDGER)
        if isinstance(got, dict) and _was_cut(led):
            # the ledger lost the newest change; the snapshot still has it
            led.append({"v": 1, "op": "restored", "at": clock.now_iso(), "trigger": got})
            return [_act(led.path, "reappended", f"the capability from {path.name}")]
        out: list[RepairAction] = []
        if path.exists():
            why = got if isinstance(got, str) else "it disagreed with triggers.jsonl"
            out.append(_act(_set_aside(path), "set_aside", f"the snapshot ({why})"))
        write_snapshot(path, trig)
    return [*out, _act(path, "rebuilt", "from the last record of triggers.jsonl")]


def _repair_template(store: AgentStore) -> list[RepairAction]:
    """``template.json`` (provenance only) from the ``agent_created`` event."""
    path = store.layout.template_file
    with store.lock():
        got = _readable(path)
        if not isinstance(got, str):
            return []
        created = next(
            (
                e
                for e in store.events.records_skipping_damaged()[0]
                if e.get("kind") == "agent_created"
            ),
            None,
        )
        data = (created.get("data") if created else None) or {}
        tpl = data.get("template")
        provenance: Mapping[str, object] = tpl if isinstance(tpl, dict) else {}
        skills_dir = store.layout.home / "skills"
        skills = (
            sorted(p.name for p in skills_dir.iterdir() if p.is_dir())
            if skills_dir.is_dir()
            else []
        )
        aside = _set_aside(path)
        write_snapshot(
            path,
            {
                "v": 1,
                **provenance,
                "applied_at": created["at"] if created else clock.now_iso(),
                "skills": skills,
                "rebuilt": True,
            },
        )
    return [
        _act(aside, "set_aside", f"the damaged snapshot ({got})"),
        _act(path, "rebuilt", "from the agent_created event"),
    ]


def _repair_tasks(store: AgentStore) -> list[RepairAction]:
    """A damaged ``tasks/<id>/task.json`` from the task's last ``tasks.jsonl``
    record (a copy of its public fields at promotion and at its end)."""
    from holon_cli.runtime.home.checks import task_problems

    damaged = {Path(p.path).parent.name: Path(p.path) for p in task_problems(store.layout)}
    if not damaged:
        return []
    last: dict[str, TaskLedgerRecord] = {}
    for _, _, line in store.ledger("tasks").scan(0):
        if line["id"] in damaged:
            last[line["id"]] = line
    out: list[RepairAction] = []
    for tid, path in damaged.items():
        rec = last.get(tid)
        if rec is None:
            out.append(_act(path, "skipped", "no record of this task in tasks.jsonl"))
            continue
        out.append(_act(_set_aside(path), "set_aside", "the damaged task record"))
        write_snapshot(path, {**rec, "promoted": True})
        out.append(_act(path, "rebuilt", "from its last record in tasks.jsonl"))
    return out


def _repair_queue(store: AgentStore) -> list[RepairAction]:
    from holon_cli.runtime import queue as q

    path = store.layout.queue_file
    with store.lock():
        got = _readable_as(path, QUEUE_SNAPSHOT, q.QUEUE_SNAPSHOT_VERSION)
        if got is None:
            return []
        if isinstance(got, dict):
            st = q.load(store)
            if st.truncated is None:
                return []
            # the ledger lost records the snapshot holds: ingest writes them back
            q.ingest(store, st)
            return [
                _act(
                    store.ledger("queue").path,
                    "reappended",
                    f"{len(st.entries)} unfinished message(s) from queue.json and the inbox",
                )
            ]
        aside = _set_aside(path)
        st = q.load(store)  # no snapshot: folded from the whole ledger
        q._save(store, st)
    return [
        _act(aside, "set_aside", f"the damaged snapshot ({got})"),
        _act(path, "rebuilt", f"from queue.jsonl ({len(st.entries)} unfinished message(s))"),
    ]


# ------------------------------------------------------------------ marks


def _repair_marks(store: AgentStore) -> list[RepairAction]:
    """Accept what a cut ledger lost: record it, and rewrite the mark."""
    out: list[RepairAction] = []
    ledger_dir = store.layout.ledger_dir
    if not ledger_dir.is_dir():
        return out
    for mark_path in sorted(ledger_dir.glob("*.mark")):
        name = mark_path.stem
        led = store.ledger(name)
        got = read_mark(mark_path)
        if got is None:
            continue
        size = led.complete_size()
        if isinstance(got, dict) and got["size"] <= size and "high_water" not in got:
            continue
        seq_key = SEQ_KEYS.get(name)
        high = _last_seq(led, seq_key)
        if isinstance(got, dict) and seq_key and got.get("high_water", 0) > high:
            lost = [high + 1, got["high_water"]]
            store.emit("agent_state_repaired", {"file": str(led.path), "lost_event_seq": lost})
            out.append(_act(led.path, "loss_recorded", f"events {lost[0]}-{lost[1]} are gone"))
            continue  # the append rewrote the mark
        if isinstance(got, dict) and got["size"] <= size:
            continue
        with locked(led.lock_path, what=f"ledger {led.path.name}"):  # as appends do
            write_mark(mark_path, led.complete_size(), _last_seq(led, seq_key) or None)
        why = got if isinstance(got, str) else f"the ledger holds {size} of {got['size']} bytes"
        out.append(_act(mark_path, "mark_rewritten", why))
    return out


def _last_seq(led: Ledger[Any], key: str | None) -> int:
    if key is None:
        return 0
    try:
        last = led.last()
    except HolonError:
        return 0
    seq = last.get(key) if last else None
    return seq if isinstance(seq, int) else 0


STEPS = (
    _repair_agent_record,
    _repair_timers,
    _repair_work_items,
    _repair_trigger,
    _repair_template,
    _repair_tasks,
    _repair_queue,
    _repair_marks,
)
