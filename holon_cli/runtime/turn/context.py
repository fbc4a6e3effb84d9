"""What a turn shows the model besides the message: the recent operator-visible
conversation (bounded, read from the transcript tail) and the agent's default
trigger descriptor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holon_cli.errors import HolonError
from holon_cli.runtime.prompt import render_recent
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.trigger import TriggerDescriptor

RECENT_CHARS = 4000
RECENT_MAX_CHARS = 24_000  # the tail's share of a large budget
RECENT_MIN_CHARS = 1000
RECENT_SCAN = 40
RECENT_SCAN_MAX = 120


def recent_chars_for(budget_tokens: int | None) -> int:
    """How much recent conversation a prompt carries: what the context budget
    leaves, about an eighth of it (``budget / 2`` characters), within
    :data:`RECENT_MIN_CHARS` .. :data:`RECENT_MAX_CHARS`."""
    if not budget_tokens:
        return RECENT_CHARS
    return max(RECENT_MIN_CHARS, min(RECENT_MAX_CHARS, budget_tokens // 2))


def recent_conversation(
    store: AgentStore, exclude_message_id: str | None, *, max_chars: int = RECENT_CHARS
) -> str | None:
    """Operator-visible history from the transcript tail (bounded; O(1) in history).
    Rendering (fences, escaping) lives in :func:`prompt.render_recent`, which
    shows at most ``RECENT_LINE_CHARS`` of a text: a large record (a 1 MB
    message body) is read as a preview, never whole (issue 31 #27)."""
    scan = RECENT_SCAN if max_chars <= RECENT_CHARS else RECENT_SCAN_MAX
    recent = store.ledger("transcript").tail_previews(scan)
    return render_recent(recent, exclude_message_id, max_chars=max_chars)


def context_trigger(store: AgentStore, *, provision: bool = True) -> TriggerDescriptor | None:
    """The agent's default trigger descriptor for the prompt, provisioned on
    first use (runtime spec: Default External Ingress Flow) when ``provision``
    (a self-owned agent; a parent-supervised one, such as `holon run`'s
    temporary agent, has no external ingress of its own unless one was made
    for it). Read again for every round, so a revoke takes the URL out of the
    next request. A damaged capability leaves it out of the prompt (``holon
    home check`` reports it) rather than failing the turn."""
    from holon_cli.runtime.waiting import triggers

    try:
        return triggers.context_descriptor(store, provision=provision)
    except (HolonError, OSError, ValueError):
        return None
