"""UseWorkspace and DetachWorkspace as the model calls them: results, error
envelopes naming the field, the ``workspace_changed`` effect, and a turn
whose later calls run in the workspace an earlier call switched to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from gitrepos import isolate_git, make_repo, needs_git

from holon_cli.providers.base import ToolCall
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools import base, catalog
from holon_cli.tools.catalog import default_catalog

pytestmark = needs_git


@pytest.fixture(autouse=True)
def _git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "shop", {"README.md": "shop\n", "src/app.py": "x = 1\n"})


@pytest.fixture
def store() -> AgentStore:
    return open_agent()


def run(
    store: AgentStore, name: str, args: dict[str, Any], cwd: Path | None = None
) -> tuple[dict[str, Any], base.ToolResult]:
    root = cwd or store.layout.home
    ctx = base.ToolContext(
        store=store,
        agent_id=store.agent_id,
        execution_root=root,
        cwd=root,
        workspace_anchor=root,
        turn_id="turn_test",
    )
    res = base.execute(catalog.registry()[name], ctx, ToolCall("call_1", name, args))
    return json.loads(res.content), res


def test_the_tools_are_in_the_catalog() -> None:
    names = [s.name for s in default_catalog().specs]
    assert "UseWorkspace" in names and "DetachWorkspace" in names
    schema = next(s for s in default_catalog().specs if s.name == "UseWorkspace").input_schema
    assert schema["properties"]["mode"]["enum"] == ["direct", "isolated"]


def test_use_workspace_returns_the_contract_fields_and_the_effect(
    store: AgentStore, repo: Path
) -> None:
    out, res = run(store, "UseWorkspace", {"path": "shop/src"}, cwd=repo.parent)
    assert res.ok and res.effects.workspace_changed is True
    for key in (
        "workspace_id",
        "workspace_anchor",
        "execution_root",
        "execution_root_id",
        "cwd",
        "projection_kind",
        "worktree_session",
    ):
        assert key in out, key
    assert out["execution_root"] == str(repo) and out["cwd"] == str(repo / "src")


@pytest.mark.parametrize(
    ("args", "kind", "field"),
    [
        ({}, "invalid_arguments", "path"),
        ({"path": "shop", "workspace_id": "agent_home"}, "invalid_arguments", "path"),
        ({"path": "nope"}, "invalid_arguments", "path"),
        ({"path": "shop/README.md"}, "invalid_arguments", "path"),
        ({"path": "shop", "mode": "sandbox"}, "invalid_arguments", "mode"),
        ({"workspace_id": "ws_123456789abc"}, "not_found", "workspace_id"),
        ({"path": "/"}, "forbidden_workspace", "path"),  # it contains the home
    ],
)
def test_use_workspace_errors_are_envelopes_and_change_nothing(
    store: AgentStore, repo: Path, args: dict[str, Any], kind: str, field: str
) -> None:
    before = store.read_record()["state"]
    out, res = run(store, "UseWorkspace", args, cwd=repo.parent)
    assert out["ok"] is False and out["kind"] == kind, out
    assert out.get("field") == field, out
    assert res.effects.workspace_changed is False
    assert store.read_record()["state"] == before


def test_detach_workspace_refuses_the_active_one_then_detaches(
    store: AgentStore, repo: Path
) -> None:
    wid = run(store, "UseWorkspace", {"path": str(repo)})[0]["workspace_id"]
    out, _ = run(store, "DetachWorkspace", {"workspace_id": wid})
    assert out["ok"] is False and out["kind"] == "rejected" and "agent_home" in out["hint"]
    run(store, "UseWorkspace", {"workspace_id": "agent_home"})
    out, res = run(store, "DetachWorkspace", {"workspace_id": wid})
    assert res.ok and out["detached"] is True and out["attached_workspaces"] == []
    assert repo.is_dir()


def script(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def test_a_turn_runs_later_calls_in_the_workspace_it_switched_to(
    tmp_path: Path, repo: Path
) -> None:
    model = script(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"name": "UseWorkspace", "arguments": {"path": str(repo), "mode": "isolated"}},
                    {"name": "ExecCommand", "arguments": {"cmd": "pwd; git branch --show-current"}},
                ]
            },
            {"text": "done"},
        ],
    )
    admit("work on the shop in isolation")
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.ran and res.final_text == "done"
    store = open_agent()
    wt = store.read_record()["state"]["worktree_session"]
    assert wt is not None
    results = [t for t in store.ledger("transcript").records() if t["kind"] == "tool_result"]
    assert results[0]["ok"] and results[1]["ok"], results
    assert wt["worktree_path"] in results[1]["output"]
    assert wt["worktree_branch"] in results[1]["output"]
    # the next turn's prompt carries the new binding
    from holon_cli.runtime.debug import debug_prompt

    d = debug_prompt(store, catalog=default_catalog())
    assert d["execution_root"] == wt["worktree_path"] and d["workspace_anchor"] == str(repo)
    binding = next(s for s in d["sections"] if "worktree:" in s["text"])
    assert wt["worktree_branch"] in binding["text"]
