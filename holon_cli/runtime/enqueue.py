"""Message admission: normalize an envelope and deliver it to the agent inbox.

Admission never waits for a lock (Maildir delivery), so any number of
concurrent ``holon enqueue`` processes proceed in parallel. When :func:`admit`
returns, the message is durable; ingestion into the queue ledger happens at
the next ``tick``/``turn``/``serve`` pass (or at once, see ``ingest_now``).

:func:`admit` is the one admission function: every producer (CLI, ``run``,
the model's ``Enqueue`` tool, ticks, timers, task rejoin, serve) names its
admission surface (``delivery_surface`` + ``admission_context``), and the
envelope module's policy decides which kinds and origins that surface may
admit. Runtime-owned origins (``system``, ``task``, ``timer``) need
``admission_context="runtime_owned"``, which the CLI never passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from holon_cli import clock
from holon_cli.errors import RejectedError, Said, UsageError
from holon_cli.model.agent import is_supervised_child, lifecycle_hint
from holon_cli.model.envelope import (
    Envelope,
    MessageBody,
    Origin,
    build_envelope,
    check_kind,
    check_priority,
    parse_origin,
)
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord
    from holon_cli.model.tracecontext import TraceContext

MAX_BODY_BYTES = 1_000_000


def check_utf8(text: object, what: str = "message") -> str:
    """Text that came from argv or stdin (surrogate-escaped bytes) must be UTF-8."""
    if not isinstance(text, str):
        raise UsageError(f"{what} must be text, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(
            f"{what} is not valid UTF-8",
            hint=Said(
                "send UTF-8 text; for binary data send a path or base64 with --json-body",
                http="send UTF-8 text (no lone surrogate escapes); for binary data send base64",
                tool="send UTF-8 text; for binary data write a file and send its path",
            ),
            kind="invalid_utf8",
        ) from None
    return text


def make_body(text: str, *, json_body: bool = False) -> MessageBody:
    check_utf8(text)
    if len(text.encode("utf-8")) > MAX_BODY_BYTES:
        raise UsageError(
            f"message body is larger than {MAX_BODY_BYTES} bytes",
            hint="put large content in a file and send its path",
        )
    if json_body:
        from holon_cli.model.jsontext import parse_json

        try:
            value = parse_json(text, "the message")
        except UsageError as exc:
            raise UsageError(
                Said(
                    f"--json-body: {exc.message}",
                    http=exc.message.replace("the message", "the JSON body", 1),
                ),
                hint=exc.hint,
                kind=exc.kind,
                details=exc.details,
            ) from None
        return {"type": "json", "value": value}
    if not text.strip():
        raise UsageError(
            "the message is empty",
            hint=Said(
                "pass the text as an argument or on stdin with `-`",
                http='send a non-empty "text"',
                tool="send some text",
            ),
        )
    return {"type": "text", "text": text}


def check_ingress(store: AgentStore, rec: AgentRecord, admission_context: str) -> None:
    """The child boundary: a supervised private child takes only runtime-owned
    messages (its parent's delegation and follow-ups, its own runtime), never
    operator or external ingress."""
    ident = rec["identity"]
    if admission_context != "runtime_owned" and is_supervised_child(ident):
        parent = ident.get("lineage_parent_agent_id")
        tid = ident.get("supervision_task_id")
        via = f" {tid}" if tid else ""
        raise RejectedError(
            f"agent {store.agent_id!r} is a private child of {parent!r}; it takes no "
            "operator or external messages",
            hint=f"send the message to {parent!r}, which supervises the child through its "
            f"task handle{via} (`holon task input{via} TEXT --agent {parent}`); "
            f"`holon status --agent {store.agent_id}` and `holon tail` still inspect it",
            kind="private_agent",
        )


def check_accepting(store: AgentStore) -> AgentRecord:
    rec = store.read_record()
    status = rec["state"]["status"]
    if status == "stopped":
        raise RejectedError(
            f"agent {store.agent_id!r} is stopped and does not accept new messages",
            hint=lifecycle_hint("stopped") or "",
            kind="agent_stopped",
        )
    return rec


def admit(
    text: str,
    *,
    agent_id: str | None = None,
    json_body: bool = False,
    kind: str | None = None,
    origin: str | Origin | dict[str, object] | None = None,
    priority: str = "normal",
    work_item_id: str | None = None,
    task_id: str | None = None,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    delivery_surface: str = "cli_prompt",
    admission_context: str = "local_process",
    metadata: Mapping[str, object] | None = None,
    source_refs: dict[str, str] | None = None,
    store: AgentStore | None = None,
    ingest_now: bool = False,
    idempotency_key: str | None = None,
    trace_context: TraceContext | None = None,
) -> Envelope:
    """Validate, normalize and durably deliver one message. Returns the envelope.

    Every bad value raises the project's :class:`UsageError` (exit 2) before
    anything is created on disk; a stopped agent raises :class:`RejectedError`.

    With ``ingest_now`` the message is also moved into the queue at once when
    the agent lock is free (a non-blocking try), so ``holon tail`` shows its
    ``message_admitted`` event immediately; when the lock is busy it stays in
    the Maildir for the lock holder or the next pass. Either way admission
    never waits for a lock.

    ``trace_context``: the caller's W3C trace (an HTTP ``traceparent``),
    stored on the message; the turn that works it continues that trace.
    """
    body = make_body(text, json_body=json_body)
    # every caller value, and the policy (kind vs origin vs surface), is
    # checked before open_agent, so a refused message never touches the home
    ids = {"agent id": agent_id, "work item id": work_item_id, "task id": task_id}
    ids |= {"correlation id": correlation_id, "causation id": causation_id}
    metadata = _checked_values(
        body, ids, kind, origin, priority, delivery_surface, admission_context, metadata,
        idempotency_key,
    )  # fmt: skip
    store = store or open_agent(agent_id)
    message_id = clock.new_id("msg")
    env = build_envelope(
        message_id=message_id,
        agent_id=store.agent_id,
        created_at=clock.now_iso(),
        body=body,
        kind=kind,
        origin=origin,
        priority=priority,
        work_item_id=work_item_id,
        task_id=task_id,
        correlation_id=correlation_id,
        causation_id=causation_id,
        delivery_surface=delivery_surface,
        admission_context=admission_context,
        metadata=metadata,
        source_refs=source_refs,
        trace_context=trace_context,
    )
    check_ingress(store, store.read_record(), admission_context)
    check_accepting(store)
    if work_item_id:
        from holon_cli.runtime.workitems import require_work_item

        require_work_item(store, work_item_id)
    if idempotency_key is None:
        store.inbox.deliver(message_id, env)
    else:
        first = _deliver_once(store, idempotency_key, env)
        if first is not None:
            return first
    if ingest_now:
        from holon_cli.runtime.queue import try_ingest

        try_ingest(store)
    return env


def _checked_values(
    body: MessageBody,
    ids: dict[str, str | None],
    kind: str | None,
    origin: str | Origin | dict[str, object] | None,
    priority: str,
    delivery_surface: str,
    admission_context: str,
    metadata: Mapping[str, object] | None,
    idempotency_key: str | None,
) -> dict[str, object] | None:
    """Check every caller value and the admission policy (raises
    :class:`UsageError`); the metadata to store (with the idempotency key)."""
    strings = {"kind": kind, "origin": origin if isinstance(origin, str) else None}
    for what, value in {**ids, **strings, "priority": priority}.items():
        if value is not None:
            check_utf8(value, what)
    if idempotency_key is not None:
        from holon_cli.runtime.idempotency import check_key

        check_key(check_utf8(idempotency_key, "--idempotency-key"))
        metadata = {**(metadata or {}), "idempotency_key": idempotency_key}
    if kind is not None:
        check_kind(kind)
    check_priority(priority)
    if isinstance(origin, str):
        parse_origin(origin)
    build_envelope(
        message_id="msg_check",
        agent_id="check",
        created_at="",
        body=body,
        kind=kind,
        origin=origin,
        priority=priority,
        delivery_surface=delivery_surface,
        admission_context=admission_context,
    )
    return metadata if metadata is None or isinstance(metadata, dict) else dict(metadata)


def _deliver_once(store: AgentStore, key: str, env: Envelope) -> Envelope | None:
    """Deliver ``env`` unless ``key`` was admitted in the last 24 h; then
    return that first envelope (marked ``duplicate``) instead."""
    from holon_cli.runtime import idempotency as idem

    with idem.keyed(store):
        first = idem.lookup(store, key)
        if first is not None:
            dup: Envelope = {**first, "duplicate": True}
            return dup
        idem.record(store, key, env["id"])  # before the delivery: see the module's protocol
        store.inbox.deliver(env["id"], env)
    return None
