"""``GET /agents/{id}/state`` carries the execution snapshot (issue 25):
the app in this process (starlette's TestClient), a real git worktree."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from gitrepos import isolate_git, make_repo, needs_git

from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime.workspace import plane

pytestmark = needs_git


def test_the_state_route_shows_workspace_and_worktree_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from starlette.testclient import TestClient

    from holon_cli.serve.http.app import HttpSettings, build_app

    isolate_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "shop")
    store = create_agent("dev")
    used = plane.use_workspace(store, path=str(repo), mode="isolated", source="cli")
    app = build_app(
        HttpSettings(host="127.0.0.1", port=0, token="t0ken"),
        runtime_status=dict,
        request_shutdown=lambda: None,
        stopping=threading.Event(),
    )
    with TestClient(app, base_url="http://127.0.0.1") as client:
        r = client.get("/agents/dev/state", headers={"Authorization": "Bearer t0ken"})
    assert r.status_code == 200, r.text
    body = r.json()
    ws = body["agent"]["workspace"]
    assert ws["workspace_id"] == used["workspace_id"] and ws["workspace_anchor"] == str(repo)
    assert ws["execution_root"] == used["worktree_session"]["worktree_path"]
    assert ws["projection_kind"] == "git_worktree_root"
    assert body["agent"]["worktree_session"] == used["worktree_session"]
    assert body["state"]["attached_workspaces"] == [used["workspace_id"]]
