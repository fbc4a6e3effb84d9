"""http_common: status and exception classification, retry hints, SSE
parsing, and credential hygiene, over real sockets on 127.0.0.1."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from loopback import LoopbackServer, Reply, closed_port
from provider_helpers import build_request

from holon_cli.providers.base import ProviderFailure
from holon_cli.providers.http_common import (
    HttpTarget,
    classify_http_error,
    parse_retry_after,
    safe_url,
)
from holon_cli.providers.openai_chat import OpenAIChatTransport
from holon_cli.providers.openai_responses import OpenAIResponsesTransport
from holon_cli.providers.sse import iter_sse
from holon_cli.providers.wire import is_context_overflow, parse_arguments, retry_hint_from_message

KEY = "sk-live-TOPSECRET-abcdef123456"


def responses(url: str, **kw: object) -> OpenAIResponsesTransport:
    return OpenAIResponsesTransport(
        model="gpt-test", base_url=url, api_key=KEY, key_env="OPENAI_API_KEY", **kw
    )  # type: ignore[arg-type]


def fail_of(transport: object) -> ProviderFailure:
    with pytest.raises(ProviderFailure) as ei:
        transport.complete(build_request())  # type: ignore[attr-defined]
    return ei.value


TEXT_OK = {
    "id": "resp_1",
    "status": "completed",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
    ],
}


# ------------------------------------------------------------ retry hints


def test_retry_after_seconds_ms_and_http_date() -> None:
    assert parse_retry_after({"retry-after": "16"}) == 16.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = datetime(2025, 6, 2, 15, 14, 0, tzinfo=UTC)
    later = format_datetime(datetime(2025, 6, 2, 15, 14, 42, tzinfo=UTC), usegmt=True)
    assert parse_retry_after({"retry-after": later}, now=now.timestamp()) == pytest.approx(42.0)
    past = format_datetime(datetime(2025, 6, 2, 15, 0, 0, tzinfo=UTC), usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now.timestamp()) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Please try again in 26.604s. Visit ...", 26.604),
        ("Please try again in 120ms.", 0.12),
        ("Please try again in 1m30s.", 90.0),
        ("Rate limited, try later.", None),
        (None, None),
    ],
)
def test_retry_hint_in_message(message: str | None, expected: float | None) -> None:
    got = retry_hint_from_message(message)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_context_overflow_detection() -> None:
    assert is_context_overflow("context_length_exceeded", None)
    assert is_context_overflow(None, "prompt is too long: 200251 tokens > 200000 maximum")
    assert is_context_overflow(
        None, "input length and `max_tokens` exceed context limit: 1 + 2 > 3"
    )
    assert is_context_overflow(None, "This model's maximum context length is 4097 tokens.")
    assert is_context_overflow(None, "Your input exceeds the context window of this model.")
    assert not is_context_overflow("invalid_value", "Invalid 'temperature'")


def test_parse_arguments_keeps_raw_text_on_error() -> None:
    assert parse_arguments('{"a": 1}') == ({"a": 1}, '{"a": 1}', None)
    assert parse_arguments({"a": 1}) == ({"a": 1}, None, None)
    assert parse_arguments("") == ({}, "", None)
    args, raw, err = parse_arguments('{"a": ')
    assert args == {} and raw == '{"a": ' and err and "not valid JSON" in err
    args, raw, err = parse_arguments("[1, 2]")
    assert args == {} and err and "JSON object" in err


# --------------------------------------------------------- classification


def target() -> HttpTarget:
    return HttpTarget(
        provider="openai",
        model_ref="openai/gpt-test",
        url="https://user:pw@api.example/v1/responses?key=abc",
        key_env="OPENAI_API_KEY",
    )


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (401, {"error": {"message": "bad key", "code": "invalid_api_key"}}, "auth"),
        (403, {"error": {"message": "forbidden"}}, "auth"),
        (404, {"error": {"message": "no such model"}}, "client_error"),
        (408, {"error": {"message": "request timeout"}}, "timeout"),
        (422, {"detail": [{"msg": "field required"}]}, "client_error"),
        (429, {"error": {"message": "slow down", "code": "rate_limit_exceeded"}}, "rate_limited"),
        (
            429,
            {
                "error": {
                    "message": "quota",
                    "code": "insufficient_quota",
                    "type": "insufficient_quota",
                }
            },
            "quota_exceeded",
        ),
        (500, {"error": {"message": "boom"}}, "server_error"),
        (501, {"error": {"message": "not implemented"}}, "client_error"),
        (502, "<html>Bad gateway</html>", "server_error"),
        (503, "", "server_error"),
        (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "server_error",
        ),
        (
            400,
            {"error": {"message": "x", "code": "context_length_exceeded"}},
            "context_length_exceeded",
        ),
        (
            413,
            {
                "type": "error",
                "error": {
                    "type": "request_too_large",
                    "message": "Request exceeds the maximum allowed number of bytes.",
                },
            },
            "client_error",
        ),
    ],
)
def test_status_classification(status: int, body: object, kind: str) -> None:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    f = classify_http_error(status, {}, raw, target())
    assert f.kind == kind
    assert f.status == status and f.stage == "status"
    assert f"HTTP {status}" in f.message
    assert f.url == "https://api.example/v1/responses"  # no user-info, no query


def test_status_error_message_carries_provider_message_and_auth_hint() -> None:
    raw = json.dumps(
        {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
    ).encode()
    f = classify_http_error(401, {}, raw, target())
    assert "Incorrect API key provided" in f.message and "invalid_api_key" in f.message
    assert f.hint and "OPENAI_API_KEY" in f.hint


def test_safe_url_strips_credentials() -> None:
    assert safe_url("https://u:p@h.example:8443/v1/x?api-key=1#f") == "https://h.example:8443/v1/x"


# ------------------------------------------------------------ over sockets


def test_timeout_is_retryable_timeout(loopback: LoopbackServer) -> None:
    loopback.queue(Reply(delay_s=1.0, body=b"{}"))
    f = fail_of(responses(loopback.url, timeout_s=0.2))
    assert f.kind == "timeout" and f.retryable
    assert f.stage in ("request", "body")
    assert "0.2s" in f.message


def test_connection_refused_is_connection_failure() -> None:
    f = fail_of(responses(f"http://127.0.0.1:{closed_port()}/v1"))
    assert f.kind == "connection" and f.stage == "connect" and f.retryable
    assert f.source_chain and "ConnectError" in f.source_chain[0]


def test_body_cut_mid_way_is_retryable_connection_failure(loopback: LoopbackServer) -> None:
    body = json.dumps(TEXT_OK).encode()
    loopback.queue(
        Reply(headers={"content-type": "application/json"}, body=body, cut_after=len(body) // 2)
    )
    f = fail_of(responses(loopback.url))
    assert f.kind == "connection" and f.stage == "body" and f.retryable


def test_truncated_json_with_complete_framing_is_invalid_response(loopback: LoopbackServer) -> None:
    text = json.dumps(TEXT_OK)[:40]
    loopback.queue(Reply.text(text, content_type="application/json"))
    f = fail_of(responses(loopback.url))
    assert f.kind == "invalid_response" and f.stage == "decode"
    assert "truncated" in f.message and f.body_preview == text


def test_non_json_200_is_invalid_response(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.text("<html>captive portal</html>", content_type="text/html"))
    f = fail_of(responses(loopback.url))
    assert f.kind == "invalid_response" and f.stage == "decode" and f.status == 200


def test_wrong_shape_200_is_invalid_response(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body({"hello": "world"}))
    f = fail_of(responses(loopback.url))
    assert f.kind == "invalid_response" and f.stage == "body"
    loopback.queue(Reply.json_body([1, 2, 3]))
    assert fail_of(responses(loopback.url)).kind == "invalid_response"
    # a Chat Completions answer from a misconfigured endpoint is not an empty reply
    loopback.queue(
        Reply.json_body({"id": "chatcmpl-1", "object": "chat.completion", "choices": []})
    )
    f = fail_of(responses(loopback.url))
    assert f.kind == "invalid_response" and "choices" in f.message


def test_429_with_retry_after_ms(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            {"error": {"message": "slow", "code": "rate_limit_exceeded"}},
            status=429,
            headers={"retry-after-ms": "1500"},
        )
    )
    f = fail_of(responses(loopback.url))
    assert f.kind == "rate_limited" and f.retry_after_s == 1.5 and f.status == 429


def test_redirect_is_client_error_naming_target(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply(status=308, headers={"location": "https://elsewhere.example/v1/responses?token=zzz"})
    )
    f = fail_of(responses(loopback.url))
    assert f.kind == "client_error" and "elsewhere.example" in f.message and "zzz" not in f.message


def test_invalid_base_url_is_client_error() -> None:
    f = fail_of(responses("localhost-without-scheme/v1"))
    assert f.kind == "client_error"


def test_api_key_never_echoed(loopback: LoopbackServer) -> None:
    # a (misbehaving) server that echoes the credential back in its error
    loopback.queue(Reply.json_body({"error": {"message": f"key {KEY} is revoked"}}, status=401))
    f = fail_of(responses(loopback.url))
    assert KEY not in f.message and KEY not in (f.body_preview or "")
    assert "[REDACTED]" in f.message
    assert KEY not in repr(responses(loopback.url))
    # ... but it was sent, in the header only
    req = loopback.requests[0]
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert KEY.encode() not in req.body


def test_user_agent_and_content_type(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(TEXT_OK))
    responses(loopback.url).complete(build_request())
    h = loopback.requests[0].headers
    assert h["content-type"] == "application/json" and h["user-agent"].startswith("holon-cli/")


def test_extra_headers_from_config_are_sent(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]})
    )
    OpenAIChatTransport(
        provider="gw", model="m", base_url=loopback.url, headers={"x-gateway": "team-a"}
    ).complete(build_request())
    h = loopback.requests[0].headers
    assert h["x-gateway"] == "team-a" and "authorization" not in h


# ------------------------------------------------------------------ SSE


def test_iter_sse_handles_comments_multiline_crlf_and_tail() -> None:
    lines = [
        ": keep-alive",
        "event: a",
        'data: {"x":',
        "data: 1}",
        "",
        "retry: 1000",
        "id: 7",
        "data: second\r",
        "\r",
        'data: {"tail": true}',  # final event without the blank line
    ]
    evs = list(iter_sse(lines))
    assert [(e.event, e.data) for e in evs] == [
        ("a", '{"x":\n1}'),
        (None, "second"),
        (None, '{"tail": true}'),
    ]
    assert evs[1].id == "7"
    # a half-written event at EOF is dropped
    assert list(iter_sse(['data: {"cut": tr'])) == []
    assert [e.data for e in iter_sse(["data: [DONE]"])] == ["[DONE]"]
