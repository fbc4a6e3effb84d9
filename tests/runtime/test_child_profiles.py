"""Child profiles from files (issue 37 item 3; rfc-agent-control-plane-model.md
"Agent Profile Model" L184-204: one Agent model, profile-based variation;
requirements.md §7 ``SpawnAgent(initial_message, preset?, ...)``): as Claude
Code's ``.claude/agents/*.md``, a ``<name>.md`` with frontmatter ``model``,
``tools``, ``budgets``, ``workspace_mode`` and the child's instructions as
its body, found in the workspace's ``.agents/profiles/`` or the home's
``profiles/``, named by ``SpawnAgent``'s ``preset``; ``holon agent
profiles`` lists and checks them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.providers.scripted import ScriptedTransport
from holon_cli.runtime.agents import profiles as pf
from holon_cli.runtime.agents.lifecycle import open_agent, set_model_override
from holon_cli.runtime.children import handle
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn
from holon_cli.runtime.workspace.plane import use_workspace
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import home_root
from holon_cli.tools.catalog import default_catalog

KNOWN = {s.name for s in default_catalog().specs}


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    real = ScriptedTransport.complete

    def complete(self: ScriptedTransport, request: Any) -> Any:
        seen.append(request)
        return real(self, request)

    monkeypatch.setattr(ScriptedTransport, "complete", complete)
    return seen


def write_profile(folder: Path, name: str, front: dict[str, Any] | str | None, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"{name}.md"
    if front is None:
        p.write_text(body)
    else:
        head = front if isinstance(front, str) else yaml.safe_dump(front, sort_keys=False)
        p.write_text(f"---\n{head}---\n{body}")
    return p


def home_profiles() -> Path:
    return home_root() / "profiles"


def family(tmp_path: Path, args: dict[str, Any], child_steps: list[Any], name: str = "f") -> str:
    p = tmp_path / f"{name}.yaml"
    data = {
        "agents": {"child-*": {"steps": child_steps}},
        "steps": [
            {"tool_calls": [{"name": "SpawnAgent", "id": "sp", "arguments": args}]},
            "Delegated.",
        ],
    }
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    open_agent(None)
    set_model_override("main", f"scripted:{p}")
    return f"scripted:{p}"


def turn(agent: str | None = None) -> Any:
    return run_turn(agent, catalog=default_catalog())


def spawn_out(parent: AgentStore) -> dict[str, Any]:
    e = [r for r in parent.ledger("transcript").records() if r.get("tool_name") == "SpawnAgent"][-1]
    return dict(json.loads(e["output"]), ok=e["ok"])


def the_child(parent: AgentStore) -> AgentStore:
    (h,) = handle.list_tasks(parent)
    return open_agent(h["child_agent_id"])


# ------------------------------------------------------------------ parsing


def test_a_claude_code_style_file_parses(tmp_path: Path) -> None:
    p = write_profile(
        tmp_path,
        "reviewer",
        "name: reviewer\ndescription: Reviews diffs\ntools: ExecCommand, MemorySearch\n"
        "model: inherit\n",
        "You review code.\n",
    )
    prof = pf.parse(p, "home", known_tools=KNOWN)
    assert prof.name == "reviewer" and prof.description == "Reviews diffs"
    assert prof.tools == ("ExecCommand", "MemorySearch") and prof.model is None
    assert prof.instructions == "You review code."
    # no frontmatter: the whole file is the body
    bare = pf.parse(write_profile(tmp_path, "bare", None, "Just do it."), "home")
    assert bare.instructions == "Just do it." and bare.tools is None


@pytest.mark.parametrize(
    ("front", "key", "says"),
    [
        ({"colour": "red"}, "colour", "unknown key"),
        ({"tools": ["ExecCommand", "Frobnicate"]}, "tools", "unknown tool(s) Frobnicate"),
        ({"tools": 3}, "tools", "list of tool names"),
        ({"budgets": {"tokens_per_day": -1}}, "budgets.tokens_per_day", ">= 0"),
        ({"budgets": {"tokens_per_day": 1.5}}, "budgets.tokens_per_day", "whole number"),
        ({"budgets": {"dollars": 3}}, "budgets.dollars", "unknown budget"),
        ({"budgets": [1]}, "budgets", "mapping"),
        ({"model": "nonsense"}, "model", "invalid model ref"),
        ({"model": 7}, "model", "non-empty string"),
        ({"workspace_mode": "sideways"}, "workspace_mode", "one of inherit, worktree"),
        ({"workspace_root": "/tmp"}, "workspace_root", "only for workspace_mode explicit_root"),
        (
            {"workspace_mode": "explicit_root", "workspace_root": "rel"},
            "workspace_root",
            "absolute path",
        ),
        ({"context": "clone"}, "context", "one of fork, fresh"),
        ({"name": "other"}, "name", "file is named prof.md"),
        ({"description": ""}, "description", "non-empty string"),
    ],
)
def test_bad_frontmatter_names_the_file_and_the_key(
    tmp_path: Path, front: dict[str, Any], key: str, says: str
) -> None:
    p = write_profile(tmp_path, "prof", front, "body")
    with pytest.raises(pf.ProfileError) as ei:
        pf.parse(p, "home", known_tools=KNOWN)
    err = ei.value
    assert err.message.startswith(f"{p}: key `{key}`: "), err.message
    assert says in err.message
    assert err.details["path"] == str(p) and err.details["key"] == key
    assert err.exit_code == 2


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("---\ntools: [ExecCommand\n---\nbody", "not valid YAML"),
        ("---\nmodel: x/y\nno end", "never closed"),
        ("---\n- a\n- b\n---\nbody", "mapping of keys"),
    ],
)
def test_a_broken_frontmatter_names_the_file(tmp_path: Path, text: str, says: str) -> None:
    p = tmp_path / "prof.md"
    p.write_text(text)
    with pytest.raises(pf.ProfileError) as ei:
        pf.parse(p, "home")
    assert ei.value.message.startswith(f"{p}: ") and says in ei.value.message


def test_bad_files_and_names(tmp_path: Path) -> None:
    (tmp_path / "Bad Name.md").write_text("x")
    with pytest.raises(pf.ProfileError, match="file name"):
        pf.parse(tmp_path / "Bad Name.md", "home")
    (tmp_path / "private_child.md").write_text("x")
    with pytest.raises(pf.ProfileError, match="built-in preset"):
        pf.parse(tmp_path / "private_child.md", "home")
    (tmp_path / "latin.md").write_bytes(b"caf\xe9")
    with pytest.raises(pf.ProfileError, match="not UTF-8"):
        pf.parse(tmp_path / "latin.md", "home")
    (tmp_path / "huge.md").write_text("x" * (pf.MAX_BYTES + 1))
    with pytest.raises(pf.ProfileError, match="at most"):
        pf.parse(tmp_path / "huge.md", "home")


def test_the_workspace_wins_over_the_home(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    write_profile(home_profiles(), "helper", {"description": "home one"}, "h")
    write_profile(proj / ".agents" / "profiles", "helper", {"description": "project one"}, "p")
    assert pf.find("helper", proj).description == "project one"
    assert pf.find("helper", None).description == "home one"
    rows = pf.list_profiles(proj)
    assert [(r["source"], r["shadowed_by"] is not None) for r in rows] == [
        ("workspace", False),
        ("home", True),
    ]
    with pytest.raises(Exception, match="no profile 'nope'"):
        pf.find("nope", proj)


# ------------------------------------------------------------ spawning


def test_spawn_by_profile_applies_model_tools_budgets_and_instructions(
    tmp_path: Path, requests: list[Any]
) -> None:
    child_script = tmp_path / "child.yaml"
    child_script.write_text(
        yaml.safe_dump(
            {
                "steps": [
                    {"tool_calls": [{"name": "ApplyPatch", "arguments": {"patch": "x"}}]},
                    "reviewed",
                ]
            }
        )
    )
    write_profile(
        home_profiles(),
        "reviewer",
        {
            "description": "Reviews",
            "model": f"scripted:{child_script}",
            "tools": ["ExecCommand", "TaskStatus"],
            "budgets": {"tokens_per_day": 100000},
            "context": "fresh",
        },
        "You only review; never edit files.",
    )
    family(tmp_path, {"initial_message": "Review the diff.", "preset": "reviewer"}, ["unused"])
    admit("get it reviewed")
    turn()
    parent = open_agent("main")
    out = spawn_out(parent)
    assert out["ok"] and out["profile"] == "reviewer" and out["context"] == "fresh"
    child = the_child(parent)
    rec = child.read_record()
    ident, state = rec["identity"], rec["state"]
    assert ident["profile_preset"] == "private_child" and ident["kind"] == "child"
    assert ident["profile"]["name"] == "reviewer"
    assert ident["profile"]["tools"] == ["ExecCommand", "TaskStatus"]
    assert state["model_override"] == f"scripted:{child_script}"
    agents_md = (child.layout.home / "AGENTS.md").read_text()
    assert "# Profile reviewer" in agents_md and "You only review; never edit files." in agents_md

    turn(child.agent_id)
    req = next(r for r in requests if r.agent_id == child.agent_id)
    assert sorted(t.name for t in req.tools) == ["ExecCommand", "TaskStatus"]
    assert any("You only review" in b for b in req.frame.system_blocks)
    # a tool outside the profile is refused, never run
    tool = next(
        e for e in child.ledger("transcript").records() if e.get("tool_name") == "ApplyPatch"
    )
    assert tool["ok"] is False and "not one of the tools of profile 'reviewer'" in tool["output"]
    # the budget applies to the child
    from holon_cli.runtime.budgets.spend import status

    assert status(child, {})["tokens_per_day"]["limit"] == 100000


def test_a_profile_budget_only_tightens_and_stops_the_child(tmp_path: Path) -> None:
    from holon_cli.runtime.budgets.check import check
    from holon_cli.runtime.budgets.spend import tightened

    assert tightened({"tokens_per_day": 10}, {"tokens_per_day": 50}) == {"tokens_per_day": 10}
    assert tightened({}, {"turns_per_hour": 0}) == {"turns_per_hour": 0}
    p = write_profile(home_profiles(), "frozen", {"budgets": {"turns_per_hour": 0}}, "x")
    family(tmp_path, {"initial_message": "go", "preset": "frozen"}, ["never sent"])
    admit("go")
    turn()
    child = the_child(open_agent("main"))
    hit = check(child, {}, turn_id=None, work_item_id=None)
    assert hit is not None and hit["budget"] == "turns_per_hour" and hit["profile"] == str(p)
    res = turn(child.agent_id)
    assert res.status == "completed"
    brief = child.ledger("briefs").last()
    assert brief and f"budgets.turns_per_hour in its profile {p}" in brief["text"]


def test_the_profile_workspace_mode_and_the_spawns_own_win(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    write_profile(
        proj / ".agents" / "profiles",
        "subdir",
        {"workspace_mode": "explicit_root", "workspace_root": "sub"},
        "x",
    )
    parent = open_agent(None)
    use_workspace(parent, path=str(proj), source="cli")
    family(tmp_path, {"initial_message": "go", "preset": "subdir"}, ["ok"])
    admit("go")
    turn()
    out = spawn_out(parent)
    assert out["ok"] and out["workspace_root"] == str((proj / "sub").resolve())
    # the spawn's own workspace_mode wins
    family(
        tmp_path,
        {"initial_message": "go", "preset": "subdir", "workspace_mode": "inherit"},
        ["ok"],
        name="g",
    )
    admit("again")
    turn()
    out = spawn_out(parent)
    assert out["ok"] and out["child_supervision"]["workspace_mode"] == "inherit"
    assert "workspace_root" not in out


def test_a_profile_cost_budget_needs_a_price(tmp_path: Path) -> None:
    p = write_profile(
        home_profiles(),
        "pricey",
        {"model": "openai/gpt-4.1", "budgets": {"cost_usd_per_day": 1.5}},
        "x",
    )
    family(tmp_path, {"initial_message": "go", "preset": "pricey"}, ["x"])
    admit("go")
    turn()
    parent = open_agent("main")
    out = spawn_out(parent)
    assert out["ok"] is False and "prices.openai/gpt-4.1 is missing" in out["message"]
    assert str(p) in out["message"] and handle.list_tasks(parent) == []
    home_root().joinpath("config.yaml").write_text(
        yaml.safe_dump({"prices": {"openai/gpt-4.1": {"input": 2, "output": 8}}})
    )
    family(tmp_path, {"initial_message": "go", "preset": "pricey"}, ["x"], name="g")
    admit("again")
    turn()
    assert spawn_out(parent)["ok"] is True


@pytest.mark.parametrize("case", ["unknown", "broken"])
def test_an_unknown_or_broken_profile_is_a_tool_error(tmp_path: Path, case: str) -> None:
    if case == "broken":
        write_profile(home_profiles(), "shaky", {"tools": ["Nope"]}, "x")
    family(
        tmp_path,
        {"initial_message": "go", "preset": "nope" if case == "unknown" else "shaky"},
        ["x"],
    )
    admit("go")
    turn()
    parent = open_agent("main")
    out = spawn_out(parent)
    assert out["ok"] is False and out["kind"] == "invalid_arguments" and out["field"] == "preset"
    if case == "unknown":
        assert "no profile 'nope'" in out["message"] and "holon agent profiles" in out["hint"]
    else:
        assert "key `tools`" in out["message"] and "shaky.md" in out["message"]
    assert handle.list_tasks(parent) == []


# ---------------------------------------------------------------- CLI


def test_agent_profiles_lists_and_checks(script_runner: Any, tmp_path: Path) -> None:
    r = script_runner.run(["holon", "agent", "profiles"])
    assert r.returncode == 0 and "no profiles" in r.stderr
    write_profile(
        home_profiles(), "reviewer", {"description": "Reviews", "tools": "ExecCommand"}, "b"
    )
    r = script_runner.run(["holon", "agent", "profiles", "--json"])
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)["data"]
    (row,) = data["profiles"]
    assert row["name"] == "reviewer" and row["valid"] and row["tools"] == ["ExecCommand"]
    assert row["source"] == "home" and row["model"] == "inherit"
    r = script_runner.run(["holon", "agent", "profiles"])
    assert r.returncode == 0 and "reviewer" in r.stdout and "Reviews" in r.stdout
    bad = write_profile(home_profiles(), "broken", {"budgets": {"tokens_per_day": "lots"}}, "b")
    r = script_runner.run(["holon", "agent", "profiles"])
    assert r.returncode == 1
    assert f"{bad}: key `budgets.tokens_per_day`" in r.stdout and "cannot be used" in r.stderr
    r = script_runner.run(["holon", "agent", "profiles", "--json"])
    assert r.returncode == 1
    env = json.loads(r.stdout)
    assert env["ok"] is False and env["error"]["kind"] == "invalid_profile"
    assert [p["valid"] for p in env["data"]["profiles"]] == [False, True]
    r = script_runner.run(["holon", "agent", "profiles", "--agent", "ghost"])
    assert r.returncode == 3
