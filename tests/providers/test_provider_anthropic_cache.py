"""Anthropic prompt caching and opt-in context management, over the loopback
server replaying recorded Messages payloads: ``cache_control`` breakpoints sit
where the frame says (its stable blocks: tools, system, the last stable item,
the history's end) plus the newest block, never more than the API's four;
context management adds the beta and the edit, and the edits the API applied
come back; no diagnostic carries the key."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from provider_helpers import WEATHER_TOOL, build_request, tool_round_conversation

from holon_cli.providers.anthropic import (
    CONTEXT_MANAGEMENT_BETA,
    MAX_CACHE_BREAKPOINTS,
    AnthropicTransport,
    cache_breakpoints,
)
from holon_cli.providers.base import ConversationItem, ProviderFailure, ToolSpec

FIXTURES = (
    Path(
        os.environ.get("HOLON_PROVIDER_FIXTURES")
        or Path(__file__).resolve().parents[2].parent / "shared" / "provider-fixtures"
    )
    / "anthropic"
)
KEY = "sk-ant-test-SECRET-0123456789"
APPLIED = {
    "applied_edits": [
        {
            "type": "clear_tool_uses_20250919",
            "cleared_tool_uses": 8,
            "cleared_input_tokens": 50000,
        }
    ]
}

pytestmark = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"shared provider fixtures not found at {FIXTURES}"
)


def claude(srv: LoopbackServer, **kw: Any) -> AnthropicTransport:
    return AnthropicTransport(model="claude-sonnet-4-5", base_url=srv.url, api_key=KEY, **kw)


def recorded(name: str, **extra: Any) -> Reply:
    """A recorded JSON case, with fields added to its body (DERIVED in the test)."""
    rec = json.loads((FIXTURES / f"{name}.json").read_text())["response"]
    return Reply.json_body({**rec["body"], **extra}, status=int(rec["status"]))


def frame_request(
    conversation: list[ConversationItem],
    tools: list[ToolSpec] | None = None,
    history: list[ConversationItem] | None = None,
) -> Any:
    return build_request(
        conversation,
        tools=[WEATHER_TOOL] if tools is None else tools,
        system="SYS",
        system_blocks=["AGENTS.md", "TOOL GUIDE"],
        stable_blocks=["# Working memory (revision 3)"],
        history=history,
        context_blocks=["Turn mode: operator request.", "## Work queue\n(empty)"],
    )


def test_breakpoints_on_the_stable_prefix_and_the_newest_block(loopback: LoopbackServer) -> None:
    loopback.queue(recorded("tool_use_single"), recorded("tool_result_followup"))
    t = claude(loopback)
    earlier = [
        ConversationItem("user", "Turn mode: operator request."),
        ConversationItem("user", "What is 2+2?"),
        ConversationItem("assistant", "4"),
    ]
    first = frame_request([ConversationItem("user", "Weather in Paris?")], history=earlier)
    t.complete(first)
    t.complete(frame_request(tool_round_conversation(), history=earlier))
    b1, b2 = (r.json() for r in loopback.requests)
    assert cache_breakpoints(b1) == [
        "tools[0]",
        "system[2]",
        "messages[1].content[0]",  # the last stable item: the history's end
        "messages[2].content[1]",  # the newest block (after the turn's context)
    ]
    assert b1["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "4", "cache_control": {"type": "ephemeral"}}],
    }
    assert cache_breakpoints(b2)[:3] == cache_breakpoints(b1)[:3]
    assert cache_breakpoints(b2)[3] == "messages[4].content[0]"  # rolled to the tool result
    assert b2["messages"][4]["content"][0]["type"] == "tool_result"
    # the stable prefix is byte-identical from round to round (a cache hit)
    for key in ("tools", "system"):
        assert json.dumps(b1[key]) == json.dumps(b2[key])
    assert b1["messages"][:2] == b2["messages"][:2]


def test_without_history_the_stable_context_carries_the_breakpoint() -> None:
    from holon_cli.providers.anthropic import build_body

    body = build_body(frame_request([ConversationItem("user", "hi")]), "m")
    assert cache_breakpoints(body) == [
        "tools[0]",
        "system[2]",
        "messages[0].content[0]",  # the working memory block (stable)
        "messages[0].content[2]",  # the newest block (stable, turn, message)
    ]
    # a frame that declares no anchors gets only the rolling marker
    req = frame_request([ConversationItem("user", "hi")])
    req.frame.cache_breakpoints = ()
    assert cache_breakpoints(build_body(req, "m")) == ["messages[0].content[2]"]


def test_never_more_than_four_breakpoints() -> None:
    from holon_cli.providers.anthropic import build_body

    tools = [ToolSpec(f"t{i}", "d", {"type": "object"}) for i in range(30)]
    convo = tool_round_conversation() * 5
    for ctx in ([], ["CTX"]):
        for tl in ([], tools):
            for hist in ([], convo[:3]):
                req = build_request(
                    convo,
                    tools=tl,
                    system_blocks=["A", "B"],
                    stable_blocks=ctx,
                    history=hist,
                    context_blocks=["TURN"],
                )
                marks = cache_breakpoints(build_body(req, "m"))
                assert len(marks) <= MAX_CACHE_BREAKPOINTS
                assert marks[-1].startswith("messages[")
    # only a turn block and nothing else: the newest block carries the rolling one
    body = build_body(build_request([], tools=[], system="", context_blocks=["CTX"]), "m")
    assert cache_breakpoints(body) == ["messages[0].content[0]"]


def test_the_next_turn_extends_this_one_on_the_wire() -> None:
    """The next turn's body repeats this turn's last body up to its end (the
    markers aside: they are not prompt content)."""
    from holon_cli.providers.anthropic import build_body

    turn = [ConversationItem("user", "Turn mode: x"), *tool_round_conversation()]
    last = frame_request(turn[1:], history=[])
    answer = ConversationItem("assistant", "It is sunny.")
    nxt = frame_request([ConversationItem("user", "and tomorrow?")], history=[*turn, answer])
    last.frame.context_blocks = [*last.frame.stable_context, "Turn mode: x"]
    nxt.frame.context_blocks = [*nxt.frame.stable_context, "Turn mode: y"]

    def wire(req: Any) -> str:
        text = json.dumps(build_body(req, "m"), ensure_ascii=False)
        return text.replace(', "cache_control": {"type": "ephemeral"}', "")

    a, b = wire(last), wire(nxt)
    assert b.startswith(a.rstrip("]} "))


def test_context_management_is_opt_in(loopback: LoopbackServer) -> None:
    loopback.queue(recorded("text_end_turn"), recorded("text_end_turn", context_management=APPLIED))
    claude(loopback).complete(build_request())
    out = claude(loopback, context_management=True).complete(build_request())
    off, on = loopback.requests
    assert "anthropic-beta" not in off.headers and "context_management" not in off.json()
    assert on.headers["anthropic-beta"] == CONTEXT_MANAGEMENT_BETA
    assert on.json()["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    assert out.context_edits == APPLIED["applied_edits"]


def test_context_management_keeps_configured_betas(loopback: LoopbackServer) -> None:
    loopback.queue(recorded("text_end_turn"))
    t = claude(
        loopback,
        context_management=True,
        headers={"anthropic-beta": f"token-efficient-tools-2025-02-19,{CONTEXT_MANAGEMENT_BETA}"},
    )
    t.complete(build_request())
    assert loopback.requests[0].headers["anthropic-beta"] == (
        f"token-efficient-tools-2025-02-19,{CONTEXT_MANAGEMENT_BETA}"
    )


def test_applied_edits_from_the_event_stream(loopback: LoopbackServer) -> None:
    text = (FIXTURES / "stream_after_tool_results.sse").read_text()
    # DERIVED: the recorded message_delta with the API's context_management field
    text = text.replace(
        '"type":"message_delta",',
        f'"type":"message_delta","context_management":{json.dumps(APPLIED)},',
    )
    loopback.queue(Reply.sse(text))
    out = claude(loopback, context_management=True, stream=True).complete(build_request())
    assert out.context_edits == APPLIED["applied_edits"] and out.text


def test_failures_with_context_management_never_carry_the_key(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.from_fixture(FIXTURES / "error_401_authentication_error.json"))
    with pytest.raises(ProviderFailure) as err:
        claude(loopback, context_management=True).complete(build_request())
    f = err.value
    assert f.kind == "auth"
    shown = " ".join(
        [f.message, f.hint or "", f.body_preview or "", json.dumps(f.diagnostics()), repr(f)]
    )
    assert KEY not in shown and KEY not in repr(claude(loopback, context_management=True))


def test_round_event_carries_applied_edits(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, holon_home: Path, tmp_path: Path
) -> None:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.run import run_once
    from holon_cli.tools.catalog import default_catalog

    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text("runtime:\n  anthropic_context_management: true\n")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", loopback.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    loopback.queue(recorded("text_end_turn", context_management=APPLIED))
    data = run_once(
        "hi",
        model="anthropic/claude-sonnet-4-5",
        workspace_root=str(tmp_path),
        sleep=lambda _s: None,
        keep_agent=True,
        catalog=default_catalog(),
    )
    assert loopback.requests[0].headers["anthropic-beta"] == CONTEXT_MANAGEMENT_BETA
    body = loopback.requests[0].json()
    # a first turn: no history or stable context yet, so tools, system, newest
    assert [m.split("[")[0] for m in cache_breakpoints(body)] == ["tools", "system", "messages"]
    events = open_agent(data["agent_id"]).events.records()
    rounds = [e["data"] for e in events if e["kind"] == "provider_round_completed"]
    assert rounds[0]["context_edits"] == APPLIED["applied_edits"]
    assert KEY not in json.dumps(events)
