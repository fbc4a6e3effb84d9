"""A whole turn with ``runtime.openai_incremental: true`` over real HTTP
(127.0.0.1): later rounds continue the previous response with only the new
items; the next turn in the same process continues it too (its input extends
the previous one: issue 44), and a new process starts full."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loopback import LoopbackServer, Reply  # noqa: E402

from holon_cli.providers import incremental as inc  # noqa: E402
from holon_cli.runtime.agents.lifecycle import open_agent  # noqa: E402
from holon_cli.runtime.run import run_once  # noqa: E402
from holon_cli.tools.catalog import default_catalog  # noqa: E402


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch, holon_home: Path):
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    inc.STATE._links.clear()
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text("runtime:\n  openai_incremental: true\n")
    with LoopbackServer() as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        yield s
    inc.STATE._links.clear()


def call(resp_id: str, call_id: str, cmd: str) -> dict:
    item = {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "ExecCommand",
        "arguments": json.dumps({"cmd": cmd}),
        "status": "completed",
    }
    return {"id": resp_id, "object": "response", "status": "completed", "output": [item]}


def text(resp_id: str, t: str) -> dict:
    content = [{"type": "output_text", "text": t, "annotations": []}]
    item = {"type": "message", "role": "assistant", "status": "completed", "content": content}
    return {"id": resp_id, "object": "response", "status": "completed", "output": [item]}


def test_a_turn_continues_its_previous_response(srv: LoopbackServer, tmp_path: Path) -> None:
    srv.queue(
        Reply.json_body(call("resp_a", "call_1", "echo one")),
        Reply.json_body(call("resp_b", "call_2", "echo two")),
        Reply.json_body(text("resp_c", "done")),
        Reply.json_body(text("resp_d", "second turn")),
        Reply.json_body(text("resp_e", "third turn")),
    )
    kw = {"model": "openai/gpt-test", "workspace_root": str(tmp_path), "catalog": default_catalog()}
    data = run_once("say hi", sleep=lambda _s: None, keep_agent=True, **kw)
    assert data["final_text"] == "done"
    b1, b2, b3 = (r.json() for r in srv.requests)
    assert "previous_response_id" not in b1 and b1["store"] is True
    assert b2["previous_response_id"] == "resp_a" and b3["previous_response_id"] == "resp_b"
    assert [i["type"] for i in b2["input"]] == ["function_call_output"]
    assert "one" in b2["input"][0]["output"] and "two" in b3["input"][0]["output"]
    store = open_agent(data["agent_id"])
    rounds = [e["data"] for e in store.events.records() if e["kind"] == "provider_round_completed"]
    assert [r["request_mode"] for r in rounds] == ["full", "incremental", "incremental"]
    assert rounds[0]["request_mode_reason"] == "first_request"
    # the next turn (the same agent, this process) continues the previous
    # response: only its own context and message are sent
    run_once("again", agent_id=data["agent_id"], sleep=lambda _s: None, **kw)
    b4 = srv.requests[3].json()
    assert b4["previous_response_id"] == "resp_c"
    assert [i["role"] for i in b4["input"]] == ["user", "user"]
    assert b4["input"][0]["content"][0]["text"].startswith("Turn mode:")
    assert b4["input"][1]["content"][0]["text"].endswith("again")
    # a new process (a cron `holon turn`) knows no previous response: full
    inc.STATE._links.clear()
    run_once("once more", agent_id=data["agent_id"], sleep=lambda _s: None, **kw)
    b5 = srv.requests[4].json()
    assert "previous_response_id" not in b5
    # ...whose input still starts with everything the previous turns sent
    assert b5["input"][: len(b1["input"])] == b1["input"]
    rounds = [e["data"] for e in store.events.records() if e["kind"] == "provider_round_completed"]
    assert [r["request_mode"] for r in rounds][3:] == ["incremental", "full"]
