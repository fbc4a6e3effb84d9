"""The click command tree as :class:`Doc` values: usage, summary, prose,
examples, options and subcommands of every command, depth first."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import click

_EXAMPLE_HEAD = re.compile(r"^Examples?:\s*$")


@dataclass
class Doc:
    path: tuple[str, ...]
    usage: str
    summary: str
    paragraphs: list[str]  # prose; a paragraph starting with "\n" is preformatted
    examples: list[str]
    options: list[tuple[str, str]]
    subcommands: list[tuple[str, str]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join(("holon", *self.path))

    @property
    def top(self) -> str:
        """The top-level command this doc belongs to ("" for the root)."""
        return self.path[0] if self.path else ""


def split_help(text: str) -> tuple[list[str], list[str]]:
    """Click help text -> (prose paragraphs, example lines)."""
    paragraphs: list[str] = []
    examples: list[str] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.split("\n")
        verbatim = lines[0].strip() == "\b"
        if verbatim:
            lines = lines[1:]
        if lines and _EXAMPLE_HEAD.match(lines[0].strip()):
            body = lines[1:]
            indent = min((len(ln) - len(ln.lstrip()) for ln in body if ln.strip()), default=0)
            examples += [ln[indent:].rstrip() for ln in body if ln.strip()]
        elif verbatim:
            paragraphs.append("\n" + "\n".join(ln.rstrip() for ln in lines))
        else:
            paragraphs.append(" ".join(ln.strip() for ln in lines if ln.strip()))
    return [p for p in paragraphs if p.strip()], examples


def _doc(cmd: click.Command, ctx: click.Context, path: tuple[str, ...]) -> Doc:
    paragraphs, examples = split_help(cmd.help or "")
    summary = cmd.get_short_help_str(limit=300)
    if paragraphs and not paragraphs[0].startswith("\n"):
        # the first paragraph is the summary unless it says more than that
        paragraphs = paragraphs[1:] if paragraphs[0] == summary else paragraphs
    options: list[tuple[str, str]] = []
    for param in cmd.get_params(ctx):
        # options only, and not --help: newer clicks also give arguments and the
        # help option (under another name) a help record, older ones do not
        if not isinstance(param, click.Option) or param.hidden or "--help" in param.opts:
            continue
        rec = param.get_help_record(ctx)
        if rec is not None:
            options.append((rec[0], " ".join(rec[1].split())))
    usage = " ".join(["holon", *path, *cmd.collect_usage_pieces(ctx)])
    doc = Doc(path, usage, summary, paragraphs, examples, options)
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                doc.subcommands.append((name, sub.get_short_help_str(limit=300)))
    return doc


def command_docs() -> list[Doc]:
    """Every command, depth first: the root, then each command and its subcommands."""
    from holon_cli.cli import cli

    out: list[Doc] = []

    def walk(cmd: click.Command, ctx: click.Context, path: tuple[str, ...]) -> None:
        out.append(_doc(cmd, ctx, path))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is None or sub.hidden:
                    continue
                walk(sub, click.Context(sub, info_name=name, parent=ctx), (*path, name))

    walk(cli, click.Context(cli, info_name="holon"), ())
    return out


def by_top(docs: list[Doc]) -> dict[str, list[Doc]]:
    """Each top-level command's docs (itself first, then its subcommands),
    in the order of ``holon --help``."""
    out: dict[str, list[Doc]] = {}
    for d in docs[1:]:
        out.setdefault(d.top, []).append(d)
    return out
