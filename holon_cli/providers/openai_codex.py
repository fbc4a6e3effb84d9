"""OpenAI Codex transport (``openai-codex/<model>``): the Responses API with
``stream: true``, consumed as server-sent events.

Owns the codex request shape (the Responses lowering without
``max_output_tokens``, which the Codex backend rejects, keeping
``reasoning: null`` and ``include: []``) and the event-feed parser:

- ``response.output_item.done`` items are collected so the terminal output
  can be rebuilt when ``response.completed`` carries an empty ``output``;
- ``response.completed`` -> the runtime block model;
- ``response.incomplete`` -> a response with ``stop_reason`` ``max_tokens``
  when content exists, else an ``incomplete`` failure;
- ``response.failed`` and ``error`` events are classified by error code
  (``rate_limit_exceeded`` -> ``rate_limited``, ``insufficient_quota`` ->
  ``quota_exceeded``, ``context_length_exceeded`` -> itself, else
  ``provider_error``);
- a stream that ends before a terminal event is ``stream_interrupted``
  (retryable). Unknown event types, ``sequence_number`` and keep-alive
  comments are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from holon_cli.providers.base import ModelResponse, ProviderFailure, ProviderRequest
from holon_cli.providers.http_common import JsonEventStream, SSEEvent
from holon_cli.providers.openai_responses import (
    OpenAIResponsesTransport,
    build_body,
    classify_response_error,
    parse_response_object,
)

_TERMINAL = {"response.completed", "response.done", "response.incomplete"}


class _ItemCollector:
    """Keeps streamed output items in output order, for rebuilding ``output``."""

    def __init__(self) -> None:
        self.done: dict[int, dict[str, Any]] = {}
        self.added: dict[int, dict[str, Any]] = {}
        self.text: dict[str, list[str]] = {}
        self.args: dict[str, list[str]] = {}
        self._next = 0

    def _index(self, obj: dict[str, Any]) -> int:
        idx = obj.get("output_index")
        if isinstance(idx, int):
            self._next = max(self._next, idx + 1)
            return idx
        self._next += 1
        return self._next - 1

    def on_added(self, obj: dict[str, Any]) -> None:
        item = obj.get("item")
        if isinstance(item, dict):
            self.added[self._index(obj)] = item

    def on_done(self, obj: dict[str, Any]) -> None:
        item = obj.get("item")
        if isinstance(item, dict):
            self.done[self._index(obj)] = item

    def on_text(self, obj: dict[str, Any]) -> None:
        key = str(obj.get("item_id") or obj.get("output_index"))
        if isinstance(obj.get("delta"), str):
            self.text.setdefault(key, []).append(obj["delta"])

    def on_args(self, obj: dict[str, Any]) -> None:
        key = str(obj.get("item_id") or obj.get("output_index"))
        if isinstance(obj.get("delta"), str):
            self.args.setdefault(key, []).append(obj["delta"])

    def items(self) -> list[dict[str, Any]]:
        out: dict[int, dict[str, Any]] = dict(self.done)
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


class OpenAICodexTransport(OpenAIResponsesTransport):
    """``POST {base_url}/responses`` with ``stream: true``; parses the event feed."""

    def __init__(self, *, model: str, provider: str = "openai-codex", **kwargs: Any) -> None:
        kwargs.pop("max_output_tokens", None)  # the Codex backend rejects it
        kwargs["stream"] = True
        super().__init__(model=model, provider=provider, **kwargs)

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        body = build_body(request, self.model)
        body.pop("max_output_tokens", None)
        body["stream"] = True
        body["reasoning"] = None
        body["include"] = []
        return body
