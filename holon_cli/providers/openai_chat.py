"""OpenAI Chat Completions transport, for config-declared compatible providers
(``transport: openai_chat_completions``): ``POST {base_url}/chat/completions``.

Owns the Chat Completions lowering (options, then ``tools``, then
``messages``: one ``system`` message from the frame, the stable context
blocks as a user message, the history, this turn's context blocks as a user
message, then this turn's conversation; assistant ``tool_calls``, ``tool``
messages with ``tool_call_id``) and two parsers: the JSON completion and the
``data: ... [DONE]`` chunk stream. Both are deliberately liberal because
compatible servers vary: tool-call ids of any shape or none at all (stable
ids are synthesized), arguments sent as an object instead of a string, a
duplicated legacy ``function_call`` field, content as a list of parts,
tool-call deltas keyed by index with repeated ids, a missing ``[DONE]`` after
a final ``finish_reason``. A stream cut before its finish is
``stream_interrupted``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Required, TypedDict

from holon_cli.model.provider import (
    STOP_CONTENT_FILTER,
    STOP_END_TURN,
    STOP_MAX_TOKENS,
    STOP_TOOL_USE,
    ConversationItem,
    ModelResponse,
    ToolCall,
)
from holon_cli.providers.base import ProviderFailure, ProviderRequest
from holon_cli.providers.http_common import (
    HttpTransport,
    post_json,
    post_stream,
)
from holon_cli.providers.sse import JsonEventStream, SSEEvent
from holon_cli.providers.wire import (
    PROMPT_SUPPORT,
    arguments_json,
    cached_of,
    call_block,
    dedupe_call_ids,
    error_fields,
    is_context_overflow,
    make_tool_call,
    merge_text,
    retry_hint_from_message,
    stable_text,
    synth_call_id,
    system_text,
    text_block,
    tool_schema,
    turn_text,
    usage_from,
)

if TYPE_CHECKING:
    from holon_cli.model.provider import ResponseBlock, TokenUsage
    from holon_cli.model.typed_base import JsonObject

_FINISH = {
    "stop": STOP_END_TURN,
    "end_turn": STOP_END_TURN,
    "eos": STOP_END_TURN,
    "length": STOP_MAX_TOKENS,
    "max_tokens": STOP_MAX_TOKENS,
    "tool_calls": STOP_TOOL_USE,
    "function_call": STOP_TOOL_USE,
    "content_filter": STOP_CONTENT_FILTER,
}

# ------------------------------------------------------------------ lowering


class Function(TypedDict):
    name: str
    arguments: str


class CallOut(TypedDict):
    """A tool call echoed back in an assistant message."""

    id: str
    type: str
    function: Function


class Message(TypedDict, total=False):
    role: Required[str]
    content: str
    tool_calls: list[CallOut]
    tool_call_id: str


class FunctionSpec(TypedDict):
    name: str
    description: str
    parameters: JsonObject


class ToolOut(TypedDict):
    type: str
    function: FunctionSpec


class Body(TypedDict, total=False):
    """A Chat Completions request body, in the order it is sent."""

    model: Required[str]
    max_tokens: int
    stream: bool
    stream_options: dict[str, bool]
    tool_choice: str
    tools: list[ToolOut]
    messages: list[Message]


def lower_messages(request: ProviderRequest) -> list[Message]:
    """The messages in prompt order: the system message, the frame's stable
    context, the history (earlier turns as they were sent), this turn's
    context, this turn's conversation."""
    msgs: list[Message] = []
    system = system_text(request.frame)
    if system:
        msgs.append({"role": "system", "content": system})
    stable = stable_text(request.frame)
    if stable:
        msgs.append({"role": "user", "content": stable})
    msgs.extend(lower_item(item) for item in request.history)
    turn = turn_text(request.frame)
    if turn:
        msgs.append({"role": "user", "content": turn})
    msgs.extend(lower_item(item) for item in request.conversation)
    return msgs


def lower_item(item: ConversationItem) -> Message:
    """One conversation entry as a Chat Completions message."""
    if item.role == "user":
        return {"role": "user", "content": item.text}
    if item.role == "assistant":
        # ``content`` is always a string, "" when the model only called
        # tools: OpenAI accepts "" (and null, or no key), but llama.cpp's
        # Python server and LM Studio reject null, Ollama answers
        # "invalid message content type: <nil>" for null or a missing key,
        # and some vLLM/SGLang front ends need the key present.
        msg: Message = {"role": "assistant", "content": item.text or ""}
        if item.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": arguments_json(c)},
                }
                for c in item.tool_calls
            ]
        return msg
    if item.role == "tool":
        return {"role": "tool", "tool_call_id": item.call_id or "", "content": item.text}
    raise ValueError(f"unknown conversation role {item.role!r}")


def build_body(
    request: ProviderRequest,
    model: str,
    *,
    stream: bool = False,
    max_output_tokens: int | None = None,
) -> Body:
    """The request body: options first, then ``tools`` and ``messages`` (the
    bytes sent are in the order a server can reuse them as a prefix)."""
    body: Body = {"model": model}
    limit = request.max_output_tokens or max_output_tokens
    if limit:
        body["max_tokens"] = limit
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tool_choice"] = "auto"
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": tool_schema(t),
                },
            }
            for t in request.tools
        ]
    body["messages"] = lower_messages(request)
    return body


# ------------------------------------------------------------------- parsing


def _error_in_body(obj: Mapping[str, object]) -> ProviderFailure:
    """Some compatible servers answer 200 with ``{"error": ...}``."""
    code, _type, msg = error_fields(obj)
    message = f"provider error in a 200 response: {msg or 'no message'}" + (
        f" [{code}]" if code else ""
    )
    if code == "rate_limit_exceeded":
        return ProviderFailure(
            "rate_limited", message, stage="body", retry_after_s=retry_hint_from_message(msg)
        )
    if code == "insufficient_quota":
        return ProviderFailure("quota_exceeded", message, stage="body")
    if is_context_overflow(code, msg):
        return ProviderFailure("context_length_exceeded", message, stage="body")
    return ProviderFailure("provider_error", message, stage="body")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
        return "".join(out)
    return ""


def _stop(finish: Any, has_calls: bool) -> str:
    stop = _FINISH.get(str(finish), STOP_END_TURN) if finish else STOP_END_TURN
    if has_calls and stop == STOP_END_TURN:
        # several servers report "stop" even when they return tool calls
        return STOP_TOOL_USE
    return stop


def _usage(obj: Mapping[str, object]) -> TokenUsage | None:
    u = obj.get("usage")
    if not isinstance(u, dict):
        return None
    return usage_from(
        u.get("prompt_tokens", u.get("input_tokens")),
        u.get("completion_tokens", u.get("output_tokens")),
        u.get("total_tokens"),
        cached_of(u.get("prompt_tokens_details")),
    )


def _calls_from_message(message: Mapping[str, object], seed: str) -> list[ToolCall]:
    calls: list[ToolCall] = []
    raw_calls = message.get("tool_calls")
    if isinstance(raw_calls, list):
        for i, tc in enumerate(raw_calls):
            if not isinstance(tc, dict):
                continue
            fn: Mapping[str, object] = (
                tc["function"] if isinstance(tc.get("function"), dict) else tc
            )
            name = fn.get("name")
            if not isinstance(name, str) or not name:
                raise ProviderFailure(
                    "invalid_response", f"tool_calls[{i}] has no function name", stage="body"
                )
            args = fn.get("arguments", fn.get("parameters"))
            raw_id = tc.get("id")
            call_id = str(raw_id) if raw_id not in (None, "") else synth_call_id(seed, i, name)
            calls.append(make_tool_call(call_id, name, args))
    legacy = message.get("function_call")
    if isinstance(legacy, dict) and isinstance(legacy.get("name"), str):
        call = make_tool_call(
            synth_call_id(seed, len(calls), legacy["name"]), legacy["name"], legacy.get("arguments")
        )
        duplicate = any(c.name == call.name and c.arguments == call.arguments for c in calls)
        if not duplicate:
            calls.append(call)
    dedupe_call_ids(calls)
    return calls


def parse_completion(obj: Any) -> ModelResponse:
    if not isinstance(obj, dict):
        raise ProviderFailure(
            "invalid_response",
            f"expected a chat.completion object, got {type(obj).__name__}",
            stage="body",
        )
    if "choices" not in obj and obj.get("error"):
        raise _error_in_body(obj)
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        keys = ", ".join(sorted(obj)[:8])
        raise ProviderFailure(
            "invalid_response",
            f"body is not a chat.completion (no 'choices'; keys: {keys})",
            stage="body",
        )
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        message = {"content": choice.get("text")} if isinstance(choice.get("text"), str) else None
    if message is None:
        raise ProviderFailure("invalid_response", "choices[0] has no 'message'", stage="body")
    seed = str(obj.get("id") or "")
    blocks: list[ResponseBlock] = []
    text = _content_text(message.get("content"))
    if text:
        blocks.append(text_block(text))
    elif isinstance(message.get("refusal"), str) and message["refusal"]:
        blocks.append(text_block(message["refusal"]))
    calls = _calls_from_message(message, seed)
    blocks.extend(call_block(c) for c in calls)
    finish = choice.get("finish_reason")
    return ModelResponse(
        blocks=merge_text(blocks),
        stop_reason=_stop(finish, bool(calls)),
        usage=_usage(obj),
        raw_stop_reason=str(finish) if finish is not None else None,
        response_id=obj.get("id") if isinstance(obj.get("id"), str) else None,
        model=obj.get("model") if isinstance(obj.get("model"), str) else None,
    )


class _StreamCall:
    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.args: list[str] = []
        self.args_obj: JsonObject | None = None


class _ChatStream:
    """What the chunks of one chat completion stream have said so far: text,
    tool calls in first-seen order (keyed by index, else id, else position;
    a continuation delta naming nothing extends the last call), finish
    reason, usage, response id and model."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[Any, _StreamCall] = {}
        self.order: list[Any] = []
        self.finish: Any = None
        self.usage: TokenUsage | None = None
        self.resp_id: str | None = None
        self.model: str | None = None
        self.last_key: Any = None

    def chunk(self, obj: Mapping[str, object]) -> None:
        if obj.get("error") and not obj.get("choices"):
            raise _error_in_body(obj)
        rid, model = obj.get("id"), obj.get("model")
        self.resp_id = self.resp_id or (rid if isinstance(rid, str) else None)
        self.model = self.model or (model if isinstance(model, str) else None)
        u = _usage(obj)
        if u is not None:
            self.usage = u
        choices = obj.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta, dict):
                self._delta(delta)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def _delta(self, delta: Mapping[str, object]) -> None:
        piece = _content_text(delta.get("content"))
        if piece:
            self.text.append(piece)
        tool_calls = delta.get("tool_calls")
        for pos, tc in enumerate(tool_calls if isinstance(tool_calls, list) else ()):
            if isinstance(tc, dict):
                self._tool_call(tc, pos)
        legacy = delta.get("function_call")
        if isinstance(legacy, dict) and not delta.get("tool_calls"):
            call = self._call(("legacy", 0))
            if isinstance(legacy.get("name"), str) and legacy["name"] != call.name:
                call.name += legacy["name"]
            if isinstance(legacy.get("arguments"), str):
                call.args.append(legacy["arguments"])

    def _tool_call(self, tc: Mapping[str, object], pos: int) -> None:
        f = tc.get("function")
        fn: Mapping[str, object] = f if isinstance(f, dict) else {}
        tc_id = tc.get("id") or None
        idx = tc.get("index")
        if isinstance(idx, int):
            key: Any = ("i", idx)
        elif tc_id is not None:
            key = ("id", tc_id)
        elif self.last_key is not None and not fn.get("name"):
            key = self.last_key  # a continuation delta that names nothing
        else:
            key = ("p", len(self.order) + pos)
        call = self._call(key)
        self.last_key = key
        if tc_id and not call.id:
            call.id = str(tc_id)
        name = fn.get("name")
        if isinstance(name, str) and name and name != call.name:
            call.name = call.name + name if call.name and not name.startswith(call.name) else name
        args = fn.get("arguments")
        if isinstance(args, str):
            call.args.append(args)
        elif isinstance(args, dict):
            call.args_obj = args

    def _call(self, key: Any) -> _StreamCall:
        call = self.calls.get(key)
        if call is None:
            call = self.calls[key] = _StreamCall()
            self.order.append(key)
        return call

    def tool_calls(self) -> list[ToolCall]:
        seed = self.resp_id or ""
        tool_calls: list[ToolCall] = []
        for i, key in enumerate(self.order):
            sc = self.calls[key]
            if not sc.name:
                raise ProviderFailure(
                    "invalid_response",
                    f"streamed tool call {i} has no function name",
                    stage="stream",
                )
            raw_args: Any = sc.args_obj if sc.args_obj is not None else "".join(sc.args)
            tool_calls.append(
                make_tool_call(sc.id or synth_call_id(seed, i, sc.name), sc.name, raw_args)
            )
        dedupe_call_ids(tool_calls)
        return tool_calls


def parse_chat_stream(events: Iterable[SSEEvent]) -> ModelResponse:
    acc = _ChatStream()
    stream = JsonEventStream(events, "chunk")
    for _ev, obj in stream:
        if isinstance(obj, dict):
            acc.chunk(obj)
    finish = acc.finish
    if not stream.done and finish is None:
        where = f"after {stream.count} chunks" if stream.count else "before any chunk"
        raise ProviderFailure(
            "stream_interrupted",
            f"chat completion stream ended {where} without a finish_reason or [DONE]",
            stage="stream",
        )
    tool_calls = acc.tool_calls()
    blocks: list[ResponseBlock] = []
    if acc.text:
        blocks.append(text_block("".join(acc.text)))
    blocks.extend(call_block(c) for c in tool_calls)
    stop = _stop(finish, bool(tool_calls))
    if stop == STOP_MAX_TOKENS:
        blocks = [b for b in blocks if not (b["type"] == "tool_call" and b["call"].arguments_error)]
    return ModelResponse(
        blocks=merge_text(blocks),
        stop_reason=stop,
        usage=acc.usage,
        raw_stop_reason=str(finish) if finish is not None else None,
        response_id=acc.resp_id,
        model=acc.model,
    )


# ----------------------------------------------------------------- transport


class OpenAIChatTransport(HttpTransport):
    """``POST {base_url}/chat/completions``; JSON by default, SSE when ``stream``."""

    endpoint = "chat/completions"
    prompt_capabilities = PROMPT_SUPPORT["openai_chat_completions"].capabilities

    def build_body(self, request: ProviderRequest) -> Body:
        return build_body(
            request, self.model, stream=self.stream, max_output_tokens=self.max_output_tokens
        )

    def complete(self, request: ProviderRequest) -> ModelResponse:
        body = self.build_body(request)
        if self.stream:
            return post_stream(self.target(), body, parse_chat_stream, parse_completion)
        return post_json(self.target(), body, parse_completion)
