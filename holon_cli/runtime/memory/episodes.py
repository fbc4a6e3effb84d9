"""Episodes: immutable records of a finished chunk of work
(``.holon/ledger/context_episodes.jsonl``; runtime spec: Additional State
Fields, archived episode memory).

Each settled turn's delta merges into the open builder (:func:`merge`). An
episode is finalized only on a semantic boundary: a switch of the active work
item (from one item to another; a chunk without one adopts the first), a
completion checkpoint, a waiting/sleep boundary, or the hard cap of
:data:`HARD_CAP_TURNS` turns. Its summary is deterministic (no model call)
and at most :data:`SUMMARY_CHARS` characters. The episode id is derived
from the turn that opened it, so a replayed settle finds the record it
already appended (:func:`append_once`) instead of writing a second one.
Memory search indexes these lines
(:func:`holon_cli.runtime.memory.sources.episode_doc`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from holon_cli.errors import HolonError

if TYPE_CHECKING:
    from holon_cli.model.memory import (
        CommandRun,
        EpisodeBoundary,
        EpisodeBuilder,
        EpisodeRecord,
        TurnMemoryDelta,
    )
    from holon_cli.store.agent_store import AgentStore

LEDGER: Final = "context_episodes"
HARD_CAP_TURNS = 8
SUMMARY_CHARS = 4000
MAX_LINES = 24
MAX_FILES = 50
MAX_COMMANDS = 30
LINE_CHARS = 420


def one_line(text: object, limit: int) -> str:
    """Whitespace folded, cut to ``limit`` characters (with an ellipsis)."""
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: max(0, limit - 1)] + "…"


def _line(d: TurnMemoryDelta) -> str:
    who = "operator" if d["authority_class"] == "operator_instruction" else d["message_kind"]
    text = f"turn {d['turn_index']} {who}"
    if d["input_excerpt"]:
        text += f": {one_line(d['input_excerpt'], 200)}"
    if d["final_excerpt"]:
        text += f" -> {one_line(d['final_excerpt'], 200)}"
    return text[:LINE_CHARS]


def _open(d: TurnMemoryDelta, workspace_id: str | None, now: str) -> EpisodeBuilder:
    return {
        "episode_id": f"ep_{d['turn_id']}",
        "work_item_id": d["work_item_id"],
        "workspace_id": workspace_id,
        "first_turn_index": d["turn_index"],
        "last_turn_index": d["turn_index"],
        "first_message_id": d["message_id"],
        "last_message_id": d["message_id"],
        "message_count": 0,
        "touched_files": [],
        "commands": [],
        "verification": [],
        "decisions": [],
        "carry_forward": [],
        "waiting": None,
        "lines": [],
        "started_at": now,
    }


def _add(b: EpisodeBuilder, d: TurnMemoryDelta) -> EpisodeBuilder:
    files = [f for f in b["touched_files"] if f not in d["files_touched"]] + d["files_touched"]
    verification: list[CommandRun] = [c for c in d["commands"] if c["exit_status"] is not None]
    decisions = list(b["decisions"])
    if d["completed_work_item"] and d["work_item_id"]:
        decisions.append(f"completed work item {d['work_item_id']}")
    if d["waiting"]:
        decisions.append(f"turn {d['turn_index']}: waiting ({d['waiting']})")
    lines = [*b["lines"], _line(d)]
    if len(lines) > MAX_LINES:  # the opening turns and the latest ones
        lines = lines[:4] + lines[-(MAX_LINES - 4) :]
    focus = d["work_focus"]
    return {
        **b,
        "last_turn_index": d["turn_index"],
        "last_message_id": d["message_id"],
        "message_count": b["message_count"] + 1,
        "touched_files": files[-MAX_FILES:],
        "commands": [*b["commands"], *d["commands"]][-MAX_COMMANDS:],
        "verification": [*b["verification"], *verification][-MAX_COMMANDS:],
        "decisions": decisions[-12:],
        "carry_forward": list(focus["open_todos"]) if focus else [],
        "waiting": d["waiting"],
        "lines": lines,
    }


def summary(b: EpisodeBuilder, boundary: str) -> str:
    """One bounded, deterministic text for prompt projection and search."""
    span = f"turns {b['first_turn_index']}-{b['last_turn_index']}"
    head = f"Episode {b['episode_id']} ({span}, {b['message_count']} message(s); {boundary})"
    if b["work_item_id"]:
        head += f" on work item {b['work_item_id']}"
    parts = [head, *(f"- {ln}" for ln in b["lines"])]
    if b["touched_files"]:
        parts.append("files: " + ", ".join(b["touched_files"][:20]))
    if b["verification"]:
        parts.append(
            "checks: "
            + "; ".join(
                f"{c['cmd'][:80]} (exit {c['exit_status']})" for c in b["verification"][-6:]
            )
        )
    if b["decisions"]:
        parts.append("decisions: " + "; ".join(b["decisions"]))
    if b["carry_forward"]:
        parts.append("carry forward: " + "; ".join(b["carry_forward"][:8]))
    if b["waiting"]:
        parts.append(f"waiting: {b['waiting']}")
    text = "\n".join(parts)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def finalize(
    b: EpisodeBuilder, boundary: EpisodeBoundary, agent_id: str, now: str
) -> EpisodeRecord:
    from holon_cli.model.memory import EPISODE_VERSION

    return {
        "v": EPISODE_VERSION,
        "episode_id": b["episode_id"],
        "agent_id": agent_id,
        "work_item_id": b["work_item_id"],
        "workspace_id": b["workspace_id"],
        "turn_range": [b["first_turn_index"], b["last_turn_index"]],
        "message_range": [b["first_message_id"], b["last_message_id"]],
        "message_count": b["message_count"],
        "touched_files": list(b["touched_files"]),
        "commands": [c["cmd"] for c in b["commands"]],
        "verification": list(b["verification"]),
        "decisions": list(b["decisions"]),
        "carry_forward": list(b["carry_forward"]),
        "waiting": b["waiting"],
        "summary": summary(b, boundary),
        "boundary": boundary,
        "started_at": b["started_at"],
        "finalized_at": now,
    }


def merge(
    b: EpisodeBuilder | None,
    d: TurnMemoryDelta,
    *,
    agent_id: str,
    workspace_id: str | None,
    now: str,
) -> tuple[EpisodeBuilder | None, list[EpisodeRecord]]:
    """Merge one turn's delta into the open builder (pure). Returns the
    builder left open (``None`` after a boundary) and the finalized episodes."""
    done: list[EpisodeRecord] = []
    wid = d["work_item_id"]
    if b is not None and b["work_item_id"] and wid and b["work_item_id"] != wid:
        done.append(finalize(b, "work_item_switch", agent_id, now))
        b = None
    elif b is not None and wid and not b["work_item_id"]:
        b = {**b, "work_item_id": wid}  # the chunk's talk led to this work item
    b = _add(b if b is not None else _open(d, workspace_id, now), d)
    boundary: EpisodeBoundary | None = None
    if d["completed_work_item"]:
        boundary = "completion_checkpoint"
    elif d["waiting"]:
        boundary = "waiting_boundary"
    elif b["message_count"] >= HARD_CAP_TURNS:
        boundary = "hard_cap"
    if boundary is not None:
        done.append(finalize(b, boundary, agent_id, now))
        return None, done
    return b, done


def append_once(store: AgentStore, rec: EpisodeRecord) -> bool:
    """Append a finalized episode unless a replay already did. A damaged
    ledger line is reported by ``holon home check``; it never stops a turn
    (the episode is still appended)."""
    led = store.ledger(LEDGER)
    try:
        if any(r.get("episode_id") == rec["episode_id"] for r in led.tail(32)):
            return False
    except (HolonError, ValueError):
        pass
    led.append({**rec})
    led.sync()
    return True
