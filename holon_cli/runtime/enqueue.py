"""Message admission: normalize an envelope and deliver it to the agent inbox.

Admission never takes a lock (Maildir delivery), so any number of concurrent
``holon enqueue`` processes proceed in parallel. When :func:`admit` returns,
the message is durable; ingestion into the queue ledger happens at the next
``tick``/``turn``/``serve`` pass.
"""

from __future__ import annotations

import json
from typing import Any

from holon_cli import clock
from holon_cli.errors import RejectedError, UsageError
from holon_cli.model.agent import lifecycle_hint
from holon_cli.model.envelope import build_envelope, check_kind, check_priority, parse_origin
from holon_cli.runtime.agents import open_agent
from holon_cli.store.agent_store import AgentStore

MAX_BODY_BYTES = 1_000_000


def make_body(text: str, *, json_body: bool = False) -> dict[str, Any]:
    if len(text.encode("utf-8")) > MAX_BODY_BYTES:
        raise UsageError(
            f"message body is larger than {MAX_BODY_BYTES} bytes",
            hint="put large content in a file and send its path",
        )
    if json_body:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"--json-body: the message is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                hint='pass a JSON document, e.g. \'{"event": "push"}\'',
            ) from None
        return {"type": "json", "value": value}
    if not text.strip():
        raise UsageError(
            "the message is empty", hint="pass the text as an argument or on stdin with `-`"
        )
    return {"type": "text", "text": text}


def check_accepting(store: AgentStore) -> dict[str, Any]:
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
    origin: str | dict[str, Any] | None = None,
    priority: str = "normal",
    work_item_id: str | None = None,
    task_id: str | None = None,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    delivery_surface: str = "cli_prompt",
    admission_context: str = "local_process",
    metadata: dict[str, Any] | None = None,
    source_refs: dict[str, str] | None = None,
    store: AgentStore | None = None,
) -> dict[str, Any]:
    """Validate, normalize and durably deliver one message. Returns the envelope."""
    body = make_body(text, json_body=json_body)
    # validate every caller value before anything is created on disk
    if kind is not None:
        check_kind(kind)
    check_priority(priority)
    if isinstance(origin, str):
        parse_origin(origin)
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
    )
    check_accepting(store)
    if work_item_id:
        from holon_cli.runtime.workitems import require_work_item

        require_work_item(store, work_item_id)
    store.inbox.deliver(message_id, env)
    return env
