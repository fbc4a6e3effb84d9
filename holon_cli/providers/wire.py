"""Pure helpers shared by the wire lowerings and parsers of every transport.

This module owns the provider-neutral pieces of request lowering (system
text from a :class:`PromptFrame`, tool schemas as emitted to providers) and
of response parsing (tool-call argument decoding, stable synthesized call
ids, text-block merging, usage coercion, retry hints in error messages,
context-overflow detection). No I/O here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from holon_cli.digest import sha256_hex
from holon_cli.model.provider import (
    PromptCapability,
    PromptFrame,
    TokenUsage,
    ToolCall,
    ToolSpec,
)

if TYPE_CHECKING:
    from holon_cli.model.provider import CallBlock, ResponseBlock, TextBlock
    from holon_cli.model.typed_base import JsonObject

_V = TypeVar("_V")

# the Anthropic beta that turns on server-side context management
# (here, not in the transport: the doctor names it without loading HTTP code)
ANTHROPIC_CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"

# ------------------------------------------------------------------ frames


def system_text(frame: PromptFrame) -> str:
    """The frame's system prompt and system blocks as one string (empty parts skipped)."""
    parts = [frame.system_prompt, *frame.system_blocks]
    return "\n\n".join(p for p in parts if p and p.strip())


def join_blocks(blocks: list[str]) -> str:
    """Context blocks as the one user text a transport sends (empty ones skipped).
    A turn's blocks sent now and the same turn kept in the history later
    (runtime/memory/history.py) join alike, so the bytes repeat exactly."""
    return "\n\n".join(b for b in blocks if b and b.strip())


def context_text(frame: PromptFrame) -> str:
    """All of the frame's context blocks (diagnostics; transports send the
    stable part and the turn part apart: :func:`stable_text`, :func:`turn_text`)."""
    return join_blocks(frame.context_blocks)


def stable_text(frame: PromptFrame) -> str:
    """The context blocks that lead the conversation, before the history."""
    return join_blocks(frame.stable_context)


def turn_text(frame: PromptFrame) -> str:
    """This turn's context blocks: after the history, before the current message."""
    return join_blocks(frame.turn_context)


def prompt_last(body: Mapping[str, _V], keys: tuple[str, ...]) -> dict[str, _V]:
    """``body`` with ``keys`` moved to its end, in that order (those present).

    The wire body is serialized in key order, so this puts the request's
    options first and then the prompt in the order providers cache it (tools,
    instructions, conversation): a request that continues the previous one
    repeats the previous body's bytes up to its conversation's end, and a
    prefix measured on the bytes sent is the prefix a provider can reuse."""
    out = {k: v for k, v in body.items() if k not in keys}
    out.update((k, body[k]) for k in keys if k in body)
    return out


# ---------------------------------------------------------- capabilities


class PromptSupport(NamedTuple):
    """What a transport kind does with a prompt frame (``holon debug providers``)."""

    capabilities: frozenset[PromptCapability]
    cached: str  # what the provider can reuse from one request to the next
    breakpoints: tuple[str, ...]  # frame anchors it lowers to cache markers (+ "rolling")
    max_breakpoints: int
    continuation: str | None  # how a later request may send less than the whole


PROMPT_SUPPORT: dict[str, PromptSupport] = {
    "openai_responses": PromptSupport(
        frozenset({"prompt_cache_key", "incremental_responses"}),
        "the longest prefix (tools, instructions, input) seen under prompt_cache_key",
        (),
        0,
        "previous_response_id, in-process only, with runtime.openai_incremental",
    ),
    "openai_codex": PromptSupport(
        frozenset({"full_request_only", "prompt_cache_key"}),
        "the longest prefix (tools, instructions, input) seen under prompt_cache_key",
        (),
        0,
        None,
    ),
    "openai_chat_completions": PromptSupport(
        frozenset({"full_request_only"}),
        "whatever prefix the server reuses on its own (tools, messages)",
        (),
        0,
        None,
    ),
    "anthropic_messages": PromptSupport(
        frozenset({"full_request_only", "prompt_cache_blocks", "context_management"}),
        "the prefix up to each cache_control marker (tools, system, messages)",
        ("tools", "system", "history", "rolling"),
        4,
        None,
    ),
    "scripted": PromptSupport(frozenset({"full_request_only"}), "nothing", (), 0, None),
}


def prompt_support(kind: str) -> PromptSupport:
    return PROMPT_SUPPORT.get(kind) or PROMPT_SUPPORT["openai_chat_completions"]


# ------------------------------------------------------------------ tools


def tool_schema(spec: ToolSpec) -> JsonObject:
    """The tool's input schema as sent to providers (``Relaxed`` mode).

    The tool layer already emits normalized schemas; this only guarantees the
    top level is an object schema, which every provider requires. A copy of
    the top level: the nested parts are the spec's own, shared by every
    request (read-only: a body is serialised as built). It was a deep copy
    of every tool's schema every round (~2 ms of a round's CPU, issue 44).
    """
    schema = dict(spec.input_schema) if isinstance(spec.input_schema, dict) else {}
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema


def parse_arguments(raw: object) -> tuple[JsonObject, str | None, str | None]:
    """Decode tool-call arguments: ``(arguments, raw_arguments, arguments_error)``.

    Providers send a JSON string (OpenAI), an object (Anthropic, some
    compatible servers), or nothing. Invalid JSON or a non-object keeps the
    raw text and an error so the tool layer can report it to the model.
    """
    if raw is None:
        return {}, None, None
    if isinstance(raw, dict):
        return raw, None, None
    if not isinstance(raw, str):
        text = json.dumps(raw, ensure_ascii=False)
        return {}, text, f"tool arguments must be a JSON object, got {type(raw).__name__}"
    if not raw.strip():
        return {}, raw, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, raw, f"tool arguments are not valid JSON: {exc.msg} at position {exc.pos}"
    if not isinstance(value, dict):
        return {}, raw, f"tool arguments must be a JSON object, got {type(value).__name__}"
    return value, raw, None


def make_tool_call(call_id: str, name: str, raw_arguments: object) -> ToolCall:
    args, raw, err = parse_arguments(raw_arguments)
    return ToolCall(id=call_id, name=name, arguments=args, raw_arguments=raw, arguments_error=err)


def arguments_json(call: ToolCall) -> str:
    """Arguments as the JSON string OpenAI-style APIs expect when echoing a call back.

    The model's own text is echoed verbatim when it still matches the parsed
    arguments (byte-identical history keeps provider prompt caches warm) or
    when it was invalid (the model should see its own mistake).
    """
    raw = call.raw_arguments
    if raw is not None:
        if call.arguments_error is not None:
            return raw
        try:
            if json.loads(raw) == call.arguments:
                return raw
        except json.JSONDecodeError:
            pass
    return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))


def synth_call_id(seed: str, index: int, name: str) -> str:
    """A stable id for a tool call the provider sent without one."""
    digest = sha256_hex(f"{seed}\x00{index}\x00{name}".encode())[:16]
    return f"call_{digest}"


def dedupe_call_ids(calls: list[ToolCall]) -> None:
    """Make ids unique within one response (some servers repeat ``call_0``)."""
    seen: set[str] = set()
    for i, call in enumerate(calls):
        if call.id in seen:
            call.id = f"{call.id}_{i}"
        seen.add(call.id)


# ----------------------------------------------------------------- blocks


def text_block(text: str) -> TextBlock:
    return {"type": "text", "text": text}


def call_block(call: ToolCall) -> CallBlock:
    return {"type": "tool_call", "call": call}


def merge_text(blocks: list[ResponseBlock]) -> list[ResponseBlock]:
    """Join adjacent text blocks and drop empty ones; order is kept."""
    out: list[ResponseBlock] = []
    for b in blocks:
        if b["type"] == "text":
            if not b["text"]:
                continue
            last = out[-1] if out else None
            if last is not None and last["type"] == "text":
                out[-1] = text_block(last["text"] + b["text"])
                continue
        out.append(b)
    return out


def as_int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float):
        return max(int(value), 0)
    return 0


def usage_from(
    input_tokens: Any, output_tokens: Any, total_tokens: Any = None, cached: Any = None
) -> TokenUsage:
    """Usage from an OpenAI-shaped answer; ``cached``: the input tokens the
    prompt cache served (already counted in ``input_tokens``)."""
    i, o = as_int(input_tokens), as_int(output_tokens)
    t = as_int(total_tokens) if total_tokens is not None else 0
    return TokenUsage(i, o, t or i + o, cache_read_input_tokens=as_int(cached))


def cached_of(details: Any) -> Any:
    """``cached_tokens`` of a ``*_tokens_details`` object, if it is one."""
    return details.get("cached_tokens") if isinstance(details, dict) else None


# ----------------------------------------------------------------- errors

_RETRY_IN = re.compile(
    r"try again in\s+(?:(\d+(?:\.\d+)?)m(?!s))?\s*(?:(\d+(?:\.\d+)?)(ms|s))?", re.I
)

_CONTEXT_PATTERNS = re.compile(
    r"prompt is too long"
    r"|exceeds? (?:the )?context (?:limit|window|length)"
    r"|maximum context length"
    r"|context[ _]length[ _]exceeded"
    r"|context window (?:of this model )?(?:is )?exceeded"
    r"|input is too long for requested model"
    r"|too many tokens in (?:the )?(?:prompt|input)",
    re.I,
)

CONTEXT_CODES = {"context_length_exceeded", "model_context_window_exceeded"}


def retry_hint_from_message(message: str | None) -> float | None:
    """OpenAI puts the delay in the text: ``Please try again in 11.054s`` /
    ``in 120ms`` / ``in 1m30s``."""
    if not message:
        return None
    m = _RETRY_IN.search(message)
    if not m or not (m.group(1) or m.group(2)):
        return None
    total = float(m.group(1) or 0) * 60.0
    if m.group(2):
        v = float(m.group(2))
        total += v / 1000.0 if m.group(3).lower() == "ms" else v
    return total


def is_context_overflow(code: str | None, message: str | None) -> bool:
    if code and code in CONTEXT_CODES:
        return True
    return bool(message and _CONTEXT_PATTERNS.search(message))


def error_fields(body: Any) -> tuple[str | None, str | None, str | None]:
    """``(code, type, message)`` from an OpenAI ``{"error": {...}}``, an Anthropic
    ``{"type": "error", "error": {...}}``, a flat stream error event, or a
    compatible server's ``{"error": "text"}`` / ``{"detail": ...}`` / ``{"message": ...}``."""
    if not isinstance(body, dict):
        return None, None, None
    err = body.get("error")
    code = type_ = message = None
    if isinstance(err, dict):
        code, type_, message = err.get("code"), err.get("type"), err.get("message")
    elif isinstance(err, str):
        message = err
    if message is None:
        for key in ("message", "detail", "error_message"):
            v = body.get(key)
            if isinstance(v, str):
                message = v
                break
            if isinstance(v, (dict, list)):
                message = json.dumps(v, ensure_ascii=False)[:500]
                break
    if code is None and isinstance(body.get("code"), str):
        code = body.get("code")
    if type_ is None and not isinstance(err, dict):
        t = body.get("type")
        if isinstance(t, str) and t != "error":
            type_ = t
    return (
        str(code) if code is not None else None,
        str(type_) if type_ is not None else None,
        str(message) if message is not None else None,
    )


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """Remove credential values from text that may reach logs or the operator."""
    for s in secrets:
        if s and len(s) >= 4 and s in text:
            text = text.replace(s, "[REDACTED]")
    return text
