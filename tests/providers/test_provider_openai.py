"""OpenAI Responses (``openai/``) and Codex streaming (``openai-codex/``):
request shapes as recorded by the loopback server, and response parsing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from provider_helpers import WEATHER_TOOL, build_request, tool_round_conversation

from holon_cli.providers.base import ConversationItem, ProviderFailure, ToolCall
from holon_cli.providers.openai_codex import OpenAICodexTransport
from holon_cli.providers.openai_responses import OpenAIResponsesTransport

KEY = "sk-test-openai"


def msg(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def fc(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(args),
    }


def resp(*items: dict[str, Any], status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "output": list(items),
        "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12},
        **extra,
    }


def sse(*events: dict[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def responses(srv: LoopbackServer, **kw: Any) -> OpenAIResponsesTransport:
    return OpenAIResponsesTransport(model="gpt-4.1", base_url=f"{srv.url}/v1", api_key=KEY, **kw)


def codex(srv: LoopbackServer) -> OpenAICodexTransport:
    return OpenAICodexTransport(model="gpt-5-codex", base_url=f"{srv.url}/v1", api_key=KEY)


# ------------------------------------------------------------ Responses JSON


def test_text_reply_and_request_shape(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(resp(msg("Hello there."))))
    req = build_request(
        [ConversationItem(role="user", text="hi")],
        tools=[WEATHER_TOOL],
        system="SYS",
        system_blocks=["GUIDE"],
        context_blocks=["CTX1", "CTX2"],
        prompt_cache_key="agent-main:abc",
        max_output_tokens=512,
    )
    out = responses(loopback).complete(req)
    assert out.text == "Hello there." and out.stop_reason == "end_turn" and out.tool_calls == []
    assert out.usage is not None and out.usage.to_dict() == {
        "input_tokens": 10,
        "output_tokens": 2,
        "total_tokens": 12,
    }
    assert out.response_id == "resp_1"

    r = loopback.requests[0]
    assert r.method == "POST" and r.path == "/v1/responses"
    assert r.headers["authorization"] == f"Bearer {KEY}"
    body = r.json()
    assert body["model"] == "gpt-4.1"
    assert body["instructions"] == "SYS\n\nGUIDE"
    assert body["input"][0] == {
        "role": "user",
        "content": [{"type": "input_text", "text": "CTX1\n\nCTX2"}],
    }
    assert body["input"][1] == {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": WEATHER_TOOL.input_schema,
            "strict": False,
        }
    ]
    assert body["prompt_cache_key"] == "agent-main:abc"
    assert body["max_output_tokens"] == 512
    assert body["store"] is False and body["stream"] is False


def test_optional_fields_absent_when_unset(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(resp(msg("ok"))))
    responses(loopback).complete(build_request())
    body = loopback.requests[0].json()
    for k in ("prompt_cache_key", "max_output_tokens", "tools", "tool_choice"):
        assert k not in body


def test_tool_call_then_result_sent_back_as_function_call_output(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(resp(fc("call_w1", "get_weather", {"city": "Paris"}))))
    t = responses(loopback)
    first = t.complete(
        build_request(
            [ConversationItem(role="user", text="Weather in Paris?")], tools=[WEATHER_TOOL]
        )
    )
    assert first.stop_reason == "tool_use"
    call = first.tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_w1", "get_weather", {"city": "Paris"})

    # the runtime appends the assistant round and the tool result, then asks again
    loopback.queue(Reply.json_body(resp(msg("It is sunny."))))
    convo = [
        ConversationItem(role="user", text="Weather in Paris?"),
        ConversationItem(role="assistant", text="", tool_calls=[call]),
        ConversationItem(role="tool", call_id=call.id, name=call.name, text="sunny, 21C"),
    ]
    second = t.complete(build_request(convo, tools=[WEATHER_TOOL]))
    assert second.text == "It is sunny."
    items = loopback.requests[1].json()["input"]
    # arguments echo the model's own JSON text (byte-identical history keeps caches warm)
    assert items[1] == {
        "type": "function_call",
        "call_id": "call_w1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    assert items[2] == {
        "type": "function_call_output",
        "call_id": "call_w1",
        "output": "sunny, 21C",
    }


def test_assistant_text_is_an_output_message_item(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(resp(msg("done"))))
    responses(loopback).complete(build_request(tool_round_conversation("c9")))
    items = loopback.requests[0].json()["input"]
    assert items[1] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
    }
    assert [i.get("type") for i in items[2:]] == ["function_call", "function_call_output"]


def test_parallel_calls_parsed_and_sent_back_in_order(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            resp(
                msg("Checking both."),
                fc("c1", "get_weather", {"city": "Paris"}),
                fc("c2", "get_weather", {"city": "Oslo"}),
            )
        )
    )
    out = responses(loopback).complete(build_request(tools=[WEATHER_TOOL]))
    assert [b["type"] for b in out.blocks] == ["text", "tool_call", "tool_call"]
    assert [c.id for c in out.tool_calls] == ["c1", "c2"]

    loopback.queue(Reply.json_body(resp(msg("Both sunny."))))
    convo = [
        ConversationItem(role="user", text="Paris and Oslo?"),
        ConversationItem(role="assistant", text="Checking both.", tool_calls=out.tool_calls),
        ConversationItem(role="tool", call_id="c1", name="get_weather", text="sunny"),
        ConversationItem(role="tool", call_id="c2", name="get_weather", text="rain", is_error=True),
    ]
    responses(loopback).complete(build_request(convo))
    items = loopback.requests[1].json()["input"]
    assert [(i.get("type"), i.get("call_id")) for i in items[2:]] == [
        ("function_call", "c1"),
        ("function_call", "c2"),
        ("function_call_output", "c1"),
        ("function_call_output", "c2"),
    ]


def test_reasoning_items_ignored_and_bad_arguments_kept_raw(loopback: LoopbackServer) -> None:
    bad = {
        "type": "function_call",
        "call_id": "c1",
        "name": "get_weather",
        "arguments": '{"city": "Par',
    }
    loopback.queue(Reply.json_body(resp({"type": "reasoning", "id": "rs_1", "summary": []}, bad)))
    out = responses(loopback).complete(build_request())
    call = out.tool_calls[0]
    assert call.arguments == {} and call.raw_arguments == '{"city": "Par' and call.arguments_error
    # echoed back verbatim so the model sees its own mistake
    loopback.queue(Reply.json_body(resp(msg("ok"))))
    convo = [
        ConversationItem(role="user", text="x"),
        ConversationItem(role="assistant", tool_calls=[call]),
        ConversationItem(role="tool", call_id="c1", text="error: bad JSON", is_error=True),
    ]
    responses(loopback).complete(build_request(convo))
    assert loopback.requests[1].json()["input"][1]["arguments"] == '{"city": "Par'


def test_incomplete_without_content_is_incomplete_failure(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            resp(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        )
    )
    with pytest.raises(ProviderFailure) as ei:
        responses(loopback).complete(build_request())
    assert ei.value.kind == "incomplete" and not ei.value.retryable


def test_incomplete_content_filter_keeps_text(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            resp(
                msg("partial"), status="incomplete", incomplete_details={"reason": "content_filter"}
            )
        )
    )
    out = responses(loopback).complete(build_request())
    assert out.stop_reason == "content_filter" and out.text == "partial"


def test_failed_status_in_200_body_is_classified(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            resp(status="failed", error={"code": "server_error", "message": "internal"})
        )
    )
    with pytest.raises(ProviderFailure) as ei:
        responses(loopback).complete(build_request())
    assert ei.value.kind == "server_error" and "internal" in ei.value.message


def test_configured_max_output_tokens_default(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(resp(msg("ok"))))
    responses(loopback, max_output_tokens=2048).complete(build_request())
    assert loopback.requests[0].json()["max_output_tokens"] == 2048


# ------------------------------------------------------------ Codex SSE


def text_stream(
    text: str = "pong", *, terminal: str = "response.completed", output_in_terminal: bool = True
) -> str:
    item = msg(text) | {"id": "msg_1", "status": "completed"}
    return sse(
        {
            "type": "response.created",
            "response": {"id": "resp_s", "status": "in_progress", "output": []},
            "sequence_number": 0,
        },
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
            "sequence_number": 1,
        },
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "item_id": "msg_1",
            "delta": text,
            "sequence_number": 2,
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": item,
            "sequence_number": 3,
        },
        {
            "type": terminal,
            "response": {
                "id": "resp_s",
                "status": "completed" if terminal == "response.completed" else "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"}
                if terminal != "response.completed"
                else None,
                "output": [item] if output_in_terminal else [],
                "usage": {"input_tokens": 11, "output_tokens": 5, "total_tokens": 16},
            },
            "sequence_number": 4,
        },
    )


def test_codex_request_shape(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.sse(text_stream()))
    out = codex(loopback).complete(
        build_request(tools=[WEATHER_TOOL], max_output_tokens=999, prompt_cache_key="k")
    )
    assert out.text == "pong" and out.stop_reason == "end_turn"
    r = loopback.requests[0]
    assert r.path == "/v1/responses" and r.headers["authorization"] == f"Bearer {KEY}"
    assert "text/event-stream" in r.headers["accept"]
    body = r.json()
    assert body["stream"] is True
    assert "max_output_tokens" not in body
    assert body["reasoning"] is None and body["include"] == []
    assert body["store"] is False and body["prompt_cache_key"] == "k"
    assert body["tools"][0]["strict"] is False


def test_codex_rebuilds_output_from_item_done_events(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.sse(text_stream("rebuilt", output_in_terminal=False)))
    out = codex(loopback).complete(build_request())
    assert out.text == "rebuilt" and out.usage is not None and out.usage.total_tokens == 16


def test_codex_incomplete_with_content_is_max_tokens(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.sse(text_stream("half", terminal="response.incomplete")))
    out = codex(loopback).complete(build_request())
    assert out.stop_reason == "max_tokens" and out.text == "half"
    assert out.raw_stop_reason == "incomplete:max_output_tokens"


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("rate_limit_exceeded", "rate_limited"),
        ("insufficient_quota", "quota_exceeded"),
        ("context_length_exceeded", "context_length_exceeded"),
        ("invalid_prompt", "provider_error"),
    ],
)
def test_codex_response_failed_classified_by_code(
    loopback: LoopbackServer, code: str, kind: str
) -> None:
    loopback.queue(
        Reply.sse(
            sse(
                {
                    "type": "response.failed",
                    "response": {
                        "id": "r",
                        "status": "failed",
                        "error": {"code": code, "message": f"{code} happened"},
                    },
                }
            )
        )
    )
    with pytest.raises(ProviderFailure) as ei:
        codex(loopback).complete(build_request())
    assert ei.value.kind == kind and f"{code} happened" in ei.value.message
    assert ei.value.stage == "stream" and ei.value.status == 200


def test_codex_stream_cut_mid_event_is_stream_interrupted(loopback: LoopbackServer) -> None:
    text = text_stream()
    cut = text.index("response.output_item.done") + 40  # inside an event's data line
    loopback.queue(Reply.sse(text, cut_after=cut))
    with pytest.raises(ProviderFailure) as ei:
        codex(loopback).complete(build_request())
    assert (
        ei.value.kind == "stream_interrupted" and ei.value.retryable and ei.value.stage == "stream"
    )


def test_codex_stream_ending_before_terminal_is_stream_interrupted(
    loopback: LoopbackServer,
) -> None:
    text = text_stream()
    loopback.queue(
        Reply.sse(text[: text.index("event: response.completed")])
    )  # clean EOF, no terminal
    with pytest.raises(ProviderFailure) as ei:
        codex(loopback).complete(build_request())
    assert ei.value.kind == "stream_interrupted"
    assert "without response.completed" in ei.value.message


def test_codex_tolerates_pings_unknown_events_and_no_event_lines(loopback: LoopbackServer) -> None:
    body = ": ping\n\n" + "data: " + json.dumps({"type": "response.future_thing", "x": 1}) + "\n\n"
    # events without `event:` lines (type only in data), plus keep-alive comments
    body += "".join(
        f"data: {json.dumps(e)}\n\n: keep-alive\n\n"
        for e in [
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": fc("c7", "get_weather", {"city": "Rome"}),
            },
            {
                "type": "response.completed",
                "response": {"id": "r", "status": "completed", "output": []},
            },
        ]
    )
    loopback.queue(Reply.sse(body))
    out = codex(loopback).complete(build_request())
    assert out.stop_reason == "tool_use" and out.tool_calls[0].arguments == {"city": "Rome"}
    assert out.usage is None


def test_codex_error_before_stream_is_plain_json(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            {
                "error": {
                    "message": "Unsupported parameter: 'max_output_tokens'",
                    "code": "unsupported_parameter",
                }
            },
            status=400,
        )
    )
    with pytest.raises(ProviderFailure) as ei:
        codex(loopback).complete(build_request())
    assert ei.value.kind == "client_error" and "Unsupported parameter" in ei.value.message


def test_codex_server_ignoring_stream_flag_still_parses(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(resp(msg("plain json"))))
    out = codex(loopback).complete(build_request())
    assert out.text == "plain json"


def test_codex_200_without_events_is_invalid_response(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.text("nothing to see here", content_type="text/plain"))
    with pytest.raises(ProviderFailure) as ei:
        codex(loopback).complete(build_request())
    assert ei.value.kind == "invalid_response"


def test_tool_call_ids_unique_even_if_provider_repeats_them(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(resp(fc("dup", "a", {}), fc("dup", "b", {}))))
    out = responses(loopback).complete(build_request())
    ids = [c.id for c in out.tool_calls]
    assert len(set(ids)) == 2 and ids[0] == "dup"


def test_toolcall_dataclass_roundtrip_for_followups() -> None:
    c = ToolCall(id="x", name="n", arguments={"a": 1})
    assert c.to_dict() == {"id": "x", "name": "n", "arguments": {"a": 1}}


def test_cached_input_tokens_are_named_in_the_usage() -> None:
    from holon_cli.providers.openai_responses import parse_response_object

    obj = {
        "id": "resp_1",
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}],
        "usage": {
            "input_tokens": 300,
            "output_tokens": 4,
            "total_tokens": 304,
            "input_tokens_details": {"cached_tokens": 256},
        },
    }
    usage = parse_response_object(obj).usage
    assert usage is not None and usage.to_dict() == {
        "input_tokens": 300,
        "output_tokens": 4,
        "total_tokens": 304,
        "cache_read_input_tokens": 256,
    }
