"""The agent's message queue: ingestion from the inbox, priority dequeue,
status settlement, crash replay and operator requeue.

Durable truth is the ``queue`` ledger:
  ``{"op": "admitted", "seq": N, "message": <envelope>}`` (v2: snake_case;
  v1 camelCase records are upgraded when read)
  ``{"op": "status", "message_id": ID, "status": dequeued|processed|aborted|interrupted}``
``state/queue.json`` is a snapshot of the fold (only unfinished entries) plus
the ledger offset it reflects; loading replays the ledger tail after that
offset, so a crash between a ledger append and a snapshot write loses
nothing and the cost of loading does not grow with history.

Bodies stay out of the snapshot: an entry keeps the envelope's head (no
body) and the byte offset of its ``admitted`` record. The full envelope of an
unfinished message also stays in ``inbox/cur/<id>.json`` (moved there from
``inbox/new`` at ingestion, removed when the message is settled), so a turn
reads exactly one message body, and a truncated ledger can be rebuilt from
the snapshot and the inbox. Memory and time per turn stay flat with the
size of the backlog.

Entry status: ``queued`` (waiting), ``dequeued`` (a turn is working on it),
then ``processed`` or ``aborted`` (final, dropped from the snapshot).
``interrupted`` is recorded when a dequeued entry is found with no turn
running (its turn crashed); the entry goes back to ``queued`` in its original
place and is replayed once per crash, up to ``MAX_ATTEMPTS`` attempts.
An aborted message can be re-admitted by an operator (``holon queue
requeue``): a new ``admitted`` record with ``requeued: true``.

Ingestion validates every inbox file through the admission policy
(re-deriving trust and authority from the origin and the admission surface);
a file that fails is moved to ``inbox/quarantine/`` with an
``inbox_message_quarantined`` event naming the file and the reason, so one
bad file never wedges the agent.

Modules: ``state`` (the fold, snapshot load/save, ledger append),
``ingest`` (inbox validation, quarantine, bodies, rebuild after ledger loss),
``steps`` (dequeue, settle, interjects, crash recovery), ``operator``
(``holon queue list`` / ``requeue``). Every name is re-exported here: callers
use ``from holon_cli.runtime import queue as q`` and ``q.<name>``.
"""

from holon_cli.runtime.queue.ingest import _body_file as _body_file
from holon_cli.runtime.queue.ingest import _find_admitted as _find_admitted
from holon_cli.runtime.queue.ingest import _quarantine as _quarantine
from holon_cli.runtime.queue.ingest import _read_inbox_file as _read_inbox_file
from holon_cli.runtime.queue.ingest import _rebuild as _rebuild
from holon_cli.runtime.queue.ingest import _release_body as _release_body
from holon_cli.runtime.queue.ingest import _sweep_cur as _sweep_cur
from holon_cli.runtime.queue.ingest import _usable as _usable
from holon_cli.runtime.queue.ingest import _with_envelope as _with_envelope
from holon_cli.runtime.queue.ingest import find_envelope, ingest, load_envelope
from holon_cli.runtime.queue.operator import _history as _history
from holon_cli.runtime.queue.operator import _summary as _summary
from holon_cli.runtime.queue.operator import list_messages, requeue
from holon_cli.runtime.queue.state import (
    FINAL,
    LIST_STATUSES,
    MAX_ATTEMPTS,
    MAX_INBOX_FILE_BYTES,
    QUEUE_RECORD_VERSION,
    QUEUE_SNAPSHOT_VERSION,
    RECENT_IDS,
    QueueState,
    load,
)
from holon_cli.runtime.queue.state import _append as _append
from holon_cli.runtime.queue.state import _save as _save
from holon_cli.runtime.queue.state import _warn as _warn
from holon_cli.runtime.queue.steps import (
    Interjects,
    dequeue_next,
    pending_count,
    put_back,
    recover,
    set_status,
    settle,
    take_interjects,
    try_ingest,
)

__all__ = [
    "FINAL",
    "Interjects",
    "LIST_STATUSES",
    "MAX_ATTEMPTS",
    "MAX_INBOX_FILE_BYTES",
    "QUEUE_RECORD_VERSION",
    "QUEUE_SNAPSHOT_VERSION",
    "RECENT_IDS",
    "QueueState",
    "dequeue_next",
    "find_envelope",
    "ingest",
    "list_messages",
    "load",
    "load_envelope",
    "pending_count",
    "put_back",
    "recover",
    "requeue",
    "set_status",
    "settle",
    "take_interjects",
    "try_ingest",
]
