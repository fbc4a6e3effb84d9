"""``POST /control/agents/{id}/pause`` and ``/start`` (issue 36 §5): the
operator holds and releases an agent over HTTP as with `holon agent pause`
and `start`: 202 with the same result; an unknown or private agent is 404;
the control guards apply (token, JSON content type)."""

from __future__ import annotations

from http_app import make_client

from holon_cli.runtime.agents.lifecycle import create_agent, open_agent


def _status(aid: str = "main") -> str:
    return str(open_agent(aid, create_default=False).read_record()["state"]["status"])


def test_pause_then_start_over_http() -> None:
    open_agent("main")
    c = make_client()
    r = c.post("/control/agents/main/pause", json={})
    assert r.status_code == 202, r.text
    assert r.json() | {"lifecycle_hint": None} == {
        "agent_id": "main",
        "previous": "awake_idle",
        "status": "paused",
        "changed": True,
        "lifecycle_hint": None,
    }
    assert _status() == "paused"
    again = c.post("/control/agents/main/pause", json={})
    assert again.status_code == 202 and again.json()["changed"] is False
    # a body is optional, as for abort
    r = c.post("/control/agents/main/start", headers={"Content-Type": "application/json"})
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "awake_idle" and _status() == "awake_idle"


def test_start_releases_a_stopped_agent() -> None:
    from holon_cli.runtime.agents.lifecycle import set_lifecycle

    open_agent("main")
    set_lifecycle("main", "stop")
    r = make_client().post("/control/agents/main/start", json={})
    assert r.status_code == 202 and r.json()["previous"] == "stopped"
    assert _status() == "awake_idle"


def test_unknown_and_private_agents_are_404_and_nothing_is_created() -> None:
    c = make_client()
    r = c.post("/control/agents/ghost/pause", json={})
    assert r.status_code == 404 and r.json()["error"]["kind"] == "not_found"
    assert not (open_agent("main").layout.home.parent / "ghost").exists()
    create_agent(
        "kid",
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
    )
    r = c.post("/control/agents/kid/pause", json={})
    assert r.status_code == 404 and _status("kid") != "paused"


def test_the_control_guards_apply() -> None:
    open_agent("main")
    c = make_client(token="s3cret")
    assert c.post("/control/agents/main/pause", json={}).status_code == 401
    ok = c.post("/control/agents/main/pause", json={}, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 202
    form = c.post(
        "/control/agents/main/start",
        content=b"x=1",
        headers={
            "Authorization": "Bearer s3cret",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert form.status_code == 415 and _status() == "paused"
    assert c.get("/control/agents/main/start").status_code == 405
