"""The stable ``kind`` strings of the error tree, as ``Literal`` types.

``ErrorKind`` is every ``kind`` a :class:`holon_cli.errors.HolonError` can
carry (the ``--json`` error envelope), including the provider failure kinds a
turn can end with. They sit below :mod:`holon_cli.errors` and
:mod:`holon_cli.model.events` (which builds ``ToolErrorKind`` on them) so
neither imports the other; :mod:`holon_cli.errors` names them for the type
checker only, which keeps building these types off every command's start-up.
"""

from __future__ import annotations

from typing import Literal

# retried on the same provider (providers.base.RETRYABLE_KINDS)
RetryableFailureKind = Literal[
    "timeout",
    "connection",
    "rate_limited",
    "server_error",
    "stream_interrupted",
]
# fail fast: the chain moves to the next fallback (providers.base.FAIL_FAST_KINDS)
FailFastFailureKind = Literal[
    "auth",
    "client_error",
    "invalid_response",
    "context_length_exceeded",
    "unsupported_transport",
    "missing_credentials",
    "quota_exceeded",
    "script_exhausted",
    "incomplete",
    "provider_error",
    "script_error",
]
ProviderFailureKind = Literal[RetryableFailureKind, FailFastFailureKind]

ErrorKind = (
    Literal[
        # one per HolonError class
        "runtime_error",
        "usage_error",
        "not_found",
        "rejected",
        "provider_failure",
        "busy",
        "corrupt_state",
        "config_error",
        "interrupted",
        # refinements raised with an explicit kind
        "internal_error",
        "agent_stopped",
        "agent_paused",
        "invalid_arguments",
        "io_error",
        "editor_failed",
        "work_item_not_found",
        "work_item_not_owned",
        "work_item_completed",
        "input_refused",
        # admission and queue (store)
        "invalid_utf8",
        "kind_origin_mismatch",
        "origin_not_admissible",
        "message_not_found",
        "not_requeueable",
        # waiting plane (callback ingress; HTTP status in waiting.triggers)
        "invalid_callback_token",
        "payload_too_large",
        "invalid_json",
        "invalid_body",
        "illegal_transition",
        # agent control (holon agent abort --run-id)
        "stale_run_id",
        # the child boundary (a supervised private child takes no ingress)
        "private_agent",
        # liveness audit and one-shot answers
        "audit_findings",
        "wait_timeout",
        # a turn refused before its dequeue: a budget holds the agent
        "budget_exhausted",
        # serve --engine dbos: the database cannot be reached at start
        "database_unavailable",
        # holon debug providers: no candidate of the chain can be served
        "no_servable_model",
        "message_aborted",
        "idempotency_conflict",
        # the operator console (holon tui)
        "serve_unavailable",
        "missing_extra",
        # bounded storage and sandboxed commands (runtime/tasks/sandbox.py, store/retention.py)
        "sandbox_unavailable",
        "disk_full",
        # the holon home as a workspace or execution root (runtime/workspace/guard.py)
        "forbidden_workspace",
        # the MCP client (runtime/mcp/): a server that cannot be reached or did
        # not answer in time, an operator request already answered
        "mcp_unavailable",
        "mcp_timeout",
        "mcp_error",
        "mcp_request_closed",
        # turn records, replay and fork (runtime/replay)
        "turn_not_found",
        "record_dropped",
        "record_damaged",
    ]
    | ProviderFailureKind
)
