"""Read-only inspection: agent summary (``status``), event tail, transcript,
and the home check. Nothing here takes a lock or writes a file."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli.errors import CorruptStateError, UsageError
from holon_cli.model.agent import lifecycle_hint
from holon_cli.runtime import queue as q
from holon_cli.runtime.home import checks as hc
from holon_cli.runtime.home import plane_checks as pc
from holon_cli.store.agent_store import LEDGER_MAX_VERSION, SEGMENTED, AgentStore
from holon_cli.store.fsio import read_snapshot
from holon_cli.store.layout import LEDGERS, AgentLayout, HomeLayout
from holon_cli.store.ledger import Ledger, Problem
from holon_cli.store.locks import pid_alive
from holon_cli.store.records import ledger_validator

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState, ExecutionProfile
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.events import EventRecord
    from holon_cli.model.turn import TranscriptEntry
    from holon_cli.runtime.home.checks import HomeOutputs


def _usage(total_in: int, total_out: int) -> dict[str, int]:
    return {
        "input_tokens": total_in,
        "output_tokens": total_out,
        "total_tokens": total_in + total_out,
    }


def agent_summary(store: AgentStore) -> dict[str, Any]:
    """The spec's ``AgentSummary`` for ``holon status`` and ``AgentGet``."""
    rec = store.read_record()
    ident, state = rec["identity"], rec["state"]
    st = q.load(store)
    last = store.events.last()
    hint = lifecycle_hint(state["status"])
    stale_run = state["status"] == "awake_running" and not pid_alive(state.get("current_run_pid"))
    if stale_run:
        hint = (
            "the process running this agent's last turn is gone; the next `holon turn` replays "
            "its message"
        )
    summary: dict[str, Any] = {
        "agent_id": store.agent_id,
        "status": state["status"],
        "stale_run": stale_run,
        # the running turn (the run `holon agent abort --run-id` names), or null
        "current_run_id": state.get("current_run_id")
        if pid_alive(state.get("current_run_pid"))
        else None,
        "lifecycle_hint": hint,
        "identity": {
            "kind": ident["kind"],
            "visibility": ident["visibility"],
            "ownership": ident["ownership"],
            "profile_preset": ident["profile_preset"],
            "lineage_parent_agent_id": ident.get("lineage_parent_agent_id"),
        },
        "agent_home": str(store.layout.home),
        "pending": q.pending_count(store, st),
        "in_flight": len(st.in_flight()),
        "processed": st.processed,
        "aborted": st.aborted,
        # the newest aborted messages and why (max_attempts_exceeded, body_missing,
        # ...): `holon queue requeue ID` runs one again
        "aborted_messages": list(st.recent_aborted),
        "current_work_item_id": state.get("current_work_item_id"),
        "last_wake_reason": state.get("last_wake_reason"),
        "sleeping_until": state.get("sleeping_until"),
        "last_turn_at": state.get("last_turn_at"),
        "last_brief_at": state.get("last_brief_at"),
        "last_closure": state.get("last_closure"),
        "last_continuation": state.get("last_continuation"),
        "pending_wake_hint": state.get("pending_wake_hint"),
        "token_usage": {
            "total": _usage(
                int(state.get("total_input_tokens", 0)), int(state.get("total_output_tokens", 0))
            ),
            "total_model_rounds": int(state.get("total_model_rounds", 0)),
            "last_turn": state.get("last_turn_token_usage"),
        },
        "last_event_seq": last["event_seq"] if last else 0,
        # what retention dropped, per segmented ledger ({} while nothing was)
        "history_trimmed": history_trimmed(store),
        "loaded_agents_md": _loaded_agents_md(store, state),
        **_execution(store, state),
        "active_skills": [a.get("skill") for a in state.get("active_skills") or []],
        "skills": _skills(state),
        "external_trigger": _trigger_status(store),
        "working_memory": _working_memory(state),
        # the spec's Additional State Fields (runtime/turn/stats.py)
        "compacted_message_count": int(state.get("compacted_message_count") or 0),
        "context_summary": state.get("context_summary"),
        "tool_latency": list(state.get("tool_latency") or []),
        "execution_profile": _execution_profile(state),
    }
    # what needs an operator: the last failed turn, a config.yaml that does not load
    summary |= {
        "last_failure": state.get("last_failure"),
        "config_error": _config_error(),
    }
    from holon_cli.runtime.agents.models import model_state
    from holon_cli.runtime.workitems import readiness_counts

    summary["model"] = model_state(state)
    summary["work_items"] = readiness_counts(store)
    from holon_cli.runtime.tasks.control import active_tasks

    summary["active_tasks"] = active_tasks(store)
    _add_config_facts(store, summary)
    return summary


def _add_config_facts(store: AgentStore, summary: dict[str, Any]) -> None:
    """The parts of an agent's summary read through config.yaml: budget,
    holds, MCP servers, telemetry, sandbox (a config that does not load
    still gives a summary: ``budget_error`` names it)."""
    from holon_cli.errors import ConfigError
    from holon_cli.runtime import telemetry
    from holon_cli.runtime.agents.holds import agent_holds
    from holon_cli.runtime.budgets.spend import status as budget_status
    from holon_cli.store.config import load_config

    try:
        cfg = load_config()
        summary["budget"] = budget_status(store, cfg)
    except ConfigError as exc:  # status still answers; turn and home check name the key
        cfg = {}
        summary["budget"] = {}
        summary["budget_error"] = exc.message
    # what keeps queued work from running by itself (operator, budget, guard)
    summary["holds"] = agent_holds(store, cfg)
    if cfg:  # an unreadable config shows no servers (its error is shown instead)
        summary |= _mcp_status(store, cfg)
    # tracing on or off here, and the spans the home's processes dropped
    summary["telemetry"] = telemetry.status(cfg)
    from holon_cli.runtime.tasks.sandbox import status as sandbox_status

    # from the probe's cache only: status never starts bwrap
    summary["sandbox"] = sandbox_status(cfg, store.agent_id)


def _execution_profile(state: AgentState) -> ExecutionProfile:
    """``execution_profile`` (zeros for an agent that never settled a turn)."""
    from holon_cli.model.agent import empty_execution_profile

    saved = state.get("execution_profile")
    return {**empty_execution_profile(), **saved} if saved else empty_execution_profile()


def _mcp_status(store: AgentStore, cfg: HolonConfig) -> dict[str, object]:
    """The agent's MCP servers as of their last use (a failed one is shown,
    never dropped) and its open operator requests; nothing for an agent
    without servers (and no MCP module is imported for it)."""
    agent = (cfg.get("agents") or {}).get(store.agent_id) or {}
    if not cfg.get("mcp_servers") and not agent.get("mcp_servers"):
        return {}
    from holon_cli.runtime.mcp.calls import server_rows
    from holon_cli.runtime.mcp.requests import open_count

    return {"mcp_servers": server_rows(cfg, store.agent_id), "mcp_requests_open": open_count(store)}


def _working_memory(state: AgentState) -> dict[str, object]:
    """The contract's ``working_memory`` (updated only when a turn settles)."""
    from holon_cli.runtime.memory.working import status_view

    return status_view(state.get("working_memory"))


def _skills(state: AgentState) -> list[dict[str, object]]:
    """Active skills with their state (``session_active`` once a turn promoted them)."""
    return [
        {
            "skill": a.get("skill"),
            "scope": a.get("scope"),
            "state": a.get("state") or "session_active",
            "entrypoint_path": a.get("entrypoint_path"),
        }
        for a in state.get("active_skills") or []
    ]


def _config_error() -> str | None:
    """Why ``config.yaml`` does not load, or ``None`` (no file is fine)."""
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        load_config()
    except ConfigError as exc:
        return exc.message
    return None


def _trigger_status(store: AgentStore) -> dict[str, object] | None:
    """The default trigger's state without its URL (a capability secret that
    `holon trigger show` prints on request); ``None`` until provisioned. Read
    only: status never provisions it."""
    try:
        rec = read_snapshot(store.layout.state_dir / "trigger.json")
    except (CorruptStateError, OSError, ValueError) as exc:
        return {"status": "damaged", "error": str(exc)[:300]}
    if not isinstance(rec, dict):
        return None
    return {
        "external_trigger_id": rec.get("external_trigger_id"),
        "status": rec.get("status"),
        "delivery_mode": rec.get("delivery_mode"),
        "trigger_count": int(rec.get("trigger_count") or 0),
        "last_triggered_at": rec.get("last_triggered_at"),
    }


def _execution(store: AgentStore, state: AgentState) -> dict[str, object]:
    """The execution snapshot: the active workspace entry and its worktree
    session (contract "Workspaces": ``workspace``, ``worktree_session``)."""
    from holon_cli.runtime.workspace import workspace_for

    ws = workspace_for(store.layout.home, state)
    return {"workspace": ws.snapshot(), "worktree_session": ws.worktree_session}


def _loaded_agents_md(store: AgentStore, state: AgentState) -> list[dict[str, object]]:
    """Source metadata of the instruction files a turn would load (never content)."""
    from holon_cli.runtime.workspace import load_instructions, workspace_for

    ws = workspace_for(store.layout.home, state)
    return [src.to_dict() for _, src in load_instructions(store.layout.home, ws)]


def tail_events(
    store: AgentStore,
    *,
    since: int | None = None,
    limit: int | None = None,
    damaged: list[Problem] | None = None,
) -> list[EventRecord]:
    """The newest events (or those after ``since``). With a ``damaged`` list,
    damaged ledger lines are skipped and reported there instead of failing."""
    if limit is not None and limit < 0:
        raise UsageError("--limit must be zero or positive")
    try:
        return _tail_events(store, since=since, limit=limit)
    except CorruptStateError:
        if damaged is None:
            raise
    recs, problems = store.events.records_skipping_damaged()
    damaged.extend(problems)
    if since is not None:
        recs = [r for r in recs if r["event_seq"] > since]
        return recs[:limit] if limit is not None else recs
    if limit is not None:
        return recs[-limit:] if limit else []
    return recs


def _tail_events(
    store: AgentStore, *, since: int | None = None, limit: int | None = None
) -> list[EventRecord]:
    led = store.events
    if since is None:
        return led.tail(limit) if limit is not None else led.records()
    # one read of one snapshot of the file: an event appended meanwhile is
    # either in it or left for the next call, never skipped (issue 31 item 21)
    return led.records_after("event_seq", since, limit)[0]


def follow_events(
    store: AgentStore,
    *,
    since: int,
    poll: float = 0.2,
    stop: Callable[[], bool] | None = None,
) -> Iterator[EventRecord]:
    """Yield events with ``event_seq > since`` as they are appended.

    Runs until the consumer stops iterating or, when idle, ``stop()`` returns
    true (the CLI uses it to notice that its reader went away)."""
    led = store.events
    fid = led.file_id()
    window, offset = led.records_after("event_seq", since)
    for rec in window:
        yield rec
        since = rec["event_seq"]
    while True:
        if led.file_id() != fid or led.size() < offset:
            # the open segment was closed (or the file replaced): the rest of
            # the closed one and the new open file, by seq from where we are
            fid = led.file_id()
            window, offset = led.records_after("event_seq", since)
            for rec in window:
                since = rec["event_seq"]
                yield rec
            continue
        recs, new_off = led.read_from(offset)
        for rec in recs:
            if rec["event_seq"] > since:
                since = rec["event_seq"]
                yield rec
        offset = new_off
        if not recs:
            if stop is not None and stop():
                return
            # an arrival whose enqueue found the agent busy: ingest it now
            # (non-blocking) so it shows up as message_admitted
            if store.inbox.pending_count() and q.try_ingest(store):
                continue
            time.sleep(poll)


def history_trimmed(store: AgentStore) -> dict[str, dict[str, object]]:
    """``{ledger: {through_seq, before, segments, bytes}}`` of the segmented
    ledgers retention has dropped history from."""
    out: dict[str, dict[str, object]] = {}
    for name in SEGMENTED:
        info = store.ledger(name).trimmed()
        if info:
            out[name] = {k: info.get(k) for k in ("through_seq", "before", "segments", "bytes")}
    return out


def trimmed_note(store: AgentStore, name: str) -> str | None:
    """One line saying where ``name``'s history now starts (``None``: whole)."""
    info = store.ledger(name).trimmed()
    if not info:
        return None
    seq = info.get("through_seq")
    upto = f" (through event_seq {seq})" if isinstance(seq, int) else ""
    return (
        f"note: {name} history up to {info.get('before') or '?'}{upto} was dropped by "
        f"retention ({info.get('segments')} closed segment(s)); what is left is shown"
    )


def transcript(store: AgentStore, *, limit: int | None = None) -> list[TranscriptEntry]:
    led = store.ledger("transcript")
    return led.tail(limit) if limit is not None else led.records()


def home_check() -> dict[str, Any]:
    """Validate every snapshot, ledger and inbox file under the home."""
    home = HomeLayout.current()
    check = _HomeCheck(home)
    if (root_problem := hc.home_root_problem(home)) is not None:
        return check.report(exists=True, problems=[root_problem])
    if not home.root.exists():
        return check.report(exists=False)
    check.home_files()
    try:
        names = sorted(n for n in os.listdir(home.agents_dir) if not n.startswith("."))
    except FileNotFoundError:
        names = []
    for name in names:
        check.agent(name)
    check.planes(names)
    from holon_cli.runtime.wake import findings as wake_findings

    # the wake index (run/wake.json): an entry that would let a pass skip work
    check._guarded(home.root, partial(wake_findings, home))
    from holon_cli.runtime.home.gc import home_usage, over_limit_note

    usage = home_usage(home)
    if (over := over_limit_note(usage)) is not None:
        check.notes.append(over)
    return {**check.report(exists=True), "usage": usage}


# the newest format of each snapshot this holon writes (1 when not named)
_SNAPSHOT_VERSIONS = {"queue.json": q.QUEUE_SNAPSHOT_VERSION, "work_items.json": 2}

_TORN_TAIL_NOTE = (
    "torn last line (an interrupted write); it is ignored and repaired on the next append"
)


class _HomeCheck:
    """The home check's findings as they accumulate: one step per kind of file."""

    def __init__(self, home: HomeLayout) -> None:
        self.home = home
        self.problems: list[Problem] = []
        self.notes: list[dict[str, object]] = []
        self.checked: dict[str, int] = {
            "agents": 0,
            "ledgers": 0,
            "records": 0,
            "inbox_messages": 0,
        }
        self.outputs: HomeOutputs = {"files": 0, "bytes": 0, "agents": {}}

    def report(self, *, exists: bool, problems: list[Problem] | None = None) -> dict[str, Any]:
        found = self.problems if problems is None else problems
        return {
            "home": str(self.home.root),
            "ok": not found,
            "exists": exists,
            "problems": [p.to_dict() for p in found],
            "notes": self.notes,
            "checked": self.checked,
            "outputs": self.outputs,
        }

    def home_files(self) -> None:
        """The home's config, permissions, staging leftovers and marker."""
        home = self.home
        self.problems.extend(hc.config_problems(home))
        self.notes.extend(hc.config_notes(home))
        self.notes.extend(hc.permission_notes(home))
        sb_problems, sb_notes = hc.sandbox_findings(home)
        self.problems.extend(sb_problems)
        self.notes.extend(sb_notes)
        self.notes.extend(hc.staging_notes(home))
        try:
            read_snapshot(home.marker)
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            self.problems.append(Problem(str(home.marker), None, str(getattr(exc, "message", exc))))

    def agent(self, name: str) -> None:
        layout = self.home.agent(name)
        self.checked["agents"] += 1
        self.snapshots(layout)
        self.ledgers(layout)
        from holon_cli.runtime.tasks.plane import outputs_usage

        self.checked["output_bytes"] = self.checked.get("output_bytes", 0) + outputs_usage(
            AgentStore(layout)
        )
        seq_problems, seq_notes = hc.event_seq_findings(layout)
        self.problems.extend(seq_problems)
        self.notes.extend(seq_notes)
        if qp := _queue_offset_problem(layout):
            self.problems.append(qp)
        self.problems.extend(hc.snapshot_ledger_findings(layout))
        self.notes.extend(hc.work_item_archive_notes(layout))
        self.problems.extend(hc.task_problems(layout))
        self.inbox(layout)
        used = hc.outputs_usage(layout)
        if used["files"]:
            self.outputs["agents"][name] = {"path": str(hc.outputs_path(layout)), **used}
            self.outputs["files"] += used["files"]
            self.outputs["bytes"] += used["bytes"]

    def planes(self, names: list[str]) -> None:
        """The newer planes' files, deletions included (issue 36): each is
        compared with what the other records say about it."""
        facts = {
            n: pc.AgentFacts(self.home.agent(n))
            for n in names
            if self.home.agent(n).runtime.is_dir()
        }
        lineage = pc.lineage_children(facts)
        for fact in facts.values():
            layout = fact.layout
            self._guarded(layout, partial(pc.spend_findings, layout, facts, lineage))
            self._guarded(layout, partial(pc.episode_findings, fact))
            self._guarded(layout, partial(pc.delegation_findings, fact))
            self._guarded(layout, partial(pc.handle_findings, fact, facts))
            for lname in SEGMENTED:
                led = fact.store.ledger(lname)
                self._guarded(layout, partial(pc.segment_gap_findings, led))
            self._guarded(layout, partial(pc.memory_index_findings, layout))
        self._guarded(self.home.root, partial(pc.registry_findings, self.home, facts))
        self.home_spend(facts)

    def home_spend(self, facts: dict[str, pc.AgentFacts]) -> None:
        """The home's spend record: a ledger like an agent's (damaged lines,
        a cut or a deletion its mark shows), and every agent's own rounds in it."""
        from holon_cli.runtime.budgets.spend import home_ledger
        from holon_cli.runtime.home import home_spend

        led = home_ledger(self.home)
        if led.path.exists() or led.mark_path.exists():
            self.ledger(led)
        elif home_spend.never_written(self.home):  # nothing lost: a note
            self.notes.extend(home_spend.never_written_note(self.home, facts))
            return
        self._guarded(self.home.root, partial(home_spend.findings, self.home, facts))

    def _guarded(self, where: AgentLayout | Path, check: Callable[[], list[Problem]]) -> None:
        """One comparison; a record too damaged to compare is reported by its
        own check, and this one says it could not run (never a traceback)."""
        try:
            self.problems.extend(check())
        except Exception as exc:  # noqa: BLE001 - a finding, not a crash
            self.problems.append(
                Problem(
                    str(where if isinstance(where, Path) else where.runtime),
                    None,
                    f"could not be checked fully ({exc!r})",
                )
            )

    def snapshots(self, layout: AgentLayout) -> None:
        extra = tuple(layout.state_dir / n for n in hc.STATE_SNAPSHOTS)
        for snap in (layout.agent_file, layout.queue_file, layout.template_file, *extra):
            try:
                obj = read_snapshot(snap, max_version=_SNAPSHOT_VERSIONS.get(snap.name, 1))
                if obj is None and snap == layout.agent_file:
                    self.problems.append(Problem(str(snap), None, "agent record missing"))
            except Exception as exc:  # noqa: BLE001
                why = str(getattr(exc, "message", exc)).removeprefix(f"{snap}: ")
                self.problems.append(Problem(str(snap), None, why))

    def ledgers(self, layout: AgentLayout) -> None:
        ledger_names = set(LEDGERS)
        if layout.ledger_dir.exists():
            ledger_names |= {p.stem for p in layout.ledger_dir.glob("*.jsonl")}
            # a ledger deleted with its records: its mark says it held some
            ledger_names |= {p.stem for p in layout.ledger_dir.glob("*.mark")}
        for lname in sorted(ledger_names):
            self.ledger(
                Ledger(
                    layout.ledger_path(lname),
                    layout.ledger_lock(lname),
                    max_version=LEDGER_MAX_VERSION.get(lname, 1),
                    validate=ledger_validator(lname),
                )
            )

    def ledger(self, led: Ledger[Any]) -> None:
        seg_problems, seg_records = hc.segment_findings(led)
        self.problems.extend(seg_problems)
        self.checked["records"] += seg_records
        if not led.path.exists():
            if led.mark_path.exists():  # deleted: the mark says it held records
                self.problems.extend(hc.ledger_mark_findings(led))
            return
        self.checked["ledgers"] += 1
        found = led.check()
        if not found:  # a damaged line changes the size too: that is not a cut
            found = hc.ledger_mark_findings(led)
        self.problems.extend(found)
        if led.has_torn_tail():
            self.notes.append({"path": str(led.path), "message": _TORN_TAIL_NOTE})
        if not found:
            self.checked["records"] += sum(1 for _ in led.scan(0))

    def inbox(self, layout: AgentLayout) -> None:
        qdir = layout.inbox_dir / "quarantine"
        if qdir.is_dir():
            bad = [p for p in qdir.iterdir() if not p.name.endswith(".reason")]
            if bad:
                self.notes.append(
                    {
                        "path": str(qdir),
                        "message": (
                            f"{len(bad)} inbox file(s) set aside because they could not be "
                            "admitted (see the .reason files and the "
                            "inbox_message_quarantined events)"
                        ),
                    }
                )
        inbox_found, inbox_count = hc.inbox_problems(layout)
        self.problems.extend(inbox_found)
        self.checked["inbox_messages"] += inbox_count


def _queue_offset_problem(layout: Any) -> Problem | None:
    """A queue snapshot that has folded more of the ledger than the ledger
    holds: the ledger was truncated or replaced (the next ingest rebuilds it)."""
    try:
        snap = read_snapshot(layout.queue_file, max_version=q.QUEUE_SNAPSHOT_VERSION)
    except Exception:  # noqa: BLE001 - reported by the snapshot check
        return None
    if not snap or not isinstance(snap.get("offset"), int):
        return None
    path = layout.ledger_path("queue")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = 0
    if snap["offset"] <= size:
        return None
    n = len(snap.get("entries") or [])
    return Problem(
        str(path),
        None,
        f"queue ledger is {size} bytes but {layout.queue_file.name} reflects "
        f"{snap['offset']} bytes: "
        f"it was truncated or replaced; {n} unfinished message(s) are kept from the snapshot and "
        "the inbox and written back by the next `holon tick` or `holon turn`",
    )
