"""The turn's own cost, kept from growing back (issue 44 item 4): a named
agent's one-round turn makes at most 12 fsyncs and each extra tool round at
most 3 (``benchmarks/turn_cost.py`` prints them by file); a safe point that
finds nothing new reads no queue; a round does not copy the tool schemas."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, RecordedRequest, Reply

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.catalog import default_catalog


def _answer(req: RecordedRequest) -> Reply:
    """``true`` until the turn's message (``rounds=N``) has N - 1 results."""
    body = req.json()
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    at, rounds = -1, 1
    for n, item in enumerate(items):
        if item.get("role") == "user" and "rounds=" in json.dumps(item.get("content")):
            at = n
            rounds = int(json.dumps(item["content"]).split("rounds=")[1][0])
    done = sum(1 for i in items[at + 1 :] if i.get("type") == "function_call_output")
    if done < rounds - 1:
        args = json.dumps({"cmd": "true"})
        output: list[dict[str, Any]] = [
            {"type": "function_call", "id": f"fc_{done}", "call_id": f"call_{done}"}
            | {"name": "ExecCommand", "arguments": args, "status": "completed"}
        ]
    else:
        text = [{"type": "output_text", "text": "done", "annotations": []}]
        output = [{"type": "message", "id": "m", "role": "assistant", "content": text}]
    usage = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    return Reply.json_body({"id": "r", "status": "completed", "output": output, "usage": usage})


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[AgentStore]:
    home = Path(os.environ["HOLON_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text("execution:\n  sandbox: none\n")
    with LoopbackServer() as srv:
        srv.check = _answer
        monkeypatch.setenv("OPENAI_BASE_URL", f"{srv.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        store = create_agent("named")
        for n in (1, 2):  # its first turns create its ledgers and folders once
            _turn(store, n, monkeypatch)
        yield store


def _turn(store: AgentStore, rounds: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files fsync'd by one turn of ``rounds`` rounds."""
    admit(f"go, rounds={rounds}", store=store)
    real, files = os.fsync, []

    def counted(fd: int) -> None:
        files.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    try:
        res = run_turn(store=store, cli_model="openai/bench", catalog=default_catalog())
    finally:
        monkeypatch.setattr(os, "fsync", real)
    assert res.status == "completed" and res.model_rounds == rounds
    return files


def test_a_named_agents_turn_makes_twelve_fsyncs_and_three_per_extra_round(
    agent: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = _turn(agent, 1, monkeypatch)
    four = _turn(agent, 4, monkeypatch)
    assert len(one) <= 12, one
    assert (len(four) - len(one)) / 3 <= 3, four
    # the turn record is written back, never fsync'd; nor is the home's spend copy
    assert not any(f.endswith(("turn_records.jsonl", "budgets/spend.jsonl")) for f in one)


def test_a_message_arriving_mid_turn_is_taken_at_the_next_safe_point(
    agent: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, asks = q.take_interjects, []

    def take(store: AgentStore, turn_id: str) -> Any:
        asks.append(turn_id)
        out = real(store, turn_id)
        if len(asks) == 1:  # arrives after the first safe point asked
            admit("and this too", priority="interject", store=store)
        return out

    monkeypatch.setattr(q, "take_interjects", take)
    _turn(agent, 4, monkeypatch)  # three safe points
    assert len(asks) == 2  # the first, then the one after the arrival; not the third
    interjected = [e for e in agent.events.records() if e["kind"] == "message_interjected"]
    assert len(interjected) == 1


def test_a_quiet_turn_asks_the_queue_once(
    agent: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, asks = q.take_interjects, []

    def take(store: AgentStore, turn_id: str) -> Any:
        asks.append(turn_id)
        return real(store, turn_id)

    monkeypatch.setattr(q, "take_interjects", take)
    _turn(agent, 4, monkeypatch)  # three safe points, nothing arrives
    assert len(asks) == 1


def test_a_round_sends_the_tool_schemas_without_copying_them() -> None:
    from holon_cli.model.provider import ToolSpec
    from holon_cli.providers.wire import tool_schema

    nested = {"type": "string"}
    spec = ToolSpec("T", "d", {"type": "object", "properties": {"x": nested}})
    out = tool_schema(spec)
    assert out == spec.input_schema and out is not spec.input_schema
    assert out["properties"]["x"] is nested  # shared, read-only
    assert tool_schema(ToolSpec("U", "d", {})) == {"type": "object", "properties": {}}
