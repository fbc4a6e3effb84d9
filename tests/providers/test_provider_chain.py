"""call_with_fallback: the spec's phase-1 retry / fail-fast / fallback rules
and the provider-attempt timeline, with real HTTP where it matters and an
injected sleep and clock (no test waits for a backoff)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from provider_helpers import build_request

from holon_cli import clock as holon_clock
from holon_cli.errors import EXIT_PROVIDER, ConfigError, ProviderError
from holon_cli.providers.base import ModelResponse, ProviderFailure, ProviderRequest, TokenUsage
from holon_cli.providers.chain import ChainFailure, call_with_fallback, retry_policy

OK_BODY = {
    "id": "r",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "winner"}],
        }
    ],
    "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
}
ANTHROPIC_OK = {
    "id": "m",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "from claude"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 2},
}
TIMELINE_KEYS = {
    "provider",
    "model_ref",
    "attempt",
    "max_attempts",
    "started_at",
    "completed_at",
    "duration_ms",
    "outcome",
    "advanced_to_fallback",
}


def env_for(srv: LoopbackServer) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "sk-o",
        "OPENAI_BASE_URL": f"{srv.url}/v1",
        "ANTHROPIC_API_KEY": "sk-a",
        "ANTHROPIC_BASE_URL": srv.url,
    }


def run(candidates: list[str], srv: LoopbackServer, sleeps: list[float], **kw: Any) -> Any:
    return call_with_fallback(
        candidates, build_request(), sleep=sleeps.append, config={}, env=env_for(srv), **kw
    )


class Fake:
    """A transport that plays back outcomes (responses or failures)."""

    def __init__(self, ref: str, outcomes: list[ModelResponse | Exception]) -> None:
        self.provider = "scripted" if ref.startswith("scripted:") else ref.partition("/")[0]
        self.model_ref = ref
        self.outcomes = list(outcomes)
        self.calls = 0

    def complete(self, request: ProviderRequest) -> ModelResponse:
        self.calls += 1
        out = self.outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out


def fakes(
    **by_ref: list[ModelResponse | Exception],
) -> tuple[dict[str, Fake], Callable[[str], Fake]]:
    table = {
        ref.replace("__", "/"): Fake(ref.replace("__", "/"), outs) for ref, outs in by_ref.items()
    }
    return table, lambda ref: table[ref]


def text_response(t: str = "ok", usage: TokenUsage | None = None) -> ModelResponse:
    return ModelResponse(blocks=[{"type": "text", "text": t}], stop_reason="end_turn", usage=usage)


# ------------------------------------------------------------ over HTTP


def test_success_first_attempt_timeline(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(OK_BODY))
    slept: list[float] = []
    res = run(["openai/gpt-a"], loopback, slept)
    assert (
        res.response.text == "winner"
        and res.model_ref == "openai/gpt-a"
        and res.provider == "openai"
    )
    tl = res.timeline
    assert (
        tl["requested_model_ref"]
        == tl["active_model_ref"]
        == tl["winning_model_ref"]
        == "openai/gpt-a"
    )
    assert tl["aggregated_token_usage"] == {
        "input_tokens": 3,
        "output_tokens": 1,
        "total_tokens": 4,
    }
    (a,) = tl["attempts"]
    assert TIMELINE_KEYS <= set(a)
    assert a["outcome"] == "succeeded" and a["attempt"] == 1 and a["max_attempts"] == 3
    assert a["advanced_to_fallback"] is False and a["token_usage"]["total_tokens"] == 4
    assert "failure_kind" not in a and "backoff_ms" not in a
    holon_clock.parse_iso(a["started_at"]) and holon_clock.parse_iso(a["completed_at"])
    assert slept == []
    json.dumps(tl)  # the timeline is plain JSON


def test_429_then_success_honours_retry_after(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
            status=429,
            headers={"retry-after": "2"},
        ),
        Reply.json_body(OK_BODY),
    )
    slept: list[float] = []
    res = run(["openai/gpt-a"], loopback, slept)
    assert res.response.text == "winner"
    assert slept == [2.0]
    first, second = res.timeline["attempts"]
    assert (
        first["outcome"] == "retrying"
        and first["failure_kind"] == "rate_limited"
        and first["disposition"] == "retryable"
    )
    assert first["backoff_ms"] == 2000 and first["advanced_to_fallback"] is False
    diag = first["transport_diagnostics"]
    assert diag["status"] == 429 and diag["stage"] == "status" and diag["provider"] == "openai"
    assert diag["url"] == f"{loopback.url}/v1/responses" and diag["model_ref"] == "openai/gpt-a"
    assert second["outcome"] == "succeeded" and second["attempt"] == 2
    assert len(loopback.requests) == 2


def test_retry_after_is_capped(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            {"error": {"message": "slow"}}, status=429, headers={"retry-after": "3600"}
        ),
        Reply.json_body(OK_BODY),
    )
    slept: list[float] = []
    res = run(["openai/gpt-a"], loopback, slept, retry_after_cap_s=30.0)
    assert slept == [30.0] and res.timeline["attempts"][0]["backoff_ms"] == 30000


def test_401_fails_fast_then_falls_back(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}},
            status=401,
        ),
        Reply.json_body(ANTHROPIC_OK),
    )
    slept: list[float] = []
    res = run(["openai/gpt-a", "anthropic/claude-b"], loopback, slept)
    assert res.response.text == "from claude" and res.model_ref == "anthropic/claude-b"
    a1, a2 = res.timeline["attempts"]
    assert (
        a1["outcome"] == "fail_fast_aborted"
        and a1["failure_kind"] == "auth"
        and a1["disposition"] == "fail_fast"
    )
    assert a1["advanced_to_fallback"] is True and a1["attempt"] == 1
    assert a2["outcome"] == "succeeded" and a2["provider"] == "anthropic"
    assert (
        res.timeline["requested_model_ref"] == "openai/gpt-a"
        and res.timeline["winning_model_ref"] == "anthropic/claude-b"
    )
    assert slept == []
    assert [r.path for r in loopback.requests] == ["/v1/responses", "/v1/messages"]


def test_500s_exhaust_retries_then_fall_back(loopback: LoopbackServer) -> None:
    boom = Reply.json_body(
        {"error": {"message": "The server had an error", "type": "server_error"}}, status=500
    )
    loopback.queue(boom, boom, boom, Reply.json_body(ANTHROPIC_OK))
    slept: list[float] = []
    draws = iter([1.0, 1.0])  # the top of each jitter range: the exponential bound itself
    res = run(["openai/gpt-a", "anthropic/claude-b"], loopback, slept, rand=lambda: next(draws))
    assert res.response.text == "from claude"
    outcomes = [(a["model_ref"], a["attempt"], a["outcome"]) for a in res.timeline["attempts"]]
    assert outcomes == [
        ("openai/gpt-a", 1, "retrying"),
        ("openai/gpt-a", 2, "retrying"),
        ("openai/gpt-a", 3, "retries_exhausted"),
        ("anthropic/claude-b", 1, "succeeded"),
    ]
    assert res.timeline["attempts"][2]["advanced_to_fallback"] is True
    assert slept == [0.5, 1.0]  # exponential backoff, no retry-after given
    assert [a.get("backoff_ms") for a in res.timeline["attempts"][:2]] == [500, 1000]


def test_backoff_has_full_jitter_below_the_exponential_bound(loopback: LoopbackServer) -> None:
    """Retries without a retry-after spread over [0, bound): many clients
    failing together do not come back together."""
    boom = Reply.json_body({"error": {"message": "busy"}}, status=503)
    loopback.queue(boom, boom, Reply.json_body(OK_BODY))
    slept: list[float] = []
    draws = iter([0.25, 0.5])
    res = run(["openai/gpt-a"], loopback, slept, rand=lambda: next(draws))
    assert slept == [0.125, 0.5]  # 0.25 x 0.5 s, then 0.5 x 1 s
    assert [a.get("backoff_ms") for a in res.timeline["attempts"][:2]] == [125, 500]


def test_backoff_jitter_uses_a_random_draw_by_default(loopback: LoopbackServer) -> None:
    boom = Reply.json_body({"error": {"message": "busy"}}, status=503)
    delays = set()
    for _ in range(3):
        loopback.queue(boom, Reply.json_body(OK_BODY))
        slept: list[float] = []
        run(["openai/gpt-a"], loopback, slept)
        assert len(slept) == 1 and 0.0 <= slept[0] < 0.5
        delays.add(slept[0])
    assert len(delays) > 1  # drawn, not fixed


def test_retry_policy_names_the_jitter() -> None:
    from holon_cli.providers.chain import retry_policy

    assert retry_policy()["backoff"]["jitter"] == "full"


def test_context_length_stops_the_whole_chain(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            {
                "error": {
                    "message": "Your input exceeds the context window of this model.",
                    "code": "context_length_exceeded",
                }
            },
            status=400,
        ),
        Reply.json_body(ANTHROPIC_OK),
    )
    with pytest.raises(ChainFailure) as ei:
        run(["openai/gpt-a", "anthropic/claude-b"], loopback, [])
    cf = ei.value
    assert cf.terminal and cf.failure_kind == "context_length_exceeded"
    assert len(loopback.requests) == 1  # the fallback was never called
    (a,) = cf.timeline["attempts"]
    assert (
        a["outcome"] == "fail_fast_aborted"
        and a["disposition"] == "turn_terminal"
        and a["advanced_to_fallback"] is False
    )
    art = cf.failure_artifact()
    assert (
        art["category"] == "transport"
        and art["status"] == 400
        and art["model_ref"] == "openai/gpt-a"
    )
    assert art["metadata"]["turn_terminal"] == "true"
    assert "context window" in art["summary"]


def test_all_candidates_fail_gives_aggregated_failure(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body({"error": {"message": "bad key"}}, status=401),
        *[
            Reply.json_body(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                status=529,
            )
        ]
        * 3,
    )
    slept: list[float] = []
    with pytest.raises(ChainFailure) as ei:
        run(["openai/gpt-a", "anthropic/claude-b"], loopback, slept)
    cf = ei.value
    assert (
        isinstance(cf, ProviderError)
        and cf.exit_code == EXIT_PROVIDER
        and cf.kind == "provider_failure"
    )
    assert cf.failure.kind == "server_error" and cf.last is cf.failure and not cf.terminal
    assert "all 2 model candidates failed" in cf.message
    assert "openai/gpt-a: auth (HTTP 401)" in cf.message
    assert (
        "anthropic/claude-b: server_error (HTTP 529), retries exhausted after 3 attempts"
        in cf.message
    )
    assert cf.hint
    art = cf.failure_artifact()
    assert set(art) >= {"summary", "category", "provider", "model_ref", "status", "metadata"}
    assert (
        art["provider"] == "anthropic" and art["status"] == 529 and art["category"] == "transport"
    )
    assert (
        art["metadata"]["attempts"] == "4"
        and art["metadata"]["candidates"] == "openai/gpt-a,anthropic/claude-b"
    )
    assert all(isinstance(v, str) for v in art["metadata"].values())
    assert cf.timeline["attempts"][-1]["advanced_to_fallback"] is False
    assert (
        "winning_model_ref" not in cf.timeline
        and cf.timeline["active_model_ref"] == "anthropic/claude-b"
    )
    assert cf.to_dict()["kind"] == "provider_failure"
    json.dumps(art)


def test_timeout_retried_then_exhausted(loopback: LoopbackServer) -> None:
    loopback.queue(*[Reply(delay_s=0.5, body=b"{}")] * 3)
    from holon_cli.providers.openai_responses import OpenAIResponsesTransport

    t = OpenAIResponsesTransport(model="m", base_url=loopback.url, api_key="k", timeout_s=0.1)
    slept: list[float] = []
    with pytest.raises(ChainFailure) as ei:
        call_with_fallback(["openai/m"], build_request(), sleep=slept.append, resolve=lambda ref: t)
    assert [a["outcome"] for a in ei.value.timeline["attempts"]] == [
        "retrying",
        "retrying",
        "retries_exhausted",
    ]
    assert ei.value.failure.kind == "timeout"
    assert ei.value.failure_artifact()["metadata"]["retryable"] == "true"


# ------------------------------------------------------- with fake transports


def test_unresolvable_candidates_are_recorded_and_skipped() -> None:
    from holon_cli.providers.registry import resolve_transport

    fake = Fake("scripted:/tmp/s.yaml", [text_response("fallback ok")])

    def resolve(ref: str) -> Any:
        # the real resolver (unknown provider; no OPENAI_API_KEY), a fake for the last ref
        return fake if ref.startswith("scripted:") else resolve_transport(ref, config={}, env={})

    res = call_with_fallback(
        ["nope/model", "openai/gpt-x", "scripted:/tmp/s.yaml"],
        build_request(),
        sleep=lambda s: None,
        resolve=resolve,
    )
    assert res.response.text == "fallback ok"
    a1, a2, a3 = res.timeline["attempts"]
    assert (a1["failure_kind"], a1["outcome"], a1["advanced_to_fallback"]) == (
        "unsupported_transport",
        "fail_fast_aborted",
        True,
    )
    assert a1["provider"] == "nope" and a1["transport_diagnostics"]["model_ref"] == "nope/model"
    assert (a2["failure_kind"], a2["outcome"]) == ("missing_credentials", "fail_fast_aborted")
    assert a3["outcome"] == "succeeded" and a3["provider"] == "scripted"


def test_missing_credentials_only_candidate_fails_with_hint() -> None:
    with pytest.raises(ChainFailure) as ei:
        call_with_fallback(
            ["anthropic/claude"], build_request(), config={}, env={}, sleep=lambda s: None
        )
    cf = ei.value
    assert cf.failure.kind == "missing_credentials" and "ANTHROPIC_API_KEY" in (cf.hint or "")
    assert cf.failure_artifact()["category"] == "runtime"


def test_transport_bug_becomes_fail_fast_provider_error() -> None:
    table, resolve = fakes(
        a__m=[TypeError("'NoneType' object is not subscriptable")], b__m=[text_response("b")]
    )
    res = call_with_fallback(["a/m", "b/m"], build_request(), sleep=lambda s: None, resolve=resolve)
    assert res.response.text == "b"
    first = res.timeline["attempts"][0]
    assert first["failure_kind"] == "provider_error" and first["outcome"] == "fail_fast_aborted"
    assert "TypeError" in first["transport_diagnostics"]["source_chain"][0]


def test_usage_aggregated_across_failed_and_winning_attempts() -> None:
    partial = ProviderFailure(
        "stream_interrupted", "cut", stage="stream", usage=TokenUsage(100, 5, 105)
    )
    table, resolve = fakes(a__m=[partial, text_response("ok", TokenUsage(100, 10, 110))])
    res = call_with_fallback(["a/m"], build_request(), sleep=lambda s: None, resolve=resolve)
    assert res.usage is not None and res.usage.to_dict() == {
        "input_tokens": 200,
        "output_tokens": 15,
        "total_tokens": 215,
    }
    assert res.timeline["aggregated_token_usage"]["total_tokens"] == 215
    assert res.timeline["attempts"][0]["token_usage"]["total_tokens"] == 105


def test_duration_measured_per_attempt_with_injected_clock() -> None:
    ticks = iter([0.0, 0.0, 1.25, 10.0, 10.5])  # resolve, then start/end of each attempt
    table, resolve = fakes(a__m=[ProviderFailure("server_error", "x", status=503), text_response()])
    res = call_with_fallback(
        ["a/m"], build_request(), sleep=lambda s: None, clock=lambda: next(ticks), resolve=resolve
    )
    assert [a["duration_ms"] for a in res.timeline["attempts"]] == [1250, 500]


def test_max_retries_zero_means_single_attempt() -> None:
    table, resolve = fakes(a__m=[ProviderFailure("server_error", "x")], b__m=[text_response("b")])
    res = call_with_fallback(
        ["a/m", "b/m"], build_request(), sleep=lambda s: None, resolve=resolve, max_retries=0
    )
    a1 = res.timeline["attempts"][0]
    assert (
        a1["max_attempts"] == 1
        and a1["outcome"] == "retries_exhausted"
        and a1["advanced_to_fallback"]
    )


def test_no_candidates_is_config_error() -> None:
    with pytest.raises(ConfigError) as ei:
        call_with_fallback([], build_request())
    assert "HOLON_MODEL" in (ei.value.hint or "")


def test_retry_policy_surface() -> None:
    p = retry_policy()
    assert p["max_retries"] == 2 and p["max_attempts_per_candidate"] == 3
    assert "rate_limited" in p["retryable"] and "auth" in p["fail_fast"]
    assert p["turn_terminal"] == ["context_length_exceeded"]


def test_before_attempt_runs_before_every_request_and_can_stop_it() -> None:
    """The turn's budget check: retries and fallbacks are requests too."""
    table, resolve = fakes(
        a__m=[
            ProviderFailure("server_error", "x", status=503),
            ProviderFailure("server_error", "y"),
        ],
        b__m=[text_response("b")],
    )
    seen: list[tuple[str, Any]] = []
    res = call_with_fallback(
        ["a/m", "b/m"],
        build_request(),
        sleep=lambda s: None,
        resolve=resolve,
        max_retries=1,
        before_attempt=lambda ref, tr: seen.append((ref, tr)),
    )
    assert res.response.text == "b"
    # each attempt is told its model and the transport it goes through
    assert seen == [("a/m", table["a/m"]), ("a/m", table["a/m"]), ("b/m", table["b/m"])]

    class Refused(Exception):
        pass

    table, resolve = fakes(a__m=[ProviderFailure("server_error", "x", status=503), text_response()])
    calls: list[str] = []

    def refuse_second(ref: str, _transport: Any) -> None:
        calls.append(ref)
        if len(calls) == 2:
            raise Refused(ref)

    with pytest.raises(Refused):
        call_with_fallback(
            ["a/m"],
            build_request(),
            sleep=lambda s: None,
            resolve=resolve,
            before_attempt=refuse_second,
        )
    assert table["a/m"].calls == 1  # the refused retry was never sent
