"""CLI and HTTP errors speak their own words (issue 36 §6): the command
line its flags and commands, the HTTP surface its body fields and routes,
a model's tool call its tool and argument names. A runtime step more than
one surface calls says each in a ``Said`` (``holon_cli.errors``).

- A scan of every error raised outside ``tools/`` (the default words are the
  command line's): no model tool name, no tool-argument name (``max_chars``,
  ``work_item_id``, ...) as something to pass, no ``mode "direct"`` unless
  the module is reached by a model's tool only, or is the HTTP surface
  (whose body fields share some names).
- The known cases end to end: each surface gets its own words.
"""

from __future__ import annotations

import ast
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from holon_cli.errors import Said, UsageError

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "holon_cli"

# reached by a model's tool only: the model's words are the right ones there
TOOL_ONLY = {
    "holon_cli/runtime/waiting/intents.py",  # RecordExternalWait, CancelExternalWait
    "holon_cli/runtime/children/worktree.py",  # SpawnAgent's workspace_mode
}
HTTP_SURFACE = "holon_cli/serve/http/"  # body fields are the HTTP surface's own words


def _tool_vocabulary() -> tuple[set[str], set[str]]:
    tools = json.loads((PACKAGE / "tools" / "manifest.json").read_text())["tools"]
    names = {t["name"] for t in tools}
    args: set[str] = set()

    def walk(schema: dict[str, Any]) -> None:
        for key, sub in (schema.get("properties") or {}).items():
            args.add(key)
            if isinstance(sub, dict):
                walk(sub)
                if isinstance(sub.get("items"), dict):
                    walk(sub["items"])

    for t in tools:
        walk(t["input_schema"])
    # one-word arguments (path, mode, query, limit) are the CLI's words too
    return names, {a for a in args if "_" in a}


def _default_words(node: ast.Call) -> str:
    """The string literals of a raise site's message and hint as the command
    line reads them (a ``Said(...)``'s first argument, a template's text)."""
    cands = list(node.args) + [k.value for k in node.keywords if k.arg in ("hint", "message")]
    out: list[str] = []
    for c in cands:
        if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "Said":
            c = c.args[0]
        elif isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "fmt":
            c = c.args[0]
        out += [
            n.value for n in ast.walk(c) if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ]
    return " ".join(out)


def model_words_in_errors(package: Path = PACKAGE) -> list[str]:
    names, args = _tool_vocabulary()
    tool = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b")
    arg = re.compile(r"(?:`|\bpass )(" + "|".join(sorted(args)) + r")\b")
    mode = re.compile(r'\bmode "?(?:direct|isolated)\b')
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        if rel.startswith(("holon_cli/tools/", HTTP_SURFACE)) or rel in TOOL_ONLY:
            continue
        src = path.read_text()
        for node in ast.walk(ast.parse(src)):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if not (
                name.endswith("Error")
                or name in ("_bad", "_invalid")
                or any(k.arg == "hint" for k in node.keywords)
            ):
                continue
            text = _default_words(node)
            hits = set(tool.findall(text)) | set(arg.findall(text)) | set(mode.findall(text))
            if hits:
                found.append(f"{rel}:{node.lineno}: {sorted(hits)}")
    return found


def test_no_error_gives_the_command_line_the_models_words() -> None:
    assert model_words_in_errors() == [], (
        "an error outside tools/ names a model tool or tool argument in its default "
        "(command line) words: pass a Said(cli, http=..., tool=...) instead"
    )


def test_the_scan_would_catch_one(tmp_path: Path) -> None:
    """The scan reads what it should: a planted raise is found (in a copy of
    the package's layout, never in the package itself)."""
    planted = tmp_path / "holon_cli" / "runtime" / "planted.py"
    planted.parent.mkdir(parents=True)
    planted.write_text(
        "from holon_cli.errors import UsageError\n\n\ndef f() -> None:\n"
        '    raise UsageError("bad", hint="pass max_chars from 1 to 9, or use MemorySearch")\n'
    )
    (hit,) = model_words_in_errors(tmp_path / "holon_cli")
    assert "holon_cli/runtime/planted.py:5" in hit and "max_chars" in hit and "MemorySearch" in hit


def test_said_gives_each_surface_its_words() -> None:
    err = UsageError(
        Said("--max-chars is 0", tool="`max_chars` is 0"),
        hint=Said("pass --max-chars", http="send max_chars", tool="pass max_chars"),
    )
    assert (err.message, err.hint) == ("--max-chars is 0", "pass --max-chars")
    assert err.said_on("cli") == ("--max-chars is 0", "pass --max-chars")
    assert err.said_on("http") == ("--max-chars is 0", "send max_chars")
    assert err.said_on("tool") == ("`max_chars` is 0", "pass max_chars")
    err.message += "; nothing was run"  # a caller adding context: said everywhere
    assert err.said_on("tool")[0] == "--max-chars is 0; nothing was run"
    plain = UsageError("x", hint="y")
    assert plain.said_on("http") == ("x", "y") and UsageError("x").said_on("tool") == ("x", None)


# ---------------------------------------------------------------- end to end


@pytest.fixture
def cli(script_runner: Any) -> Any:
    def run(*args: str) -> Any:
        return script_runner.run(["holon", *args], stdin=io.StringIO(""))

    return run


def test_memory_get_speaks_the_command_lines_words(cli: Any) -> None:
    res = cli("memory", "get", "mem_x", "--max-chars", "0")
    assert res.returncode == 2
    assert "--max-chars must be between 1 and 50000" in res.stderr
    assert "max_chars" not in res.stderr.replace("--max-chars", "")
    res = cli("memory", "get", "mem_nothing_here")
    assert res.returncode == 3
    assert "holon memory search" in res.stderr and "MemorySearch" not in res.stderr


def test_memory_get_tool_speaks_the_models_words(tmp_path: Path) -> None:
    from holon_cli.providers.base import ToolCall
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.tools.base import ToolContext, execute
    from holon_cli.tools.catalog import registry

    store = open_agent(None)
    ctx = ToolContext(
        store=store,
        agent_id=store.agent_id,
        execution_root=tmp_path,
        cwd=tmp_path,
        workspace_anchor=tmp_path,
        turn_id="turn_test",
    )
    for args, says, never in (
        ({"source_ref": "mem_x", "max_chars": 0}, "`max_chars` must be between 1", "--max-chars"),
        ({"source_ref": "mem_nothing"}, "as MemorySearch returned it", "holon memory"),
    ):
        res = execute(
            registry()["MemoryGet"], ctx, ToolCall(id="c1", name="MemoryGet", arguments=args)
        )
        assert not res.ok and says in res.content and never not in res.content, res.content


def test_workspace_refusals_per_surface(cli: Any, tmp_path: Path) -> None:
    res = cli("workspace", "use", "agent_home", "--isolated")
    assert res.returncode == 2 and "without --isolated" in res.stderr
    assert 'mode "direct"' not in res.stderr and "UseWorkspace" not in res.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    res = cli("workspace", "use", str(plain), "--isolated")
    assert res.returncode == 2 and "without --isolated" in res.stderr
    assert 'mode "direct"' not in res.stderr

    from http_app import make_client

    c = make_client()
    r = c.post(
        "/control/agents/main/workspace", json={"workspace_id": "agent_home", "mode": "isolated"}
    )
    assert r.status_code == 400 and r.json()["error"]["hint"].startswith('send "mode": "direct"')
    r = c.post("/control/agents/main/workspace", json={"path": str(plain), "mode": "isolated"})
    assert r.status_code == 400 and '"mode": "direct"' in r.json()["error"]["hint"]
    r = c.post("/control/agents/main/workspace", json={"workspace_id": "ws_0123456789abcdef"})
    err = r.json()["error"]
    assert r.status_code == 404 and '{"path": "/abs/dir"}' in err["hint"]
    assert "UseWorkspace" not in err["hint"] and "holon workspace" not in err["hint"]


@pytest.mark.parametrize(
    ("route", "body", "headers"),
    [
        ("/webhooks/gh/main", b'{"broken": ', {"Content-Type": "application/json"}),
        ("/agents/main/enqueue", b'{"text": "\\ud800", "origin": "webhook:gh"}', {}),
        ("/agents/main/enqueue", b'{"text": " ", "origin": "webhook:gh"}', {}),
    ],
)
def test_http_answers_name_no_command_line_flag(
    route: str, body: bytes, headers: dict[str, str]
) -> None:
    from http_app import make_client

    from holon_cli.runtime.agents.lifecycle import open_agent

    open_agent("main")
    r = make_client().post(
        route, content=body, headers={"Content-Type": "application/json", **headers}
    )
    assert 400 <= r.status_code < 500, r.text
    err = r.json()["error"]
    said = f"{err['message']} {err.get('hint') or ''}"
    assert not re.search(r"(?<![\w-])--[a-z]", said), said
    assert "stdin" not in said
