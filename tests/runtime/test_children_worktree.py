"""Worktree children (``workspace_mode: "worktree"``): a task-owned git
worktree on a unique branch is the child's execution root; at terminal
cleanup or TaskStop a clean one is removed with its branch, a dirty or
mismatched one is kept with a ``worktree_retained`` event in the parent."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.runtime.agents.lifecycle import open_agent, set_model_override
from holon_cli.runtime.children import handle
from holon_cli.runtime.turn import run_turn
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.catalog import default_catalog
from tests.runtime.test_children import tool_call

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def parent(tmp_path: Path) -> AgentStore:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"agents": {"child-*": ["done"]}, "steps": ["x"], "loop": True}))
    store = open_agent(None)
    set_model_override(store.agent_id, f"scripted:{p}")
    from holon_cli.runtime.workspace.plane import use_workspace

    use_workspace(store, path=str(repo), mode="direct")  # the parent works in the repository
    return store


def spawn(parent: AgentStore) -> dict[str, Any]:
    res = tool_call(parent, "SpawnAgent", initial_message="Try it.", workspace_mode="worktree")
    assert res.ok, res.content
    return dict(res.data)


def branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").splitlines()


def test_a_clean_worktree_is_removed_with_its_branch_at_terminal_cleanup(
    parent: AgentStore, tmp_path: Path
) -> None:
    res = spawn(parent)
    wt = res["child_supervision"]["worktree"]
    tid, cid = res["supervision_task_id"], res["agent_id"]
    path = Path(wt["path"])
    assert wt["branch"] == f"holon/child/{tid}" and path.is_dir()
    assert (path / "README.md").read_text() == "hello\n"
    assert wt["branch"] in branches(tmp_path / "repo")
    child_state = open_agent(cid).read_record()["state"]
    # the parent's workspace, projected onto the task's worktree (the workspace plane's binding)
    assert child_state["workspace_anchor"] == str(tmp_path / "repo")
    assert child_state["execution_root"] == str(path) and child_state["cwd"] == str(path)
    assert child_state["projection_kind"] == "git_worktree_root"
    assert child_state["worktree_session"]["worktree_branch"] == wt["branch"]
    created = [e for e in open_agent(cid).events.records() if e["kind"] == "worktree_created"]
    assert [e["data"]["worktree_path"] for e in created] == [str(path)]
    detail = handle.task_status(parent, tid)["task"]["worktree"]
    assert detail["changed_files"] == [] and detail["cleanup_status"] == "pending"
    run_turn(cid, catalog=default_catalog())
    detail = handle.task_status(parent, tid)["task"]["worktree"]
    assert detail["cleanup_status"] == "removed"
    assert not path.exists() and wt["branch"] not in branches(tmp_path / "repo")
    assert not any(e["kind"] == "worktree_retained" for e in parent.events.records())


def test_a_dirty_worktree_is_kept_with_a_worktree_retained_event(
    parent: AgentStore, tmp_path: Path
) -> None:
    res = spawn(parent)
    tid, cid = res["supervision_task_id"], res["agent_id"]
    path = Path(res["child_supervision"]["worktree"]["path"])
    (path / "new.txt").write_text("work\n")
    (path / "README.md").write_text("changed\n")
    live = handle.task_status(parent, tid)["task"]["worktree"]
    assert live["changed_files"] == ["README.md", "new.txt"]
    run_turn(cid, catalog=default_catalog())
    detail = handle.task_status(parent, tid)["task"]["worktree"]
    assert detail["cleanup_status"] == "retained"
    assert detail["changed_files"] == ["README.md", "new.txt"]
    assert path.is_dir() and detail["branch"] in branches(tmp_path / "repo")
    (ev,) = [e for e in parent.events.records() if e["kind"] == "worktree_retained"]
    assert ev["data"]["task_id"] == tid and "2 changed file" in ev["data"]["reason"]


def test_task_stop_cleans_up_and_a_mismatched_worktree_is_kept(
    parent: AgentStore, tmp_path: Path
) -> None:
    clean = spawn(parent)
    stop = tool_call(parent, "TaskStop", task_id=clean["supervision_task_id"])
    assert stop.ok and stop.data["task"]["worktree"]["cleanup_status"] == "removed"
    moved = spawn(parent)
    path = Path(moved["child_supervision"]["worktree"]["path"])
    git(path, "checkout", "-q", "-b", "elsewhere")
    stop = tool_call(parent, "TaskStop", task_id=moved["supervision_task_id"])
    assert stop.data["task"]["worktree"]["cleanup_status"] == "retained"
    (ev,) = [e for e in parent.events.records() if e["kind"] == "worktree_retained"]
    assert "elsewhere" in ev["data"]["reason"]


def test_worktree_mode_outside_a_git_repository_leaves_nothing(tmp_path: Path) -> None:
    store = open_agent(None)
    plain = tmp_path / "plain"
    plain.mkdir()
    store.update_state(lambda st: st.update(workspace_anchor=str(plain), cwd=str(plain)))
    res = tool_call(store, "SpawnAgent", initial_message="Try it.", workspace_mode="worktree")
    assert not res.ok and "git" in res.error["message"]
    assert handle.list_tasks(store, include_all=True) == []
    assert [p.name for p in store.layout.home.parent.iterdir()] == ["main"]


def test_inherit_binds_the_child_to_the_parents_active_workspace(
    parent: AgentStore, tmp_path: Path
) -> None:
    res = tool_call(parent, "SpawnAgent", initial_message="Work here.")
    assert res.ok and res.data["child_supervision"]["worktree"] is None
    state = open_agent(res.data["agent_id"]).read_record()["state"]
    pstate = parent.read_record()["state"]
    assert state["active_workspace_id"] == pstate["active_workspace_id"]
    assert state["workspace_anchor"] == str(tmp_path / "repo")
    assert state["execution_root"] == str(tmp_path / "repo")
    assert state["projection_kind"] == "canonical_root"


def test_a_dirty_parent_checkout_is_refused_for_a_worktree_child(
    parent: AgentStore, tmp_path: Path
) -> None:
    (tmp_path / "repo" / "README.md").write_text("uncommitted\n")
    res = tool_call(parent, "SpawnAgent", initial_message="Try it.", workspace_mode="worktree")
    assert not res.ok and "uncommitted changes" in res.error["message"]
    assert handle.list_tasks(parent, include_all=True) == []
