"""Whole turns over real HTTP (127.0.0.1) against each provider's wire shape:
tool results go back in the provider's own follow-up form; retry, fallback and
context-length failures land on the run result, events and transcript."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loopback import LoopbackServer, Reply  # noqa: E402

from holon_cli.runtime.agents.lifecycle import open_agent  # noqa: E402
from holon_cli.runtime.run import run_once  # noqa: E402
from holon_cli.tools.catalog import default_catalog


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch):
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    with LoopbackServer() as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        yield s


def responses_call(call_id: str, cmd: str) -> dict:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-test",
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": call_id,
                "name": "ExecCommand",
                "arguments": json.dumps({"cmd": cmd}),
                "status": "completed",
            }
        ],
        "usage": {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55},
    }


def responses_text(text: str) -> dict:
    return {
        "id": "resp_2",
        "object": "response",
        "status": "completed",
        "model": "gpt-test",
        "output": [
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 80, "output_tokens": 7, "total_tokens": 87},
    }


def anthropic_msg(content: list, stop: str) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 30, "output_tokens": 4},
    }


def no_sleep(_s: float) -> None:
    pass


def test_openai_tool_round_trip(srv: LoopbackServer, tmp_path: Path) -> None:
    srv.queue(
        Reply.json_body(responses_call("call_abc123", "echo hello-from-tool")),
        Reply.json_body(responses_text("all done")),
    )
    data = run_once(
        "say hi",
        model="openai/gpt-test",
        workspace_root=str(tmp_path),
        sleep=no_sleep,
        catalog=default_catalog(),
    )
    assert data["final_status"] == "completed" and data["final_text"] == "all done"
    assert data["token_usage"] == {"input_tokens": 130, "output_tokens": 12, "total_tokens": 142}
    first, second = srv.requests
    assert (
        first.path == "/v1/responses" and first.headers["authorization"] == "Bearer sk-test-openai"
    )
    body = first.json()
    assert body["model"] == "gpt-test" and body["tools"][0]["type"] == "function"
    assert "prompt_cache_key" in body and body["instructions"]
    outs = [it for it in second.json()["input"] if it.get("type") == "function_call_output"]
    assert (
        len(outs) == 1
        and outs[0]["call_id"] == "call_abc123"
        and "hello-from-tool" in outs[0]["output"]
    )
    calls = [it for it in second.json()["input"] if it.get("type") == "function_call"]
    assert calls[0]["call_id"] == "call_abc123"


def test_anthropic_tool_round_trip(srv: LoopbackServer, tmp_path: Path) -> None:
    srv.queue(
        Reply.json_body(
            anthropic_msg(
                [
                    {"type": "text", "text": "checking"},
                    {
                        "type": "tool_use",
                        "id": "toolu_01XYZ",
                        "name": "ExecCommand",
                        "input": {"cmd": "echo anthropic-ok"},
                    },
                ],
                "tool_use",
            )
        ),
        Reply.json_body(anthropic_msg([{"type": "text", "text": "finished"}], "end_turn")),
    )
    data = run_once(
        "go",
        model="anthropic/claude-test",
        workspace_root=str(tmp_path),
        sleep=no_sleep,
        catalog=default_catalog(),
    )
    assert data["final_text"] == "finished"
    first, second = srv.requests
    assert first.path == "/v1/messages"
    assert (
        first.headers["x-api-key"] == "sk-ant-test"
        and first.headers["anthropic-version"] == "2023-06-01"
    )
    assert first.json()["max_tokens"] > 0
    msgs = second.json()["messages"]
    results = [
        b
        for m in msgs
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert results and results[0]["tool_use_id"] == "toolu_01XYZ"
    assert "anthropic-ok" in json.dumps(results[0]["content"])


def test_config_chat_completions_provider(
    srv: LoopbackServer, tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        "providers:\n  local:\n    transport: openai_chat_completions\n    base_url: "
        f"{srv.url}/v1\n    api_key_env: LOCAL_KEY\n"
    )
    monkeypatch.setenv("LOCAL_KEY", "local-secret")
    srv.queue(
        Reply.json_body(
            {
                "id": "c1",
                "object": "chat.completion",
                "model": "llama",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_9",
                                    "type": "function",
                                    "function": {
                                        "name": "ExecCommand",
                                        "arguments": '{"cmd": "echo chat-ok"}',
                                    },
                                }
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
            }
        ),
        Reply.json_body(
            {
                "id": "c2",
                "object": "chat.completion",
                "model": "llama",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "chat done"},
                    }
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22},
            }
        ),
    )
    data = run_once(
        "go",
        model="local/llama",
        workspace_root=str(tmp_path),
        sleep=no_sleep,
        catalog=default_catalog(),
    )
    assert data["final_text"] == "chat done"
    first, second = srv.requests
    assert (
        first.path == "/v1/chat/completions"
        and first.headers["authorization"] == "Bearer local-secret"
    )
    tool_msgs = [m for m in second.json()["messages"] if m["role"] == "tool"]
    assert tool_msgs[0]["tool_call_id"] == "call_9" and "chat-ok" in tool_msgs[0]["content"]


def test_429_retry_then_success_honours_retry_after(srv: LoopbackServer, tmp_path: Path) -> None:
    waits: list[float] = []
    srv.queue(
        Reply.json_body(
            {
                "error": {
                    "message": "Rate limit reached",
                    "type": "requests",
                    "code": "rate_limit_exceeded",
                }
            },
            status=429,
            headers={"retry-after": "2"},
        ),
        Reply.json_body(responses_text("after retry")),
    )
    data = run_once(
        "x",
        model="openai/gpt-test",
        workspace_root=str(tmp_path),
        sleep=waits.append,
        catalog=default_catalog(),
    )
    assert data["final_text"] == "after retry"
    assert waits and abs(waits[0] - 2.0) < 0.01
    outcomes = [a["outcome"] for a in data["provider_attempt_timeline"]["attempts"]]
    assert outcomes == ["retrying", "succeeded"]
    assert (
        data["provider_attempt_timeline"]["attempts"][0]["transport_diagnostics"]["status"] == 429
    )


def test_500s_exhaust_retries_then_fallback(
    srv: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_FALLBACK_MODELS", "anthropic/claude-test")
    err = Reply.json_body(
        {"error": {"message": "The server had an error", "type": "server_error"}}, status=500
    )
    srv.queue(
        err,
        err,
        err,
        Reply.json_body(anthropic_msg([{"type": "text", "text": "from fallback"}], "end_turn")),
    )
    data = run_once(
        "x",
        model="openai/gpt-test",
        workspace_root=str(tmp_path),
        sleep=no_sleep,
        keep_agent=True,
        catalog=default_catalog(),
    )
    assert data["final_status"] == "completed" and data["final_text"] == "from fallback"
    tl = data["provider_attempt_timeline"]["attempts"]
    assert [a["outcome"] for a in tl] == ["retrying", "retrying", "retries_exhausted", "succeeded"]
    assert tl[2]["advanced_to_fallback"] is True and tl[3]["model_ref"] == "anthropic/claude-test"
    store = open_agent(data["agent_id"], create_default=False)
    prc = next(e for e in store.events.records() if e["kind"] == "provider_round_completed")
    assert prc["data"]["provider_attempt_timeline"]["winning_model_ref"] == "anthropic/claude-test"
    tr = next(t for t in store.ledger("transcript").records() if t["kind"] == "assistant_round")
    assert len(tr["provider_attempt_timeline"]["attempts"]) == 4


def test_401_fails_fast_to_fallback(
    srv: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_FALLBACK_MODELS", "anthropic/claude-test")
    srv.queue(
        Reply.json_body(
            {
                "error": {
                    "message": "Incorrect API key provided",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
            status=401,
        ),
        Reply.json_body(anthropic_msg([{"type": "text", "text": "ok"}], "end_turn")),
    )
    data = run_once(
        "x",
        model="openai/gpt-test",
        workspace_root=str(tmp_path),
        sleep=no_sleep,
        catalog=default_catalog(),
    )
    assert [a["outcome"] for a in data["provider_attempt_timeline"]["attempts"]] == [
        "fail_fast_aborted",
        "succeeded",
    ]
    assert len(srv.requests) == 2


def test_context_length_exceeded_fails_turn_without_continuation(
    srv: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_FALLBACK_MODELS", "anthropic/claude-test")
    srv.queue(
        Reply.json_body(
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
            status=400,
        )
    )
    data = run_once(
        "x",
        model="openai/gpt-test",
        workspace_root=str(tmp_path),
        sleep=no_sleep,
        catalog=default_catalog(),
    )
    assert data["final_status"] == "failed"
    assert len(srv.requests) == 1  # no fallback, no retry
    fa = data["failure_artifact"]
    assert fa["status"] == 400 and "context" in fa["summary"].lower()
    store = open_agent(data["agent_id"], create_default=False)
    assert store.read_record()["state"]["last_closure"]["outcome"] == "failed"
    assert store.ledger("briefs").records()[-1]["kind"] == "failure"
    err = next(e for e in store.events.records() if e["kind"] == "runtime_error")
    assert err["data"]["failure_kind"] == "context_length_exceeded"


def test_stale_work_item_reminder_is_provider_only(
    srv: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holon_cli.runtime import workitems as wi

    monkeypatch.setenv("HOLON_WORK_ITEM_STALE_REMINDER_ROUNDS", "2")
    monkeypatch.setenv("HOLON_WORK_ITEM_STALE_REMINDER_COOLDOWN_ROUNDS", "0")
    store = open_agent(None)
    w = wi.create_work_item(
        store,
        "Refactor the parser",
        plan_status="ready",
        todo_list=[{"text": "split lexer", "state": "in_progress"}],
    )
    wi.pick_work_item(store, w["work_item"]["id"], source="operator")
    srv.queue(
        Reply.json_body(responses_call("c1", "true")),
        Reply.json_body(responses_call("c2", "true")),
        Reply.json_body(responses_call("c3", "true")),
        Reply.json_body(responses_text("done for now")),
    )
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn

    admit("keep going", store=store)
    res = run_turn(
        store=store, cli_model="openai/gpt-test", sleep=no_sleep, catalog=default_catalog()
    )
    assert res.final_text == "done for now"
    bodies = [json.dumps(r.json()["input"]) for r in srv.requests]
    hits = [i for i, b in enumerate(bodies) if "Work-item progress reminder" in b]
    # the threshold is reached after round 2, so round 3 is the first request to
    # carry it; later requests keep it in the conversation (append-only, so the
    # provider's prompt cache holds) and, with no cooldown, it is injected once
    assert hits == [2, 3]
    assert bodies[3].count("Work-item progress reminder") == 1
    assert "split lexer" in bodies[2]
    transcript = json.dumps(store.ledger("transcript").records())
    assert "Work-item progress reminder" not in transcript
    assert [e["kind"] for e in store.events.records()].count("work_item_stale_reminder") == 1


def test_provider_max_output_tokens_beats_the_runtime_default(
    srv: LoopbackServer, tmp_path: Path, holon_home: Path
) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        "runtime:\n  max_output_tokens: 1000\n"
        "providers:\n  local:\n    transport: openai_chat_completions\n    base_url: "
        f"{srv.url}/v1\n    max_output_tokens: 200\n"
    )
    srv.queue(
        Reply.json_body(
            {
                "id": "c",
                "object": "chat.completion",
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "ok"},
                    }
                ],
            }
        ),
        Reply.json_body(responses_text("ok")),
    )
    run_once(
        "x",
        model="local/m",
        workspace_root=str(tmp_path),
        sleep=no_sleep,
        catalog=default_catalog(),
    )
    assert srv.requests[0].json()["max_tokens"] == 200
    run_once(
        "x",
        model="openai/gpt-test",
        workspace_root=str(tmp_path),
        sleep=no_sleep,
        catalog=default_catalog(),
    )
    assert (
        srv.requests[1].json()["max_output_tokens"] == 1000
    )  # no provider setting: the runtime default
