"""``holon workspace list|use|detach``, the execution snapshot in ``holon
status``, and ``holon run``'s binding rules (contract "Workspaces"), with
real git repositories."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from gitrepos import isolate_git, make_repo, needs_git, worktree_list
from inprocess_cli import bind_runner  # noqa: F401  (autouse)
from inprocess_cli import run as holon

pytestmark = needs_git


@pytest.fixture(autouse=True)
def _git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "shop", {"README.md": "shop\n", "AGENTS.md": "# shop\n"})


@pytest.fixture
def dev() -> str:
    assert holon("agent", "create", "dev").returncode == 0
    return "dev"


def data(res: Any) -> Any:
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["data"]


def status(agent: str) -> dict[str, Any]:
    return data(holon("status", "--agent", agent, "--json"))


def script(tmp_path: Path, steps: list[dict[str, Any]], name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def test_use_list_status_and_back_to_agent_home(dev: str, repo: Path) -> None:
    st = status(dev)
    assert st["workspace"]["workspace_id"] == "agent_home" and st["worktree_session"] is None
    used = data(holon("workspace", "use", str(repo), "--agent", dev, "--json"))
    wid = used["workspace_id"]
    st = status(dev)
    assert set(st["workspace"]) >= {
        "workspace_id",
        "workspace_anchor",
        "execution_root",
        "cwd",
        "projection_kind",
    }
    assert st["workspace"]["workspace_id"] == wid and st["workspace"]["cwd"] == str(repo)
    rows = data(holon("workspace", "list", "--agent", dev, "--json"))["workspaces"]
    assert [(r["workspace_id"], r["active"], r["exists"]) for r in rows] == [
        ("agent_home", False, True),
        (wid, True, True),
    ]
    text = holon("status", "--agent", dev).stdout
    assert re.search(rf"^workspace +{wid} \({re.escape(str(repo))}\)$", text, re.M), text
    back = data(holon("workspace", "use", "agent_home", "--agent", dev, "--json"))
    assert back["workspace_id"] == "agent_home" and back["previous_workspace_id"] == wid


def test_isolated_use_shows_the_worktree_everywhere(dev: str, repo: Path) -> None:
    used = data(holon("workspace", "use", str(repo), "--isolated", "--agent", dev, "--json"))
    wt = used["worktree_session"]
    assert used["projection_kind"] == "git_worktree_root"
    assert [r["worktree"] for r in worktree_list(repo)] == [str(repo), wt["worktree_path"]]
    st = status(dev)
    assert st["worktree_session"] == wt and st["workspace"]["workspace_anchor"] == str(repo)
    assert f"branch {wt['worktree_branch']} from main" in holon("status", "--agent", dev).stdout
    d = data(holon("debug", "prompt", "--agent", dev, "--json"))
    assert d["execution_root"] == wt["worktree_path"] and d["worktree_session"] == wt
    assert [s["path"] for s in d["instructions"] if s["scope"] == "workspace"] == [
        str(repo / "AGENTS.md")
    ]
    text = holon("debug", "prompt", "--agent", dev).stdout
    assert "git_worktree_root" in text and wt["worktree_branch"] in text


def test_detach_exit_codes_and_nothing_deleted(dev: str, repo: Path, tmp_path: Path) -> None:
    wid = data(holon("workspace", "use", str(repo), "--agent", dev, "--json"))["workspace_id"]
    res = holon("workspace", "detach", wid, "--agent", dev)
    assert res.returncode == 4 and "agent_home" in res.stderr
    res = holon("workspace", "detach", wid, "--agent", dev, "--json")
    assert res.returncode == 4 and json.loads(res.stdout)["error"]["kind"] == "rejected"
    assert holon("workspace", "detach", "ws_000000000000", "--agent", dev).returncode == 3
    gone = tmp_path / "gone"
    gone.mkdir()
    stale = data(holon("workspace", "use", str(gone), "--agent", dev, "--json"))["workspace_id"]
    assert holon("workspace", "use", wid, "--agent", dev).returncode == 0  # by id
    gone.rmdir()
    res = holon("workspace", "detach", stale, "--agent", dev)
    assert res.returncode == 0 and "directory is gone" in res.stdout
    rows = data(holon("workspace", "list", "--all", "--agent", dev, "--json"))["workspaces"]
    assert {r["workspace_id"]: r["attached"] for r in rows} == {
        "agent_home": True,
        wid: True,
        stale: False,
    }
    assert repo.is_dir() and (repo / "README.md").is_file()


@pytest.mark.parametrize(
    ("target", "flags", "code", "words"),
    [
        ("missing", [], 2, "no such directory"),
        ("shop/README.md", [], 2, "is a file, not a directory"),
        ("ws_999999999999", [], 3, "not attached"),
        ("dirty", ["--isolated"], 4, "uncommitted changes"),
        ("plain", ["--isolated"], 2, "not a git repository"),
    ],
)
def test_bad_use_is_a_clear_error_and_keeps_the_binding(
    dev: str,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    flags: list[str],
    code: int,
    words: str,
) -> None:
    holon("workspace", "use", str(repo), "--agent", dev)
    (tmp_path / "plain").mkdir()
    make_repo(tmp_path / "dirty").joinpath("README.md").write_text("changed\n")
    monkeypatch.chdir(tmp_path)
    before = status(dev)["workspace"]
    res = holon("workspace", "use", target, *flags, "--agent", dev)
    assert res.returncode == code and words in res.stderr, res.stderr
    assert status(dev)["workspace"] == before


def test_run_keeps_an_existing_agents_binding_agent_home_included(
    dev: str, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = script(tmp_path, [{"text": "ok"}] * 3)
    monkeypatch.chdir(repo)
    assert holon("run", "--agent", dev, "--model", model, "hi").returncode == 0
    assert status(dev)["workspace"]["workspace_id"] == "agent_home"
    iso = data(holon("workspace", "use", str(repo), "--isolated", "--agent", dev, "--json"))
    assert holon("run", "--agent", dev, "--model", model, "hi").returncode == 0
    assert status(dev)["worktree_session"] == iso["worktree_session"]
    other = tmp_path / "other"
    other.mkdir()
    args = ("run", "--agent", dev, "--workspace-root", str(other), "--model", model, "hi")
    assert holon(*args).returncode == 0
    assert status(dev)["workspace"]["execution_root"] == str(other.resolve())
    assert status(dev)["worktree_session"] is None


def test_a_new_agent_is_bound_to_the_current_directory(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = script(tmp_path, [{"text": "ok"}])
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    assert (
        holon("run", "--agent", "fresh", "--create-agent", "--model", model, "hi").returncode == 0
    )
    ws = status("fresh")["workspace"]
    assert ws["workspace_anchor"] == str(repo) and ws["cwd"] == str(repo / "src")
    kept = data(holon("run", "--keep-agent", "--json", "--model", model, "hi"))
    ws = status(kept["agent_id"])["workspace"]
    assert ws["workspace_anchor"] == str(repo) and ws["execution_root"] == str(repo)


def test_a_bad_workspace_root_leaves_no_temporary_agent(tmp_path: Path, holon_home: Path) -> None:
    model = script(tmp_path, [{"text": "ok"}])
    res = holon("run", "--workspace-root", str(tmp_path / "nope"), "--model", model, "hi")
    assert res.returncode == 2 and "not a directory" in res.stderr
    agents = holon_home / "agents"
    assert not agents.exists() or not [p for p in agents.iterdir() if p.name.startswith("run-")]


@pytest.mark.script_launch_mode("subprocess")
def test_a_second_process_sees_the_same_binding(
    dev: str, repo: Path, tmp_path: Path, script_runner: Any
) -> None:
    """Bound by one process, a `holon turn` in another runs in the worktree."""
    iso = data(holon("workspace", "use", str(repo), "--isolated", "--agent", dev, "--json"))
    model = script(
        tmp_path,
        [
            {"tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "pwd"}}]},
            {"text": "done"},
        ],
    )
    assert holon("enqueue", "--agent", dev, "where are you").returncode == 0
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    res = script_runner.run(["holon", "turn", "--agent", dev, "--model", model, "--json"], env=env)
    assert res.returncode == 0, res.stderr
    tr = data(holon("transcript", "--agent", dev, "--json"))
    outputs = [e.get("output", "") for e in tr["entries"] if e["kind"] == "tool_result"]
    assert any(iso["worktree_session"]["worktree_path"] in o for o in outputs), outputs


def test_status_flags_an_execution_root_that_is_gone(dev: str, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    holon("workspace", "use", str(gone), "--agent", dev)
    assert "MISSING" not in holon("status", "--agent", dev).stdout
    gone.rmdir()
    res = holon("status", "--agent", dev)
    assert res.returncode == 0 and "MISSING: the execution root is gone" in res.stdout
    assert holon("workspace", "use", "agent_home", "--agent", dev).returncode == 0
    assert "MISSING" not in holon("status", "--agent", dev).stdout
