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

from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

from holon_cli.model.value import Value

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject

# ----------------------------------------------------------------- requests


class ToolSpec(Value):
    """A tool as offered to the model. ``input_schema`` is JSON Schema (object)."""

    def __init__(self, name: str, description: str, input_schema: JsonObject) -> None:
        self.name = name
        self.description = description
        self.input_schema = input_schema


class ToolCall(Value):
    """A tool call requested by the model. ``arguments`` is the parsed JSON object;
    ``raw_arguments`` keeps the exact text when the provider sent a string (or
    when it was not valid JSON, in which case ``arguments`` is ``{}`` and
    ``arguments_error`` says why)."""

    def __init__(
        self,
        id: str,
        name: str,
        arguments: JsonObject,
        raw_arguments: str | None = None,
        arguments_error: str | None = None,
    ) -> None:
        self.id = id
        self.name = name
        self.arguments = arguments
        self.raw_arguments = raw_arguments
        self.arguments_error = arguments_error

    def to_dict(self) -> ToolCallDict:
        d: ToolCallDict = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.arguments_error:
            d["arguments_error"] = self.arguments_error
            d["raw_arguments"] = self.raw_arguments
        return d


class ConversationItem(Value):
    """One provider-neutral conversation entry.

    - ``role="user"``: ``text`` (an admitted message rendered with its provenance)
    - ``role="assistant"``: ``text`` and ``tool_calls``
    - ``role="tool"``: ``call_id``, ``name``, ``text`` (the tool result string), ``is_error``
    """

    def __init__(
        self,
        role: str,
        text: str = "",
        tool_calls: list[ToolCall] | None = None,
        call_id: str | None = None,
        name: str | None = None,
        is_error: bool = False,
    ) -> None:
        self.role = role
        self.text = text
        self.tool_calls: list[ToolCall] = [] if tool_calls is None else tool_calls
        self.call_id = call_id
        self.name = name
        self.is_error = is_error

    def with_text(self, text: str) -> ConversationItem:
        """The same entry with ``text`` instead (a copy; the tool calls list is shared)."""
        return ConversationItem(
            self.role, text, self.tool_calls, self.call_id, self.name, self.is_error
        )


class ToolCallDict(TypedDict):
    """A tool call as records keep it (``ToolCall.to_dict``; the journal and
    the history always add ``raw_arguments``)."""

    id: str
    name: str
    arguments: JsonObject
    arguments_error: NotRequired[str | None]
    raw_arguments: NotRequired[str | None]


class ConversationItemDict(TypedDict):
    """A conversation item as the turn journal and the prompt history store it."""

    role: str
    text: NotRequired[str]
    tool_calls: NotRequired[list[ToolCallDict]]
    call_id: NotRequired[str | None]
    name: NotRequired[str | None]
    is_error: NotRequired[bool]


def item_to_dict(it: ConversationItem) -> ConversationItemDict:
    """A conversation item as the turn journal and the prompt history store it."""
    return {
        "role": it.role,
        "text": it.text,
        "tool_calls": [c.to_dict() | {"raw_arguments": c.raw_arguments} for c in it.tool_calls],
        "call_id": it.call_id,
        "name": it.name,
        "is_error": it.is_error,
    }


def item_from_dict(d: ConversationItemDict) -> ConversationItem:
    calls = [
        ToolCall(
            c["id"],
            c["name"],
            c.get("arguments") or {},
            c.get("raw_arguments"),
            c.get("arguments_error"),
        )
        for c in d.get("tool_calls", [])
    ]
    return ConversationItem(
        d["role"],
        d.get("text", ""),
        calls,
        d.get("call_id"),
        d.get("name"),
        bool(d.get("is_error")),
    )


# What a transport can do with a prompt (runtime spec: Provider Prompt Frame,
# ``ProviderPromptCapability``). A transport declares a set of them.
PromptCapability = Literal[
    "full_request_only",
    "prompt_cache_key",
    "prompt_cache_blocks",
    "incremental_responses",
    "context_management",
]
# Where a frame asks for a prompt-cache breakpoint: the end of the tool
# catalog, of the instructions, and of the last stable item (the history, or
# the stable context blocks when there is no history yet). Transports that
# cache by blocks (Anthropic) lower these; the others ignore them.
CacheAnchor = Literal["tools", "system", "history"]
CACHE_ANCHORS: tuple[CacheAnchor, ...] = ("tools", "system", "history")


class PromptCache(Value):
    """The spec's ProviderPromptCache: the frame's cache record.

    ``working_memory_revision`` is the revision of the working memory the
    stable prefix carries (the conversation window's snapshot), and
    ``compression_epoch`` counts the compactions that changed the prefix
    (the agent's history epochs plus this turn's own compactions): a
    request of another epoch never continues one of an older epoch."""

    def __init__(
        self,
        agent_id: str,
        prompt_cache_key: str,
        context_fingerprint: str,
        working_memory_revision: int = 0,
        compression_epoch: int = 0,
    ) -> None:
        self.agent_id = agent_id
        self.prompt_cache_key = prompt_cache_key
        self.context_fingerprint = context_fingerprint
        self.working_memory_revision = working_memory_revision
        self.compression_epoch = compression_epoch

    def to_dict(self) -> PromptCacheDict:
        return {
            "agent_id": self.agent_id,
            "prompt_cache_key": self.prompt_cache_key,
            "context_fingerprint": self.context_fingerprint,
            "working_memory_revision": self.working_memory_revision,
            "compression_epoch": self.compression_epoch,
        }


class PromptCacheDict(TypedDict):
    agent_id: str
    prompt_cache_key: str
    context_fingerprint: str
    working_memory_revision: int
    compression_epoch: int


class PromptFrame(Value):
    """The spec's ProviderPromptFrame: semantic, replayable, transport-neutral.

    Prompt order (what a provider caches as a prefix comes first): the tool
    catalog, ``system_prompt`` and ``system_blocks`` (the instructions), the
    first ``stable_blocks`` of ``context_blocks`` (stable across turns:
    trigger, the conversation window's working memory and earlier
    conversation), then the request's ``history`` (earlier turns, in append
    order), then the remaining context blocks (this turn's: turn mode,
    memory delta, work queue, active skills), then the current message and
    this turn's rounds. ``cache_breakpoints`` names where a block-caching
    transport puts its markers (:data:`CACHE_ANCHORS`); ``cache`` is the
    cache record."""

    def __init__(
        self,
        system_prompt: str,
        system_blocks: list[str] | None = None,
        context_blocks: list[str] | None = None,
        prompt_cache_key: str | None = None,
        context_fingerprint: str | None = None,
        *,
        stable_blocks: int = 0,
        cache: PromptCache | None = None,
        cache_breakpoints: tuple[CacheAnchor, ...] = CACHE_ANCHORS,
    ) -> None:
        self.system_prompt = system_prompt
        self.system_blocks: list[str] = [] if system_blocks is None else system_blocks
        self.context_blocks: list[str] = [] if context_blocks is None else context_blocks
        self.prompt_cache_key = prompt_cache_key
        self.context_fingerprint = context_fingerprint
        self.stable_blocks = stable_blocks
        self.cache = cache
        self.cache_breakpoints = cache_breakpoints

    @property
    def stable_context(self) -> list[str]:
        """The context blocks lowered before the history."""
        return self.context_blocks[: self.stable_blocks]

    @property
    def turn_context(self) -> list[str]:
        """The context blocks lowered after the history, before the message."""
        return self.context_blocks[self.stable_blocks :]


# --------------------------------------------------------------- responses


class TokenUsage(Value):
    """A provider's reported usage. ``input_tokens`` counts every input token,
    cached ones included; ``cache_read_input_tokens`` (served from the
    provider's prompt cache) and ``cache_creation_input_tokens`` (written to
    it) are parts of it, 0 when the provider reports none. ``to_dict`` names
    the cache counts only when there are some, so records without a cache
    keep their shape."""

    def __init__(
        self,
        input_tokens: int = 0,
        output_tokens: int = 0,
        total_tokens: int = 0,
        cache_read_input_tokens: int = 0,
        cache_creation_input_tokens: int = 0,
    ) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.total_tokens = total_tokens
        self.cache_read_input_tokens = cache_read_input_tokens
        self.cache_creation_input_tokens = cache_creation_input_tokens

    def to_dict(self) -> dict[str, int]:
        out = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cache_read_input_tokens:
            out["cache_read_input_tokens"] = self.cache_read_input_tokens
        if self.cache_creation_input_tokens:
            out["cache_creation_input_tokens"] = self.cache_creation_input_tokens
        return out

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
        )


# normalized stop reasons
STOP_END_TURN = "end_turn"
STOP_TOOL_USE = "tool_use"
STOP_MAX_TOKENS = "max_tokens"
STOP_STOP_SEQUENCE = "stop_sequence"
STOP_CONTENT_FILTER = "content_filter"


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class CallBlock(TypedDict):
    type: Literal["tool_call"]
    call: ToolCall


# one block of the runtime block model (``ModelResponse.blocks``)
ResponseBlock = TextBlock | CallBlock


class ModelResponse(Value):
    """The runtime block model. ``blocks`` keeps order: ``{"type": "text", "text"}``
    and ``{"type": "tool_call", "call": ToolCall}``.

    ``request_mode`` says how the request went out when a transport can send
    less than the whole conversation (``full`` | ``incremental``), and
    ``request_mode_reason`` why it was full; ``context_edits`` are the
    server-side context edits the provider applied to this request (Anthropic).
    """

    def __init__(
        self,
        blocks: list[ResponseBlock],
        stop_reason: str,
        usage: TokenUsage | None = None,
        raw_stop_reason: str | None = None,
        response_id: str | None = None,
        model: str | None = None,
        request_mode: str | None = None,
        request_mode_reason: str | None = None,
        context_edits: list[JsonObject] | None = None,
    ) -> None:
        self.blocks = blocks
        self.stop_reason = stop_reason
        self.usage = usage
        self.raw_stop_reason = raw_stop_reason
        self.response_id = response_id
        self.model = model
        self.request_mode = request_mode
        self.request_mode_reason = request_mode_reason
        self.context_edits = context_edits

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.blocks if b["type"] == "text")

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b["call"] for b in self.blocks if b["type"] == "tool_call"]
