"""The provider contract: the request a transport receives, the failure
classes, and the ``Transport`` protocol. The provider-neutral values (tool
specs, conversation, prompt frame, the response block model) are in
``holon_cli.model.provider`` and re-exported here.

A transport performs exactly one HTTP attempt per ``complete`` call and
either returns a :class:`ModelResponse` or raises :class:`ProviderFailure`.
Retry, backoff and fallback live in ``providers.chain``, not in transports.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, get_args

# The neutral values live in ``model/``; re-exported here for code that still
# imports them from their old place.
from holon_cli.kinds import FailFastFailureKind, RetryableFailureKind
from holon_cli.model.provider import (
    STOP_CONTENT_FILTER,
    STOP_END_TURN,
    STOP_MAX_TOKENS,
    STOP_STOP_SEQUENCE,
    STOP_TOOL_USE,
    ConversationItem,
    ModelResponse,
    PromptCache,
    PromptCapability,
    PromptFrame,
    TokenUsage,
    ToolCall,
    ToolSpec,
)
from holon_cli.model.value import Value

if TYPE_CHECKING:
    from holon_cli.model.failure import TransportDiagnostics

__all__ = [
    "CONTEXT_OVERFLOW_HINT",
    "DEFAULT_TIMEOUT_S",
    "FAIL_FAST_KINDS",
    "RETRYABLE_KINDS",
    "STOP_CONTENT_FILTER",
    "STOP_END_TURN",
    "STOP_MAX_TOKENS",
    "STOP_STOP_SEQUENCE",
    "STOP_TOOL_USE",
    "ConversationItem",
    "ModelResponse",
    "PromptCache",
    "PromptCapability",
    "PromptFrame",
    "ProviderFailure",
    "ProviderRequest",
    "TokenUsage",
    "ToolCall",
    "ToolSpec",
    "Transport",
]

# seconds a transport waits for an answer unless config says otherwise
DEFAULT_TIMEOUT_S = 120.0

# ------------------------------------------------------------------ request


class ProviderRequest(Value):
    """One provider round's request. ``history`` is the agent's earlier turns
    (append order, as they were sent: lowered after the frame's stable
    context blocks and before its turn blocks); ``conversation`` is this
    turn's (the current message first). ``state_dir`` is where a provider may
    keep per-agent state (the scripted provider's cursor); ``turn_id`` the
    turn this round belongs to."""

    def __init__(
        self,
        frame: PromptFrame,
        conversation: list[ConversationItem],
        tools: list[ToolSpec],
        max_output_tokens: int | None = None,
        state_dir: Path | None = None,
        agent_id: str | None = None,
        turn_id: str | None = None,
        history: list[ConversationItem] | None = None,
    ) -> None:
        self.frame = frame
        self.conversation = conversation
        self.tools = tools
        self.max_output_tokens = max_output_tokens
        self.state_dir = state_dir
        self.agent_id = agent_id
        self.turn_id = turn_id
        self.history: list[ConversationItem] = [] if history is None else history


# ---------------------------------------------------------------- failures

CONTEXT_OVERFLOW_HINT = (
    "the conversation no longer fits the model's context window; "
    "start a fresh work item or use a model with a larger window"
)

# failure kinds and whether the chain retries them on the same provider
RETRYABLE_KINDS = set(get_args(RetryableFailureKind))
FAIL_FAST_KINDS = set(get_args(FailFastFailureKind))


class ProviderFailure(Exception):
    """One failed provider attempt.

    ``kind`` is one of ``RETRYABLE_KINDS`` or ``FAIL_FAST_KINDS``; ``stage`` is
    where it happened (``connect``, ``request``, ``status``, ``body``,
    ``decode``, ``stream``); ``retry_after_s`` comes from the server when given.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        stage: str = "request",
        provider: str | None = None,
        model_ref: str | None = None,
        url: str | None = None,
        usage: TokenUsage | None = None,
        source_chain: list[str] | None = None,
        body_preview: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after_s = retry_after_s
        self.stage = stage
        self.provider = provider
        self.model_ref = model_ref
        self.url = url
        self.usage = usage
        self.source_chain = source_chain or []
        self.body_preview = body_preview
        # what the operator can do about it (shown by the CLI next to the message)
        self.hint = hint

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS

    def diagnostics(self) -> TransportDiagnostics:
        d: TransportDiagnostics = {"stage": self.stage}
        if self.provider is not None:
            d["provider"] = self.provider
        if self.model_ref is not None:
            d["model_ref"] = self.model_ref
        if self.url is not None:
            d["url"] = self.url
        if self.status is not None:
            d["status"] = self.status
        if self.source_chain:
            d["source_chain"] = self.source_chain
        return d


class Transport(Protocol):
    """One provider transport bound to a model. ``complete`` = one attempt.
    ``prompt_capabilities``: what it can do with a prompt frame (runtime
    spec: ``ProviderPromptCapability``; the table is ``wire.PROMPT_SUPPORT``)."""

    provider: str
    model_ref: str
    prompt_capabilities: frozenset[PromptCapability]

    def complete(self, request: ProviderRequest) -> ModelResponse: ...
