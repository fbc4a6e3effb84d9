"""The provider contract: provider-neutral requests, the runtime block model
for responses, and the failure classes.

A transport performs exactly one HTTP attempt per ``complete`` call and
either returns a :class:`ModelResponse` or raises :class:`ProviderFailure`.
Retry, backoff and fallback live in ``providers.chain``, not in transports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

# ---------------------------------------------------------------- requests


@dataclass
class ToolSpec:
    """A tool as offered to the model. ``input_schema`` is JSON Schema (object)."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class ToolCall:
    """A tool call requested by the model. ``arguments`` is the parsed JSON object;
    ``raw_arguments`` keeps the exact text when the provider sent a string (or
    when it was not valid JSON, in which case ``arguments`` is ``{}`` and
    ``arguments_error`` says why)."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None
    arguments_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.arguments_error:
            d["arguments_error"] = self.arguments_error
            d["raw_arguments"] = self.raw_arguments
        return d


@dataclass
class ConversationItem:
    """One provider-neutral conversation entry.

    - ``role="user"``: ``text`` (an admitted message rendered with its provenance)
    - ``role="assistant"``: ``text`` and ``tool_calls``
    - ``role="tool"``: ``call_id``, ``name``, ``text`` (the tool result string), ``is_error``
    """

    role: str
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None
    is_error: bool = False


@dataclass
class PromptFrame:
    """The spec's ProviderPromptFrame: semantic, replayable, transport-neutral."""

    system_prompt: str
    system_blocks: list[str] = field(default_factory=list)
    context_blocks: list[str] = field(default_factory=list)
    prompt_cache_key: str | None = None
    context_fingerprint: str | None = None


@dataclass
class ProviderRequest:
    frame: PromptFrame
    conversation: list[ConversationItem]
    tools: list[ToolSpec]
    max_output_tokens: int | None = None
    # where a provider may keep per-agent state (the scripted provider's cursor)
    state_dir: Path | None = None
    agent_id: str | None = None


# --------------------------------------------------------------- responses


@dataclass
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
        )


# normalized stop reasons
STOP_END_TURN = "end_turn"
STOP_TOOL_USE = "tool_use"
STOP_MAX_TOKENS = "max_tokens"
STOP_STOP_SEQUENCE = "stop_sequence"
STOP_CONTENT_FILTER = "content_filter"


@dataclass
class ModelResponse:
    """The runtime block model. ``blocks`` keeps order: ``{"type": "text", "text"}``
    and ``{"type": "tool_call", "call": ToolCall}``."""

    blocks: list[dict[str, Any]]
    stop_reason: str
    usage: TokenUsage | None = None
    raw_stop_reason: str | None = None
    response_id: str | None = None
    model: str | None = None

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.blocks if b["type"] == "text")

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b["call"] for b in self.blocks if b["type"] == "tool_call"]


# ---------------------------------------------------------------- failures

# failure kinds and whether the chain retries them on the same provider
RETRYABLE_KINDS = {"timeout", "connection", "rate_limited", "server_error", "stream_interrupted"}
FAIL_FAST_KINDS = {
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
}


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

    def diagnostics(self) -> dict[str, Any]:
        d: dict[str, Any] = {"stage": self.stage}
        for k in ("provider", "model_ref", "url", "status"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.source_chain:
            d["source_chain"] = self.source_chain
        return d


class Transport(Protocol):
    """One provider transport bound to a model. ``complete`` = one attempt."""

    provider: str
    model_ref: str

    def complete(self, request: ProviderRequest) -> ModelResponse: ...
