"""The operator's workspace routes (what `holon tui`'s actions call):
``GET /agents/{id}/workspaces`` lists, ``POST /control/agents/{id}/workspace``
attaches by absolute path, enters an attached id (direct or isolated) and
leaves for agent_home; bad bodies are a 400 naming the field, and a refusal
leaves the previous binding intact."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepos import isolate_git, make_repo, needs_git
from http_app import make_client

from holon_cli.runtime.agents.lifecycle import open_agent

ROUTE = "/control/agents/main/workspace"


@pytest.fixture(autouse=True)
def _main_agent() -> None:
    open_agent("main")


def _active() -> str:
    state = open_agent("main", create_default=False).read_record()["state"]
    return str(state.get("active_workspace_id") or "agent_home")


def test_attach_enter_and_exit(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    c = make_client()
    r = c.post(ROUTE, json={"path": str(proj)})
    assert r.status_code == 200, r.text
    got = r.json()
    wid = got["workspace_id"]
    assert got["newly_attached"] is True and got["mode"] == "direct"
    assert got["execution_root"] == str(proj.resolve()) and _active() == wid
    listed = c.get("/agents/main/workspaces").json()["workspaces"]
    assert [(w["workspace_id"], w["active"]) for w in listed] == [
        ("agent_home", False),
        (wid, True),
    ]
    r = c.post(ROUTE, json={"workspace_id": "agent_home"})
    assert r.status_code == 200 and r.json()["previous_workspace_id"] == wid
    assert _active() == "agent_home"
    r = c.post(ROUTE, json={"workspace_id": wid, "mode": "direct"})
    assert r.status_code == 200 and _active() == wid
    state = c.get("/agents/main/state").json()
    assert state["agent"]["workspace"]["workspace_id"] == wid
    assert state["agent"]["workspace"]["projection_kind"] == "canonical_root"


@needs_git
def test_enter_isolated_makes_a_worktree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    c = make_client()
    wid = c.post(ROUTE, json={"path": str(repo)}).json()["workspace_id"]
    r = c.post(ROUTE, json={"workspace_id": wid, "mode": "isolated"})
    assert r.status_code == 200, r.text
    session = r.json()["worktree_session"]
    assert session and Path(session["worktree_path"]).is_dir()
    state = c.get("/agents/main/state").json()["agent"]
    assert state["workspace"]["projection_kind"] == "git_worktree_root"
    assert state["worktree_session"]["worktree_branch"] == session["worktree_branch"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "path"),
        ({"path": "/tmp", "workspace_id": "agent_home"}, "path"),
        ({"path": "relative/dir"}, "path"),
        ({"path": 7}, "path"),
        ({"workspace_id": ""}, "workspace_id"),
        ({"workspace_id": "agent_home", "mode": 1}, "mode"),
    ],
)
def test_bad_bodies_are_400_naming_the_field(body: dict[str, object], field: str) -> None:
    r = make_client().post(ROUTE, json=body)
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["message"]
    assert _active() == "agent_home"


def test_refusals_keep_the_binding(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    c = make_client()
    wid = c.post(ROUTE, json={"path": str(proj)}).json()["workspace_id"]
    for body, status in [
        ({"path": str(tmp_path / "missing")}, 400),  # no such directory
        ({"workspace_id": "ws_0123456789ab"}, 404),  # not attached
        ({"workspace_id": wid, "mode": "sideways"}, 400),
        ({"workspace_id": "agent_home", "mode": "isolated"}, 400),
    ]:
        r = c.post(ROUTE, json=body)
        assert r.status_code == status, (body, r.text)
        assert set(r.json()["error"]) == {"kind", "message", "hint"}
        assert _active() == wid
    assert (
        c.post("/control/agents/nobody/workspace", json={"workspace_id": "agent_home"}).status_code
        == 404
    )
    assert c.get("/agents/nobody/workspaces").status_code == 404


def test_workspace_post_is_a_control_route(tmp_path: Path) -> None:
    c = make_client()
    r = c.post(ROUTE, json={"path": str(tmp_path)}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    r = c.post(ROUTE, content=b'{"path": "/tmp"}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = make_client(token="s3cret").get("/agents/main/workspaces")
    assert r.status_code == 401
    assert _active() == "agent_home"


def test_state_carries_the_execution_policy(holon_home: Path) -> None:
    c = make_client()
    pol = c.get("/agents/main/state").json()["execution_policy"]
    assert pol["sandbox_setting"] == "auto"  # the default: bwrap where it works here
    assert pol["backend"] == ("bwrap" if pol["sandbox"] == "bwrap" else "host_local")
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text("execution:\n  sandbox: none\n")
    pol = c.get("/agents/main/state").json()["execution_policy"]
    assert pol["backend"] == "host_local" and pol["capabilities"] == "kept"
    (holon_home / "config.yaml").write_text("execution:\n  sandbox: bwrap\n")
    pol = c.get("/agents/main/state").json()["execution_policy"]
    assert pol["backend"] == "bwrap" and pol["network_confinement"] == "enforced"
    (holon_home / "config.yaml").write_text("execution: [not, a, mapping\n")
    r = c.get("/agents/main/state")
    assert r.status_code == 200 and r.json()["execution_policy"] is None


def test_the_home_is_never_a_workspace_409(holon_home: Path, tmp_path: Path) -> None:
    """Issue 35 item 4: the route answered 200 for the home before."""
    c = make_client()
    link = tmp_path / "to-home"
    link.symlink_to(holon_home)
    from holon_cli.runtime.agents.lifecycle import create_agent

    other = create_agent("ops").layout.home
    for p in (holon_home, holon_home.parent, holon_home / "run", other, link):
        r = c.post(ROUTE, json={"path": str(p)})
        assert r.status_code == 409, (p, r.text)
        assert r.json()["error"]["kind"] == "forbidden_workspace"
    assert _active() == "agent_home"
