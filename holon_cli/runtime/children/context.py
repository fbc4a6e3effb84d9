"""A child's starting context: ``fork`` or ``fresh`` (control-plane RFC:
Fresh versus forked, Fork Context Derivation).

- ``fresh``: the child starts from its handoff (``initial_message``) only.
- ``fork``: the runtime derives a bounded view of the parent's relevant
  context from its structured state, never a transcript copy, anchored on
  the parent's active work item (the one the delegation records):

  1. that work item in full as the parent's own prompt shows it: objective,
     plan descriptor and a bounded plan preview, todos, blocker, its waits
     (triggered or not) and its recent process trace;
  2. the parent's working memory, without its list of other open items;
  3. finalized episode summaries of that work item (of no work item when
     the parent has no active one);
  4. other work items only when the handoff names them (by id), one
     compact line each;
  5. a small hot tail: the parent's recent conversation.

  Each part has its own bound and the whole at most :data:`FORK_CHARS`. It
  is derived once, at spawn, and kept in the child's
  ``state/inherited_context.json``: every turn of the child shows the same
  bytes (a stable prefix for prompt caching), as a context block fenced as
  evidence (the parent's text, external evidence included, is information
  to inspect, not instructions: the handoff is the child's task).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict

from holon_cli import clock
from holon_cli.store.fsio import read_snapshot, write_snapshot

if TYPE_CHECKING:
    from pathlib import Path

    from holon_cli.store.agent_store import AgentStore
    from holon_cli.store.layout import AgentLayout

CONTEXT_MODES = ("fork", "fresh")
FILE = "inherited_context.json"
VERSION = 1
FORK_CHARS = 12_000
ITEM_CHARS = 5_000
MEMORY_CHARS = 2_000
EPISODES = 3
EPISODE_CHARS = 600
REFERENCED_ITEMS = 3
RECENT_CHARS = 1_500
WI_ID = re.compile(r"\bwi_[0-9a-z]{8,40}\b")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit - 40)
    return text[: cut if cut > 0 else limit - 40] + "\n… (cut to fit the inherited context)"


def _episodes(parent: AgentStore, work_item_id: str | None) -> str | None:
    rows = [
        r
        for r in parent.ledger("context_episodes").tail(64)
        if r.get("work_item_id") == work_item_id
    ][-EPISODES:]
    if not rows:
        return None
    lines = []
    for r in rows:
        span = r.get("turn_range") or []
        turns = f"turns {span[0]}-{span[-1]}" if span else "turns ?"
        summary = " ".join(str(r.get("summary") or "").split())
        lines.append(f"- {r.get('episode_id')} ({turns}): {_cut(summary, EPISODE_CHARS)}")
    return "\n".join(lines)


def _memory(parent: AgentStore) -> str | None:
    from holon_cli.runtime.memory import working

    wm = working.state_of(parent.read_record()["state"].get("working_memory"))
    cur = wm["current_working_memory"]
    if cur is None:
        return None
    # other open work items stay out (RFC: non-active work stays out by default)
    wm = {**wm, "current_working_memory": {**cur, "open_work_items": []}}
    return working.render(wm, max_chars=MEMORY_CHARS)


class ContextSection(TypedDict):
    title: str
    chars: int


class InheritedContext(TypedDict):
    """``state/inherited_context.json``: what a child was handed (``text``:
    the fork's view, ``None`` for a fresh child or a parent with nothing)."""

    v: int
    mode: str
    parent_agent_id: str
    supervision_task_id: str
    anchor_work_item_id: str | None
    derived_at: str
    sections: list[ContextSection]
    text: str | None


def derive_fork(
    parent: AgentStore, handoff: str, work_item_id: str | None
) -> tuple[str, list[ContextSection]] | None:
    """The inherited view (its text and its sections' titles and sizes), or
    ``None`` when the parent has nothing to pass on."""
    from holon_cli.runtime.turn.context import recent_conversation
    from holon_cli.runtime.workitems.projection import item_line, item_snapshot

    parts: list[tuple[str, str]] = []
    if work_item_id:
        item = item_snapshot(parent, work_item_id)
        if item:
            parts.append(("Active work item", _cut(item, ITEM_CHARS)))
    mem = _memory(parent)
    if mem:
        parts.append(("Working memory", mem))
    eps = _episodes(parent, work_item_id)
    if eps:
        parts.append(("Episodes of this work", eps))
    named = [w for w in dict.fromkeys(WI_ID.findall(handoff)) if w != work_item_id]
    lines = [ln for w in named[:REFERENCED_ITEMS] if (ln := item_line(parent, w))]
    if lines:
        parts.append(("Other work items the handoff names", "\n".join(lines)))
    recent = recent_conversation(parent, None, max_chars=RECENT_CHARS)
    if recent:
        parts.append(("Recent conversation", recent.split("\n", 1)[-1]))
    if not parts:
        return None
    out: list[str] = []
    sections: list[ContextSection] = []
    used = 0
    for title, text in parts:
        block = f"## {title}\n{text.strip()}"
        if used + len(block) + 2 > FORK_CHARS:
            block = _cut(block, max(0, FORK_CHARS - used - 2))
            if len(block) < 80:
                break
        out.append(block)
        sections.append({"title": title, "chars": len(block)})
        used += len(block) + 2
    return "\n\n".join(out), sections


def render(rec: Mapping[str, object]) -> str | None:
    """The prompt's context block for a stored inherited context (fenced)."""
    text = rec.get("text")
    if rec.get("mode") != "fork" or not isinstance(text, str) or not text:
        return None
    from holon_cli.runtime.prompt import fence

    parent = str(rec.get("parent_agent_id") or "parent")
    head = (
        f"# Inherited context (fork of {parent})\n"
        f"The runtime derived this from {parent}'s state when it delegated to you "
        f"({rec.get('derived_at')}): its active work item, working memory, related episodes "
        "and recent conversation, bounded. Use it as background; your task is your "
        "delegation message."
    )
    salt = str(rec.get("supervision_task_id") or "")
    return (
        head
        + "\n"
        + fence(text, authority="inherited_context", source=f"agent:{parent}", salt=salt)
    )


def record(
    parent: AgentStore,
    *,
    mode: str,
    handoff: str,
    work_item_id: str | None,
    supervision_task_id: str,
) -> InheritedContext:
    """What ``state/inherited_context.json`` holds for a new child."""
    rec: InheritedContext = {
        "v": VERSION,
        "mode": mode,
        "parent_agent_id": parent.agent_id,
        "supervision_task_id": supervision_task_id,
        "anchor_work_item_id": work_item_id,
        "derived_at": clock.now_iso(),
        "sections": [],
        "text": None,
    }
    if mode == "fork":
        got = derive_fork(parent, handoff, work_item_id)
        if got is not None:
            rec["text"], rec["sections"] = got
    return rec


def write(layout: AgentLayout, rec: InheritedContext) -> None:
    write_snapshot(_path(layout.state_dir), rec)


def _path(state_dir: Path) -> Path:
    return state_dir / FILE


def read(store: AgentStore) -> Mapping[str, object] | None:
    """The stored record as JSON (its readers take each field with a check)."""
    try:
        rec = read_snapshot(_path(store.layout.state_dir))
    except Exception:  # noqa: BLE001 - a damaged file leaves the block out, never fails a turn
        return None
    return rec if isinstance(rec, dict) else None


def block_for(store: AgentStore, identity: Mapping[str, object]) -> str | None:
    """The turn's inherited-context block: a forked child's, else ``None``."""
    if identity.get("kind") != "child":
        return None
    rec = read(store)
    return render(rec) if rec else None
