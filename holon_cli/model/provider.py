"""Provider-neutral values that cross the provider boundary: what the runtime
offers a model (``ToolSpec``), the conversation it replays
(``ConversationItem``, ``ToolCall``), the prompt frame (``PromptFrame``), and
what comes back in the runtime block model (``ModelResponse``, ``TokenUsage``,
the normalized stop reasons).

Pure values: no I/O, no provider knowledge. ``providers/`` lowers them to each
wire API and parses answers back into them; ``runtime/`` and ``tools/`` build
and read them without importing any transport.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# ----------------------------------------------------------------- requests


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
    # how the request went out when a transport can send less than the whole
    # conversation (``full`` | ``incremental``), and why it was full
    request_mode: str | None = None
    request_mode_reason: str | None = None
    # server-side context edits the provider applied to this request (Anthropic)
    context_edits: list[dict[str, Any]] | None = None

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.blocks if b["type"] == "text")

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b["call"] for b in self.blocks if b["type"] == "tool_call"]
