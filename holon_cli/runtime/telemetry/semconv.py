"""The GenAI semantic conventions holon emits (latest experimental), by name,
and the content policy. No OpenTelemetry import: tests and docs read it.

holon is a new instrumentation, so it has no older convention version to
keep emitting: it always emits the latest experimental names.
``OTEL_SEMCONV_STABILITY_OPT_IN`` changes one thing: with
``gen_ai_latest_experimental`` in it, ``OTEL_INSTRUMENTATION_GENAI_
CAPTURE_MESSAGE_CONTENT`` is read as that mode's enum (``SPAN_ONLY`` and
``SPAN_AND_EVENT`` record content on spans; ``EVENT_ONLY`` and
``NO_CONTENT`` do not: holon emits no events), besides ``true``.

Content (``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.system_instructions``, ``gen_ai.tool.call.arguments``,
``gen_ai.tool.call.result``) is recorded only when capture is on, as JSON
text cut at :data:`MAX_CONTENT_CHARS` per attribute (input messages keep the
newest that fit).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

# span names: "<operation> <target>"
INVOKE_AGENT = "invoke_agent"
CHAT = "chat"
EXECUTE_TOOL = "execute_tool"

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"
MCP_METHOD = "mcp.method.name"
# holon's own
MESSAGE_ID = "holon.message.id"
TURN_ID = "holon.turn.id"
TURN_OUTCOME = "holon.turn.outcome"
ATTEMPT = "holon.provider.attempt"
MODEL_REF = "holon.model_ref"

MAX_CONTENT_CHARS = 16384
CAPTURE_VAR = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
OPT_IN_VAR = "OTEL_SEMCONV_STABILITY_OPT_IN"
MCP_PREFIX = "mcp__"


class ContentPolicy(NamedTuple):
    capture: bool
    max_chars: int = MAX_CONTENT_CHARS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ContentPolicy:
        env = os.environ if env is None else env
        value = env.get(CAPTURE_VAR, "").strip().lower()
        opt_in = {v.strip() for v in env.get(OPT_IN_VAR, "").lower().split(",")}
        on = value == "true"
        if "gen_ai_latest_experimental" in opt_in and value in ("span_only", "span_and_event"):
            on = True
        return cls(on)

    def cut(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        return text[: max(self.max_chars - 1, 0)] + "…"

    def dumps(self, value: Any) -> str:
        return self.cut(json.dumps(value, ensure_ascii=False, default=str))

    def messages(self, messages: Sequence[Mapping[str, object]]) -> str:
        """The newest messages whose JSON fits, oldest first."""
        kept: list[Mapping[str, object]] = []
        size = 2
        for m in reversed(messages):
            n = len(json.dumps(m, ensure_ascii=False, default=str)) + 1
            if kept and size + n > self.max_chars:
                break
            kept.append(m)
            size += n
        return self.cut(json.dumps(list(reversed(kept)), ensure_ascii=False, default=str))


def request_model(model_ref: str) -> str:
    """The model name a ref asks for (``openai/gpt-4.1`` -> ``gpt-4.1``)."""
    if model_ref.startswith("scripted:"):
        return model_ref
    return model_ref.partition("/")[2] or model_ref


def provider_name(provider: str | None, model_ref: str) -> str:
    """``gen_ai.provider.name``: the provider holon resolved (``openai``,
    ``anthropic``, a configured provider's name, ``scripted``)."""
    if provider:
        return provider
    if model_ref.startswith("scripted:"):
        return "scripted"
    return model_ref.partition("/")[0] or "_OTHER"


def conversation_item(item: Any) -> dict[str, object]:
    """One conversation entry in the conventions' message shape."""
    role = item.role
    if role == "tool":
        part: dict[str, object] = {
            "type": "tool_call_response",
            "id": item.call_id,
            "result": item.text,
        }
        return {"role": "tool", "parts": [part]}
    parts: list[dict[str, object]] = []
    if item.text:
        parts.append({"type": "text", "content": item.text})
    for call in getattr(item, "tool_calls", None) or []:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    return {"role": role, "parts": parts}


def output_message(response: Any) -> dict[str, object]:
    parts: list[dict[str, object]] = []
    if response.text:
        parts.append({"type": "text", "content": response.text})
    for call in response.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    return {
        "role": "assistant",
        "parts": parts,
        "finish_reason": response.raw_stop_reason or response.stop_reason,
    }
