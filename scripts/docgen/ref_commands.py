"""``docs/reference/commands/``: an index of every command and one page per
top-level command (its subcommands as sections), from the click tree."""

from __future__ import annotations

from .clicktree import Doc
from .md import cell, code, code_cell, note, page, prose, table

SOURCE = "the click command tree"


def slug(top: str) -> str:
    return top


def render_index(root: Doc, tops: dict[str, list[Doc]]) -> str:
    lines = [
        note(SOURCE),
        "",
        "# Commands",
        "",
        prose(root.summary),
        "",
        "Every command has `--help` with an example, and the same text is its manual "
        "page (`man holon-enqueue`, see [Installing the man pages]"
        "(../../guides/install.md#man-pages)). Commands that report something take "
        "`--json` and then print exactly one object on stdout:",
        "",
        "```json",
        '{"schema_version": 1, "ok": true, "command": "status", "data": {...}}',
        '{"schema_version": 1, "ok": false, "command": "status",',
        ' "error": {"kind": "not_found", "message": "...", "hint": "..."}}',
        "```",
        "",
        "Diagnostics go to stderr, data to stdout; the exit codes are in "
        "[Exit codes and errors](../exit-codes.md).",
        "",
    ]
    rows = []
    for top, group in tops.items():
        head = group[0]
        subs = ", ".join(code(name) for name, _ in head.subcommands)
        rows.append([f"[{code(head.name)}]({slug(top)}.md)", cell(head.summary), subs or "&nbsp;"])
    lines += table(["command", "what it does", "subcommands"], rows)
    return page(lines)


def _section(d: Doc, level: str) -> list[str]:
    lines = [f"{level} {code(d.name)}", "", prose(d.summary), "", "```", d.usage, "```", ""]
    for p in d.paragraphs:
        lines += (["```", p[1:], "```"] if p.startswith("\n") else [prose(p)]) + [""]
    if d.subcommands:
        rows = [
            [f"[{code(d.name + ' ' + name)}](#{anchor(d.name + ' ' + name)})", cell(short)]
            for name, short in d.subcommands
        ]
        lines += table(["subcommand", "description"], rows)
    if d.options:
        lines += table(["option", "description"], ([code_cell(o), cell(t)] for o, t in d.options))
    if d.examples:
        lines += ["```sh", *d.examples, "```", ""]
    return lines


def anchor(title: str) -> str:
    """The id MkDocs gives a heading ``# `title` `` (its toc slugify)."""
    return "-".join(title.lower().split())


def render_command(group: list[Doc]) -> str:
    head, subs = group[0], group[1:]
    lines = [note(SOURCE), "", *_section(head, "#")]
    for d in subs:
        lines += _section(d, "##")
    lines += [f"Manual page: `man holon-{head.top}`.", ""]
    return page(lines)
