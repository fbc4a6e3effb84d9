"""The smaller reference pages: the model's tools (from the tool catalog),
the environment and files (from the contract's lists in ``facts``), and the
``scripted:`` model's format (from ``holon_cli/providers/scripted.py``)."""

from __future__ import annotations

import json

from .facts import ENVIRONMENT, FILES, PRECEDENCE, scripted_format
from .md import cell, code, note, page, prose, table


def render_tools() -> str:
    from holon_cli.tools.catalog import render_manifest

    tools = json.loads(render_manifest())["tools"]
    lines = [
        note("the tool catalog (holon_cli/tools/, holon_cli/tools/manifest.json)"),
        "",
        "# Model tools",
        "",
        "The tools a turn offers the model, with the JSON schema of their arguments as "
        "the model receives it. `holon debug prompt --json` lists what an agent's next "
        "turn offers (`tool_schemas[]`, with each schema's size in tokens), MCP tools "
        "included: those are named `mcp__<server>__<tool>` and carry the server's own "
        "schema (see [MCP](../guides/mcp.md)). A failing call is a tool result the "
        "model reads, never an ended turn (kinds in "
        "[Exit codes and errors](exit-codes.md#every-kind)).",
        "",
    ]
    lines += table(
        ["tool", "what it does"],
        (
            [f"[{code(t['name'])}](#{t['name'].lower()})", cell(t["description"].split(". ")[0])]
            for t in tools
        ),
    )
    for t in tools:
        lines += [f"## {code(t['name'])} {{#{t['name'].lower()}}}", "", prose(t["description"]), ""]
        if t.get("guidance"):
            lines += ["Guidance the prompt gives with it:", "", prose(t["guidance"]), ""]
        props = (t["input_schema"].get("properties") or {}).items()
        required = set(t["input_schema"].get("required") or [])
        rows = [
            [
                code(name),
                cell(_schema_type(spec)),
                "yes" if name in required else "no",
                cell(spec.get("description", "")),
            ]
            for name, spec in props
        ]
        if rows:
            lines += table(["argument", "type", "required", "description"], rows)
        lines += [
            "```json",
            json.dumps(t["input_schema"], indent=2, ensure_ascii=False),
            "```",
            "",
        ]
    return page(lines)


def _schema_type(spec: dict[str, object]) -> str:
    if "enum" in spec:
        return " | ".join(json.dumps(v) for v in spec["enum"])  # type: ignore[union-attr]
    tp = spec.get("type")
    if isinstance(tp, list):
        return " or ".join(str(t) for t in tp)
    if tp == "array" and isinstance(spec.get("items"), dict):
        return f"array of {_schema_type(spec['items'])}"  # type: ignore[arg-type]
    return str(tp or "any")


def render_environment() -> str:
    lines = [
        note("the CLI contract's lists in scripts/docgen/facts.py"),
        "",
        "# Environment and files",
        "",
        "## Environment variables",
        "",
    ]
    lines += table(["variable", "what it does"], ([code(n), cell(t)] for n, t in ENVIRONMENT))
    lines += [prose(PRECEDENCE), "", "## Files", ""]
    lines += table(["path", "what it holds"], ([code(n), cell(t)] for n, t in FILES))
    lines += [
        "The whole layout, and what `holon home check` sees in each file, is in "
        "[Files and storage](../guides/files.md).",
        "",
    ]
    return page(lines)


def render_scripted() -> str:
    lines = [
        note("holon_cli/providers/scripted.py"),
        "",
        "# The scripted model",
        "",
        "The model ref `scripted:<path>` replays a YAML script of model steps offline "
        "(no network, no keys): for demos, and for testing agent workflows "
        "deterministically. `holon replay TURN --export FILE` writes one from a "
        "recorded turn.",
        "",
    ]
    for kind, text in scripted_format():
        lines += (["```yaml", text, "```"] if kind == "code" else [prose(text)]) + [""]
    return page(lines)
