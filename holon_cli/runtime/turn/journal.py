"""The in-flight turn's journal (``state/turn_journal.json``): the
conversation so far, usage, the attempt timeline, interjected messages and,
once the turn has decided how it ends, its settlement.

Invariants:
- rewritten atomically after every step, so a replay after a crash sees every
  tool result that was recorded and runs no recorded call again;
- the settlement is saved before the terminal records (brief, transcript
  entry, ``turn_terminal`` event) are written; a replay that finds it writes
  only the records that are missing and settles the queue entry, so a message
  gets exactly one terminal and one result brief under any kill;
- removed once the agent record reflects the settled turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from holon_cli.model.turn import TurnSettlement
from holon_cli.providers.base import ConversationItem, ToolCall
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot, write_snapshot


def journal_path(store: AgentStore) -> Path:
    return store.layout.state_dir / "turn_journal.json"


def item_to_dict(it: ConversationItem) -> dict[str, Any]:
    return {
        "role": it.role,
        "text": it.text,
        "tool_calls": [c.to_dict() | {"raw_arguments": c.raw_arguments} for c in it.tool_calls],
        "call_id": it.call_id,
        "name": it.name,
        "is_error": it.is_error,
    }


def item_from_dict(d: dict[str, Any]) -> ConversationItem:
    calls = [
        ToolCall(
            c["id"],
            c["name"],
            c.get("arguments") or {},
            c.get("raw_arguments"),
            c.get("arguments_error"),
        )
        for c in d.get("tool_calls", [])
    ]
    return ConversationItem(
        d["role"],
        d.get("text", ""),
        calls,
        d.get("call_id"),
        d.get("name"),
        bool(d.get("is_error")),
    )


class Journal:
    """The in-flight turn's conversation, rewritten atomically after every step."""

    def __init__(self, store: AgentStore, turn_id: str, message_id: str) -> None:
        self.store = store
        self.turn_id = turn_id
        self.message_id = message_id
        self.items: list[ConversationItem] = []
        self.provider_only: set[int] = set()
        self.rounds = 0
        self.usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        self.usage_reported = False  # some provider answer carried token data
        self.timeline: list[dict[str, Any]] = []
        self.interject_ids: list[str] = []
        self.settlement: TurnSettlement | None = None

    @classmethod
    def load(cls, store: AgentStore) -> Journal | None:
        snap = read_snapshot(journal_path(store))
        if not snap or not snap.get("message_id"):
            return None
        j = cls(store, str(snap.get("turn_id") or ""), str(snap["message_id"]))
        j.items = [item_from_dict(d) for d in snap.get("items", [])]
        j.rounds = int(snap.get("rounds", 0))
        j.usage = dict(snap.get("usage") or j.usage)
        j.usage_reported = bool(snap.get("usage_reported", False))
        j.timeline = list(snap.get("timeline") or [])
        j.interject_ids = list(snap.get("interject_ids") or [])
        j.settlement = cast("TurnSettlement | None", snap.get("settlement"))
        return j

    @classmethod
    def resume(cls, store: AgentStore, turn_id: str, message_id: str) -> Journal | None:
        j = cls.load(store)
        if j is None or j.message_id != message_id:
            return None
        j.turn_id = turn_id
        return j

    def save(self) -> None:
        snap: dict[str, Any] = {
            "v": 1,
            "turn_id": self.turn_id,
            "message_id": self.message_id,
            "rounds": self.rounds,
            "usage": self.usage,
            "usage_reported": self.usage_reported,
            "timeline": self.timeline,
            "interject_ids": self.interject_ids,
            "items": [
                item_to_dict(it) for i, it in enumerate(self.items) if i not in self.provider_only
            ],
        }
        if self.settlement is not None:
            snap["settlement"] = self.settlement
        write_snapshot(journal_path(self.store), snap)

    def clear(self) -> None:
        try:
            journal_path(self.store).unlink()
        except FileNotFoundError:
            pass

    def recorded_results(self) -> dict[str, ConversationItem]:
        return {it.call_id: it for it in self.items if it.role == "tool" and it.call_id}

    def add_usage(self, usage: dict[str, Any] | None) -> None:
        if not usage:
            return
        self.usage_reported = True
        for k in self.usage:
            self.usage[k] += int(usage.get(k, 0))
