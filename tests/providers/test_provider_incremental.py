"""Incremental Responses requests (``runtime.openai_incremental: true``) over
the loopback server replaying recorded payloads: later rounds of a turn send
``previous_response_id`` and only the new items; any mismatch sends the whole
request; a provider that lost the previous response gets one full retry."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, Reply

from holon_cli.errors import ConfigError
from holon_cli.providers import incremental as inc
from holon_cli.providers.base import (
    ConversationItem,
    ModelResponse,
    PromptFrame,
    ProviderFailure,
    ProviderRequest,
    ToolSpec,
)
from holon_cli.providers.openai_codex import OpenAICodexTransport
from holon_cli.providers.openai_responses import OpenAIResponsesTransport

FIXTURES = (
    Path(
        os.environ.get("HOLON_PROVIDER_FIXTURES")
        or Path(__file__).resolve().parents[2].parent / "shared" / "provider-fixtures"
    )
    / "openai_responses"
)
LOCAL = Path(__file__).resolve().parent / "fixtures"
KEY = "sk-test-incremental-0123456789"
CAPITAL = ToolSpec(
    name="get_capital",
    description="The capital of a country.",
    input_schema={"type": "object", "properties": {"country": {"type": "string"}}},
)

pytestmark = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"shared provider fixtures not found at {FIXTURES}"
)


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    inc.STATE._links.clear()
    yield
    inc.STATE._links.clear()


def fixture(name: str) -> Reply:
    folder = LOCAL if name.startswith("error_400_previous") else FIXTURES
    return Reply.from_fixture(folder / f"{name}.json")


def transport(srv: LoopbackServer, *, incremental: bool = True) -> OpenAIResponsesTransport:
    return OpenAIResponsesTransport(
        model="gpt-4o", base_url=f"{srv.url}/v1", api_key=KEY, incremental=incremental
    )


class Turn:
    """A turn's conversation as the turn loop keeps it (the journal's items)."""

    def __init__(
        self,
        turn_id: str = "turn_1",
        *,
        agent_id: str = "main",
        system: str = "You are a test agent.",
        tools: list[ToolSpec] | None = None,
        cache_key: str = "pck_test",
    ) -> None:
        self.turn_id, self.agent_id, self.system, self.cache_key = (
            turn_id,
            agent_id,
            system,
            cache_key,
        )
        self.tools = [CAPITAL] if tools is None else tools
        self.items = [ConversationItem("user", "What is the capital of PotatoLand?")]

    def request(self) -> ProviderRequest:
        return ProviderRequest(
            frame=PromptFrame(
                system_prompt=self.system,
                context_blocks=["# Work queue\n(empty)"],
                prompt_cache_key=self.cache_key,
            ),
            conversation=list(self.items),
            tools=list(self.tools),
            agent_id=self.agent_id,
            turn_id=self.turn_id,
        )

    def answered(self, resp: ModelResponse) -> None:
        """The round is journaled, and each call gets a result."""
        self.items.append(ConversationItem("assistant", resp.text, list(resp.tool_calls)))
        for c in resp.tool_calls:
            self.items.append(ConversationItem("tool", f"result of {c.id}", call_id=c.id))


def round_trip(t: OpenAIResponsesTransport, turn: Turn) -> ModelResponse:
    resp = t.complete(turn.request())
    turn.answered(resp)
    return resp


def test_later_rounds_send_previous_response_id_and_only_new_items(
    loopback: LoopbackServer,
) -> None:
    loopback.queue(
        fixture("function_call_single"),
        fixture("parallel_function_calls"),
        fixture("function_call_output_followup"),
    )
    t, turn = transport(loopback), Turn()
    first = round_trip(t, turn)
    second = round_trip(t, turn)
    third = round_trip(t, turn)
    assert third.text == "The capital of PotatoLand is Potato City."
    b1, b2, b3 = (r.json() for r in loopback.requests)
    # the first round is a full request, stored so it can be continued
    assert "previous_response_id" not in b1 and b1["store"] is True
    assert [i.get("role") for i in b1["input"]] == ["user", "user"]
    assert (first.request_mode, first.request_mode_reason) == ("full", "first_request")
    # later rounds: the previous response's id and only the tool results
    assert b2["previous_response_id"] == "resp_04907f5d3de791830068fbaa19bb908195a91378279dba0f14"
    assert b2["input"] == [
        {
            "type": "function_call_output",
            "call_id": "call_YfwRsW8sUxDKipwyhWTzOXCA",
            "output": "result of call_YfwRsW8sUxDKipwyhWTzOXCA",
        }
    ]
    assert b3["previous_response_id"] == "resp_67e547c48c9481918c5c4394464ce0c60ae6111e84dd5c08"
    assert [i["call_id"] for i in b3["input"]] == [
        "call_LWVp74L5HaH2KNvgVz9PJsrj",
        "call_YnRAWeTyxI91m5uNa5bxXwVO",
    ]
    assert second.request_mode == third.request_mode == "incremental"
    # instructions and tools are not carried over by the API: sent every round
    assert b3["instructions"] == b1["instructions"] and b3["tools"] == b1["tools"]
    # a full request now carries all 9 items (the final answer included)
    full = t.build_body(turn.request())
    assert len(full["input"]) == 9 and len(b3["input"]) == 2


def test_off_by_default_sends_full_unstored_requests(loopback: LoopbackServer) -> None:
    loopback.queue(fixture("function_call_single"), fixture("function_call_output_followup"))
    t, turn = transport(loopback, incremental=False), Turn()
    round_trip(t, turn)
    resp = round_trip(t, turn)
    b2 = loopback.requests[1].json()
    assert "previous_response_id" not in b2 and b2["store"] is False
    assert [i.get("type") for i in b2["input"]][-2:] == ["function_call", "function_call_output"]
    assert resp.request_mode is None and len(inc.STATE) == 0


def test_a_later_turn_that_extends_the_previous_request_continues_it(
    loopback: LoopbackServer,
) -> None:
    """The spec's lowering: a later turn may continue when its full request is
    a strict extension of the previous request and response."""
    loopback.queue(fixture("function_call_single"), fixture("text_nonstream"))
    t, turn = transport(loopback), Turn("turn_1")
    first = round_trip(t, turn)
    turn.turn_id = "turn_2"  # the same history, and the new turn's message after it
    turn.items.append(ConversationItem("user", "And the capital of Tomatoland?"))
    resp = round_trip(t, turn)
    body = loopback.requests[1].json()
    assert body["previous_response_id"] == first.response_id
    assert [i.get("type") or i.get("role") for i in body["input"]] == [
        "function_call_output",
        "user",
    ]
    assert resp.request_mode == "incremental"


def test_a_compaction_sends_a_full_request(loopback: LoopbackServer) -> None:
    """Another compression epoch in the frame's cache record: never continued."""
    from holon_cli.providers.base import PromptCache

    loopback.queue(fixture("function_call_single"), fixture("text_nonstream"))
    t, turn = transport(loopback), Turn()
    round_trip(t, turn)
    req = turn.request()
    req.frame.cache = PromptCache("main", "pck_test", "ctx", 0, compression_epoch=1)
    resp = t.complete(req)
    assert "previous_response_id" not in loopback.requests[1].json()
    assert (resp.request_mode, resp.request_mode_reason) == ("full", "compacted")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("instructions", "request_changed"),
        ("tools", "request_changed"),
        ("compaction", "history_changed"),
        ("cache_key", "first_request"),
    ],
)
def test_any_mismatch_sends_a_full_request(
    loopback: LoopbackServer, change: str, reason: str
) -> None:
    loopback.queue(fixture("function_call_single"), fixture("function_call_output_followup"))
    t, turn = transport(loopback), Turn()
    round_trip(t, turn)
    if change == "instructions":
        turn.system = "You are a changed agent."
    elif change == "tools":
        turn.tools = [*turn.tools, ToolSpec("Sleep", "wait", {"type": "object"})]
    elif change == "compaction":  # earlier items summarized away
        turn.items = [ConversationItem("user", "(summary) asked for a capital"), *turn.items[2:]]
    else:  # another prompt cache key is another scope
        turn.cache_key = "pck_other"
    resp = round_trip(t, turn)
    body = loopback.requests[1].json()
    assert "previous_response_id" not in body
    assert (resp.request_mode, resp.request_mode_reason) == ("full", reason)
    # the full request carries the whole conversation again
    assert body["input"][0]["role"] == "user"
    assert body["input"][-1]["type"] == "function_call_output"


def test_scoped_by_agent(loopback: LoopbackServer) -> None:
    loopback.queue(
        fixture("function_call_single"),
        fixture("function_call_single"),
        fixture("function_call_output_followup"),
    )
    t = transport(loopback)
    a, b = Turn(agent_id="alpha"), Turn(agent_id="beta")
    round_trip(t, a)
    b_resp = round_trip(t, b)  # same history and turn id, another agent
    a_resp = round_trip(t, a)
    assert (b_resp.request_mode_reason, a_resp.request_mode) == ("first_request", "incremental")
    assert "previous_response_id" not in loopback.requests[1].json()
    assert loopback.requests[2].json()["previous_response_id"].startswith("resp_04907")


def test_unknown_previous_response_retries_once_in_full(loopback: LoopbackServer) -> None:
    loopback.queue(
        fixture("function_call_single"),
        fixture("error_400_previous_response_not_found"),
        fixture("function_call_output_followup"),
        fixture("parallel_function_calls_followup"),
    )
    t, turn = transport(loopback), Turn()
    round_trip(t, turn)
    resp = round_trip(t, turn)
    assert resp.text == "The capital of PotatoLand is Potato City."
    assert (resp.request_mode, resp.request_mode_reason) == ("full", "previous_response_unknown")
    refused, retried = (r.json() for r in loopback.requests[1:3])
    assert "previous_response_id" in refused and "previous_response_id" not in retried
    assert [i.get("type") for i in retried["input"]][-2:] == [
        "function_call",
        "function_call_output",
    ]
    # the retry's answer is the new chain head: the next round continues it
    turn.items.append(ConversationItem("user", "and now?"))
    round_trip(t, turn)
    assert loopback.requests[3].json()["previous_response_id"].startswith("resp_0e9950")


def test_unknown_previous_response_twice_is_a_failure_not_a_loop(
    loopback: LoopbackServer,
) -> None:
    loopback.queue(
        fixture("function_call_single"),
        fixture("error_400_previous_response_not_found"),
        fixture("error_400_previous_response_not_found"),
    )
    t, turn = transport(loopback), Turn()
    round_trip(t, turn)
    with pytest.raises(ProviderFailure) as err:
        t.complete(turn.request())
    assert err.value.kind == "client_error" and err.value.status == 400
    assert "previous_response_not_found" in err.value.message
    assert len(loopback.requests) == 3 and KEY not in err.value.message


def test_other_errors_of_an_incremental_request_are_not_retried(
    loopback: LoopbackServer,
) -> None:
    loopback.queue(
        fixture("function_call_single"),
        Reply.from_fixture(FIXTURES / "error_400_invalid_param.json"),
    )
    t, turn = transport(loopback), Turn()
    round_trip(t, turn)
    with pytest.raises(ProviderFailure) as err:
        t.complete(turn.request())
    assert err.value.kind == "client_error" and len(loopback.requests) == 2
    # the chain is still there: a retry by the chain continues it
    assert len(inc.STATE) == 1


def test_codex_never_sends_incrementally(loopback: LoopbackServer) -> None:
    text = (FIXTURES / "stream_function_call.sse").read_text()
    loopback.queue(Reply.sse(text), Reply.sse(text))
    t = OpenAICodexTransport(
        model="gpt-5-codex", base_url=f"{loopback.url}/v1", api_key=KEY, incremental=True
    )
    turn = Turn()
    round_trip(t, turn)
    round_trip(t, turn)
    b2 = loopback.requests[1].json()
    assert "previous_response_id" not in b2 and b2["store"] is False


def test_state_is_bounded() -> None:
    state = inc.IncrementalState(max_scopes=2)
    body: dict[str, Any] = {"model": "m", "input": [{"role": "user"}]}
    for agent in ("a", "b", "c"):
        state.advance(inc.scope_of(agent, "k", "m", "u"), "t", body, [], "resp")
    assert len(state) == 2
    assert state.plan(inc.scope_of("a", "k", "m", "u"), "t", body).reason == "first_request"
    assert state.plan(None, "t", body).reason == "unscoped"


def test_registry_reads_the_config_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    from holon_cli.providers.registry import resolve_transport

    env = {"OPENAI_API_KEY": KEY}
    on = resolve_transport(
        "openai/gpt-4o", config={"runtime": {"openai_incremental": True}}, env=env
    )
    off = resolve_transport("openai/gpt-4o", config={}, env=env)
    assert isinstance(on, OpenAIResponsesTransport) and on.incremental is True
    assert isinstance(off, OpenAIResponsesTransport) and off.incremental is False


def test_config_flag_must_be_a_boolean(holon_home: Path) -> None:
    from holon_cli.store.config import load_config

    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text("runtime:\n  openai_incremental: often\n")
    with pytest.raises(ConfigError) as err:
        load_config()
    assert "runtime.openai_incremental" in str(err.value)


def test_streamed_rounds_continue_too_and_recover_from_an_unknown_previous_response(
    loopback: LoopbackServer,
) -> None:
    """A config provider with ``stream: true``: the event feed's terminal
    response id is the next round's ``previous_response_id``; the refusal of
    an unknown one arrives as plain JSON before any event."""
    call = Reply.sse((FIXTURES / "stream_function_call.sse").read_text())
    after = Reply.sse((FIXTURES / "stream_text_after_tool.sse").read_text())
    loopback.queue(call, fixture("error_400_previous_response_not_found"), after, call, after)
    t = OpenAIResponsesTransport(
        model="gpt-4o", base_url=f"{loopback.url}/v1", api_key=KEY, incremental=True, stream=True
    )
    turn = Turn()
    round_trip(t, turn)
    resp = round_trip(t, turn)
    assert resp.request_mode_reason == "previous_response_unknown" and resp.text
    bodies = [r.json() for r in loopback.requests]
    assert bodies[1]["previous_response_id"] == (
        "resp_67e554a155508191900ee113293c4c830794405d35281ae2"
    )
    assert bodies[1]["stream"] is True and "previous_response_id" not in bodies[2]
    # a new turn of the same agent starts full, then continues the streamed head
    turn.turn_id = "turn_2"
    round_trip(t, turn)
    round_trip(t, turn)
    assert "previous_response_id" not in loopback.requests[3].json()
    assert loopback.requests[4].json()["previous_response_id"] == (
        "resp_67e554a155508191900ee113293c4c830794405d35281ae2"
    )


def test_an_incomplete_response_is_not_continued(loopback: LoopbackServer) -> None:
    """A response cut off by max_output_tokens may hold a call the runtime
    dropped (its arguments never finished): the next round goes in full."""
    loopback.queue(fixture("incomplete_nonstream_max_output_tokens"), fixture("text_nonstream"))
    t, turn = transport(loopback), Turn()
    first = round_trip(t, turn)
    assert first.stop_reason == "max_tokens"
    turn.items.append(ConversationItem("user", "go on"))
    resp = round_trip(t, turn)
    assert "previous_response_id" not in loopback.requests[1].json()
    assert resp.request_mode_reason == "first_request"
