"""Shared plumbing of the waiting plane: file locations and queue peeking.

Everything lives under the agent's ``.holon/``: ``ledger/<name>.jsonl``
(append-only truth), ``state/<name>.json`` (snapshots), ``locks/<name>.lock``
(read-modify-write of one resource) and ``secrets/`` (0700, files 0600).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope, EnvelopeHead, QueueEntry


def field(env: Mapping[str, Any], camel: str, snake: str) -> Any:
    """An envelope field under either spelling (the envelope is moving to snake_case)."""
    if snake in env:
        return env[snake]
    return env.get(camel)


def source_refs(env: Mapping[str, Any]) -> Mapping[str, object]:
    refs = field(env, "sourceRefs", "source_refs")
    return refs if isinstance(refs, dict) else {}


def metadata_of(env: Mapping[str, Any]) -> Mapping[str, object]:
    """An envelope's ``metadata`` object (``{}`` when it has none)."""
    meta = env.get("metadata")
    return meta if isinstance(meta, dict) else {}


def state_file(store: AgentStore, name: str) -> Path:
    return store.layout.state_dir / f"{name}.json"


def lock_file(store: AgentStore, name: str) -> Path:
    return store.layout.locks_dir / f"{name}.lock"


def secrets_dir(store: AgentStore) -> Path:
    return store.layout.runtime / "secrets"


def _envelope(store: AgentStore, entry: QueueEntry) -> EnvelopeHead | Envelope:
    """A queued entry's envelope head (kind, origin, refs, metadata); the full
    envelope when the head left its metadata out (too large for the index)."""
    from holon_cli.runtime import queue as q

    empty: EnvelopeHead = {}
    head: EnvelopeHead | Envelope = entry.get("head") or entry.get("envelope") or empty
    if "metadata" in head or head.get("kind") not in ("system_tick", "timer_tick"):
        return head
    try:
        return q.load_envelope(store, entry)
    except Exception:  # noqa: BLE001 - an unusable copy: the head is all we know
        return head


def queued_envelopes(store: AgentStore) -> Iterator[Mapping[str, object]]:
    """Messages still waiting for a turn: queued ledger entries and inbox
    deliveries not yet ingested. Read-only, no lock. The inbox is listed
    *before* the queue is loaded and the queue is reloaded when a listed file
    vanished, so a message that a racing ingestion moves from the inbox into
    the queue is always seen (once)."""
    from holon_cli.runtime import queue as q

    names = store.inbox.pending()
    st = q.load(store)
    seen: set[str] = set()

    def queued(state: q.QueueState) -> Iterator[Mapping[str, object]]:
        for e in state.entries.values():
            if e.get("status") == "queued" and e["message_id"] not in seen:
                seen.add(e["message_id"])
                yield _envelope(store, e)

    yield from queued(st)
    vanished = False
    for path in names:
        mid = path.name[: -len(".json")]
        if mid in seen or mid in st.entries or mid in st.recent_final:
            continue
        try:
            env = store.inbox.read(path)
        except FileNotFoundError:
            vanished = True
            continue
        except (OSError, ValueError):
            continue  # a bad file: ingestion quarantines it
        seen.add(mid)
        yield env
    if vanished:
        yield from queued(q.load(store))
