"""Every recorded wire fixture in ../shared/provider-fixtures goes through the
transport that owns its API, over real HTTP on 127.0.0.1, and becomes either a
ModelResponse in the runtime block model or a classified ProviderFailure.

The cases are the directory listing, so a new fixture file is covered
automatically by the generic checks; ``EXPECTED`` pins the precise outcome of
the known ones.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from provider_helpers import build_request

from holon_cli.providers.anthropic import AnthropicTransport
from holon_cli.providers.base import (
    FAIL_FAST_KINDS,
    RETRYABLE_KINDS,
    STOP_CONTENT_FILTER,
    STOP_END_TURN,
    STOP_MAX_TOKENS,
    STOP_STOP_SEQUENCE,
    STOP_TOOL_USE,
    ModelResponse,
    ProviderFailure,
)
from holon_cli.providers.openai_chat import OpenAIChatTransport
from holon_cli.providers.openai_codex import OpenAICodexTransport
from holon_cli.providers.openai_responses import OpenAIResponsesTransport

# beside the checkout (CI: a clone with shared/ next to it); a worktree
# elsewhere points at them with $HOLON_PROVIDER_FIXTURES
FIXTURES = Path(
    os.environ.get("HOLON_PROVIDER_FIXTURES")
    or Path(__file__).resolve().parents[2].parent / "shared" / "provider-fixtures"
)
API_KEY = "sk-test-SECRET-0123456789"
DIRS = ("openai_responses", "openai_chat", "anthropic")


def _cases() -> list[Any]:
    out = []
    for d in DIRS:
        folder = FIXTURES / d
        if not folder.is_dir():
            continue
        for p in sorted(folder.iterdir()):
            if p.suffix in (".json", ".sse") and not p.name.endswith(".source.txt"):
                out.append(pytest.param(p, id=f"{d}/{p.name}"))
    return out


CASES = _cases()


def ok(
    stop: str,
    text: str | None = None,
    calls: list[tuple[str, dict[str, Any]]] | None = None,
    usage: tuple[int, int, int] | None = None,
) -> dict[str, Any]:
    return {"ok": True, "stop": stop, "text": text, "calls": calls, "usage": usage}


def fail(kind: str, retry_after: float | None = None, status: int | None = None) -> dict[str, Any]:
    return {"ok": False, "kind": kind, "retry_after": retry_after, "status": status}


EXPECTED: dict[str, dict[str, Any]] = {
    # OpenAI Responses (JSON through openai/, SSE through openai-codex/)
    "openai_responses/error_400_code_null.json": fail("client_error", status=400),
    "openai_responses/error_400_context_length_exceeded.json": fail(
        "context_length_exceeded", status=400
    ),
    "openai_responses/error_400_invalid_param.json": fail("client_error", status=400),
    "openai_responses/function_call_output_followup.json": ok(
        STOP_END_TURN, "The capital of PotatoLand is Potato City.", [], (67, 11, 78)
    ),
    "openai_responses/function_call_single.json": ok(
        STOP_TOOL_USE, None, [("get_capital", {"country": "PotatoLand"})], (40, 18, 58)
    ),
    "openai_responses/incomplete_nonstream_max_output_tokens.json": ok(
        STOP_MAX_TOKENS, "pong", [], (11, 5, 16)
    ),
    "openai_responses/parallel_function_calls.json": ok(
        STOP_TOOL_USE,
        None,
        [("get_location", {"loc_name": "Londos"}), ("get_location", {"loc_name": "London"})],
        (0, 0, 0),
    ),
    "openai_responses/parallel_function_calls_followup.json": ok(STOP_END_TURN),
    "openai_responses/text_nonstream.json": ok(STOP_END_TURN),
    "openai_responses/stream_error_event.sse": fail("context_length_exceeded"),
    "openai_responses/stream_failed_context_length.sse": fail("context_length_exceeded"),
    "openai_responses/stream_failed_insufficient_quota.sse": fail("quota_exceeded"),
    "openai_responses/stream_failed_rate_limit.sse": fail("rate_limited", retry_after=11.054),
    "openai_responses/stream_function_call.sse": ok(
        STOP_TOOL_USE, None, [("get_capital", {"country": "France"})]
    ),
    "openai_responses/stream_function_call_with_sequence_numbers.sse": ok(
        STOP_TOOL_USE, None, [("multiply", {"a": 1231, "b": 2331})]
    ),
    "openai_responses/stream_incomplete_max_output_tokens.sse": ok(
        STOP_MAX_TOKENS, "pong", [], (11, 5, 16)
    ),
    "openai_responses/stream_text_after_tool.sse": ok(
        STOP_END_TURN, "The capital of France is Paris.", [], (278, 9, 287)
    ),
    "openai_responses/stream_text_basic.sse": ok(STOP_END_TURN, "pong", [], (11, 5, 16)),
    # Chat Completions (config-declared provider)
    "openai_chat/error_400_context_length_exceeded.json": fail(
        "context_length_exceeded", status=400
    ),
    "openai_chat/error_400_unsupported_value.json": fail("client_error", status=400),
    "openai_chat/error_401_invalid_api_key.json": fail("auth", status=401),
    "openai_chat/error_429_insufficient_quota.json": fail("quota_exceeded", status=429),
    "openai_chat/error_429_rate_limit_exceeded.json": fail(
        "rate_limited", retry_after=26.604, status=429
    ),
    "openai_chat/error_500_server_error.json": fail("server_error", status=500),
    "openai_chat/finish_reason_length.json": ok(STOP_MAX_TOKENS, '{"', [], (79, 1, 80)),
    "openai_chat/malformed_200_text_plain.json": fail("invalid_response", status=200),
    "openai_chat/malformed_200_wrong_shape.json": fail("invalid_response", status=200),
    "openai_chat/malformed_truncated_body.json": fail("invalid_response", status=200),
    "openai_chat/parallel_tool_calls.json": ok(
        STOP_TOOL_USE,
        None,
        [
            ("GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c"}),
            ("get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
        ],
        (149, 60, 209),
    ),
    "openai_chat/text.json": ok(STOP_END_TURN, "The capital of France is Paris.", [], (14, 7, 21)),
    "openai_chat/tool_call_single.json": ok(
        STOP_TOOL_USE, None, [("lookup_population", {"country": "Crumpet"})], (92, 17, 109)
    ),
    "openai_chat/tool_result_followup.json": ok(
        STOP_TOOL_USE, None, [("can_have_dragons", {"population": 123124})]
    ),
    "openai_chat/tool_result_followup_final.json": ok(STOP_END_TURN, "YES", [], (146, 3, 149)),
    "openai_chat/stream_text.sse": ok(
        STOP_END_TURN, "The capital of the UK is London.", [], (78, 9, 87)
    ),
    "openai_chat/stream_tool_call.sse": ok(
        STOP_TOOL_USE, None, [("get_capital", {"country": "UK"})], (53, 15, 68)
    ),
    "openai_chat/stream_tool_call_no_obfuscation.sse": ok(
        STOP_TOOL_USE, None, [("multiply", {"a": 1231, "b": 2331})], (54, 20, 74)
    ),
    "openai_chat/stream_truncated_no_done.sse": fail("stream_interrupted"),
    # Anthropic Messages
    "anthropic/error_400_context_limit_with_max_tokens.json": fail(
        "context_length_exceeded", status=400
    ),
    "anthropic/error_400_invalid_request.json": fail("client_error", status=400),
    "anthropic/error_400_prompt_too_long.json": fail("context_length_exceeded", status=400),
    "anthropic/error_401_authentication_error.json": fail("auth", status=401),
    "anthropic/error_404_not_found.json": fail("client_error", status=404),
    "anthropic/error_429_rate_limit_error.json": fail("rate_limited", retry_after=16.0, status=429),
    "anthropic/error_500_api_error.json": fail("server_error", status=500),
    "anthropic/error_529_overloaded_error.json": fail("server_error", status=529),
    "anthropic/max_tokens_nonstream.json": ok(
        STOP_MAX_TOKENS, "I'll create a comprehensive tax guide", [], (450, 124, 574)
    ),
    "anthropic/text_end_turn.json": ok(
        STOP_END_TURN, "The capital of France is Paris.", [], (20, 10, 30)
    ),
    "anthropic/tool_result_followup.json": ok(STOP_END_TURN, "Mexico City", [], (460, 91, 551)),
    "anthropic/tool_result_parallel_followup.json": ok(STOP_END_TURN, "Daisy is the youngest", []),
    "anthropic/tool_use_parallel.json": ok(
        STOP_TOOL_USE,
        "I'll help you find out who is the youngest",
        [("retrieve_entity_info", {"name": n}) for n in ("Alice", "Bob", "Charlie", "Daisy")],
        (423, 202, 625),
    ),
    "anthropic/tool_use_single.json": ok(
        STOP_TOOL_USE, "Let me first check your country", [("get_user_country", {})], (383, 65, 448)
    ),
    "anthropic/stream_after_tool_results.sse": ok(STOP_END_TURN, "**Charles**", [], (678, 82, 760)),
    "anthropic/stream_error_overloaded.sse": fail("server_error"),
    "anthropic/stream_max_tokens_truncated_tool_input.sse": ok(
        STOP_MAX_TOKENS, "save it in a file called taxes.txt", [], (450, 124, 574)
    ),
    "anthropic/stream_parallel_tool_use.sse": ok(
        STOP_TOOL_USE,
        None,
        [("pelican_name_generator", {}), ("pelican_name_generator", {})],
        (542, 62, 604),
    ),
    "anthropic/stream_stop_sequence.sse": ok(
        STOP_STOP_SEQUENCE, "def pelican():", [], (16, 28, 44)
    ),
    "anthropic/stream_text_end_turn.sse": ok(STOP_END_TURN, "- Captain\n- Scoop", [], (17, 10, 27)),
    "anthropic/stream_tool_use_input_json_delta.sse": ok(
        STOP_TOOL_USE,
        "I'll check the current weather in Paris",
        [("get_weather", {"location": "Paris"})],
        (377, 65, 442),
    ),
}


def transport_for(path: Path, base: str) -> Any:
    api, stream = path.parent.name, path.suffix == ".sse"
    if api == "openai_responses":
        cls = OpenAICodexTransport if stream else OpenAIResponsesTransport
        return cls(
            model="gpt-test", base_url=f"{base}/v1", api_key=API_KEY, key_env="OPENAI_API_KEY"
        )
    if api == "openai_chat":
        return OpenAIChatTransport(
            provider="local", model="m", base_url=f"{base}/v1", api_key=API_KEY, stream=stream
        )
    return AnthropicTransport(model="claude-test", base_url=base, api_key=API_KEY, stream=stream)


@pytest.mark.skipif(not CASES, reason=f"shared provider fixtures not found at {FIXTURES}")
@pytest.mark.parametrize("path", CASES)
def test_fixture_through_transport(path: Path, loopback: LoopbackServer) -> None:
    loopback.queue(Reply.from_fixture(path))
    transport = transport_for(path, loopback.url)
    key = f"{path.parent.name}/{path.name}"
    try:
        outcome: ModelResponse | ProviderFailure = transport.complete(build_request())
    except ProviderFailure as f:
        outcome = f
    assert len(loopback.requests) == 1

    # generic checks: hold for any fixture, including ones added later
    if isinstance(outcome, ProviderFailure):
        assert outcome.kind in RETRYABLE_KINDS | FAIL_FAST_KINDS
        assert outcome.message and API_KEY not in outcome.message
        assert outcome.provider == transport.provider and outcome.model_ref == transport.model_ref
        assert outcome.url and outcome.url.startswith("http://127.0.0.1:")
        assert outcome.stage in {"connect", "request", "status", "body", "decode", "stream"}
    else:
        assert outcome.stop_reason in {
            STOP_END_TURN,
            STOP_TOOL_USE,
            STOP_MAX_TOKENS,
            STOP_STOP_SEQUENCE,
            STOP_CONTENT_FILTER,
        }
        for b in outcome.blocks:
            assert b["type"] in ("text", "tool_call")
        for c in outcome.tool_calls:
            assert c.id and c.name and isinstance(c.arguments, dict)
        assert len({c.id for c in outcome.tool_calls}) == len(outcome.tool_calls)
        if outcome.tool_calls and outcome.stop_reason != STOP_MAX_TOKENS:
            assert outcome.stop_reason == STOP_TOOL_USE

    exp = EXPECTED.get(key)
    if exp is None:
        return
    if not exp["ok"]:
        assert isinstance(outcome, ProviderFailure), (
            f"{key}: expected {exp['kind']}, got a response"
        )
        assert outcome.kind == exp["kind"], f"{key}: {outcome.kind}: {outcome.message}"
        if exp["retry_after"] is not None:
            assert outcome.retry_after_s == pytest.approx(exp["retry_after"])
        if exp["status"] is not None:
            assert outcome.status == exp["status"]
        return
    assert isinstance(outcome, ModelResponse), f"{key}: {outcome}"
    assert outcome.stop_reason == exp["stop"]
    if exp["text"] is not None:
        assert exp["text"] in outcome.text
    if exp["calls"] is not None:
        assert [(c.name, c.arguments) for c in outcome.tool_calls] == exp["calls"]
    if exp["usage"] is not None:
        assert outcome.usage is not None
        assert (
            outcome.usage.input_tokens,
            outcome.usage.output_tokens,
            outcome.usage.total_tokens,
        ) == exp["usage"]


def test_expectations_match_the_fixture_listing() -> None:
    """EXPECTED names only fixtures that exist; fixtures added later still get
    the generic checks above, and a warning asks for a pinned outcome."""
    if not CASES:
        pytest.skip("no fixtures")
    names = {f"{p.values[0].parent.name}/{p.values[0].name}" for p in CASES}
    stale = set(EXPECTED) - names
    assert not stale, f"EXPECTED names fixtures that no longer exist: {sorted(stale)}"
    unpinned = sorted(names - set(EXPECTED))
    if unpinned:
        warnings.warn(f"fixtures without a pinned outcome in EXPECTED: {unpinned}", stacklevel=1)


def test_tool_call_ids_survive_from_fixtures(loopback: LoopbackServer) -> None:
    """Call ids are the provider's own (needed to correlate tool results)."""
    folder = FIXTURES / "openai_responses"
    if not folder.is_dir():
        pytest.skip("no fixtures")
    loopback.queue(Reply.from_fixture(folder / "function_call_single.json"))
    resp = transport_for(folder / "function_call_single.json", loopback.url).complete(
        build_request()
    )
    assert resp.tool_calls[0].id == "call_YfwRsW8sUxDKipwyhWTzOXCA"
    assert resp.tool_calls[0].raw_arguments == '{"country":"PotatoLand"}'


# ------------------------------------------- compatible servers' strictness

# How real OpenAI-compatible servers answer an assistant message whose
# ``content`` is not a string (issue: the second round of every tool loop
# failed against llama.cpp). Bodies as those servers send them.
_STRICT_SERVERS = {
    # llama-cpp-python's server (pydantic): null and a missing key both fail
    "llama.cpp": (
        500,
        {
            "error": {
                "code": 500,
                "message": "1 validation error for ChatCompletionRequestAssistantMessage\n"
                "content\n  Input should be a valid string [type=string_type]",
                "type": "server_error",
            }
        },
    ),
    # Ollama's /v1 compatibility layer: null and a missing key both fail
    "ollama": (
        400,
        {
            "error": {
                "message": "invalid message content type: <nil>",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
    ),
    # LM Studio: "must be a string or an array of objects"
    "lmstudio": (
        400,
        {"error": "Invalid 'content': 'content' field must be a string or an array of objects."},
    ),
}


def _strict(server: str) -> Any:
    status, body = _STRICT_SERVERS[server]

    def check(req: Any) -> Reply | None:
        for msg in req.json().get("messages", []):
            if not isinstance(msg.get("content"), str):
                return Reply.json_body(body, status=status)
        return None

    return check


@pytest.mark.skipif(not CASES, reason=f"shared provider fixtures not found at {FIXTURES}")
@pytest.mark.parametrize("server", sorted(_STRICT_SERVERS))
def test_chat_tool_loop_against_strict_servers(server: str, loopback: LoopbackServer) -> None:
    """Two rounds of a recorded tool loop (the model answers with tool calls
    and ``content: null``; then the final answer). The second request replays
    the assistant's tool-call turn, which such servers accept only with a
    string ``content``, and which OpenAI accepts too (its own recorded
    follow-up request omits the key; "" is equally valid)."""
    from holon_cli.providers.base import ConversationItem

    folder = FIXTURES / "openai_chat"
    loopback.check = _strict(server)
    loopback.queue(
        Reply.from_fixture(folder / "tool_call_single.json"),
        Reply.from_fixture(folder / "tool_result_followup_final.json"),
    )
    transport = transport_for(folder / "tool_call_single.json", loopback.url)
    convo = [ConversationItem(role="user", text="Can Crumpet have dragons?")]
    first = transport.complete(build_request(convo))
    assert first.stop_reason == STOP_TOOL_USE and first.text == ""
    convo += [
        ConversationItem(role="assistant", text=first.text, tool_calls=first.tool_calls),
        ConversationItem(
            role="tool", call_id=first.tool_calls[0].id, name="lookup_population", text="123124"
        ),
    ]
    final = transport.complete(build_request(convo))
    assert final.stop_reason == STOP_END_TURN and "YES" in final.text
    sent = loopback.requests[1].json()["messages"]
    assistant = [m for m in sent if m["role"] == "assistant"]
    assert assistant == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_TTY8UFNo7rNCaOBUNtlRSvMG",
                    "type": "function",
                    "function": {"name": "lookup_population", "arguments": '{"country":"Crumpet"}'},
                }
            ],
        }
    ]
