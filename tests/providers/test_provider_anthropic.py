"""Anthropic Messages transport: headers, request lowering (system blocks,
tool_use/tool_result grouping, role merging, max_tokens) and parsing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from provider_helpers import WEATHER_TOOL, build_request, tool_round_conversation

from holon_cli.providers.anthropic import AnthropicTransport, parse_message
from holon_cli.providers.base import ConversationItem, ProviderFailure, ToolCall

KEY = "sk-ant-test-key"


def claude(srv: LoopbackServer, **kw: Any) -> AnthropicTransport:
    return AnthropicTransport(model="claude-sonnet-4-5", base_url=srv.url, api_key=KEY, **kw)


def message(
    *content: dict[str, Any], stop: str = "end_turn", usage: dict[str, int] | None = None
) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": list(content),
        "stop_reason": stop,
        "usage": usage or {"input_tokens": 10, "output_tokens": 4},
    }


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(i: str, name: str, inp: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": i, "name": name, "input": inp}


def events(*evs: dict[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in evs)


def test_headers_and_request_shape(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(message(text("Hi!"))))
    req = build_request(
        [ConversationItem(role="user", text="hello")],
        tools=[WEATHER_TOOL],
        system="SYS",
        system_blocks=["GUIDE"],
        context_blocks=["CTX"],
    )
    out = claude(loopback).complete(req)
    assert out.text == "Hi!" and out.stop_reason == "end_turn"
    r = loopback.requests[0]
    assert r.path == "/v1/messages"
    assert r.headers["x-api-key"] == KEY
    assert r.headers["anthropic-version"] == "2023-06-01"
    assert r.headers["content-type"] == "application/json"
    assert "authorization" not in r.headers
    body = r.json()
    assert body["model"] == "claude-sonnet-4-5"
    assert body["max_tokens"] == 8192
    assert body["system"] == [
        {"type": "text", "text": "SYS"},
        {"type": "text", "text": "GUIDE", "cache_control": {"type": "ephemeral"}},
    ]
    # the turn's context leads the first user message (no marker: it is not
    # stable across turns, the rolling one on the newest block covers it);
    # consecutive user entries merge into one message
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "CTX"},
                {"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}},
            ],
        }
    ]
    # the body's bytes are in the API's cache order: options, tools, system, messages
    assert list(body)[-3:] == ["tools", "system", "messages"]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": WEATHER_TOOL.input_schema,
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert "stream" not in body
    assert "context_management" not in body and "anthropic-beta" not in r.headers


def test_max_tokens_from_request_and_base_url_with_v1(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(message(text("ok"))))
    AnthropicTransport(model="m", base_url=f"{loopback.url}/v1", api_key=KEY).complete(
        build_request(max_output_tokens=321)
    )
    r = loopback.requests[0]
    assert r.path == "/v1/messages" and r.json()["max_tokens"] == 321


def test_tool_use_then_tool_result_followup(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            message(
                text("Let me look."),
                tool_use("toolu_1", "get_weather", {"city": "Paris"}),
                stop="tool_use",
            )
        )
    )
    first = claude(loopback).complete(build_request(tools=[WEATHER_TOOL]))
    assert first.stop_reason == "tool_use" and [b["type"] for b in first.blocks] == [
        "text",
        "tool_call",
    ]
    call = first.tool_calls[0]
    assert (call.id, call.arguments) == ("toolu_1", {"city": "Paris"})

    loopback.queue(Reply.json_body(message(text("Sunny."))))
    convo = [
        ConversationItem(role="user", text="Weather?"),
        ConversationItem(role="assistant", text="Let me look.", tool_calls=[call]),
        ConversationItem(role="tool", call_id="toolu_1", name="get_weather", text="sunny"),
    ]
    claude(loopback).complete(build_request(convo))
    msgs = loopback.requests[1].json()["messages"]
    assert msgs[1] == {
        "role": "assistant",
        "content": [text("Let me look."), tool_use("toolu_1", "get_weather", {"city": "Paris"})],
    }
    assert msgs[2]["role"] == "user"
    assert msgs[2]["content"][0]["type"] == "tool_result"
    assert (
        msgs[2]["content"][0]["tool_use_id"] == "toolu_1"
        and msgs[2]["content"][0]["content"] == "sunny"
    )
    assert "is_error" not in msgs[2]["content"][0]


def test_parallel_tool_results_grouped_in_one_user_message(loopback: LoopbackServer) -> None:
    calls = [
        ToolCall(id=f"toolu_{i}", name="get_weather", arguments={"city": c})
        for i, c in enumerate(["Paris", "Oslo"])
    ]
    convo = [
        ConversationItem(role="user", text="Both?"),
        ConversationItem(role="assistant", tool_calls=calls),
        ConversationItem(role="tool", call_id="toolu_0", text="sunny"),
        ConversationItem(role="tool", call_id="toolu_1", text="ERROR: timeout", is_error=True),
        ConversationItem(role="user", text="(an interjection admitted mid-turn)"),
    ]
    loopback.queue(Reply.json_body(message(text("ok"))))
    claude(loopback).complete(build_request(convo))
    msgs = loopback.requests[0].json()["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    last = msgs[2]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert [b["tool_use_id"] for b in last[:2]] == ["toolu_0", "toolu_1"]
    assert last[1]["is_error"] is True and "is_error" not in last[0]


def test_tool_results_lead_even_if_user_text_came_first(loopback: LoopbackServer) -> None:
    convo = tool_round_conversation("toolu_9")
    convo.insert(2, ConversationItem(role="user", text="also, hurry"))
    loopback.queue(Reply.json_body(message(text("ok"))))
    claude(loopback).complete(build_request(convo))
    content = loopback.requests[0].json()["messages"][2]["content"]
    assert content[0]["type"] == "tool_result" and content[1]["text"] == "also, hurry"


def test_conversation_starting_with_assistant_gets_a_user_turn(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(message(text("ok"))))
    claude(loopback).complete(
        build_request(
            [
                ConversationItem(role="assistant", text="earlier"),
                ConversationItem(role="user", text="now"),
            ]
        )
    )
    msgs = loopback.requests[0].json()["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]


def test_usage_includes_cache_tokens() -> None:
    out = parse_message(
        message(
            text("x"),
            usage={
                "input_tokens": 10,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 1000,
                "output_tokens": 5,
            },
        )
    )
    # input counts every input token; the cache's parts are named beside it
    assert out.usage is not None and out.usage.to_dict() == {
        "input_tokens": 1110,
        "output_tokens": 5,
        "total_tokens": 1115,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 100,
    }


@pytest.mark.parametrize(
    ("raw", "stop"),
    [
        ("end_turn", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("refusal", "content_filter"),
        ("pause_turn", "end_turn"),
    ],
)
def test_stop_reasons(raw: str, stop: str) -> None:
    out = parse_message(message(text("x"), stop=raw))
    assert out.stop_reason == stop and out.raw_stop_reason == raw


def test_thinking_blocks_ignored() -> None:
    out = parse_message(
        message({"type": "thinking", "thinking": "hmm", "signature": "s"}, text("answer"))
    )
    assert out.blocks == [{"type": "text", "text": "answer"}]


def test_error_body_in_200_is_classified() -> None:
    with pytest.raises(ProviderFailure) as ei:
        parse_message(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        )
    assert ei.value.kind == "server_error" and ei.value.retryable


# ------------------------------------------------------------------ stream


def stream_text(t: str) -> str:
    return events(
        {
            "type": "message_start",
            "message": {
                "id": "msg_s",
                "model": "m",
                "content": [],
                "usage": {"input_tokens": 7, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_s",
                "name": "get_weather",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": '},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '"Lima"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 20},
        },
        {"type": "message_stop"},
    )


def test_stream_request_and_parse(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.sse(stream_text("Checking.")))
    out = claude(loopback, stream=True).complete(build_request())
    assert loopback.requests[0].json()["stream"] is True
    assert out.text == "Checking." and out.stop_reason == "tool_use"
    assert out.tool_calls[0].arguments == {"city": "Lima"} and out.tool_calls[0].id == "toolu_s"
    assert out.usage is not None and out.usage.to_dict() == {
        "input_tokens": 7,
        "output_tokens": 20,
        "total_tokens": 27,
    }


def test_stream_mid_stream_overloaded_error_is_retryable(loopback: LoopbackServer) -> None:
    s = stream_text("x")
    cut = s.index("event: content_block_stop")
    loopback.queue(
        Reply.sse(
            s[:cut]
            + events(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            )
        )
    )
    with pytest.raises(ProviderFailure) as ei:
        claude(loopback, stream=True).complete(build_request())
    assert (
        ei.value.kind == "server_error" and ei.value.retryable and "Overloaded" in ei.value.message
    )


def test_stream_cut_is_interrupted(loopback: LoopbackServer) -> None:
    s = stream_text("x")
    loopback.queue(Reply.sse(s, cut_after=s.index("input_json_delta") + 10))
    with pytest.raises(ProviderFailure) as ei:
        claude(loopback, stream=True).complete(build_request())
    assert ei.value.kind == "stream_interrupted"


def test_stream_clean_eof_without_stop_is_interrupted(loopback: LoopbackServer) -> None:
    s = stream_text("x")
    loopback.queue(Reply.sse(s[: s.index("event: message_delta")]))
    with pytest.raises(ProviderFailure) as ei:
        claude(loopback, stream=True).complete(build_request())
    assert ei.value.kind == "stream_interrupted" and "without message_stop" in ei.value.message
