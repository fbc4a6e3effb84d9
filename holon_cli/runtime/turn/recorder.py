"""The side effects of one turn, bound once: every event carries the turn id
and the triggering message's provenance; every transcript entry the turn and
message ids. The loop says *what* happened; this says where it is written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from holon_cli.model.envelope import body_text, origin_label
from holon_cli.runtime.briefs import write_transcript
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.events import EventKind


class TurnRecorder:
    def __init__(self, store: AgentStore, message: Envelope, turn_id: str) -> None:
        self.store = store
        self.message = message
        self.message_id: str = message["id"]
        self.turn_id = turn_id

    def event(
        self,
        kind: EventKind,
        data: Mapping[str, Any],
        *,
        message: Envelope | None = None,
        work_item_id: str | None = None,
    ) -> None:
        """An audit event of this turn (``turn_id`` leads its data)."""
        self.store.emit(
            kind,
            {"turn_id": self.turn_id, **data},
            message=self.message if message is None else message,
            turn_id=self.turn_id,
            work_item_id=work_item_id,
        )

    def plain_event(self, kind: EventKind, data: Mapping[str, Any]) -> None:
        """An event of this turn whose data is a record of its own (no ``turn_id`` key)."""
        self.store.emit(kind, data, message=self.message, turn_id=self.turn_id)

    def transcript(self, kind: str, **fields: Any) -> None:
        write_transcript(
            self.store, kind, turn_id=self.turn_id, message_id=self.message_id, **fields
        )

    def message_entry(self, env: Envelope, **extra: Any) -> None:
        """An admitted message as a transcript entry, provenance preserved."""
        write_transcript(
            self.store,
            "message",
            message_id=env["id"],
            turn_id=self.turn_id,
            message_kind=env.get("kind"),
            origin=env.get("origin"),
            origin_label=origin_label(env.get("origin", {})),
            authority_class=env.get("authority_class"),
            trust=env.get("trust"),
            priority=env.get("priority"),
            work_item_id=env.get("work_item_id"),
            text=body_text(env.get("body", {})),
            **extra,
        )
