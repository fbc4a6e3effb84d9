"""The workspace plane against real git (issue 25): ids and the home
registry, direct and isolated bindings, restart recovery, detaching, the
migration of older records, and every bad input leaving the binding intact."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from gitrepos import git, isolate_git, make_repo, needs_git, worktree_list

from holon_cli.errors import HolonError, NotFoundError, RejectedError, UsageError
from holon_cli.model.workspace import AGENT_HOME
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
from holon_cli.runtime.workspace import load_instructions, plane, workspace_for, workspace_id
from holon_cli.runtime.workspace.guard import ForbiddenWorkspace
from holon_cli.store.agent_store import AgentStore

pytestmark = needs_git


@pytest.fixture(autouse=True)
def _git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "shop", {"README.md": "shop\n", "AGENTS.md": "# shop rules\n", "src/a.py": ""}
    )


@pytest.fixture
def store() -> AgentStore:
    return create_agent("dev")


def state(store: AgentStore) -> dict[str, Any]:
    return dict(store.read_record()["state"])


def binding_of(store: AgentStore) -> dict[str, Any]:
    s = state(store)
    keys = ("active_workspace_id", "workspace_anchor", "execution_root", "cwd", "projection_kind")
    return {k: s.get(k) for k in (*keys, "attached_workspaces", "worktree_session")}


def registry(holon_home: Path) -> list[dict[str, Any]]:
    return json.loads((holon_home / "workspaces.json").read_text())["workspaces"]


# ------------------------------------------------------------------ ids


def test_a_new_agent_is_on_agent_home(store: AgentStore) -> None:
    ws = workspace_for(store.layout.home, state(store))
    assert ws.workspace_id == AGENT_HOME and ws.execution_root == store.layout.home
    assert ws.snapshot()["projection_kind"] == "canonical_root"
    assert plane.list_workspaces(store)[0] | {"active": True} == plane.list_workspaces(store)[0]


def test_direct_path_binds_the_repository_top_level_and_registers_it(
    store: AgentStore, repo: Path, holon_home: Path
) -> None:
    out = plane.use_workspace(store, path=str(repo / "src"), source="tool")
    wid = out["workspace_id"]
    assert wid.startswith("ws_") and wid == workspace_id(repo)
    assert out["workspace_anchor"] == str(repo) and out["execution_root"] == str(repo)
    assert out["cwd"] == str(repo / "src") and out["projection_kind"] == "canonical_root"
    assert out["execution_root_id"] == wid and out["worktree_session"] is None
    assert out["previous_workspace_id"] == AGENT_HOME
    assert state(store)["attached_workspaces"] == [wid]
    assert [r["workspace_id"] for r in registry(holon_home)] == [wid]
    ev = [e for e in store.events.records() if e["kind"] == "workspace_bound"][-1]
    assert ev["data"]["workspace_id"] == wid and ev["data"]["source"] == "tool"


def test_an_anchor_keeps_one_id_across_agents_and_subdirectories(
    store: AgentStore, repo: Path, holon_home: Path
) -> None:
    a = plane.use_workspace(store, path=str(repo), source="cli")["workspace_id"]
    other = create_agent("ops")
    b = plane.use_workspace(other, path=str(repo / "src"), source="cli")["workspace_id"]
    assert a == b and len(registry(holon_home)) == 1


def test_a_plain_directory_is_its_own_anchor(store: AgentStore, tmp_path: Path) -> None:
    d = tmp_path / "notes"
    (d / "sub").mkdir(parents=True)
    out = plane.use_workspace(store, path=str(d / "sub"), source="cli")
    assert out["workspace_anchor"] == str((d / "sub").resolve())


def test_relative_paths_are_taken_from_the_callers_cwd(store: AgentStore, repo: Path) -> None:
    out = plane.use_workspace(store, path="src", base=repo, source="tool")
    assert out["cwd"] == str(repo / "src")


def test_agent_home_by_id_returns_home_and_keeps_the_attachment(
    store: AgentStore, repo: Path
) -> None:
    wid = plane.use_workspace(store, path=str(repo))["workspace_id"]
    out = plane.use_workspace(store, workspace_id=AGENT_HOME)
    assert out["workspace_id"] == AGENT_HOME and out["previous_workspace_id"] == wid
    assert state(store)["attached_workspaces"] == [wid]
    back = plane.use_workspace(store, workspace_id=wid)
    assert back["execution_root"] == str(repo) and back["cwd"] == str(repo)


# -------------------------------------------------------- linked worktrees


def test_a_path_in_a_linked_worktree_keeps_the_repository_id(
    store: AgentStore, repo: Path, tmp_path: Path
) -> None:
    wid = plane.use_workspace(store, path=str(repo))["workspace_id"]
    wt = tmp_path / "shop-feature"
    git("worktree", "add", "-q", "-b", "feature", str(wt), cwd=repo)
    out = plane.use_workspace(store, path=str(wt / "src"))
    assert out["workspace_id"] == wid and out["workspace_anchor"] == str(repo)
    assert out["execution_root"] == str(wt.resolve())
    assert out["projection_kind"] == "git_worktree_root" and out["execution_root_id"] != wid
    assert 'mode="isolated"' in out["guidance"] and wid in out["guidance"]
    assert state(store)["attached_workspaces"] == [wid]


# ------------------------------------------------------------- isolated


def test_isolated_makes_a_managed_worktree_on_its_own_branch(
    store: AgentStore, repo: Path, holon_home: Path
) -> None:
    out = plane.use_workspace(store, path=str(repo / "src"), mode="isolated")
    wt = out["worktree_session"]
    assert set(wt) == {
        "original_working_directory",
        "original_branch",
        "worktree_path",
        "worktree_branch",
    }
    assert wt["original_working_directory"] == str(repo) and wt["original_branch"] == "main"
    assert wt["worktree_branch"].startswith("holon/dev/")
    path = Path(wt["worktree_path"])
    assert holon_home / "worktrees" in path.parents  # not inside the agent home
    assert out["execution_root"] == str(path) and out["cwd"] == str(path / "src")
    assert out["workspace_anchor"] == str(repo) and out["projection_kind"] == "git_worktree_root"
    rows = {r["worktree"]: r for r in worktree_list(repo)}
    assert rows[str(path)]["branch"] == f"refs/heads/{wt['worktree_branch']}"
    assert rows[str(repo)]["branch"] == "refs/heads/main"  # the checkout is untouched
    assert "worktree_created" in [e["kind"] for e in store.events.records()]
    # guidance still comes from the anchor, never from the worktree
    ws = workspace_for(store.layout.home, state(store))
    (path / "AGENTS.md").write_text("# worktree copy, edited\n")
    [src] = [s for _, s in load_instructions(store.layout.home, ws) if s.scope == "workspace"]
    assert src.path == str(repo / "AGENTS.md")


def test_an_isolated_session_survives_a_restart_and_is_resumed(
    store: AgentStore, repo: Path
) -> None:
    first = plane.use_workspace(store, path=str(repo), mode="isolated")
    # a new process: nothing but the files
    again = open_agent("dev")
    ws = workspace_for(again.layout.home, again.read_record()["state"])
    assert ws.worktree_session == first["worktree_session"]
    assert str(ws.execution_root) == first["execution_root"]
    plane.use_workspace(again, workspace_id=AGENT_HOME)
    resumed = plane.use_workspace(again, workspace_id=first["workspace_id"], mode="isolated")
    assert resumed["worktree_session"] == first["worktree_session"]
    assert len(worktree_list(repo)) == 2  # the repository and one managed worktree


def test_uncommitted_changes_refuse_isolation_and_keep_the_binding(
    store: AgentStore, repo: Path
) -> None:
    (repo / "README.md").write_text("changed\n")
    before = binding_of(store)
    with pytest.raises(RejectedError) as exc:
        plane.use_workspace(store, path=str(repo), mode="isolated")
    assert "uncommitted changes" in exc.value.message and "README.md" in exc.value.message
    assert "stash" in (exc.value.hint or "")
    assert binding_of(store) == before and len(worktree_list(repo)) == 1


def test_a_worktree_whose_branch_was_deleted_by_hand_is_a_clear_error(
    store: AgentStore, repo: Path
) -> None:
    first = plane.use_workspace(store, path=str(repo), mode="isolated")
    plane.use_workspace(store, workspace_id=AGENT_HOME)
    branch = first["worktree_session"]["worktree_branch"]
    git("update-ref", "-d", f"refs/heads/{branch}", cwd=repo)
    before = binding_of(store)
    with pytest.raises(RejectedError) as exc:
        plane.use_workspace(store, workspace_id=first["workspace_id"], mode="isolated")
    assert branch in exc.value.message and "checkout -b" in (exc.value.hint or "")
    assert binding_of(store) == before
    assert Path(first["worktree_session"]["worktree_path"]).is_dir()  # nothing deleted


def test_isolation_needs_a_git_repository_with_a_commit(store: AgentStore, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(UsageError) as exc:
        plane.use_workspace(store, path=str(plain), mode="isolated")
    assert exc.value.kind == "invalid_arguments" and "not a git repository" in exc.value.message
    empty = tmp_path / "empty"
    empty.mkdir()
    git("init", "-q", cwd=empty)
    with pytest.raises(RejectedError, match="no commit yet"):
        plane.use_workspace(store, path=str(empty), mode="isolated")
    assert state(store)["active_workspace_id"] is None  # still AgentHome


# ------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"path": "/no/such/dir"}, UsageError, "no such directory"),
        ({"path": "FILE"}, UsageError, "is a file, not a directory"),
        ({}, UsageError, "exactly one of path and workspace_id"),
        ({"path": ".", "workspace_id": "agent_home"}, UsageError, "both were given"),
        ({"path": ".", "mode": "sandbox"}, UsageError, "mode must be direct or isolated"),
        ({"workspace_id": "ws_000000000000"}, NotFoundError, "not attached"),
        ({"workspace_id": "agent_home", "mode": "isolated"}, UsageError, "no isolated mode"),
        ({"path": "/"}, ForbiddenWorkspace, "it contains the holon home"),
        ({"path": "HOME"}, ForbiddenWorkspace, "it is the holon home"),
        ({"path": "OTHER"}, ForbiddenWorkspace, "it is inside the holon home"),
    ],
)
def test_bad_input_is_a_clear_error_and_the_binding_stays(
    store: AgentStore,
    repo: Path,
    holon_home: Path,
    kwargs: dict[str, str],
    error: type[HolonError],
    words: str,
) -> None:
    plane.use_workspace(store, path=str(repo))
    subs = {
        "FILE": str(repo / "README.md"),
        "HOME": str(holon_home),
        "OTHER": str(create_agent("ops").layout.home),
    }
    kwargs = {k: subs.get(v, v) for k, v in kwargs.items()}
    before = binding_of(store)
    events = len(store.events.records())
    with pytest.raises(error) as exc:
        plane.use_workspace(store, base=repo, source="tool", **kwargs)  # type: ignore[arg-type]
    assert words in exc.value.message
    assert binding_of(store) == before and len(store.events.records()) == events


def test_not_even_the_operator_may_attach_another_agents_home(
    store: AgentStore, holon_home: Path
) -> None:
    """Issue 35 item 4: the home is refused on the operator's paths too (it
    was accepted from the CLI and HTTP before)."""
    other = create_agent("ops").layout.home
    for source in ("cli", "http_control"):
        with pytest.raises(ForbiddenWorkspace) as exc:
            plane.use_workspace(store, path=str(other), source=source)
        assert exc.value.exit_code == 4 and exc.value.kind == "forbidden_workspace"
    assert state(store)["active_workspace_id"] is None


def test_the_agents_own_home_by_path_is_agent_home(store: AgentStore, repo: Path) -> None:
    plane.use_workspace(store, path=str(repo))
    out = plane.use_workspace(store, path=str(store.layout.home), source="tool")
    assert out["workspace_id"] == AGENT_HOME


# -------------------------------------------------------------- detach


def test_detach_refuses_the_active_workspace_naming_agent_home(
    store: AgentStore, repo: Path
) -> None:
    wid = plane.use_workspace(store, path=str(repo))["workspace_id"]
    with pytest.raises(RejectedError) as exc:
        plane.detach_workspace(store, wid)
    assert exc.value.exit_code == 4 and "agent_home" in (exc.value.hint or "")
    assert state(store)["attached_workspaces"] == [wid]


def test_detach_forgets_an_id_and_deletes_nothing(
    store: AgentStore, repo: Path, holon_home: Path
) -> None:
    from holon_cli.runtime import queue as q

    iso = plane.use_workspace(store, path=str(repo), mode="isolated")
    plane.use_workspace(store, workspace_id=AGENT_HOME)
    pending = q.pending_count(store)
    out = plane.detach_workspace(store, iso["workspace_id"], source="tool")
    assert out["detached"] is True and out["stale"] is False
    assert state(store)["attached_workspaces"] == []
    assert Path(iso["worktree_session"]["worktree_path"]).is_dir() and repo.is_dir()
    assert len(worktree_list(repo)) == 2
    assert [r["workspace_id"] for r in registry(holon_home)] == [iso["workspace_id"]]
    ev = [e for e in store.events.records() if e["kind"] == "workspace_detached"]
    assert ev[-1]["data"]["workspace_id"] == iso["workspace_id"]
    assert q.pending_count(store) == pending  # an audit event, never a queued message
    [row] = [r for r in plane.list_workspaces(store, include_all=True) if r["attached"] is False]
    assert row["workspace_id"] == iso["workspace_id"] and row["exists"] is True


def test_a_stale_workspace_detaches_and_unknown_ids_are_not_found(
    store: AgentStore, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    wid = plane.use_workspace(store, path=str(gone))["workspace_id"]
    plane.use_workspace(store, workspace_id=AGENT_HOME)
    gone.rmdir()
    with pytest.raises(RejectedError, match="no longer exists"):
        plane.use_workspace(store, workspace_id=wid)
    assert [r["exists"] for r in plane.list_workspaces(store)] == [True, False]
    assert plane.detach_workspace(store, wid)["stale"] is True
    with pytest.raises(NotFoundError):
        plane.detach_workspace(store, wid)
    with pytest.raises(RejectedError, match="cannot be detached"):
        plane.detach_workspace(store, AGENT_HOME)


# ----------------------------------------------------------- migration


def test_an_older_record_with_paths_is_read_and_upgraded(
    store: AgentStore, tmp_path: Path, repo: Path, holon_home: Path
) -> None:
    old_a, old_b = tmp_path / "old-a", tmp_path / "old-b"
    old_a.mkdir()
    old_b.mkdir()

    def legacy(s: Any) -> None:
        s.update(
            attached_workspaces=[str(old_a), str(old_b)],
            workspace_anchor=str(old_a),
            cwd=str(old_a),
            active_workspace_id=None,
        )

    store.update_state(legacy)
    ws = workspace_for(store.layout.home, state(store))
    assert ws.workspace_id == workspace_id(old_a) and ws.execution_root == old_a
    rows = plane.list_workspaces(store)
    assert [r["workspace_anchor"] for r in rows[1:]] == [str(old_a), str(old_b)]
    assert rows[1]["active"] is True
    plane.use_workspace(store, path=str(repo))
    ids = state(store)["attached_workspaces"]
    assert ids == [workspace_id(old_a), workspace_id(old_b), workspace_id(repo)]
    anchors = {r["workspace_id"]: r["workspace_anchor"] for r in registry(holon_home)}
    assert anchors[workspace_id(old_b)] == str(old_b)  # the path is not lost
    back = plane.use_workspace(store, workspace_id=workspace_id(old_b))
    assert back["execution_root"] == str(old_b)


def test_work_items_and_briefs_record_the_active_workspace(store: AgentStore, repo: Path) -> None:
    from holon_cli.runtime.briefs import write_brief
    from holon_cli.runtime.workitems.mutations import create_work_item

    home_item = create_work_item(store, objective="tidy notes")["work_item"]["id"]
    wid = plane.use_workspace(store, path=str(repo))["workspace_id"]
    repo_item = create_work_item(store, objective="fix the shop")["work_item"]["id"]
    brief = write_brief(store, kind="result", text="done")
    items = {r["id"]: r for r in store.ledger("work_items").records()}
    assert items[home_item]["workspace_id"] == AGENT_HOME
    assert items[repo_item]["workspace_id"] == wid
    assert brief["workspace_id"] == wid


def test_cwd_outside_the_execution_root_reads_as_the_root(store: AgentStore, repo: Path) -> None:
    plane.use_workspace(store, path=str(repo))
    store.update_state(lambda s: s.update(cwd=os.path.dirname(repo)))
    ws = workspace_for(store.layout.home, state(store))
    assert ws.cwd == repo


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not valid JSON"),
        ('{"v": 1, "workspaces": {}}', "`workspaces` must be a list"),
        ('{"v": 1, "workspaces": [{"workspace_id": "ws_1"}]}', "needs a `workspace_id`"),
        ('{"v": 9, "workspaces": []}', "newer than this holon understands"),
    ],
)
def test_a_damaged_registry_is_named_and_the_binding_stays(
    store: AgentStore, repo: Path, holon_home: Path, text: str, words: str
) -> None:
    from holon_cli.errors import CorruptStateError

    (holon_home / "workspaces.json").write_text(text)
    with pytest.raises(CorruptStateError) as exc:
        plane.use_workspace(store, path=str(repo))
    assert "workspaces.json" in exc.value.message and words in exc.value.message
    assert state(store)["active_workspace_id"] is None


def test_an_agent_may_enter_its_own_managed_worktree_by_path(store: AgentStore, repo: Path) -> None:
    iso = plane.use_workspace(store, path=str(repo), mode="isolated")
    plane.use_workspace(store, workspace_id=AGENT_HOME)
    path = iso["worktree_session"]["worktree_path"]
    out = plane.use_workspace(store, path=path, source="tool")
    assert out["workspace_id"] == iso["workspace_id"] and out["execution_root"] == path
    assert out["projection_kind"] == "git_worktree_root" and "guidance" in out
    with pytest.raises(RejectedError, match="may not be attached"):
        plane.use_workspace(create_agent("ops"), path=path, source="tool")


def test_the_prompt_names_the_binding_and_the_other_attached_ids(
    store: AgentStore, repo: Path, tmp_path: Path
) -> None:
    from holon_cli.runtime.debug import debug_prompt
    from holon_cli.tools.catalog import default_catalog

    notes = tmp_path / "notes"
    notes.mkdir()
    shop = plane.use_workspace(store, path=str(repo))["workspace_id"]
    plane.use_workspace(store, path=str(notes))
    d = debug_prompt(store, catalog=default_catalog())
    [text] = [s["text"] for s in d["sections"] if s["text"].startswith("# Execution")]
    assert f"execution_root: {notes.resolve()}" in text
    assert "projection_kind: canonical_root" in text
    assert f"other attached workspaces: {shop}\n" in text


@pytest.mark.parametrize("agent_id", ["dev", "a..b", "x.lock", "v1.", "A_b-c.d"])
def test_worktree_branch_names_are_valid_refs(agent_id: str, tmp_path: Path) -> None:
    from holon_cli.runtime.workspace.worktree import _branch_name

    name = _branch_name(agent_id, "abc123")
    git("check-ref-format", "--branch", name, cwd=tmp_path)
