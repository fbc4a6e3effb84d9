"""The route table of serve/http/app.py is what serve serves and what the
HTTP reference says: every route the app mounts comes from it with a
summary and its answers, each answer line starts with a status code, and
every status a route's answers name (besides its guards') is one its
handler can give."""

from __future__ import annotations

import re

from http_app import make_app
from starlette.routing import Route

from holon_cli.serve.http import app as http_app


def test_every_mounted_route_is_a_documented_table_row() -> None:
    table = {(r.path, r.method) for r in http_app.ROUTES}
    mounted = {
        (r.path, m)
        for r in make_app().routes
        if isinstance(r, Route) and r.path in {p for p, _ in table}
        for m in (r.methods or set()) - {"HEAD"}
    }
    assert mounted == table
    for r in http_app.ROUTES:
        assert r.summary and r.answers, r.path
        assert r.access in http_app.ACCESS_ANSWERS
        for line in (*r.answers, *http_app.ACCESS_ANSWERS[r.access]):
            assert re.match(r"^[1-5]\d\d\b", line), (r.path, line)
        if r.method == "GET":
            assert not r.body, r.path  # a GET takes its input in the query


def test_the_documented_answers_are_real() -> None:
    """Spot checks of the table against the app: what a route answers when
    it works, and the guard answers every control route shares."""
    from http_app import client_for

    c = client_for(make_app())
    assert c.get("/healthz").status_code == 200
    assert (
        c.post(
            "/control/agents/main/pause", content=b"x", headers={"Content-Type": "text/plain"}
        ).status_code
        == 415
    )
    assert (
        c.get("/agents/main/status", headers={"Origin": "http://evil.example"}).status_code == 403
    )
    assert c.get("/agents/main/events?after=x").status_code == 400
    prompt = next(r for r in http_app.ROUTES if r.path.endswith("/prompt"))
    assert any(a.startswith("202") for a in prompt.answers)
    res = c.post("/control/agents/nobody/prompt", json={"text": "hi"})
    assert res.status_code == 404 and res.json()["error"]["kind"] == "not_found"
    from holon_cli.runtime.agents.lifecycle import open_agent

    open_agent(None)  # the default agent, as serve creates it
    res = c.post("/control/agents/main/prompt", json={"text": "hi"})
    assert res.status_code == 202 and "message_id" in res.json()


def test_stream_routes_name_their_sse_events() -> None:
    streams = [r for r in http_app.ROUTES if r.sse]
    assert {r.path for r in streams} == {"/events", "/agents/{agent_id}/events/stream"}
    for r in streams:
        assert set(http_app.STREAM_NOTES) <= set(r.sse)
