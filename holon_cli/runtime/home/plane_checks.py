"""``holon home check``'s comparisons for the newer planes' files (issue 36):
spend, episodes, delegations and child handles, closed segments, the
workspace registry, the memory index. Each takes :class:`AgentFacts` (one
agent's records, read once) and returns ``Problem``s; ``runtime/inspect``
composes them, ``runtime/home/repair_planes`` repairs what they find.

A file that was never written is no damage (a new agent has no spend.jsonl),
so a deletion is seen through what other records say: a ledger's mark, the
events of the rounds a spend record stands for, the episode count kept in
the agent's working memory, the delegation records and child records that
name a supervision record, the agents' workspace bindings, the copy of the
closed tail that names the newest segment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from holon_cli.errors import CorruptStateError
from holon_cli.store.layout import AgentLayout, HomeLayout
from holon_cli.store.ledger import Problem

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord
    from holon_cli.model.events import EventRecord
    from holon_cli.model.task import TaskRecord
    from holon_cli.store.ledger import Ledger

R = TypeVar("R", bound="Mapping[str, object]")


def _clean(led: Any) -> bool:
    """The ledger reads through without a damaged line (else its own check
    reports it and the comparisons below stay quiet)."""
    try:
        return not led.check()
    except Exception:  # noqa: BLE001 - reported by the ledger check
        return False


def _readable(led: Ledger[R]) -> list[R]:
    return [rec for _, _, rec in led.scan(0)] if led.path.exists() else []


class AgentFacts:
    """What one agent's records say, read once per home check (events,
    identity, working memory); shared by the checks of every agent."""

    def __init__(self, layout: AgentLayout) -> None:
        from holon_cli.store.agent_store import AgentStore

        self.layout = layout
        self.store = AgentStore(layout)
        self.events: list[EventRecord] = []
        try:
            self.events = self.store.events.records_skipping_damaged()[0]
        except Exception:  # noqa: BLE001 - a newer format: reported by the ledger check
            self.events = []
        self.record: AgentRecord | None = None
        try:
            self.record = self.store.read_record()
        except Exception:  # noqa: BLE001 - reported by the snapshot check
            pass

    @property
    def identity(self) -> Mapping[str, object]:
        return self.record["identity"] if self.record is not None else {}

    @property
    def state(self) -> Mapping[str, object]:
        return self.record["state"] if self.record is not None else {}

    def rounds(self) -> dict[str, list[EventRecord]]:
        """The provider requests that were charged, by turn: each round
        (``provider_round_completed``) and each failed chain that reported
        usage (``runtime_error`` with ``token_usage``); one spend record each."""
        out: dict[str, list[EventRecord]] = {}
        for ev in self.events:
            kind, data, turn = ev["kind"], ev.get("data") or {}, ev.get("turn_id")
            charged = kind == "provider_round_completed" or (
                kind == "runtime_error" and isinstance(data.get("token_usage"), dict)
            )
            if charged and turn:
                out.setdefault(turn, []).append(ev)
        return out


def lineage_children(facts: dict[str, AgentFacts]) -> dict[str, list[str]]:
    """Each agent's descendants (itself first) among the agents of the home."""
    parent = {
        name: f.identity.get("lineage_parent_agent_id")
        for name, f in facts.items()
        if isinstance(f.identity.get("lineage_parent_agent_id"), str)
    }
    out: dict[str, list[str]] = {name: [name] for name in facts}
    for name in facts:
        seen = {name}
        cur = parent.get(name)
        while isinstance(cur, str) and cur in out and cur not in seen and len(seen) < 32:
            out[cur].append(name)
            seen.add(cur)
            cur = parent.get(cur)
    return out


def missing_spend(
    layout: AgentLayout, facts: dict[str, AgentFacts], lineage: dict[str, list[str]]
) -> dict[tuple[str, str], list[EventRecord]]:
    """``(agent, turn) -> the charged events`` the agent's spend ledger lacks
    (its own rounds and its descendants': each is charged up the lineage).
    Empty when the ledger has a damaged line (its own check says so)."""
    from holon_cli.runtime.budgets.spend import LEDGER
    from holon_cli.store.ledger import Ledger
    from holon_cli.store.records import ledger_validator

    led = Ledger(
        layout.ledger_path(LEDGER), layout.ledger_lock(LEDGER), validate=ledger_validator(LEDGER)
    )
    if not _clean(led):
        return {}
    have: dict[tuple[str, str], int] = {}
    for rec in _readable(led):
        key = (str(rec.get("agent_id")), str(rec.get("turn_id")))
        have[key] = have.get(key, 0) + 1
    out: dict[tuple[str, str], list[EventRecord]] = {}
    for who in lineage.get(layout.agent_id, [layout.agent_id]):
        for turn, evs in facts[who].rounds().items():
            got = have.get((who, turn), 0)
            if got < len(evs):
                out[(who, turn)] = evs[got:]
    return out


def spend_findings(
    layout: AgentLayout, facts: dict[str, AgentFacts], lineage: dict[str, list[str]]
) -> list[Problem]:
    from holon_cli.runtime.budgets.spend import LEDGER

    lost = missing_spend(layout, facts, lineage)
    if not lost:
        return []
    n = sum(len(v) for v in lost.values())
    path = layout.ledger_path(LEDGER)
    what = "is missing" if not path.exists() else "lacks records"
    return [
        Problem(
            str(path),
            None,
            f"{path.name} {what}: the events record {n} charged provider request(s) in "
            f"{len(lost)} turn(s) it does not hold, so budgets count less than was spent "
            "(the file was deleted, cut or replaced); `holon home check --repair` "
            "records them again from the events",
        )
    ]


def episode_findings(fact: AgentFacts) -> list[Problem]:
    """``context_episodes.jsonl`` holds every episode the working memory
    counts as archived (each is appended before the count moves)."""
    from holon_cli.runtime.memory.episodes import LEDGER

    led = fact.store.ledger(LEDGER)
    wm = fact.state.get("working_memory") or {}
    want = wm.get("archived_episode_count") if isinstance(wm, dict) else None
    if not isinstance(want, int) or not _clean(led):
        return []
    have = len(_readable(led))
    if have >= want:
        return []
    return [
        Problem(
            str(led.path),
            None,
            f"{led.path.name} holds {have} episode(s) but the agent archived {want} "
            "(state/agent.json working_memory): the file was deleted, cut or replaced. "
            "Restore it from a backup if you have one; episodes cannot be rebuilt "
            "(their turns are summarised once), `holon home check --repair` records the loss",
        )
    ]


def child_handles(fact: AgentFacts) -> dict[str, TaskRecord]:
    from holon_cli.model.task import is_child_task
    from holon_cli.runtime.tasks.records import iter_records

    return {rec["id"]: rec.copy() for _, rec in iter_records(fact.store) if is_child_task(rec)}


def delegation_gaps(fact: AgentFacts) -> tuple[list[str], list[str]]:
    """Child handles whose ``started`` record, and final ones whose
    ``completed`` record, ``delegations.jsonl`` lacks (task ids)."""
    led = fact.store.ledger("delegations")
    handles = child_handles(fact)
    if not handles or not _clean(led):
        return [], []
    started: set[Any] = set()
    completed: set[Any] = set()
    for rec in _readable(led):
        (completed if rec.get("event") == "completed" else started).add(
            rec.get("supervision_task_id")
        )
    no_start = sorted(t for t in handles if t not in started)
    no_end = sorted(
        t
        for t, h in handles.items()
        if h.get("result_message_id") and t not in completed and h.get("status") != "running"
    )
    return no_start, no_end


def delegation_findings(fact: AgentFacts) -> list[Problem]:
    no_start, no_end = delegation_gaps(fact)
    if not no_start and not no_end:
        return []
    path = fact.store.ledger("delegations").path
    gone = ", ".join([*no_start, *no_end][:3])
    return [
        Problem(
            str(path),
            None,
            f"{path.name} {'is missing' if not path.exists() else 'lacks'} the delegation "
            f"record(s) of {len(no_start) + len(no_end)} child handle(s) ({gone}); "
            "`holon home check --repair` writes them again from the handles (tasks/*/task.json)",
        )
    ]


def missing_handles(fact: AgentFacts, facts: dict[str, AgentFacts]) -> dict[str, dict[str, object]]:
    """Supervision records (``tasks/<id>/task.json``) that the delegation
    records or a child's identity name, that are gone before their child
    finished (a finished handle's folder is pruned with the task outputs, its
    ``completed`` record kept): task id -> what is known of it."""
    from holon_cli.runtime.tasks.records import tasks_root

    led = fact.store.ledger("delegations")
    known: dict[str, dict[str, object]] = {}
    completed: set[str] = set()
    recs = _readable(led) if _clean(led) else []
    for rec in recs:
        tid = rec.get("supervision_task_id")
        if not isinstance(tid, str):
            continue
        if rec.get("event") == "completed":
            completed.add(tid)
        known.setdefault(tid, {}).update(
            {k: v for k, v in rec.items() if k != "event"} | {f"{rec.get('event')}_at": rec["at"]}
        )
    for name, other in facts.items():
        ident = other.identity
        child_tid = ident.get("supervision_task_id")
        parent = ident.get("lineage_parent_agent_id")
        if parent == fact.layout.agent_id and isinstance(child_tid, str):
            known.setdefault(child_tid, {}).setdefault("child_agent_id", name)
    root = tasks_root(fact.store)
    return {
        tid: info
        for tid, info in known.items()
        if tid not in completed
        and tid.startswith("task_")
        and "/" not in tid
        and not (root / tid / "task.json").exists()
    }


def handle_findings(fact: AgentFacts, facts: dict[str, AgentFacts]) -> list[Problem]:
    from holon_cli.runtime.tasks.records import tasks_root

    root = tasks_root(fact.store)
    return [
        Problem(
            str(root / tid / "task.json"),
            None,
            f"the supervision record of child {info.get('child_agent_id')!r} is missing "
            "(deleted before the child finished): the child can no longer report its result; "
            "`holon home check --repair` rebuilds it from delegations.jsonl and the child's "
            "record",
        )
        for tid, info in sorted(missing_handles(fact, facts).items())
    ]


def lost_marker(seg_dir: Path, stem: str, num: int) -> Path:
    """Written by ``home check --repair`` for a closed segment it could not
    rebuild: the loss is known, the gap is no longer a finding."""
    return seg_dir / f"{stem}.{num:08d}.lost"


def segment_gaps(led: Any) -> list[int]:
    """Numbers of closed segments that are gone: a gap in the numbering
    (retention drops the oldest only, recording the last it dropped), or the
    newest closed segment, named by its copy of the closed tail."""
    from holon_cli.store.ledger import read_trimmed, segment_number

    seg_dir, stem = led.segments_dir, led.path.stem
    try:
        names = os.listdir(seg_dir)
    except FileNotFoundError:
        return []
    present = {n for p in led.closed_segments() if (n := segment_number(p.name, stem)) is not None}
    named = set(present)
    for name in names:
        num = name[len(stem) + 1 : -len(".tail")]
        if name.startswith(stem + ".") and name.endswith(".tail") and num.isdigit():
            if not (int(num) not in present and _close_never_renamed(led, seg_dir / name)):
                named.add(int(num))
    if not named:
        return []
    first = int((read_trimmed(seg_dir, stem) or {}).get("last_segment") or 0) + 1
    return [
        n
        for n in range(first, max(named) + 1)
        if n not in present
        and not lost_marker(seg_dir, stem, n).exists()
        and not any(seg_dir.glob(f"{stem}.{n:08d}.jsonl*.damaged-*"))
    ]


def _close_never_renamed(led: Any, copy: Path) -> bool:
    """A copy of the tail whose segment is missing because the close that
    wrote it was killed before its rename (a home written before the copy
    moved after the rename): the open file still holds the copy's last record."""
    try:
        lines = copy.read_bytes().rstrip(b"\n").split(b"\n")
        return bool(lines[-1]) and lines[-1] + b"\n" in led.path.read_bytes()
    except OSError:
        return False


def segment_gap_findings(led: Any) -> list[Problem]:
    out = []
    for n in segment_gaps(led):
        path = led.segments_dir / f"{led.path.stem}.{n:08d}.jsonl.gz"
        out.append(
            Problem(
                str(path),
                None,
                f"closed segment {n} of {led.path.name} is missing (deleted or moved): its "
                "records are gone from history; `holon home check --repair` rebuilds the "
                "newest one from its copy of the closed tail, else records the loss",
            )
        )
    return out


def registry_expected(facts: dict[str, AgentFacts]) -> dict[str, tuple[str, str]]:
    """Workspace id -> (anchor, first bound at) that the agents' records say
    the registry holds: every ``workspace_bound`` of a ``ws_`` id (a
    temporary run's binding is not registered), and each active binding."""
    out: dict[str, tuple[str, str]] = {}
    for f in facts.values():
        for ev in f.events:
            data = ev.get("data")
            if not isinstance(data, dict):
                continue
            wid, anchor = data.get("workspace_id"), data.get("workspace_anchor")
            if (
                ev.get("kind") == "workspace_bound"
                and data.get("source") != "run"
                and isinstance(wid, str)
                and wid.startswith("ws_")
                and isinstance(anchor, str)
            ):
                out.setdefault(wid, (anchor, str(ev.get("at") or "")))
    return out


def registry_findings(home: HomeLayout, facts: dict[str, AgentFacts]) -> list[Problem]:
    from holon_cli.store.workspace_registry import read_registry

    path = home.workspace_registry
    try:
        rows = read_registry(home)
    except CorruptStateError as exc:
        why = str(exc.details.get("reason") or exc.message).removeprefix(f"{path}: ")
        return [
            Problem(
                str(path),
                None,
                f"{why}; `holon home check --repair` rebuilds it from the agents' records "
                "(the damaged file is kept aside)",
            )
        ]
    have = {r["workspace_id"] for r in rows}
    lost = sorted(set(registry_expected(facts)) - have)
    if not lost:
        return []
    return [
        Problem(
            str(path),
            None,
            f"{path.name} {'is missing' if not path.exists() else 'lacks'} "
            f"{len(lost)} workspace(s) the agents are bound to ({', '.join(lost[:3])}); "
            "`holon home check --repair` rebuilds it from the agents' records",
        )
    ]


def memory_index_findings(layout: AgentLayout) -> list[Problem]:
    from holon_cli.store.memory_index import index_problem

    path = layout.runtime / "indexes" / "memory.sqlite3"
    why = index_problem(path)
    if why is None:
        return []
    return [
        Problem(
            str(path),
            None,
            f"the memory index cannot serve a search: {why}; `holon memory rebuild` (or "
            "`holon home check --repair`) rebuilds it from its sources, nothing is lost",
        )
    ]
