"""The MCP control routes (what a web console calls, beside the other control
routes and behind the same guards): ``GET /agents/{id}/mcp`` lists the
servers and the open operator requests, ``POST
/control/agents/{id}/mcp/requests/{rid}/answer`` answers one (the call is
sent again at once); a second answer is a 409, bad bodies a 400."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_app import make_client
from mcp_helpers import close_servers, fake, write_config

pytest.importorskip("mcp", reason="needs the MCP SDK (pip install -e '.[mcp]')")


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    close_servers()


def _open_request(holon_home: Path) -> str:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.mcp import calls
    from holon_cli.runtime.mcp.config import find
    from holon_cli.runtime.mcp.requests import open_request
    from holon_cli.store.config import load_config

    write_config(holon_home, {"fake": fake("--era", "modern")})
    store, cfg = open_agent("main"), load_config()
    spec = find(cfg, "main", "fake")
    out = calls.call_tool(store, cfg, spec, "color", {})
    assert out.kind == "input_required"
    return str(open_request(store, spec, "color", {}, out)["id"])


def test_list_and_answer_over_http(holon_home: Path) -> None:
    rid = _open_request(holon_home)
    c = make_client()
    got: dict[str, Any] = c.get("/agents/main/mcp").json()
    assert got["servers"][0]["name"] == "fake" and got["servers"][0]["state"] == "ok"
    assert [r["id"] for r in got["requests"]] == [rid]
    route = f"/control/agents/main/mcp/requests/{rid}/answer"
    assert c.post(route, json={}).status_code == 400
    assert c.post(route, json={"content": {}, "decline": True}).status_code == 400
    assert c.post(route, json={"decline": "yes"}).status_code == 400
    bad = c.post(route, json={"content": {"colour": "x"}})
    assert bad.status_code == 400 and bad.json()["error"]["kind"] == "usage_error"
    r = c.post(route, json={"content": {"color": "teal"}})
    assert r.status_code == 200, r.text
    assert r.json()["outcome"] == "result" and r.json()["result_message_id"]
    again = c.post(route, json={"content": {"color": "red"}})
    assert again.status_code == 409 and again.json()["error"]["kind"] == "mcp_request_closed"
    assert c.get("/agents/main/mcp").json()["requests"] == []
    assert len(c.get("/agents/main/mcp?all=1").json()["requests"]) == 1
    missing = c.post("/control/agents/main/mcp/requests/mcpreq_nope/answer", json={"decline": True})
    assert missing.status_code == 404


def test_the_answer_route_keeps_the_control_guards(holon_home: Path) -> None:
    rid = _open_request(holon_home)
    c = make_client()
    r = c.post(
        f"/control/agents/main/mcp/requests/{rid}/answer",
        json={"decline": True},
        headers={"Origin": "https://evil.example"},
    )
    assert r.status_code == 403
