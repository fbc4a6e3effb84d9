"""Idempotency keys of ``holon enqueue --idempotency-key K`` (issue 31 #31).

A retried enqueue (a script that was killed, or timed out, between the
message being stored and its id being printed) must not admit the message
twice. The key is stored with the envelope (``metadata.idempotency_key``)
and in a small key file, ``state/idempotency/<sha256 of K>.json``
(``{v, key, message_id, at}``).

Protocol, under the agent's idempotency lock (taken by keyed admissions
only: a plain ``enqueue`` still takes no lock):

1. a key file younger than :data:`WINDOW_S` whose message exists (in the
   inbox, or admitted to the queue ledger) answers with that message: no
   second message is admitted;
2. otherwise the key file is written first (fsync'd) naming the new
   message id, then the message is delivered.

A kill after 2's key file but before the delivery leaves a key naming a
message that never existed: step 1 finds no such message and admits anew.
A kill after the delivery leaves both: the retry gets the first id. So the
same key within 24 h yields one message and one id, whatever was killed
when. Key files older than the window are removed on the next keyed
admission.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli import clock
from holon_cli.errors import UsageError
from holon_cli.model.envelope import is_admitted
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope, EnvelopeRef

WINDOW_S = 24 * 3600.0
MAX_KEY_CHARS = 256
KEY_FILE_VERSION = 1


def check_key(key: str) -> str:
    if not key.strip():
        raise UsageError(
            "--idempotency-key is empty", hint="pass a unique key, e.g. the job's run id"
        )
    if len(key) > MAX_KEY_CHARS:
        raise UsageError(
            f"--idempotency-key is longer than {MAX_KEY_CHARS} characters",
            hint="use a shorter key, e.g. a hash of the request",
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise UsageError(
            "--idempotency-key contains control characters",
            hint="use printable text, e.g. the job's run id",
        )
    return key


def key_path(store: AgentStore, key: str) -> Path:
    from holon_cli.digest import sha256_hex

    return store.layout.idempotency_dir / f"{sha256_hex(key.encode('utf-8'))[:40]}.json"


@contextmanager
def keyed(store: AgentStore) -> Iterator[None]:
    """The agent's idempotency lock: lookup, key file and delivery in one step."""
    from holon_cli.store.locks import locked

    with locked(store.layout.idempotency_lock, what=f"idempotency keys of {store.agent_id!r}"):
        yield


def find_envelope(store: AgentStore, message_id: str) -> Envelope | None:
    """The stored envelope of a message (upgraded: the read boundary): in the
    inbox (``new/``, ``cur/``), else its ``admitted`` record in the queue
    ledger; ``None`` if it never existed or cannot be read as an envelope.
    ``new`` is read before ``cur`` and the ledger: ingestion appends to the
    ledger before it moves the file, so a message is never missed."""
    from holon_cli.model.envelope import EnvelopeError, upgrade_envelope

    raw: object = None
    for folder in (store.inbox.new, store.inbox.cur):
        try:
            raw = dict(store.inbox.read(folder / f"{message_id}.json"))
            break
        except FileNotFoundError:
            continue
        except (ValueError, UnicodeDecodeError, OSError):
            break  # unreadable here: the ledger has the admitted record
    if raw is None:
        raw = _admitted_record(store, message_id)
    if raw is None:
        return None
    try:
        return upgrade_envelope(raw)
    except EnvelopeError:
        return None


def _admitted_record(store: AgentStore, message_id: str) -> EnvelopeRef | None:
    import mmap

    led = store.ledger("queue")
    try:
        f = open(led.path, "rb")
    except FileNotFoundError:
        return None
    with f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            at = mm.find(message_id.encode("ascii"))
            if at < 0:
                return None
            start = mm.rfind(b"\n", 0, at) + 1
    # the first mention of a new id is its admission (nothing can name it earlier)
    rec = led.read_at(start)
    if rec is not None and is_admitted(rec) and rec["message"]["id"] == message_id:
        return rec["message"]
    for _, _, r in led.scan(0):
        if is_admitted(r) and r["message"]["id"] == message_id:
            return r["message"]
    return None


def lookup(store: AgentStore, key: str) -> Envelope | None:
    """The envelope of the message first admitted with ``key`` in the last
    24 h, or ``None``. Caller holds :func:`keyed`."""
    path = key_path(store, key)
    try:
        rec = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (ValueError, OSError):
        return None  # a damaged key file is rewritten by this admission
    if not isinstance(rec, dict) or rec.get("key") != key:
        return None
    at = rec.get("at")
    mid = rec.get("message_id")
    if not isinstance(at, str) or not isinstance(mid, str):
        return None
    if clock.now() - clock.parse_iso(at) > WINDOW_S:
        return None
    return find_envelope(store, mid)


def record(store: AgentStore, key: str, message_id: str) -> None:
    """Write the key file (before the message is delivered), and drop key
    files past the window. Caller holds :func:`keyed`."""
    from holon_cli.store.fsio import write_snapshot

    folder = store.layout.idempotency_dir
    folder.mkdir(parents=True, exist_ok=True)
    _prune(folder)
    write_snapshot(
        key_path(store, key),
        {"v": KEY_FILE_VERSION, "key": key, "message_id": message_id, "at": clock.now_iso()},
    )


def _prune(folder: Path) -> None:
    import time

    cutoff = time.time() - WINDOW_S  # file times are real time, not the injectable clock
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    for e in entries:
        try:
            if e.name.endswith(".json") and e.stat().st_mtime < cutoff:
                os.unlink(e.path)
        except FileNotFoundError:
            continue
