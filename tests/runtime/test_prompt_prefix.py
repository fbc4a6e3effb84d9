"""A prompt whose prefix survives the next turn (issue 44 item 1, issue 37
item 1), on the bytes the transports send: real turns against a loopback
server replaying recorded payloads from ``../shared/provider-fixtures/``,
working memory and work items on. Every request, across turns and within
one, starts with the previous request's bytes (up to its closing brackets;
Anthropic's ``cache_control`` markers aside: they are not prompt content);
a change during a turn is appended after the latest round; compaction
changes the prefix once, and the frame's cache record says so."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from loopback import LoopbackServer, Reply

from holon_cli.providers.scripted import ScriptedTransport
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn
from holon_cli.tools.catalog import default_catalog

FIXTURES = Path(
    os.environ.get("HOLON_PROVIDER_FIXTURES")
    or Path(__file__).resolve().parents[2].parent / "shared" / "provider-fixtures"
)
MARKER = b', "cache_control": {"type": "ephemeral"}'

# transport kind -> (fixture folder, a tool round, a final answer, parallel calls)
WIRES = {
    "openai_responses": (
        "openai_responses",
        "function_call_single",
        "text_nonstream",
        "parallel_function_calls",
    ),
    "openai_chat_completions": ("openai_chat", "tool_call_single", "text", "parallel_tool_calls"),
    "anthropic_messages": ("anthropic", "tool_use_single", "text_end_turn", "tool_use_parallel"),
}

pytestmark = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"shared provider fixtures not found at {FIXTURES}"
)


def content_end(body: bytes) -> int:
    """Where a JSON body's content ends: before its closing brackets."""
    end = len(body)
    while end and body[end - 1 : end] in (b"]", b"}", b" "):
        end -= 1
    return end


def wire(raw: bytes) -> bytes:
    return raw.replace(MARKER, b"")


def turn(model: str = "bench/m") -> Any:
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.ran and res.status == "completed", res
    return res


@pytest.mark.parametrize("kind", list(WIRES))
def test_each_request_extends_the_previous_one_across_turns_on_the_wire(
    kind: str, holon_home: Path
) -> None:
    folder, tool_round, final, parallel = WIRES[kind]

    def reply(name: str) -> Reply:
        return Reply.from_fixture(FIXTURES / folder / f"{name}.json")

    holon_home.mkdir(parents=True, exist_ok=True)
    with LoopbackServer() as srv:
        provider = {"transport": kind, "base_url": f"{srv.url}/v1"}
        (holon_home / "config.yaml").write_text(yaml.safe_dump({"providers": {"bench": provider}}))
        starts = []
        srv.queue(reply(tool_round), reply(final))
        admit("first question")
        starts.append(len(srv.requests))
        turn()
        store = open_agent(None)  # a work item between turns: the work queue block
        item = wi.create_work_item(store, "build the parser")["work_item"]["id"]
        wi.pick_work_item(store, item, reason="test")
        srv.queue(reply(final))
        admit("second question")
        starts.append(len(srv.requests))
        turn()
        srv.queue(reply(parallel), reply(final))
        admit("third question")
        starts.append(len(srv.requests))
        turn()
        bodies = [wire(r.body) for r in srv.requests]
    assert len(bodies) == 5
    across = 0
    for n in range(1, len(bodies)):
        prev, nxt = bodies[n - 1], bodies[n]
        end = content_end(prev)
        shared = len(os.path.commonprefix([prev, nxt]))
        assert nxt[:end] == prev[:end], f"request {n + 1} breaks the prefix at {shared} of {end}"
        across += n in starts
    assert across == 2  # both turn boundaries were checked
    # the body ends with the conversation: options, tools, instructions first
    last = json.loads(bodies[-1])
    keys = list(last)
    assert keys[-1] in ("input", "messages")
    assert set(keys[keys.index("tools") + 1 :]) <= {"instructions", "input", "system", "messages"}


def test_a_change_during_a_turn_is_appended_after_the_latest_round(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn keeps the context blocks its first request carried; a work
    item created in round 1 reaches round 2 as an update after the round,
    and round 2's request still starts with round 1's bytes."""
    from holon_cli.providers.openai_responses import build_body

    seen: list[Any] = []
    real = ScriptedTransport.complete

    def capture(self: ScriptedTransport, request: Any) -> Any:
        seen.append(request)
        return real(self, request)

    monkeypatch.setattr(ScriptedTransport, "complete", capture)
    create = {"name": "CreateWorkItem", "arguments": {"objective": "write the release notes"}}
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"steps": [{"tool_calls": [create]}, "done"]}))
    admit("plan the release")
    turn(f"scripted:{script}")
    first, second = seen
    assert second.frame.turn_context == first.frame.turn_context  # kept for the turn
    assert not any("write the release notes" in b for b in first.frame.context_blocks)
    update = second.conversation[-1]
    assert update.role == "user" and update.text.startswith("# Context update")
    assert "## Work queue" in update.text and "write the release notes" in update.text
    a, b = (json.dumps(build_body(r, "m"), ensure_ascii=False).encode() for r in seen)
    assert b[: content_end(a)] == a[: content_end(a)]
    # the update is journaled with the turn: the history keeps it, so the
    # next turn's request starts with this one's too
    from holon_cli.runtime.memory.history import PromptHistory

    h = PromptHistory.load(open_agent(None))
    assert any(i.text.startswith("# Context update") for i in h.items())


def test_the_cache_record_names_the_window_and_moves_once_per_compaction(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frame's cache record (runtime spec: ProviderPromptCache): the
    agent, the key, the fingerprint, the working memory revision the prefix
    carries and the compression epoch; a roll of the history (the
    conversation window outgrew its share of the budget) moves the epoch
    once, and the requests after it extend each other again."""
    from holon_cli.runtime.memory import compaction as cp

    seen: list[Any] = []
    real = ScriptedTransport.complete

    def capture(self: ScriptedTransport, request: Any) -> Any:
        seen.append(request)
        return real(self, request)

    monkeypatch.setattr(ScriptedTransport, "complete", capture)
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"loop": True, "steps": ["An answer. " * 40]}))
    model = f"scripted:{script}"
    admit("first")
    turn(model)
    fixed = cp.fixed_tokens(seen[0].frame, seen[0].tools)
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(f"runtime:\n  context_budget_tokens: {fixed + 1200}\n")
    for i in range(8):
        admit(f"question {i}")
        turn(model)
    records = [r.frame.cache for r in seen]
    assert all(
        c.agent_id == "main" and c.prompt_cache_key == seen[0].frame.prompt_cache_key
        for c in records
    )
    assert [c.context_fingerprint for c in records] == [r.frame.context_fingerprint for r in seen]
    epochs = [c.compression_epoch for c in records]
    assert epochs == sorted(epochs) and epochs[-1] >= 1, epochs
    # between two epochs' changes, each turn's request starts with the previous one
    from holon_cli.providers.openai_responses import build_body

    bodies = [json.dumps(build_body(r, "m"), ensure_ascii=False).encode() for r in seen]
    for n in range(1, len(seen)):
        prev, nxt = bodies[n - 1], bodies[n]
        same_epoch = epochs[n] == epochs[n - 1]
        extends = nxt.startswith(prev[: content_end(prev)])
        if same_epoch:
            assert extends, (n, epochs)
        else:  # a roll: the window's working memory now leads the conversation
            assert seen[n].frame.cache.working_memory_revision > 0
    rolled = [
        e["data"] for e in open_agent(None).events.records() if e["kind"] == "context_window_rolled"
    ]
    assert any(d["dropped_message_count"] > 0 for d in rolled)
    assert {d["reason"] for d in rolled} <= {"history_window", "over_budget", "blocks_shrunk"}
    built = [
        e["data"] for e in open_agent(None).events.records() if e["kind"] == "turn_context_built"
    ]
    assert {"working_memory_revision", "compression_epoch", "history_turns"} <= set(built[-1])
