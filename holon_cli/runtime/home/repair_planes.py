"""``holon home check --repair`` for the newer planes' files (issue 36):
rebuild what other records still say, record what is gone for good.

- ``spend.jsonl``: the charged requests the events record and the ledger
  lacks (the agent's own and its descendants') are appended again, marked
  ``recovered_from: "events"``; budgets then count them.
- ``delegations.jsonl``: a child handle's missing ``started`` / ``completed``
  record is written again from the handle.
- a child's supervision record (``tasks/<id>/task.json``) deleted or
  damaged before the child finished: rebuilt from the delegation records
  and the child's own record (its first message is not sent twice).
- ``context_episodes.jsonl`` cut or deleted: episodes are summaries of turns
  made once and cannot be rebuilt; the loss is recorded
  (``agent_state_repaired``) and the working memory's count set to what
  the file holds.
- closed segments: a missing newest segment is rebuilt from its copy of the
  closed tail; a damaged one is replaced by the records that can still be
  read (the damaged file set aside); what cannot be rebuilt is recorded as
  lost (``<stem>.<N>.lost`` and an ``agent_state_repaired`` event).
- ``workspaces.json``: rebuilt from the agents' ``workspace_bound`` records
  (a damaged file is set aside first; readable entries are kept).
- the memory index: rebuilt from its sources (``holon memory rebuild``).

Never deletes; every change is one action in the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from holon_cli import clock
from holon_cli.errors import HolonError
from holon_cli.runtime.home import checks as hc
from holon_cli.runtime.home import plane_checks as pc
from holon_cli.runtime.home.repair import RepairAction, _act, _set_aside
from holon_cli.store.fsio import write_snapshot
from holon_cli.store.layout import HomeLayout
from holon_cli.store.locks import locked

if TYPE_CHECKING:
    from holon_cli.model.workspace import RegistryEntry
    from holon_cli.store.ledger import Ledger

R = TypeVar("R", bound="Mapping[str, object]")


def repair_all() -> list[RepairAction]:
    """``home check --repair``: the snapshots and ledgers of
    :mod:`holon_cli.runtime.home.repair`, then the newer planes' files."""
    import os

    from holon_cli.runtime.home.repair import repair_home

    actions = repair_home()
    home = HomeLayout.current()
    try:
        names = sorted(n for n in os.listdir(home.agents_dir) if not n.startswith("."))
    except FileNotFoundError:
        return actions
    actions += repair_planes(home, names)
    return actions + _wake_index(home)


def _wake_index(home: HomeLayout) -> list[RepairAction]:
    """The wake index rebuilt from the agents' files when ``home check``
    finds it damaged or stale (last: the repairs above change those files)."""
    from holon_cli.runtime.wake import rebuild

    try:
        done = rebuild(home)
    except HolonError as exc:
        from holon_cli.store.wake import snapshot_path

        return [_act(snapshot_path(home.root), "skipped", f"wake index: {exc.message}")]
    if done is None:
        return []
    return [_act(Path(done["path"]), done["action"], done["detail"])]


def repair_planes(home: HomeLayout, names: list[str]) -> list[RepairAction]:
    facts = {n: pc.AgentFacts(home.agent(n)) for n in names if home.agent(n).runtime.is_dir()}
    lineage = pc.lineage_children(facts)
    out: list[RepairAction] = []
    for fact in facts.values():
        for step in (_segments, _handles, _delegations, _episodes, _memory_index, _cleanups):
            out += _guarded(fact, step, facts)
    # read again: the segments repaired above hold events again
    facts = {n: pc.AgentFacts(home.agent(n)) for n in facts}
    for fact in facts.values():
        out += _guarded(fact, lambda f, fs: _spend(f, fs, lineage), facts)
    from holon_cli.runtime.home import home_spend

    try:  # after the agents' spend ledgers: it is rebuilt from them
        out += home_spend.repair(home, facts)
    except HolonError as exc:
        out.append(_act(home.spend_ledger, "skipped", exc.message))
    try:
        out += _registry(home, facts)
    except HolonError as exc:
        out.append(_act(home.workspace_registry, "skipped", exc.message))
    return out


def _guarded(fact: pc.AgentFacts, step: Any, facts: dict[str, pc.AgentFacts]) -> list[RepairAction]:
    try:
        return list(step(fact, facts))
    except HolonError as exc:
        return [_act(fact.layout.runtime, "skipped", exc.message)]


# ------------------------------------------------------------------- spend


def _spend(
    fact: pc.AgentFacts, facts: dict[str, pc.AgentFacts], lineage: dict[str, list[str]]
) -> list[RepairAction]:
    from holon_cli.runtime.budgets import spend as budgets
    from holon_cli.store.config import load_config

    lost = pc.missing_spend(fact.layout, facts, lineage)
    if not lost:
        return []
    try:
        cfg = load_config()
    except Exception:  # noqa: BLE001 - prices are optional; the config check names damage
        cfg = {}
    led = fact.store.ledger(budgets.LEDGER)
    events = sorted(
        ((who, ev) for (who, _turn), evs in lost.items() for ev in evs),
        key=lambda pair: str(pair[1].get("at") or ""),
    )
    for who, ev in events:
        data = ev.get("data") or {}
        usage = data.get("token_usage") or {}
        tin, tout = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        at = str(ev.get("at") or clock.now_iso())
        try:
            ts = clock.parse_iso(at)
        except ValueError:
            ts = clock.now()
        model_ref = data.get("model_ref")
        if not isinstance(model_ref, str):
            tl = data.get("provider_attempt_timeline") or {}
            model_ref = tl.get("winning_model_ref") if isinstance(tl, dict) else None
        led.append(
            {
                "v": budgets.SPEND_VERSION,
                "at": at,
                "ts": ts,
                "agent_id": who,
                "turn_id": ev["turn_id"],
                "message_id": ev.get("message_id"),
                "work_item_id": ev.get("work_item_id"),
                "model_ref": model_ref if isinstance(model_ref, str) else None,
                "input_tokens": tin,
                "output_tokens": tout,
                "cost_usd": round(budgets._cost(cfg, model_ref, tin, tout), 9),
                "estimated": False,
                "recovered_from": "events",
            }
        )
    return [
        _act(
            led.path,
            "reappended",
            f"{len(events)} spend record(s) of {len(lost)} turn(s) from the events",
        )
    ]


# ------------------------------------------------------ children, delegations


def _delegations(fact: pc.AgentFacts, _facts: dict[str, pc.AgentFacts]) -> list[RepairAction]:
    from holon_cli.runtime.children.supervision import append_delegation

    no_start, no_end = pc.delegation_gaps(fact)
    if not no_start and not no_end:
        return []
    handles = pc.child_handles(fact)
    for tid in no_start:
        append_delegation(fact.store, handles[tid], "started")
    for tid in no_end:
        h = handles[tid]
        append_delegation(fact.store, h, "completed", result_message_id=h.get("result_message_id"))
    path = fact.store.ledger("delegations").path
    return [_act(path, "reappended", f"delegation record(s) of {', '.join([*no_start, *no_end])}")]


def _handles(fact: pc.AgentFacts, facts: dict[str, pc.AgentFacts]) -> list[RepairAction]:
    """Child handles deleted, or damaged with no copy in tasks.jsonl."""
    from holon_cli.runtime.tasks.records import tasks_root

    out: list[RepairAction] = []
    wanted = pc.missing_handles(fact, facts)
    root = tasks_root(fact.store)
    damaged = {Path(p.path).parent.name for p in hc.task_problems(fact.layout)}
    for tid in sorted(damaged):
        info = _delegation_info(fact, tid)
        if info:
            path = root / tid / "task.json"
            out.append(_act(_set_aside(path), "set_aside", "the damaged supervision record"))
            wanted[tid] = info
    for tid, info in sorted(wanted.items()):
        out += _rebuild_handle(fact, facts, root / tid, info)
    return out


def _delegation_info(fact: pc.AgentFacts, tid: str) -> dict[str, object]:
    info: dict[str, object] = {}
    led = fact.store.ledger("delegations")
    if led.path.exists() and pc._clean(led):
        for rec in pc._readable(led):
            if rec.get("supervision_task_id") == tid:
                info.update(rec)
                info[f"{rec.get('event')}_at"] = rec.get("at")
    return info


def _rebuild_handle(
    fact: pc.AgentFacts, facts: dict[str, pc.AgentFacts], d: Path, info: Mapping[str, object]
) -> list[RepairAction]:
    from holon_cli.model import task as tm

    child_id = info.get("child_agent_id")
    child = facts.get(child_id) if isinstance(child_id, str) else None
    if child is None:
        return [
            _act(
                d / "task.json",
                "skipped",
                f"cannot be rebuilt: its child {child_id!r} is gone too; the parent's next "
                "`holon tick` no longer waits for it",
            )
        ]
    first = next(
        (e.get("message_id") for e in child.events if e.get("kind") == "message_admitted"), None
    )
    at = str(info.get("started_at") or info.get("at") or clock.now_iso())
    summary = str(info.get("summary") or "")
    mode = str(info.get("workspace_mode") or "inherit")
    archived = bool(child.state.get("archived_at"))
    rec: dict[str, object] = {
        "v": tm.TASK_RECORD_VERSION,
        "id": d.name,
        "agent_id": fact.layout.agent_id,
        "kind": tm.CHILD_TASK_KIND,
        "status": "cancelled" if archived else "running",
        "promoted": True,
        "promoted_at": at,
        "created_at": at,
        "started_at": at,
        "finished_at": clock.now_iso() if archived else None,
        "parent_message_id": None,
        "turn_id": None,
        "summary": summary,
        "recovery": {
            "kind": tm.CHILD_TASK_KIND,
            "summary": summary,
            "prompt": summary,
            "trust": "trusted_system",
            "workspace_mode": mode,
        },
        "child": {
            "child_agent_id": child_id,
            "delegation_id": info.get("delegation_id"),
            "work_item_id": info.get("work_item_id"),
            "workspace_mode": mode,
            "worktree": None,
            # never sent again: the child holds it (or a placeholder when it
            # holds nothing from its parent any more)
            "initial_message_id": first or "rebuilt",
            "child_archived": archived,
        },
        "result_message_id": None,
        "rebuilt": True,
    }
    d.mkdir(parents=True, exist_ok=True)
    write_snapshot(d / "task.json", rec)
    return [_act(d / "task.json", "rebuilt", "from delegations.jsonl and the child's record")]


# ---------------------------------------------------------------- episodes


def _episodes(fact: pc.AgentFacts, _facts: dict[str, pc.AgentFacts]) -> list[RepairAction]:
    from holon_cli.runtime.memory.episodes import LEDGER

    if not pc.episode_findings(fact):
        return []
    led = fact.store.ledger(LEDGER)
    have = len(pc._readable(led))
    box: dict[str, int] = {}

    def accept(st: Any) -> None:
        wm = st.get("working_memory") or {}
        box["was"] = int(wm.get("archived_episode_count") or 0)
        wm["archived_episode_count"] = have
        st["working_memory"] = wm

    fact.store.update_state(accept)
    lost = box.get("was", have) - have
    fact.store.emit("agent_state_repaired", {"file": str(led.path), "lost_episodes": lost})
    return [
        _act(
            led.path,
            "loss_recorded",
            f"{lost} archived episode(s) are gone (episodes cannot be rebuilt)",
        )
    ]


# ---------------------------------------------------------------- segments


def _segments(fact: pc.AgentFacts, _facts: dict[str, pc.AgentFacts]) -> list[RepairAction]:
    from holon_cli.store.agent_store import SEGMENTED

    out: list[RepairAction] = []
    for name in SEGMENTED:
        led = fact.store.ledger(name)
        losses: list[dict[str, object]] = []
        with locked(led.lock_path, what=f"ledger {led.path.name}"):  # as a close takes it
            out += _damaged_segments(led, losses)
            out += _missing_segments(led, losses)
        for data in losses:  # recorded once the ledger's lock is let go (events has one too)
            fact.store.emit("agent_state_repaired", data)
    return out


def _damaged_segments(led: Any, losses: list[dict[str, object]]) -> list[RepairAction]:
    from holon_cli.store.ledger_segments import compress_segment

    problems, _ = hc.segment_findings(led)
    out: list[RepairAction] = []
    for path in sorted({Path(p.path) for p in problems}):
        if not path.exists():
            continue
        kept = _sound_records(led, path)
        aside = _set_aside(path)
        out.append(_act(aside, "set_aside", "the damaged closed segment"))
        if kept:
            plain = path.with_name(path.name.removesuffix(".gz"))
            from holon_cli.store.fsio import atomic_write_bytes, dumps

            atomic_write_bytes(plain, b"".join((dumps(r) + "\n").encode() for r in kept))
            compress_segment(plain)
            out.append(_act(path, "rebuilt", f"from its {len(kept)} readable record(s)"))
        losses.append({"file": str(path), "kept_records": len(kept), "set_aside": str(aside)})
    return out


def _sound_records(led: Ledger[R], path: Path) -> list[R]:
    """The records of a damaged closed segment that read and validate."""
    from holon_cli.errors import CorruptStateError
    from holon_cli.store.ledger_lines import _parse
    from holon_cli.store.ledger_segments import open_segment

    out: list[R] = []
    try:
        with open_segment(path) as f:
            for line_no, raw in enumerate(f, 1):
                if not raw.endswith(b"\n") or not raw.strip():
                    continue
                try:
                    out.append(_parse(path, raw, line_no, 0, led.max_version, led.validate))
                except CorruptStateError:
                    continue
    except CorruptStateError:
        pass  # cut: what came before the cut is kept
    return out


def _missing_segments(led: Any, losses: list[dict[str, object]]) -> list[RepairAction]:
    from holon_cli.store.fsio import atomic_write_bytes, dumps
    from holon_cli.store.ledger import iter_segment, tail_path
    from holon_cli.store.ledger_segments import compress_segment

    out: list[RepairAction] = []
    seg_dir, stem = led.segments_dir, led.path.stem
    for n in pc.segment_gaps(led):
        path = seg_dir / f"{stem}.{n:08d}.jsonl"
        copy = tail_path(seg_dir, stem, n)
        recs: list[Mapping[str, object]] = []
        if copy.exists():
            try:
                recs = [r for _, r in iter_segment(copy, led.max_version)]
            except HolonError:
                recs = []
        capped = bool(recs) and "tail_copy_capped" in recs[0]
        recs = recs[1:] if capped else recs
        older = [p for p in led.closed_segments() if p.name < path.name]
        if recs and not older and not capped:
            # the copy holds the last records of all closed history: with no
            # older segment left, that is this segment whole or its end
            atomic_write_bytes(path, b"".join((dumps(r) + "\n").encode() for r in recs))
            compress_segment(path)
            out.append(
                _act(path.with_name(path.name + ".gz"), "rebuilt", "from the copy of the tail")
            )
            losses.append(
                {"file": str(path) + ".gz", "rebuilt_from": str(copy), "records": len(recs)}
            )
            continue
        marker = pc.lost_marker(seg_dir, stem, n)
        write_snapshot(marker, {"v": 1, "segment": n, "lost_at": clock.now_iso()})
        losses.append({"file": str(path) + ".gz", "lost_segment": n})
        out.append(
            _act(
                path.with_name(path.name + ".gz"),
                "loss_recorded",
                f"closed segment {n} is gone and nothing holds its records",
            )
        )
    return out


# ---------------------------------------------- durable cleanups (worktrees)


def _cleanups(fact: pc.AgentFacts, _facts: dict[str, pc.AgentFacts]) -> list[RepairAction]:
    """What a killed process left undone: an ended child's worktree cleanup
    and archiving, an isolated worktree made and never bound."""
    from holon_cli.model.task import is_child_task
    from holon_cli.runtime.children import supervision as sv
    from holon_cli.runtime.tasks.records import iter_records
    from holon_cli.runtime.workspace.heal import heal

    out: list[RepairAction] = []
    for d, rec in iter_records(fact.store):
        if is_child_task(rec) and sv.is_final(rec) and rec.get("result_message_id"):
            for done in sv.finish_ended(fact.store, rec):
                detail = done["action"].replace("_", " ")
                out.append(_act(d / "task.json", "finished", detail))
    for done in heal(HomeLayout.current(), fact.layout.agent_id):
        why = f" ({done['reason']})" if done.get("reason") else ""
        out.append(_act(Path(done["path"]), "finished", done["action"].replace("_", " ") + why))
    return out


# ------------------------------------------------------------ memory index


def _memory_index(fact: pc.AgentFacts, _facts: dict[str, pc.AgentFacts]) -> list[RepairAction]:
    if not pc.memory_index_findings(fact.layout):
        return []
    from holon_cli.runtime.memory.search import index_path, sync

    got = sync(fact.store, rebuild=True)
    return [
        _act(
            index_path(fact.store),
            "rebuilt",
            f"from its sources ({got.get('documents', 0)} document(s)); "
            "a database of another schema is kept aside",
        )
    ]


# ---------------------------------------------------------- workspaces.json


def _registry(home: HomeLayout, facts: dict[str, pc.AgentFacts]) -> list[RepairAction]:
    from holon_cli.errors import CorruptStateError
    from holon_cli.model.workspace import REGISTRY_VERSION
    from holon_cli.store.workspace_registry import read_registry

    if not pc.registry_findings(home, facts):
        return []
    out: list[RepairAction] = []
    path = home.workspace_registry
    with locked(home.locks_dir / "workspaces.lock", what="the workspace registry"):
        try:
            rows: list[RegistryEntry] = [r.copy() for r in read_registry(home)]
        except CorruptStateError:
            rows = []
            out.append(_act(_set_aside(path), "set_aside", "the damaged registry"))
        have = {r["workspace_id"] for r in rows}
        added = 0
        for wid, (anchor, at) in sorted(pc.registry_expected(facts).items()):
            if wid not in have:
                rows.append(
                    {
                        "workspace_id": wid,
                        "workspace_anchor": anchor,
                        "registered_at": at or clock.now_iso(),
                    }
                )
                added += 1
        write_snapshot(path, {"v": REGISTRY_VERSION, "workspaces": rows})
    out.append(_act(path, "rebuilt", f"from the agents' records ({added} workspace(s) added)"))
    return out
