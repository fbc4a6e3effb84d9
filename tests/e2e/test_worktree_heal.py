"""Issue 36 item 3: worktrees left by a killed command heal (real git, real
SIGKILLs, bounded). ``workspace use --isolated`` killed after its worktree
exists (git's own lock still on it, as when git itself is killed mid-add)
and before the binding is written; a worktree child whose handle ended but
whose cleanup never ran. ``home audit`` reports each until the next ``tick``
(or ``home check --repair``) finishes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepos import git, isolate_git, make_repo, needs_git, worktree_list

pytestmark = [needs_git, pytest.mark.slow]


def holon(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, "-m", "holon_cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


def audit() -> list[dict[str, Any]]:
    res = holon("home", "audit", "--json")
    doc = json.loads(res.stdout)
    assert res.returncode in (0, 1), res.stdout + res.stderr
    return list(doc["data"]["findings"])


def slow_git(tmp_path: Path) -> Path:
    """A ``git`` that, after a real ``worktree add``, locks the new worktree
    (git's ``initializing`` lock, as a git killed mid-add leaves it) and then
    hangs, after touching ``slowbin/locked``: the command above it is killed
    there (not while git's own ``worktree add`` still runs: it locks the
    worktree too while it checks out, and a kill then leaves a half-made
    checkout, which the heal rightly keeps)."""
    real = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    bindir = tmp_path / "slowbin"
    bindir.mkdir()
    shim = bindir / "git"
    shim.write_text(
        "#!/bin/sh\n"
        f'"{real}" "$@" || exit $?\n'
        'if [ "$1" = worktree ] && [ "$2" = add ]; then\n'
        "  for last; do :; done\n"  # the path is the argument before HEAD
        f'  "{real}" worktree lock --reason initializing "$(echo "$@" | '
        "awk '{print $(NF-1)}')\" 2>/dev/null\n"
        f'  touch "{bindir / "locked"}"\n'
        "  sleep 60\n"
        "fi\n"
    )
    shim.chmod(0o755)
    return bindir


def test_a_killed_isolated_use_is_finished_by_the_next_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holon_home: Path
) -> None:
    isolate_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    holon("agent", "create", "dev", check=True)
    env = dict(os.environ)
    bindir = slow_git(tmp_path)
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "holon_cli",
            "workspace",
            "use",
            str(repo),
            "--isolated",
            "--agent",
            "dev",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    folder = holon_home / "worktrees" / "dev"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the worktree is made and locked; the bind waits
        if (bindir / "locked").exists():
            made = [p for p in folder.glob("repo-*") if p.is_dir()]
            assert any(r.get("locked") is not None for r in worktree_list(repo))
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the isolated worktree was never made")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    (wt,) = made
    assert len(worktree_list(repo)) == 2
    state = json.loads(holon("agent", "status", "dev", "--json").stdout)["data"]
    assert state.get("execution_root") != str(wt)  # never bound
    (finding,) = audit()
    assert finding["kind"] == "cleanup_pending" and str(wt) in finding["detail"]
    assert "holon tick --agent dev" in finding["detail"]
    holon("tick", "--agent", "dev", check=True)
    assert not wt.exists()
    assert len(worktree_list(repo)) == 1
    assert not [b for b in git("branch", cwd=repo).split() if b.startswith("holon/")]
    assert audit() == []
    # and the next use makes a fresh one that binds
    holon("workspace", "use", str(repo), "--isolated", "--agent", "dev", check=True)
    assert audit() == []


def test_a_kept_change_is_not_removed_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holon_home: Path
) -> None:
    """A leftover someone already worked in is kept (and unlocked), never removed."""
    from holon_cli.runtime.workspace.heal import heal, intent_path
    from holon_cli.store.layout import HomeLayout

    isolate_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    wt = holon_home / "worktrees" / "dev" / "repo-x1"
    wt.parent.mkdir(parents=True)
    git("worktree", "add", "-q", "-b", "holon/dev/x1", str(wt), "HEAD", cwd=repo)
    git("worktree", "lock", str(wt), cwd=repo)
    (wt / "work.txt").write_text("kept\n")
    intent_path(wt).write_text(
        json.dumps(
            {"v": 1, "pid": 2**22 + 7, "path": str(wt), "branch": "holon/dev/x1", "repo": str(repo)}
        )
    )
    (done,) = heal(HomeLayout.current(), "dev")
    assert done["action"] == "worktree_kept" and "uncommitted" in done["reason"]
    assert (wt / "work.txt").read_text() == "kept\n"
    assert not intent_path(wt).exists()
    assert all(r.get("locked") is None for r in worktree_list(repo))


def test_an_ended_childs_pending_cleanup_is_finished_by_the_parents_next_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holon_home: Path
) -> None:
    """The state a serve killed between a child's result and its cleanup
    leaves: the handle final with its result, the worktree pending, the
    child not archived."""
    import yaml

    from holon_cli.runtime.agents.lifecycle import open_agent, set_model_override
    from holon_cli.runtime.children import supervision as sv
    from holon_cli.runtime.tasks.records import read_record_file
    from holon_cli.runtime.turn import run_turn
    from holon_cli.runtime.workspace.plane import use_workspace
    from holon_cli.tools.catalog import default_catalog
    from tests.runtime.test_children import tool_call

    isolate_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    script = tmp_path / "s.yaml"
    script.write_text(
        yaml.safe_dump({"agents": {"child-*": ["done"]}, "steps": ["x"], "loop": True})
    )
    parent = open_agent(None)
    set_model_override(parent.agent_id, f"scripted:{script}")
    use_workspace(parent, path=str(repo), mode="direct")
    res = tool_call(parent, "SpawnAgent", initial_message="Try it.", workspace_mode="worktree")
    assert res.ok, res.content
    tid, cid = res.data["supervision_task_id"], res.data["agent_id"]
    path = Path(res.data["child_supervision"]["worktree"]["path"])
    # the child's last turn ends; the process dies before the cleanup
    with monkeypatch.context() as m:
        m.setattr(sv, "cleanup_for", lambda parent, task_id: None)
        run_turn(cid, catalog=default_catalog())
    rec = read_record_file(sv.handle_dir(parent, tid))
    assert rec["result_message_id"] and rec["child"]["worktree"]["cleanup_status"] == "pending"
    assert path.is_dir()
    kinds = [f["kind"] for f in audit()]
    assert "cleanup_pending" in kinds
    holon("tick", "--agent", "main", check=True)
    rec = read_record_file(sv.handle_dir(parent, tid))
    assert rec["child"]["worktree"]["cleanup_status"] == "removed" and not path.exists()
    assert open_agent(cid).read_record()["state"].get("archived_at")
    assert "cleanup_pending" not in [f["kind"] for f in audit()]


def test_home_check_repair_finishes_a_pending_cleanup_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holon_home: Path
) -> None:
    from holon_cli.runtime.workspace.heal import intent_path

    isolate_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    holon("agent", "create", "dev", check=True)
    holon("agent", "stop", "dev", check=True)  # no tick runs for it: the repair must
    wt = holon_home / "worktrees" / "dev" / "repo-x2"
    git("worktree", "add", "-q", "-b", "holon/dev/x2", str(wt), "HEAD", cwd=repo)
    intent_path(wt).write_text(
        json.dumps(
            {"v": 1, "pid": 2**22 + 9, "path": str(wt), "branch": "holon/dev/x2", "repo": str(repo)}
        )
    )
    assert [f["kind"] for f in audit()] == ["cleanup_pending"]
    res = holon("home", "check", "--repair")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"repaired {wt}: finished: worktree removed" in res.stderr
    assert not wt.exists() and audit() == []
