"""Chat Completions transport for config-declared compatible providers:
request shape, tool-result follow-ups, liberal parsing, and the chunk stream."""

from __future__ import annotations

import json
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from provider_helpers import WEATHER_TOOL, build_request, tool_round_conversation

from holon_cli.providers.base import ConversationItem, ProviderFailure, ToolCall
from holon_cli.providers.openai_chat import OpenAIChatTransport, parse_completion

KEY = "local-key-123"


def chat(
    srv: LoopbackServer, *, stream: bool = False, api_key: str | None = KEY, **kw: Any
) -> OpenAIChatTransport:
    return OpenAIChatTransport(
        provider="local",
        model="qwen",
        base_url=f"{srv.url}/v1",
        api_key=api_key,
        stream=stream,
        **kw,
    )


def completion(
    message: dict[str, Any], finish: str | None = "stop", **extra: Any
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        **extra,
    }


def chunks(*objs: dict[str, Any], done: bool = True) -> str:
    text = "".join(f"data: {json.dumps(o)}\n\n" for o in objs)
    return text + ("data: [DONE]\n\n" if done else "")


def delta(d: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


def test_request_shape(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(completion({"content": "hello"})))
    req = build_request(
        [ConversationItem(role="user", text="hi")],
        tools=[WEATHER_TOOL],
        system="SYS",
        system_blocks=["B"],
        context_blocks=["CTX"],
        max_output_tokens=100,
    )
    out = chat(loopback).complete(req)
    assert out.text == "hello" and out.stop_reason == "end_turn"
    assert out.usage is not None and out.usage.to_dict() == {
        "input_tokens": 5,
        "output_tokens": 3,
        "total_tokens": 8,
    }
    r = loopback.requests[0]
    assert r.path == "/v1/chat/completions" and r.headers["authorization"] == f"Bearer {KEY}"
    body = r.json()
    assert body["model"] == "qwen" and body["stream"] is False and body["max_tokens"] == 100
    assert body["messages"] == [
        {"role": "system", "content": "SYS\n\nB"},
        {"role": "user", "content": "CTX"},
        {"role": "user", "content": "hi"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER_TOOL.input_schema,
            },
        }
    ]


def test_no_key_no_authorization_header(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(completion({"content": "ok"})))
    chat(loopback, api_key=None).complete(build_request())
    assert "authorization" not in loopback.requests[0].headers


def test_tool_result_followup_shape(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            completion(
                {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_A",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        }
                    ],
                },
                "tool_calls",
            )
        )
    )
    first = chat(loopback).complete(build_request(tools=[WEATHER_TOOL]))
    assert first.stop_reason == "tool_use" and first.tool_calls[0].id == "call_A"

    loopback.queue(Reply.json_body(completion({"content": "Sunny."})))
    convo = [
        ConversationItem(role="user", text="Weather?"),
        ConversationItem(role="assistant", tool_calls=first.tool_calls),
        ConversationItem(role="tool", call_id="call_A", name="get_weather", text="sunny"),
    ]
    chat(loopback).complete(build_request(convo))
    msgs = loopback.requests[1].json()["messages"]
    # "" rather than null: llama.cpp, Ollama and LM Studio reject null (see
    # test_provider_fixtures::test_chat_tool_loop_against_strict_servers)
    assert msgs[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_A",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
        ],
    }
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_A", "content": "sunny"}


def test_runtime_built_calls_serialize_compact_json(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(completion({"content": "ok"})))
    chat(loopback).complete(build_request(tool_round_conversation("c1")))
    msgs = loopback.requests[0].json()["messages"]
    assert msgs[2]["content"] == "Let me check."
    assert msgs[2]["tool_calls"][0]["function"]["arguments"] == '{"city":"Paris"}'


def test_parallel_calls_and_results(loopback: LoopbackServer) -> None:
    calls = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        },
        {
            "id": "c2",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
        },
    ]
    loopback.queue(
        Reply.json_body(completion({"content": None, "tool_calls": calls}, "tool_calls"))
    )
    out = chat(loopback).complete(build_request())
    assert [(c.id, c.arguments["city"]) for c in out.tool_calls] == [
        ("c1", "Paris"),
        ("c2", "Oslo"),
    ]
    loopback.queue(Reply.json_body(completion({"content": "done"})))
    convo = [
        ConversationItem(role="user", text="x"),
        ConversationItem(role="assistant", tool_calls=out.tool_calls),
    ]
    convo += [
        ConversationItem(role="tool", call_id=c.id, text=f"r{i}")
        for i, c in enumerate(out.tool_calls)
    ]
    chat(loopback).complete(build_request(convo))
    msgs = loopback.requests[1].json()["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in msgs[3:]] == [
        ("tool", "c1"),
        ("tool", "c2"),
    ]


# ------------------------------------------------------------- liberal parse


def test_missing_ids_are_synthesized_stably() -> None:
    body = completion(
        {
            "tool_calls": [
                {"type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"function": {"name": "g", "arguments": "{}"}},
            ]
        },
        "tool_calls",
    )
    a, b = parse_completion(body), parse_completion(json.loads(json.dumps(body)))
    ids = [c.id for c in a.tool_calls]
    assert ids == [c.id for c in b.tool_calls] and all(ids) and len(set(ids)) == 2


def test_odd_id_shapes_objects_and_duplicates() -> None:
    body = completion(
        {
            "content": [{"type": "text", "text": "Using "}, {"type": "text", "text": "tools."}],
            "tool_calls": [
                {"id": 0, "type": "function", "function": {"name": "f", "arguments": {"x": 1}}},
                {"id": 0, "type": "function", "function": {"name": "g", "arguments": '{"y": 2}'}},
            ],
            "function_call": {
                "name": "f",
                "arguments": '{"x": 1}',
            },  # legacy duplicate of the first
        },
        "stop",  # some servers say "stop" even with tool calls
    )
    out = parse_completion(body)
    assert out.text == "Using tools."
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("f", {"x": 1}), ("g", {"y": 2})]
    assert out.tool_calls[0].id == "0" and out.tool_calls[1].id != "0"
    assert out.stop_reason == "tool_use"


def test_legacy_function_call_alone() -> None:
    out = parse_completion(
        completion(
            {"content": None, "function_call": {"name": "f", "arguments": '{"a": 1}'}},
            "function_call",
        )
    )
    assert (
        out.stop_reason == "tool_use"
        and out.tool_calls[0].arguments == {"a": 1}
        and out.tool_calls[0].id
    )


def test_error_object_in_200_body_is_classified() -> None:
    with pytest.raises(ProviderFailure) as ei:
        parse_completion(
            {
                "error": {
                    "message": "model overloaded, try again in 2s",
                    "code": "rate_limit_exceeded",
                }
            }
        )
    assert ei.value.kind == "rate_limited" and ei.value.retry_after_s == 2.0


# ------------------------------------------------------------------ stream


def test_stream_request_and_tool_call_deltas_by_index_with_repeated_ids(
    loopback: LoopbackServer,
) -> None:
    loopback.queue(
        Reply.sse(
            chunks(
                delta({"role": "assistant", "content": "Checking"}),
                delta(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": ""},
                            }
                        ]
                    }
                ),
                delta(
                    {
                        "tool_calls": [
                            {
                                "index": 1,
                                "id": "call_2",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"ci'},
                            }
                        ]
                    }
                ),
                delta(
                    {
                        "tool_calls": [
                            {"index": 0, "id": "call_1", "function": {"arguments": '{"city":'}}
                        ]
                    }
                ),  # id repeated
                delta({"tool_calls": [{"index": 1, "function": {"arguments": 'ty":"Oslo"}'}}]}),
                delta(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "function": {"name": "get_weather", "arguments": '"Paris"}'},
                            }
                        ]
                    }
                ),
                delta({}, "tool_calls"),
                {
                    "id": "chatcmpl-s",
                    "choices": [],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
                },
            )
        )
    )
    out = chat(loopback, stream=True).complete(build_request(tools=[WEATHER_TOOL]))
    body = loopback.requests[0].json()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert out.text == "Checking" and out.stop_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"}),
        ("call_2", "get_weather", {"city": "Oslo"}),
    ]
    assert out.usage is not None and out.usage.total_tokens == 13


def test_stream_without_index_or_ids(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.sse(
            chunks(
                delta({"tool_calls": [{"function": {"name": "f", "arguments": '{"a"'}}]}),
                delta({"tool_calls": [{"function": {"arguments": ": 1}"}}]}),
                delta({}, "tool_calls"),
            )
        )
    )
    out = chat(loopback, stream=True).complete(build_request())
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("f", {"a": 1})] and out.tool_calls[
        0
    ].id


def test_stream_missing_done_after_finish_is_accepted(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.sse(chunks(delta({"content": "fine"}), delta({}, "length"), done=False)))
    out = chat(loopback, stream=True).complete(build_request())
    assert out.text == "fine" and out.stop_reason == "max_tokens"


def test_stream_truncated_before_finish_is_interrupted(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.sse(
            chunks(delta({"content": "The capital"}), done=False) + 'data: {"id":"chatcmpl-s","choi'
        )
    )
    with pytest.raises(ProviderFailure) as ei:
        chat(loopback, stream=True).complete(build_request())
    assert ei.value.kind == "stream_interrupted" and ei.value.retryable


def test_stream_connection_cut_is_interrupted(loopback: LoopbackServer) -> None:
    text = chunks(delta({"content": "a"}), delta({"content": "b"}), delta({}, "stop"))
    loopback.queue(Reply.sse(text, cut_after=text.index("\n\n") + 2))
    with pytest.raises(ProviderFailure) as ei:
        chat(loopback, stream=True).complete(build_request())
    assert ei.value.kind == "stream_interrupted" and ei.value.stage == "stream"


def test_stream_error_chunk_is_classified(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.sse(
            chunks(
                {"error": {"message": "This model's maximum context length is 8192 tokens"}},
                done=False,
            )
        )
    )
    with pytest.raises(ProviderFailure) as ei:
        chat(loopback, stream=True).complete(build_request())
    assert ei.value.kind == "context_length_exceeded"


def test_stream_flag_but_json_answer(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(completion({"content": "not streamed"})))
    out = chat(loopback, stream=True).complete(build_request())
    assert out.text == "not streamed"


def test_tool_call_dataclass_is_reusable_in_next_request(loopback: LoopbackServer) -> None:
    call = ToolCall(
        id="x1", name="get_weather", arguments={"city": "Rome"}, raw_arguments='{"city": "Rome"}'
    )
    loopback.queue(Reply.json_body(completion({"content": "ok"})))
    chat(loopback).complete(
        build_request(
            [
                ConversationItem(role="user", text="q"),
                ConversationItem(role="assistant", tool_calls=[call]),
                ConversationItem(role="tool", call_id="x1", text="warm"),
            ]
        )
    )
    fn = loopback.requests[0].json()["messages"][2]["tool_calls"][0]["function"]
    assert fn == {"name": "get_weather", "arguments": '{"city": "Rome"}'}


def test_cached_prompt_tokens_are_named_in_the_usage() -> None:
    body = completion({"content": "hi"}, "stop")
    body["usage"] = {
        "prompt_tokens": 120,
        "completion_tokens": 7,
        "total_tokens": 127,
        "prompt_tokens_details": {"cached_tokens": 100},
    }
    usage = parse_completion(body).usage
    assert usage is not None and usage.input_tokens == 120
    assert usage.cache_read_input_tokens == 100 and usage.cache_creation_input_tokens == 0
    body["usage"].pop("prompt_tokens_details")
    assert "cache_read_input_tokens" not in parse_completion(body).usage.to_dict()
