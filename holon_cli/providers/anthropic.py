"""Anthropic Messages transport (``anthropic/<model>``, and config providers with
``transport: anthropic_messages``): ``POST {base}/v1/messages``.

Owns the Messages lowering: options first, then ``tools``, ``system`` (text
blocks) and ``messages`` (the API's cache order); the frame's stable context
blocks lead the first user message, then the history (earlier turns as they
were sent), this turn's context blocks, this turn's conversation; assistant
``tool_use`` blocks, tool results as ``tool_result`` blocks grouped into one
user message (``tool_use_id``, ``is_error``), consecutive same-role messages
merged, ``max_tokens`` always set. Prompt caching: at most four
``cache_control: ephemeral`` breakpoints (the API's limit), placed from the
frame (its ``cache_breakpoints``: the last tool, the last system block, the
last stable conversation block: the history's end), plus one rolling marker
on the newest conversation block. Opt-in context management
(``runtime.anthropic_context_management``) asks the API to clear old tool
results server-side (``clear_tool_uses_20250919`` under the
``context-management-2025-06-27`` beta); the edits it applied come back on
the response. Parses the JSON ``message`` and
the SSE feed (``message_start``, ``content_block_*`` with ``text_delta`` and
``input_json_delta``, ``message_delta``, ``ping``, mid-stream ``error``).

A ``tool_use`` block cut off by ``max_tokens`` (its input never finished) is
dropped: it cannot be executed safely, and the stop reason tells the runtime
why the turn ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Required, TypedDict

from holon_cli.model.provider import (
    STOP_CONTENT_FILTER,
    STOP_END_TURN,
    STOP_MAX_TOKENS,
    STOP_STOP_SEQUENCE,
    STOP_TOOL_USE,
    ConversationItem,
    ModelResponse,
    TokenUsage,
    ToolCall,
)
from holon_cli.providers.base import ProviderFailure, ProviderRequest
from holon_cli.providers.http_common import (
    HttpTransport,
    join_url,
    post_json,
    post_stream,
)
from holon_cli.providers.sse import JsonEventStream, SSEEvent
from holon_cli.providers.wire import (
    ANTHROPIC_CONTEXT_MANAGEMENT_BETA,
    PROMPT_SUPPORT,
    as_int,
    call_block,
    dedupe_call_ids,
    error_fields,
    is_context_overflow,
    make_tool_call,
    merge_text,
    stable_text,
    synth_call_id,
    text_block,
    tool_schema,
    turn_text,
)

if TYPE_CHECKING:
    from holon_cli.model.provider import ResponseBlock
    from holon_cli.model.typed_base import JsonObject

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192

_STOP = {
    "end_turn": STOP_END_TURN,
    "tool_use": STOP_TOOL_USE,
    "max_tokens": STOP_MAX_TOKENS,
    "stop_sequence": STOP_STOP_SEQUENCE,
    "pause_turn": STOP_END_TURN,
    "refusal": STOP_CONTENT_FILTER,
    "model_context_window_exceeded": STOP_MAX_TOKENS,
}
_EPHEMERAL = {"type": "ephemeral"}
MAX_CACHE_BREAKPOINTS = 4
CONTEXT_MANAGEMENT_BETA = ANTHROPIC_CONTEXT_MANAGEMENT_BETA
CONTEXT_EDITS = [{"type": "clear_tool_uses_20250919"}]


class Block(TypedDict, total=False):
    """A content block as sent (``text``, ``tool_use``, ``tool_result``)."""

    type: Required[str]
    text: str
    id: str
    name: str
    input: JsonObject
    tool_use_id: str
    content: str
    is_error: bool
    cache_control: dict[str, str]


class Message(TypedDict):
    role: str
    content: list[Block]


class Tool(TypedDict, total=False):
    name: Required[str]
    description: Required[str]
    input_schema: Required[JsonObject]
    cache_control: dict[str, str]


class Body(TypedDict, total=False):
    """A Messages API request body, in the order it is sent."""

    model: Required[str]
    max_tokens: Required[int]
    stream: bool
    context_management: dict[str, list[dict[str, str]]]
    tool_choice: dict[str, str]
    tools: list[Tool]
    system: list[Block]
    messages: list[Message]


# ------------------------------------------------------------------ lowering


def _mark(block: Block | Tool) -> None:
    block["cache_control"] = dict(_EPHEMERAL)


def lower_system(request: ProviderRequest) -> list[Block]:
    parts = [request.frame.system_prompt, *request.frame.system_blocks]
    blocks: list[Block] = [{"type": "text", "text": p} for p in parts if p and p.strip()]
    if blocks and "system" in request.frame.cache_breakpoints:
        _mark(blocks[-1])
    return blocks


def _item_content(item: ConversationItem) -> tuple[str, list[Block]]:
    """One conversation entry as (role, content blocks)."""
    if item.role == "user":
        return "user", [{"type": "text", "text": item.text}] if item.text.strip() else []
    if item.role == "assistant":
        content: list[Block] = []
        if item.text.strip():
            content.append({"type": "text", "text": item.text})
        for c in item.tool_calls:
            content.append(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments or {}}
            )
        return "assistant", content
    if item.role == "tool":
        block: Block = {"type": "tool_result", "tool_use_id": item.call_id or ""}
        if item.text:
            block["content"] = item.text
        if item.is_error:
            block["is_error"] = True
        return "user", [block]
    raise ValueError(f"unknown conversation role {item.role!r}")


def lower_messages(request: ProviderRequest) -> list[Message]:
    """The messages in prompt order: the frame's stable context, the history
    (earlier turns as they were sent), this turn's context, this turn's
    conversation; consecutive same-role messages merged. The frame's
    ``history`` anchor marks the last stable block (the history's end, else
    the stable context's); the rolling marker is :func:`add_rolling_marker`'s."""
    msgs: list[Message] = []

    def add(role: str, content: list[Block]) -> None:
        if not content:
            return
        if msgs and msgs[-1]["role"] == role:
            msgs[-1]["content"].extend(content)
        else:
            msgs.append({"role": role, "content": list(content)})

    frame = request.frame
    stable = stable_text(frame)
    if stable:
        add("user", [{"type": "text", "text": stable}])
    for item in request.history:
        add(*_item_content(item))
    if "history" in frame.cache_breakpoints and msgs:
        # the last stable item: a breakpoint here survives the whole turn and
        # is what the next turn's request starts with
        _mark(msgs[-1]["content"][-1])
    turn = turn_text(frame)
    if turn:
        add("user", [{"type": "text", "text": turn}])
    for item in request.conversation:
        add(*_item_content(item))
    for m in msgs:
        if m["role"] == "user":
            # tool results must lead the user message that answers the tool calls
            m["content"].sort(key=lambda b: 0 if b.get("type") == "tool_result" else 1)
    if msgs and msgs[0]["role"] != "user":
        msgs.insert(
            0, {"role": "user", "content": [{"type": "text", "text": "(conversation continues)"}]}
        )
    return msgs


def lower_tools(request: ProviderRequest) -> list[Tool]:
    tools: list[Tool] = [
        {"name": t.name, "description": t.description, "input_schema": tool_schema(t)}
        for t in request.tools
    ]
    if tools and "tools" in request.frame.cache_breakpoints:
        _mark(tools[-1])
    return tools


def cache_breakpoints(body: Body) -> list[str]:
    """Where a body's ``cache_control`` markers sit, in prompt order
    (``tools[i]``, ``system[i]``, ``messages[i].content[j]``)."""
    where = [f"tools[{i}]" for i, t in enumerate(body.get("tools") or []) if "cache_control" in t]
    where += [
        f"system[{i}]" for i, b in enumerate(body.get("system") or []) if "cache_control" in b
    ]
    for i, m in enumerate(body.get("messages") or []):
        content = m.get("content")
        if isinstance(content, list):
            where += [
                f"messages[{i}].content[{j}]"
                for j, b in enumerate(content)
                if isinstance(b, dict) and "cache_control" in b
            ]
    return where


def add_rolling_marker(body: Body) -> None:
    """One request-local marker on the newest conversation block (runtime
    spec: Provider Prompt Frame), while the frame's markers leave one of
    the API's :data:`MAX_CACHE_BREAKPOINTS`: the next round's request starts
    with everything up to it."""
    msgs = body.get("messages") or []
    if not msgs or not msgs[-1]["content"]:
        return
    newest = msgs[-1]["content"][-1]
    if "cache_control" in newest or len(cache_breakpoints(body)) >= MAX_CACHE_BREAKPOINTS:
        return
    marked = newest.copy()
    marked["cache_control"] = dict(_EPHEMERAL)
    msgs[-1]["content"][-1] = marked


def build_body(
    request: ProviderRequest,
    model: str,
    *,
    stream: bool = False,
    max_output_tokens: int | None = None,
    context_management: bool = False,
) -> Body:
    """The request body: options first, then ``tools``, ``system`` and
    ``messages`` (the order the API caches them: the bytes sent are in that
    order too). Cache markers sit where the frame's ``cache_breakpoints``
    say (its stable blocks), plus the rolling one."""
    body: Body = {
        "model": model,
        "max_tokens": request.max_output_tokens or max_output_tokens or DEFAULT_MAX_TOKENS,
    }
    if stream:
        body["stream"] = True
    if context_management:
        body["context_management"] = {"edits": [dict(e) for e in CONTEXT_EDITS]}
    if request.tools:
        body["tool_choice"] = {"type": "auto"}
        body["tools"] = lower_tools(request)
    system = lower_system(request)
    if system:
        body["system"] = system
    body["messages"] = lower_messages(request)
    add_rolling_marker(body)
    return body


def with_beta(current: str | None, beta: str) -> str:
    """``anthropic-beta`` with ``beta`` added once to what config already asks for."""
    names = [n.strip() for n in (current or "").split(",") if n.strip()]
    return ",".join(names if beta in names else [*names, beta])


# ------------------------------------------------------------------- parsing


def context_edits(obj: object) -> list[JsonObject] | None:
    """The context edits the API applied (``context_management.applied_edits``):
    type and the counts only, nothing of the cleared content."""
    cm = obj.get("context_management") if isinstance(obj, dict) else None
    edits = cm.get("applied_edits") if isinstance(cm, dict) else None
    if not isinstance(edits, list):
        return None
    keep = ("type", "cleared_tool_uses", "cleared_input_tokens", "cleared_thinking_turns")
    return [{k: e[k] for k in keep if k in e} for e in edits if isinstance(e, dict)]


def classify_error_object(body: Any, *, stage: str) -> ProviderFailure:
    """An Anthropic error object (a mid-stream ``error`` event, or a 200 ``type: error``)."""
    _code, type_, msg = error_fields(body)
    message = f"anthropic error: {msg or 'no message'}" + (f" [{type_}]" if type_ else "")
    if type_ in ("overloaded_error", "api_error"):
        return ProviderFailure("server_error", message, stage=stage)
    if type_ == "rate_limit_error":
        return ProviderFailure("rate_limited", message, stage=stage)
    if type_ in ("authentication_error", "permission_error"):
        return ProviderFailure("auth", message, stage=stage)
    if type_ == "billing_error":
        return ProviderFailure("quota_exceeded", message, stage=stage)
    if is_context_overflow(None, msg):
        return ProviderFailure("context_length_exceeded", message, stage=stage)
    if type_ in ("invalid_request_error", "not_found_error", "request_too_large"):
        return ProviderFailure("client_error", message, stage=stage)
    return ProviderFailure("provider_error", message, stage=stage)


def _usage(u: Mapping[str, object]) -> TokenUsage:
    created = as_int(u.get("cache_creation_input_tokens"))
    read = as_int(u.get("cache_read_input_tokens"))
    inp = as_int(u.get("input_tokens")) + created + read
    out = as_int(u.get("output_tokens"))
    return TokenUsage(
        inp, out, inp + out, cache_read_input_tokens=read, cache_creation_input_tokens=created
    )


def _stop(raw: Any, has_calls: bool) -> str:
    if raw is None:
        return STOP_TOOL_USE if has_calls else STOP_END_TURN
    return _STOP.get(str(raw), STOP_TOOL_USE if has_calls else STOP_END_TURN)


def parse_message(obj: Any) -> ModelResponse:
    if not isinstance(obj, dict):
        raise ProviderFailure(
            "invalid_response",
            f"expected a Messages object, got {type(obj).__name__}",
            stage="body",
        )
    if obj.get("type") == "error" or (obj.get("error") and "content" not in obj):
        raise classify_error_object(obj, stage="body")
    content = obj.get("content")
    if not isinstance(content, list):
        keys = ", ".join(sorted(obj)[:8])
        raise ProviderFailure(
            "invalid_response",
            f"body is not a Messages object (no 'content' list; keys: {keys})",
            stage="body",
        )
    seed = str(obj.get("id") or "")
    blocks: list[ResponseBlock] = []
    calls = []
    for i, b in enumerate(content):
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            blocks.append(text_block(b["text"]))
        elif b.get("type") == "tool_use":
            name = b.get("name")
            if not isinstance(name, str) or not name:
                raise ProviderFailure(
                    "invalid_response", f"tool_use block {i} has no name", stage="body"
                )
            call = make_tool_call(
                str(b.get("id") or synth_call_id(seed, i, name)), name, b.get("input")
            )
            calls.append(call)
            blocks.append(call_block(call))
        # thinking, redacted_thinking, server tool blocks: not replayed by the runtime
    dedupe_call_ids(calls)
    raw_stop = obj.get("stop_reason")
    stop = _stop(raw_stop, bool(calls))
    if stop == STOP_MAX_TOKENS:
        blocks = [b for b in blocks if not (b["type"] == "tool_call" and b["call"].arguments_error)]
    usage = _usage(obj["usage"]) if isinstance(obj.get("usage"), dict) else None
    return ModelResponse(
        blocks=merge_text(blocks),
        stop_reason=stop,
        usage=usage,
        raw_stop_reason=str(raw_stop) if raw_stop is not None else None,
        response_id=obj.get("id") if isinstance(obj.get("id"), str) else None,
        model=obj.get("model") if isinstance(obj.get("model"), str) else None,
        context_edits=context_edits(obj),
    )


def parse_message_stream(events: Iterable[SSEEvent]) -> ModelResponse:
    """A Messages API event stream folded into one :class:`ModelResponse`."""
    acc = _MessageStream()
    stream = JsonEventStream(events, "event")
    for ev, obj in stream:
        if not isinstance(obj, dict):
            continue
        typ = obj.get("type") if isinstance(obj.get("type"), str) else ev.event
        if acc.feed(typ, obj):
            break
    if not acc.stopped and not (acc.got_delta and acc.raw_stop is not None):
        where = f"after {stream.count} events" if stream.count else "before any event"
        raise ProviderFailure(
            "stream_interrupted",
            f"message stream ended {where} without message_stop",
            stage="stream",
        )
    return acc.response()


@dataclass
class _Slot:
    """One content block of a stream: its start, the text and JSON deltas."""

    start: JsonObject
    text: list[str]
    json: list[str] = field(default_factory=list)
    done: bool = False


class _MessageStream:
    """What a message stream has said so far: its content blocks by index,
    usage, ids, the stop reason and context edits."""

    def __init__(self) -> None:
        self.blocks: dict[object, _Slot] = {}
        self.usage: JsonObject = {}
        self.msg_id: str | None = None
        self.model: str | None = None
        self.raw_stop: object = None
        self.edits: list[JsonObject] | None = None
        self.got_delta = False
        self.stopped = False

    def feed(self, typ: object, obj: JsonObject) -> bool:
        """Fold one event in; True at ``message_stop``. Raises on an ``error`` event."""
        if typ == "message_start":
            m = obj.get("message") or {}
            if not isinstance(m, dict):
                return False
            mid, model = m.get("id"), m.get("model")
            self.msg_id = mid if isinstance(mid, str) else None
            self.model = model if isinstance(model, str) else None
            self._add_usage(m.get("usage"))
        elif typ == "content_block_start":
            idx = obj.get("index", len(self.blocks))
            cb = obj.get("content_block") or {}
            if isinstance(cb, dict):
                text = cb.get("text")
                first = text if isinstance(text, str) else ""
                self.blocks[idx] = _Slot(cb, [first] if cb.get("type") == "text" else [])
        elif typ == "content_block_delta":
            self._block_delta(obj)
        elif typ == "content_block_stop":
            idx = obj.get("index")
            slot = self.blocks.get(idx) if isinstance(idx, int) else None
            if slot is not None:
                slot.done = True
        elif typ == "message_delta":
            self.got_delta = True
            d = obj.get("delta") or {}
            if isinstance(d, dict) and d.get("stop_reason") is not None:
                self.raw_stop = d["stop_reason"]
            self._add_usage(obj.get("usage"))
            self.edits = context_edits(obj) or self.edits
        elif typ == "message_stop":
            self.stopped = True
            return True
        elif typ == "error":
            raise classify_error_object(obj, stage="stream")
        # ping and unknown events: nothing to keep
        return False

    def _add_usage(self, usage: object) -> None:
        if isinstance(usage, dict):
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    def _block_delta(self, obj: JsonObject) -> None:
        idx = obj.get("index")
        delta = obj.get("delta") or {}
        slot = self.blocks.get(idx) if idx is not None else None
        if slot is None or not isinstance(delta, dict):
            return
        text, partial = delta.get("text"), delta.get("partial_json")
        if delta.get("type") == "text_delta" and isinstance(text, str):
            slot.text.append(text)
        elif delta.get("type") == "input_json_delta" and isinstance(partial, str):
            slot.json.append(partial)

    def response(self) -> ModelResponse:
        """The blocks in index order; a tool call cut off by ``max_tokens`` is dropped."""
        out: list[ResponseBlock] = []
        calls: list[ToolCall] = []
        truncated = self.raw_stop == "max_tokens"
        for idx in sorted(self.blocks, key=lambda k: k if isinstance(k, int) else 1 << 30):
            slot = self.blocks[idx]
            start = slot.start
            if start.get("type") == "text":
                out.append(text_block("".join(slot.text)))
            elif start.get("type") == "tool_use":
                if truncated and not slot.done:
                    continue
                call = self._tool_call(idx, slot, len(calls))
                if truncated and call.arguments_error:
                    continue
                calls.append(call)
                out.append(call_block(call))
        dedupe_call_ids(calls)
        raw_stop = self.raw_stop
        return ModelResponse(
            blocks=merge_text(out),
            stop_reason=_stop(raw_stop, bool(calls)),
            usage=_usage(self.usage) if self.usage else None,
            raw_stop_reason=str(raw_stop) if raw_stop is not None else None,
            response_id=self.msg_id,
            model=self.model,
            context_edits=self.edits,
        )

    def _tool_call(self, idx: object, slot: _Slot, n_calls: int) -> ToolCall:
        start = slot.start
        name = start.get("name")
        if not isinstance(name, str) or not name:
            raise ProviderFailure(
                "invalid_response", f"tool_use block {idx} has no name", stage="stream"
            )
        partial = "".join(slot.json)
        raw: object = partial if partial.strip() else (start.get("input") or {})
        seed = self.msg_id or ""
        return make_tool_call(str(start.get("id") or synth_call_id(seed, n_calls, name)), name, raw)


# ----------------------------------------------------------------- transport


class AnthropicTransport(HttpTransport):
    """``POST {base_url}/v1/messages``; JSON by default, SSE when ``stream``."""

    prompt_capabilities = PROMPT_SUPPORT["anthropic_messages"].capabilities

    def __init__(
        self,
        *,
        model: str,
        provider: str = "anthropic",
        base_url: str = DEFAULT_ANTHROPIC_BASE_URL,
        context_management: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(model=model, provider=provider, base_url=base_url, **kwargs)
        self.extra_headers = {"anthropic-version": ANTHROPIC_VERSION, **self.extra_headers}
        self.context_management = context_management
        if context_management:
            self.extra_headers["anthropic-beta"] = with_beta(
                self.extra_headers.get("anthropic-beta"), CONTEXT_MANAGEMENT_BETA
            )

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return join_url(base, "messages") if base.endswith("/v1") else join_url(base, "v1/messages")

    def build_body(self, request: ProviderRequest) -> Body:
        return build_body(
            request,
            self.model,
            stream=self.stream,
            max_output_tokens=self.max_output_tokens,
            context_management=self.context_management,
        )

    def complete(self, request: ProviderRequest) -> ModelResponse:
        body = self.build_body(request)
        if self.stream:
            return post_stream(self.target(), body, parse_message_stream, parse_message)
        return post_json(self.target(), body, parse_message)
