"""What a turn shows the model besides the message: the recent operator-visible
conversation (bounded, read from the transcript tail)."""

from __future__ import annotations

from holon_cli.runtime.prompt import render_recent
from holon_cli.store.agent_store import AgentStore

RECENT_CHARS = 4000


def recent_conversation(store: AgentStore, exclude_message_id: str | None) -> str | None:
    """Operator-visible history from the transcript tail (bounded; O(1) in history).
    Rendering (fences, escaping) lives in :func:`prompt.render_recent`."""
    return render_recent(
        store.ledger("transcript").tail(40), exclude_message_id, max_chars=RECENT_CHARS
    )
