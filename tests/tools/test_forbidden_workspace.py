"""Issue 35 item 4: the holon home, a folder containing it, or one inside it
(but the agent's own home and the worktrees holon manages) never becomes a
workspace or an execution root, by any path, symlinks resolved: exit 4 /
``forbidden_workspace``, and nothing changes.

Before the fix ``holon workspace use "$HOLON_HOME"`` exited 0 (and the
control route answered 200); only the model's ``UseWorkspace`` refused. The
paths tried: the CLI, ``UseWorkspace``, ``holon run``'s directory, a
template (the CLI's ``--template`` and ``SpawnAgent``'s), a template's skill
folder, a child inheriting or worktree-ing a parent's binding, and a
command launched from a binding recorded before the check existed. The HTTP
route is in tests/serve/test_http_workspace.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from holon_cli.providers.base import ToolCall
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
from holon_cli.runtime.workspace import guard
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.base import ToolContext, execute
from holon_cli.tools.catalog import registry
from tests.inprocess_cli import bind_runner, run

__all__ = ["bind_runner"]


def _targets(home: Path, tmp_path: Path) -> dict[str, Path]:
    """Every way to name the home or part of it (symlinks included)."""
    other = create_agent("ops").layout.home
    links = tmp_path / "links"
    links.mkdir()
    (links / "to-home").symlink_to(home)
    (links / "to-agents").symlink_to(home / "agents")
    (links / "to-parent").symlink_to(home.parent)
    return {
        "the home": home,
        "its parent": home.parent,
        "the filesystem root": Path("/"),
        "its run folder": home / "run",
        "another agent's home": other,
        "another agent's runtime": other / ".holon",
        "a symlink to the home": links / "to-home",
        "a symlink into it": links / "to-agents",
        "a symlink to its parent": links / "to-parent",
        "a dotted path into it": home / "agents" / ".." / "run",
    }


def _record(store: AgentStore) -> dict[str, Any]:
    return dict(store.read_record()["state"])


def test_the_rule(holon_home: Path, tmp_path: Path) -> None:
    store = open_agent(None)
    for what, p in _targets(holon_home, tmp_path).items():
        assert guard.forbidden_reason(p, agent_home=store.layout.home) is not None, what
    own = store.layout.home
    assert guard.forbidden_reason(own, agent_home=own) is None
    assert guard.forbidden_reason(own / "notes", agent_home=own) is None
    wt = holon_home / "worktrees" / "main" / "shop-1a2b"
    wt.mkdir(parents=True)
    assert guard.forbidden_reason(wt, agent_home=own) is None  # a managed worktree
    assert guard.forbidden_reason(holon_home / "worktrees", agent_home=own) is not None
    assert guard.forbidden_reason(holon_home / "worktrees" / "main", agent_home=own) is not None
    assert guard.forbidden_reason(tmp_path / "links", agent_home=own) is None


def test_cli_workspace_use_refuses_every_form(holon_home: Path, tmp_path: Path) -> None:
    store = open_agent(None)
    before = _record(store)
    for what, p in _targets(holon_home, tmp_path).items():
        res = run("workspace", "use", str(p), "--json")
        assert res.returncode == 4, (what, res.stdout)
        err = json.loads(res.stdout)["error"]
        assert err["kind"] == "forbidden_workspace", (what, err)
        assert "holon home" in err["message"] and err["hint"]
    after = _record(store)
    assert {k: after.get(k) for k in before} == before
    reg = holon_home / "workspaces.json"
    assert not reg.exists() or str(holon_home) not in reg.read_text()
    # the agent's own home by path is AgentHome (allowed)
    res = run("workspace", "use", str(store.layout.home / "notes"), "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["data"]["workspace_id"] == "agent_home"


def _tool(ctx: ToolContext, name: str, **args: Any) -> Any:
    return execute(registry()[name], ctx, ToolCall(id="c", name=name, arguments=args))


def test_use_workspace_refuses_it_as_a_tool_error(
    ctx: ToolContext, holon_home: Path, tmp_path: Path
) -> None:
    for what, p in _targets(holon_home, tmp_path).items():
        r = _tool(ctx, "UseWorkspace", path=str(p))
        assert not r.ok and r.error is not None, what
        assert r.error["kind"] == "forbidden_workspace", (what, r.error)


def test_holon_run_refuses_a_folder_holding_the_home(
    holon_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.yaml"
    model.write_text('steps:\n  - text: "never"\n')
    for cwd in (holon_home.parent, Path("/")):
        monkeypatch.chdir(cwd)
        res = run("run", "--model", f"scripted:{model}", "hi", "--json")
        assert res.returncode == 4, res.stdout
        assert json.loads(res.stdout)["error"]["kind"] == "forbidden_workspace"
    res = run("run", "--model", f"scripted:{model}", "--workspace-root", str(holon_home), "hi")
    assert res.returncode == 4


def test_a_template_cannot_be_the_home(holon_home: Path, tmp_path: Path) -> None:
    open_agent(None)
    (holon_home / "AGENTS.md").write_text("# a planted template\n")
    res = run("agent", "create", "copycat", "--template", str(holon_home), "--json")
    assert res.returncode == 4, res.stdout
    assert json.loads(res.stdout)["error"]["kind"] == "forbidden_workspace"
    assert not (holon_home / "agents" / "copycat").exists()
    # nor a skill folder a template names
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "AGENTS.md").write_text("# t\n")
    skill = holon_home / "agents" / "main" / ".holon"
    (skill / "SKILL.md").write_text("---\nname: x\ndescription: y\n---\n")
    (tpl / "skills.json").write_text(json.dumps({"skill_refs": [str(skill)]}))
    res = run("agent", "create", "copycat", "--template", str(tpl), "--json")
    assert res.returncode == 4 and "forbidden_workspace" in res.stdout


def test_spawn_agent_with_the_home_as_template_is_refused(
    ctx: ToolContext, holon_home: Path
) -> None:
    (holon_home / "AGENTS.md").write_text("# a planted template\n")
    r = _tool(ctx, "SpawnAgent", initial_message="copy", template=str(holon_home))
    assert not r.ok and r.error is not None and r.error["kind"] == "forbidden_workspace"


def _plant_binding(store: AgentStore, root: Path) -> None:
    """A binding recorded before the check existed (straight into the record)."""

    def plant(st: Any) -> None:
        st["active_workspace_id"] = "ws_0123456789ab"
        st["attached_workspaces"] = ["ws_0123456789ab"]
        st["workspace_anchor"] = st["execution_root"] = st["cwd"] = str(root)
        st["projection_kind"] = "canonical_root"

    store.update_state(plant)


def test_a_child_never_inherits_a_binding_to_the_home(holon_home: Path) -> None:
    from holon_cli.runtime.children.spawn import spawn_private_child

    parent = open_agent(None)
    _plant_binding(parent, holon_home)
    for mode in ("inherit", "worktree"):
        with pytest.raises(guard.ForbiddenWorkspace):
            spawn_private_child(parent, "work", workspace_mode=mode)


def test_a_command_never_runs_in_a_recorded_binding_to_the_home(
    holon_home: Path, call: Callable[..., Any], ctx: ToolContext
) -> None:
    import dataclasses

    c = dataclasses.replace(ctx, execution_root=holon_home, cwd=holon_home)
    r = execute(
        registry()["ExecCommand"],
        c,
        ToolCall(id="c", name="ExecCommand", arguments={"cmd": "echo x >> config.yaml"}),
    )
    assert not r.ok and r.error is not None and r.error["kind"] == "forbidden_workspace"
    assert (
        not (holon_home / "config.yaml").exists()
        or "x" not in (holon_home / "config.yaml").read_text()
    )
    # and `holon task run --workdir` the home
    res = run("task", "run", "--workdir", str(holon_home), "--json", "--", "true")
    assert res.returncode == 4 and json.loads(res.stdout)["error"]["kind"] == "forbidden_workspace"
    assert os.path.isdir(holon_home)
