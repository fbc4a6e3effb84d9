"""OpenAI Responses API transport (``openai/<model>``, and config providers with
``transport: openai_responses``): non-streaming ``POST {base}/responses``.

Owns the Responses wire lowering of a :class:`ProviderRequest` (also used by
the codex streaming transport), the parsing of a Responses object into the
runtime block model, and the parser of the Responses event stream (SSE).
Lowering: the body's options first, then ``tools``, ``instructions`` (the
frame's system prompt and system blocks) and ``input`` (the bytes sent are in
the order the API caches them); ``input`` is the frame's stable context
blocks as one user message, the history (earlier turns, as they were sent),
this turn's context blocks as one user message, then this turn's
conversation. User turns are ``input_text`` messages; assistant text is an
output ``message`` item; tool calls are ``function_call`` items (arguments as
a JSON string); tool results are ``function_call_output`` items correlated by
``call_id``. ``prompt_cache_key`` is the frame's.
Requests are sent with ``store: false``: the runtime always sends the full
replayable conversation, unless incremental requests are on
(``runtime.openai_incremental``), which store responses and continue them
(across turns too, within one process).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from holon_cli.model.provider import (
    STOP_CONTENT_FILTER,
    STOP_END_TURN,
    STOP_MAX_TOKENS,
    STOP_TOOL_USE,
    ConversationItem,
    ModelResponse,
)
from holon_cli.providers.base import CONTEXT_OVERFLOW_HINT, ProviderFailure, ProviderRequest
from holon_cli.providers.http_common import (
    HttpTransport,
    post_json,
    post_stream,
)
from holon_cli.providers.responses_body import Body, InputItem, ToolOut
from holon_cli.providers.sse import JsonEventStream, SSEEvent
from holon_cli.providers.wire import (
    PROMPT_SUPPORT,
    arguments_json,
    cached_of,
    call_block,
    dedupe_call_ids,
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
    from holon_cli.model.provider import ResponseBlock
    from holon_cli.model.typed_base import JsonObject

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"

# ------------------------------------------------------------------ lowering


def _user(text: str) -> InputItem:
    return {"role": "user", "content": [{"type": "input_text", "text": text}]}


def lower_input(request: ProviderRequest) -> list[InputItem]:
    """The ``input`` items in prompt order: the frame's stable context, the
    history (earlier turns as they were sent), this turn's context, then this
    turn's conversation. A turn's context and a history turn's context item
    lower alike, so the next turn's input starts with this turn's."""
    items: list[InputItem] = []
    stable = stable_text(request.frame)
    if stable:
        items.append(_user(stable))
    for item in request.history:
        items.extend(lower_item(item))
    turn = turn_text(request.frame)
    if turn:
        items.append(_user(turn))
    for item in request.conversation:
        items.extend(lower_item(item))
    return items


def lower_item(item: ConversationItem) -> list[InputItem]:
    """One conversation entry as Responses input items."""
    if item.role == "user":
        return [_user(item.text)]
    if item.role == "assistant":
        items: list[InputItem] = []
        if item.text:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": item.text, "annotations": []}],
                }
            )
        for call in item.tool_calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": arguments_json(call),
                }
            )
        return items
    if item.role == "tool":
        return [
            {"type": "function_call_output", "call_id": item.call_id or "", "output": item.text}
        ]
    raise ValueError(f"unknown conversation role {item.role!r}")


def echoed_output(response: ModelResponse) -> list[InputItem]:
    """A response's output as the next request's input will echo it (the turn
    journals it as one assistant entry)."""
    return lower_item(ConversationItem("assistant", response.text, response.tool_calls))


def lower_tools(request: ProviderRequest) -> list[ToolOut]:
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": tool_schema(t),
            "strict": False,
        }
        for t in request.tools
    ]


# the prompt, in the order a provider caches it; the body ends with it
PROMPT_KEYS = ("tools", "instructions", "input")


def build_body(
    request: ProviderRequest,
    model: str,
    *,
    max_output_tokens: int | None = None,
    codex: bool = False,
) -> Body:
    """The request body: options first, then the prompt (tools, instructions,
    input: :data:`PROMPT_KEYS`), so the bytes sent are in cache order.
    ``codex``: the Codex backend's shape (streamed, no ``max_output_tokens``,
    which it rejects; ``reasoning: null`` and ``include: []``)."""
    body: Body = {"model": model}
    if request.frame.prompt_cache_key:
        body["prompt_cache_key"] = request.frame.prompt_cache_key
    limit = request.max_output_tokens or max_output_tokens
    if limit and not codex:
        body["max_output_tokens"] = limit
    body["store"] = False
    body["stream"] = codex
    tools = lower_tools(request)
    if tools:
        body["tool_choice"] = "auto"
    if codex:
        body["reasoning"] = None
        body["include"] = []
    if tools:
        body["tools"] = tools
    instructions = system_text(request.frame)
    if instructions:
        body["instructions"] = instructions
    body["input"] = lower_input(request)
    return body


# ------------------------------------------------------------------- parsing


def classify_response_error(error: Any, *, stage: str = "body") -> ProviderFailure:
    """A ``response.failed`` / ``error`` payload by its code (codex semantics)."""
    if isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]  # {"type": "error", "error": {...}}
    err = error if isinstance(error, dict) else {}
    code = str(err["code"]) if err.get("code") is not None else None
    type_ = err.get("type") if isinstance(err.get("type"), str) else None
    msg = (
        err.get("message")
        if isinstance(err.get("message"), str)
        else (error if isinstance(error, str) else None)
    )
    message = f"response failed: {msg or 'no message'}" + (f" [{code}]" if code else "")
    if code == "rate_limit_exceeded":
        return ProviderFailure(
            "rate_limited", message, stage=stage, retry_after_s=retry_hint_from_message(msg)
        )
    if code in ("insufficient_quota", "billing_hard_limit_reached"):
        return ProviderFailure(
            "quota_exceeded",
            message,
            stage=stage,
            hint="the account is out of quota or credits; add credits or switch model",
        )
    if is_context_overflow(code, msg):
        return ProviderFailure(
            "context_length_exceeded",
            message,
            stage=stage,
            hint=CONTEXT_OVERFLOW_HINT,
        )
    if code in ("server_error", "server_is_overloaded", "slow_down") or type_ == "server_error":
        return ProviderFailure("server_error", message, stage=stage)
    return ProviderFailure("provider_error", message, stage=stage)


def parse_output_items(items: list[Any], seed: str) -> list[ResponseBlock]:
    blocks: list[ResponseBlock] = []
    calls = []
    for idx, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        typ = item.get("type")
        if typ == "message" or (typ is None and item.get("role") == "assistant"):
            content = item.get("content")
            if isinstance(content, str):
                blocks.append(text_block(content))
                continue
            for part in content or []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") in ("output_text", "text") and isinstance(
                    part.get("text"), str
                ):
                    blocks.append(text_block(part["text"]))
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    blocks.append(text_block(part["refusal"]))
        elif typ == "function_call":
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise ProviderFailure(
                    "invalid_response", f"function_call output item {idx} has no name", stage="body"
                )
            call_id = item.get("call_id") or item.get("id") or synth_call_id(seed, idx, name)
            call = make_tool_call(str(call_id), name, item.get("arguments"))
            calls.append(call)
            blocks.append(call_block(call))
        # reasoning, web_search_call, etc. carry nothing the runtime replays
    dedupe_call_ids(calls)
    return merge_text(blocks)


def parse_response_object(
    obj: Any, *, reconstructed: list[JsonObject] | None = None
) -> ModelResponse:
    """Parse a Responses object (the JSON body, or a streamed terminal ``response``)."""
    if not isinstance(obj, dict):
        raise ProviderFailure(
            "invalid_response",
            f"expected a Responses object, got {type(obj).__name__}",
            stage="body",
        )
    status = obj.get("status")
    if status == "failed" or (
        isinstance(obj.get("error"), dict) and status not in ("completed", "incomplete")
    ):
        raise classify_response_error(obj.get("error") or {})
    output = obj.get("output")
    # a streamed terminal event may omit ``output``: the items came as events
    if output is None and reconstructed is None:
        raise ProviderFailure(
            "invalid_response",
            f"body is not a Responses object (no 'output'; keys: {', '.join(sorted(obj)[:8])})",
            stage="body",
        )
    if output is not None and not isinstance(output, list):
        raise ProviderFailure("invalid_response", "'output' is not a list", stage="body")
    items = output or []
    if not items and reconstructed:
        items = reconstructed
    seed = str(obj.get("id") or "")
    blocks = parse_output_items(items, seed)
    usage_obj = obj.get("usage")
    usage = (
        usage_from(
            usage_obj.get("input_tokens"),
            usage_obj.get("output_tokens"),
            usage_obj.get("total_tokens"),
            cached_of(usage_obj.get("input_tokens_details")),
        )
        if isinstance(usage_obj, dict)
        else None
    )
    has_calls = any(b["type"] == "tool_call" for b in blocks)
    raw_stop = str(status) if status is not None else None
    if status == "incomplete":
        details = obj.get("incomplete_details") or {}
        reason = details.get("reason") if isinstance(details, dict) else None
        raw_stop = f"incomplete:{reason}" if reason else "incomplete"
        if not blocks:
            raise ProviderFailure(
                "incomplete",
                f"response incomplete ({reason or 'no reason given'}) before any output",
                stage="body",
                usage=usage,
            )
        stop = STOP_CONTENT_FILTER if reason == "content_filter" else STOP_MAX_TOKENS
        # a call whose arguments were cut off cannot be executed safely
        if stop == STOP_MAX_TOKENS:
            blocks = [
                b for b in blocks if not (b["type"] == "tool_call" and b["call"].arguments_error)
            ]
    elif status in (None, "completed"):
        stop = STOP_TOOL_USE if has_calls else STOP_END_TURN
    else:
        raise ProviderFailure(
            "invalid_response",
            f"response status {status!r} is not terminal (background responses are not supported)",
            stage="body",
        )
    return ModelResponse(
        blocks=blocks,
        stop_reason=stop,
        usage=usage,
        raw_stop_reason=raw_stop,
        response_id=obj.get("id") if isinstance(obj.get("id"), str) else None,
        model=obj.get("model") if isinstance(obj.get("model"), str) else None,
    )


# -------------------------------------------------------------- event stream

# The Responses event feed (``stream: true``, used by ``openai-codex/`` and by
# config providers with ``stream: true``):
# - ``response.output_item.done`` items are collected so the terminal output
#   can be rebuilt when ``response.completed`` carries an empty ``output``;
# - ``response.completed`` -> the runtime block model;
# - ``response.incomplete`` -> a response with ``stop_reason`` ``max_tokens``
#   when content exists, else an ``incomplete`` failure;
# - ``response.failed`` and ``error`` events are classified by error code
#   (``classify_response_error``);
# - a stream that ends before a terminal event is ``stream_interrupted``
#   (retryable). Unknown event types, ``sequence_number`` and keep-alive
#   comments are ignored.

_TERMINAL = {"response.completed", "response.done", "response.incomplete"}


class _ItemCollector:
    """Keeps streamed output items in output order, for rebuilding ``output``."""

    def __init__(self) -> None:
        self.done: dict[int, JsonObject] = {}
        self.added: dict[int, JsonObject] = {}
        self.text: dict[str, list[str]] = {}
        self.args: dict[str, list[str]] = {}
        self._next = 0

    def _index(self, obj: Mapping[str, object]) -> int:
        idx = obj.get("output_index")
        if isinstance(idx, int):
            self._next = max(self._next, idx + 1)
            return idx
        self._next += 1
        return self._next - 1

    def on_added(self, obj: Mapping[str, object]) -> None:
        item = obj.get("item")
        if isinstance(item, dict):
            self.added[self._index(obj)] = item

    def on_done(self, obj: Mapping[str, object]) -> None:
        item = obj.get("item")
        if isinstance(item, dict):
            self.done[self._index(obj)] = item

    def on_text(self, obj: Mapping[str, object]) -> None:
        key = str(obj.get("item_id") or obj.get("output_index"))
        delta = obj.get("delta")
        if isinstance(delta, str):
            self.text.setdefault(key, []).append(delta)

    def on_args(self, obj: Mapping[str, object]) -> None:
        key = str(obj.get("item_id") or obj.get("output_index"))
        delta = obj.get("delta")
        if isinstance(delta, str):
            self.args.setdefault(key, []).append(delta)

    def items(self) -> list[JsonObject]:
        out: dict[int, JsonObject] = dict(self.done)
        # items that were started but never finished: rebuild from their deltas
        for idx, item in self.added.items():
            if idx in out:
                continue
            key = str(item.get("id") or idx)
            if item.get("type") == "message" and key in self.text:
                out[idx] = {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "".join(self.text[key])}],
                }
            elif item.get("type") == "function_call":
                rebuilt = dict(item)
                rebuilt["arguments"] = (
                    "".join(self.args.get(key, [])) or item.get("arguments") or ""
                )
                out[idx] = rebuilt
        return [out[i] for i in sorted(out)]


def parse_responses_stream(events: Iterable[SSEEvent]) -> ModelResponse:
    collector = _ItemCollector()
    stream = JsonEventStream(events, "event")
    last_type: str | None = None
    for ev, obj in stream:
        if not isinstance(obj, dict):
            continue
        typ = obj.get("type") if isinstance(obj.get("type"), str) else ev.event
        last_type = typ
        if typ == "response.output_item.added":
            collector.on_added(obj)
        elif typ == "response.output_item.done":
            collector.on_done(obj)
        elif typ == "response.output_text.delta":
            collector.on_text(obj)
        elif typ == "response.function_call_arguments.delta":
            collector.on_args(obj)
        elif typ in _TERMINAL:
            response = obj.get("response")
            if not isinstance(response, dict):
                raise ProviderFailure(
                    "invalid_response", f"{typ} event carries no response object", stage="stream"
                )
            if typ == "response.incomplete" and response.get("status") is None:
                response = {**response, "status": "incomplete"}
            return parse_response_object(response, reconstructed=collector.items())
        elif typ == "response.failed":
            response = obj.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            raise classify_response_error(error or obj.get("error") or {}, stage="stream")
        elif typ == "error":
            raise classify_response_error(obj, stage="stream")
        # response.created / in_progress / content_part.* / *.done deltas / unknown: nothing to keep
    where = (
        f"after {stream.count} events (last: {last_type})" if stream.count else "before any event"
    )
    raise ProviderFailure(
        "stream_interrupted",
        f"event stream ended {where} without response.completed",
        stage="stream",
    )


# ----------------------------------------------------------------- transport


class OpenAIResponsesTransport(HttpTransport):
    """``POST {base_url}/responses``: non-streaming JSON, or SSE when ``stream``
    (a config-declared provider with ``stream: true``).

    With ``incremental`` (``runtime.openai_incremental: true``) requests are
    stored (``store: true``) and a later request (a later round, or a later
    turn in the same process) continues the previous response when it extends
    it (see :mod:`holon_cli.providers.incremental`); a provider that no
    longer knows the previous response gets the same round once more in full.
    """

    endpoint = "responses"
    prompt_capabilities = PROMPT_SUPPORT["openai_responses"].capabilities
    # the Codex backend keeps nothing (``store`` must stay false)
    incremental_capable = True

    def __init__(
        self,
        *,
        model: str,
        provider: str = "openai",
        base_url: str = DEFAULT_OPENAI_BASE_URL,
        incremental: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(model=model, provider=provider, base_url=base_url, **kwargs)
        self.incremental = incremental and self.incremental_capable

    def build_body(self, request: ProviderRequest) -> Body:
        body = build_body(request, self.model, max_output_tokens=self.max_output_tokens)
        if self.stream:
            body["stream"] = True
        if self.incremental:
            body["store"] = True
        return body

    def complete(self, request: ProviderRequest) -> ModelResponse:
        body = self.build_body(request)
        if not self.incremental:
            return self._send(body)
        return self._complete_incremental(request, body)

    def _send(self, body: Mapping[str, object]) -> ModelResponse:
        if self.stream:
            return post_stream(self.target(), body, parse_responses_stream, parse_response_object)
        return post_json(self.target(), body, parse_response_object)

    def _complete_incremental(self, request: ProviderRequest, body: Body) -> ModelResponse:
        from holon_cli.providers import incremental as inc

        scope = inc.scope_of(
            request.agent_id, request.frame.prompt_cache_key, self.model_ref, self.url()
        )
        cache = request.frame.cache
        epoch = cache.compression_epoch if cache is not None else 0
        plan = inc.STATE.plan(scope, request.turn_id, body, epoch)
        try:
            response = self._send(plan.body)
        except ProviderFailure as failure:
            if plan.mode != "incremental" or not inc.unknown_previous_response(
                failure.status, failure.message, failure.body_preview
            ):
                raise
            # expired or never stored: this round once more, in full
            inc.STATE.forget(scope)
            plan = inc.Plan(body, "full", "previous_response_unknown")
            response = self._send(body)
        if (response.raw_stop_reason or "").startswith("incomplete"):
            # the stored output may hold a call cut off mid-arguments that the
            # runtime dropped: the next round cannot answer it, so it goes full
            inc.STATE.forget(scope)
        else:
            inc.STATE.advance(
                scope, request.turn_id, body, echoed_output(response), response.response_id, epoch
            )
        response.request_mode = plan.mode
        response.request_mode_reason = plan.reason
        return response
