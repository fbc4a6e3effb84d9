"""Working memory: the agent's durable continuity layer (runtime spec:
Additional State Fields, ``workingMemory``).

Invariants:
- updated only when a turn settles, never during its provider loop: the turn
  gathers a :class:`~holon_cli.model.memory.TurnMemoryDelta`
  (:func:`turn_delta`, reading the work plane once), saves it in the
  settlement, and :func:`apply_delta` folds it in;
- :func:`apply_delta` is pure and deterministic: the same state and delta
  give the same revision, builder and episodes (a replayed settle after a
  kill lands on the same revision; ``last_applied_turn_id`` makes it
  exactly-once);
- the revision moves only when the derived ``current_working_memory``
  changes, so a turn that changed nothing leaves the prompt's memory bytes
  as they were;
- only operator and runtime instructions keep their text here; evidence
  (external, integration) is never copied out of its fence.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from holon_cli.runtime.memory import episodes as ep
from holon_cli.runtime.memory.episodes import one_line

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.memory import (
        CommandRun,
        CurrentWorkingMemory,
        EpisodeRecord,
        TurnMemoryDelta,
        WorkFocus,
        WorkingMemoryState,
    )
    from holon_cli.store.agent_store import AgentStore

MAX_OPERATOR_REQUESTS = 8
MAX_FILES = 12
MAX_COMMANDS = 8
MAX_OPEN_ITEMS = 8
EXCERPT_CHARS = 400
PLAN_PREVIEW_CHARS = 600
TRUSTED = ("operator_instruction", "runtime_instruction")


def empty_state() -> WorkingMemoryState:
    return {
        "current_working_memory": None,
        "working_memory_revision": 0,
        "pending_working_memory_delta": None,
        "last_prompted_working_memory_revision": 0,
        "active_episode_id": None,
        "archived_episode_count": 0,
        "active_episode_builder": None,
        "compacted_message_count": 0,
        "last_applied_turn_id": None,
    }


def state_of(raw: Any) -> WorkingMemoryState:
    """The agent's working memory, or an empty one (older agents have none)."""
    base = empty_state()
    if isinstance(raw, dict):
        base.update(cast("WorkingMemoryState", {k: v for k, v in raw.items() if k in base}))
    return base


# ------------------------------------------------------- gathering (I/O)


def work_focus(store: AgentStore, work_item_id: str | None) -> WorkFocus | None:
    """The current work item as working memory keeps it (the plan file is the
    truth: its preview is read from it)."""
    if not work_item_id:
        return None
    from holon_cli.runtime.workitems.views import wait_brief
    from holon_cli.store.workitem_index import describe_file, load

    idx = load(store)
    rec = idx.get(work_item_id)
    if rec is None:
        return None
    desc = describe_file(Path(rec["plan_artifact"]["path"]))
    preview = str(desc.get("preview") or "")[:PLAN_PREVIEW_CHARS] if desc["exists"] else ""
    todos = [
        str(t.get("text")) for t in rec.get("todo_list") or [] if t.get("state") != "completed"
    ]
    waits = idx.waits_for(rec)
    return {
        "id": rec["id"],
        "objective": one_line(rec["objective"], EXCERPT_CHARS),
        "state": rec["state"],
        "plan_status": rec["plan_status"],
        "plan_preview": preview.rstrip("\n"),
        "open_todos": [one_line(t, 160) for t in todos[:12]],
        "blocked_by": rec.get("blocked_by"),
        "waits": [
            ", ".join(f"{k}={v}" for k, v in wait_brief(w).items()) for w in waits.active[:3]
        ],
    }


def open_work_items(store: AgentStore) -> list[str]:
    from holon_cli.store.workitem_index import load

    idx = load(store)
    rows = list(idx.open_records())
    rows.sort(key=lambda r: str(r.get("created_at")))
    return [f"{r['id']}: {one_line(r['objective'], 120)}" for r in rows[:MAX_OPEN_ITEMS]]


def turn_delta(
    store: AgentStore,
    msg: Envelope,
    *,
    turn_id: str,
    turn_index: int,
    status: str,
    focus: str | None,
    workspace_id: str | None,
    files_touched: list[str],
    commands: list[CommandRun],
    completed_work_item: bool,
    waiting: str | None,
    final_text: str,
    prompted_revision: int,
    compacted_message_count: int,
) -> TurnMemoryDelta:
    """What this turn adds to working memory; read once, before the settlement
    is saved (a replay applies these very values)."""
    from holon_cli.model.envelope import body_text

    authority = msg.get("authority_class")
    text = body_text(msg.get("body", {})) if authority in TRUSTED else ""
    return {
        "turn_id": turn_id,
        "turn_index": turn_index,
        "message_id": msg["id"],
        "message_kind": msg.get("kind"),
        "authority_class": authority,
        "input_excerpt": one_line(text, EXCERPT_CHARS),
        "status": status,
        "work_item_id": focus,
        "workspace_id": workspace_id,
        "work_focus": work_focus(store, focus),
        "open_work_items": open_work_items(store),
        "files_touched": list(dict.fromkeys(files_touched)),
        "commands": commands[-MAX_COMMANDS * 2 :],
        "completed_work_item": completed_work_item,
        "waiting": waiting,
        "final_excerpt": one_line(final_text, EXCERPT_CHARS),
        "prompted_revision": prompted_revision,
        "compacted_message_count": compacted_message_count,
    }


# ------------------------------------------------------------ folding


def derive(prev: CurrentWorkingMemory | None, d: TurnMemoryDelta) -> CurrentWorkingMemory:
    """The next ``current_working_memory`` (pure)."""
    requests = list(prev["operator_requests"]) if prev else []
    if d["authority_class"] == "operator_instruction" and d["input_excerpt"]:
        requests.append(f"[{d['message_id']}] {d['input_excerpt']}")
    files = [f for f in (prev["recent_files"] if prev else []) if f not in d["files_touched"]]
    files += d["files_touched"]
    cmds = list(prev["recent_commands"]) if prev else []
    cmds += d["commands"]
    return {
        "active_work_item": d["work_focus"],
        "open_work_items": list(d["open_work_items"]),
        "operator_requests": requests[-MAX_OPERATOR_REQUESTS:],
        "recent_files": files[-MAX_FILES:],
        "recent_commands": cmds[-MAX_COMMANDS:],
        "last_result": d["final_excerpt"] or (prev["last_result"] if prev else None),
        "waiting": d["waiting"],
    }


def delta_text(d: TurnMemoryDelta, old_rev: int, new_rev: int) -> str:
    """The short prompt-facing delta the next turn sees."""
    bits = [f"turn {d['turn_index']} ({d['message_kind'] or 'message'}): {d['status']}"]
    if d["work_item_id"]:
        bits.append(f"work item {d['work_item_id']}")
    if d["completed_work_item"]:
        bits.append("completed a work item")
    if d["files_touched"]:
        bits.append("touched " + ", ".join(d["files_touched"][:6]))
    if d["commands"]:
        failed = sum(1 for c in d["commands"] if c["exit_status"] not in (0, None))
        bits.append(f"ran {len(d['commands'])} command(s), {failed} failed")
    if d["compacted_message_count"]:
        bits.append(f"compacted {d['compacted_message_count']} message(s)")
    if d["waiting"]:
        bits.append(f"waiting: {d['waiting']}")
    return f"working memory revision {old_rev} -> {new_rev}: " + "; ".join(bits)


def apply_delta(
    wm: WorkingMemoryState, d: TurnMemoryDelta, *, agent_id: str, now: str
) -> tuple[WorkingMemoryState, list[EpisodeRecord]]:
    """Fold one settled turn in (pure). Returns the new state and the episodes
    it finalized (append them before saving the state)."""
    if wm["last_applied_turn_id"] == d["turn_id"]:
        return wm, []
    cur = derive(wm["current_working_memory"], d)
    rev = wm["working_memory_revision"]
    new_rev = rev + 1 if cur != wm["current_working_memory"] else rev
    builder, done = ep.merge(
        wm["active_episode_builder"], d, agent_id=agent_id, workspace_id=d["workspace_id"], now=now
    )
    out: WorkingMemoryState = {
        "current_working_memory": cur,
        "working_memory_revision": new_rev,
        "pending_working_memory_delta": delta_text(d, rev, new_rev),
        "last_prompted_working_memory_revision": d["prompted_revision"],
        "active_episode_id": builder["episode_id"] if builder else None,
        "archived_episode_count": wm["archived_episode_count"] + len(done),
        "active_episode_builder": builder,
        "compacted_message_count": wm["compacted_message_count"] + d["compacted_message_count"],
        "last_applied_turn_id": d["turn_id"],
    }
    return out, done


# ------------------------------------------------------------ projection


MEMORY_MAX_CHARS = 8000
MEMORY_MIN_CHARS = 600


def memory_chars_for(budget_tokens: int | None) -> int:
    """The working-memory block's share of the context budget: about an
    eighth (``budget / 2`` characters), within the bounds above."""
    if not budget_tokens:
        return MEMORY_MAX_CHARS
    return max(MEMORY_MIN_CHARS, min(MEMORY_MAX_CHARS, budget_tokens // 2))


QUEUE_MAX_CHARS = 12_000  # the work queue projection's own default
QUEUE_MIN_CHARS = 800


def queue_chars_for(budget_tokens: int | None) -> int:
    """The work queue block's share of the context budget (about an eighth:
    ``budget / 2`` characters), within the bounds above; at the default
    budget it is the projection's own default."""
    if not budget_tokens:
        return QUEUE_MAX_CHARS
    return max(QUEUE_MIN_CHARS, min(QUEUE_MAX_CHARS, budget_tokens // 2))


def render(wm: WorkingMemoryState, *, max_chars: int = MEMORY_MAX_CHARS) -> str | None:
    """The prompt's working-memory block (deterministic), or ``None`` before
    the first settled turn. Within ``max_chars``: the oldest operator
    requests go first, then older commands and files, then the text is cut
    at a line."""
    cur = wm["current_working_memory"]
    if cur is None:
        return None
    cur = {**cur}
    while True:
        text = _render(wm, cur)
        if len(text) <= max_chars:
            return text
        for key in ("operator_requests", "recent_commands", "recent_files", "open_work_items"):
            if cur[key]:
                cur[key] = cur[key][1:]
                break
        else:
            cut = text.rfind("\n", 0, max_chars)
            return text[:cut] if cut > 0 else text[:max_chars]


def _render(wm: WorkingMemoryState, cur: CurrentWorkingMemory) -> str:
    lines = [f"# Working memory (revision {wm['working_memory_revision']})"]
    focus = cur["active_work_item"]
    if focus:
        lines.append(f'Current work item: {focus["id"]} "{focus["objective"]}"')
        lines.append(f"- state: {focus['state']}; plan_status: {focus['plan_status']}")
        if focus["open_todos"]:
            lines.append("- open todos: " + "; ".join(focus["open_todos"]))
        if focus["blocked_by"]:
            lines.append(f"- blocked_by: {focus['blocked_by']}")
        lines.extend(f"- wait: {w}" for w in focus["waits"])
    if cur["open_work_items"]:
        lines.append("Open work items: " + "; ".join(cur["open_work_items"]))
    if cur["operator_requests"]:
        lines.append("Recent operator requests (oldest first):")
        lines.extend(f"- {r}" for r in cur["operator_requests"])
    if cur["recent_files"]:
        lines.append("Recent files: " + ", ".join(cur["recent_files"]))
    if cur["recent_commands"]:
        lines.append(
            "Recent commands: "
            + "; ".join(
                f"`{one_line(c['cmd'], 120)}` (exit {c['exit_status']})"
                for c in cur["recent_commands"]
            )
        )
    if cur["last_result"]:
        lines.append(f"Last result: {cur['last_result']}")
    if cur["waiting"]:
        lines.append(f"Waiting: {cur['waiting']}")
    if wm["archived_episode_count"]:
        lines.append(
            f"Archived episodes: {wm['archived_episode_count']} "
            "(older turns; MemorySearch finds them)"
        )
    return "\n".join(lines)


def render_delta(wm: WorkingMemoryState) -> str | None:
    text = wm["pending_working_memory_delta"]
    return f"# Since your last turn\n{text}" if text else None


def status_view(raw: Any) -> dict[str, object]:
    """``holon status --json`` data ``working_memory``."""
    wm = state_of(raw)
    return {
        "working_memory_revision": wm["working_memory_revision"],
        "current_working_memory": wm["current_working_memory"],
        "pending_working_memory_delta": wm["pending_working_memory_delta"],
        "last_prompted_working_memory_revision": wm["last_prompted_working_memory_revision"],
        "active_episode_id": wm["active_episode_id"],
        "archived_episode_count": wm["archived_episode_count"],
        "compacted_message_count": wm["compacted_message_count"],
    }


# ------------------------------------------------------------ settle (I/O)


def settle_memory(store: AgentStore, d: TurnMemoryDelta, now: str) -> WorkingMemoryState:
    """Finalized episodes appended (each once, by id) before the state that
    no longer holds them; returns the new working memory for the caller's
    state update (which applies it only if the turn is not applied yet)."""
    wm = state_of(store.read_record()["state"].get("working_memory"))
    new, done = apply_delta(wm, d, agent_id=store.agent_id, now=now)
    for rec in done:
        ep.append_once(store, rec)
    return new
