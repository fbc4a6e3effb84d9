"""Contract test of ``cli/click_seam.py``, the one module touching click's
private names: each name it reaches still exists with the signature and the
meaning shell completion relies on. A click release that renames or reshapes
one fails here, naming it, before a TAB press misbehaves."""

from __future__ import annotations

import inspect
from importlib.metadata import version

import click
from click import shell_completion as sc

from holon_cli.cli import click_seam


def _demo() -> click.Group:
    @click.group()
    def root() -> None:
        """Root."""

    @root.command()
    @click.option("--agent", shell_complete=lambda ctx, param, incomplete: [])
    @click.option("--name")
    @click.argument("path", required=False)
    def show(agent: str | None, name: str | None, path: str | None) -> None:
        """Show."""

    return root


def test_the_private_names_it_reaches_exist() -> None:
    assert list(inspect.signature(sc._resolve_context).parameters) == [
        "cli",
        "ctx_args",
        "prog_name",
        "args",
    ]
    assert list(inspect.signature(sc._resolve_incomplete).parameters) == [
        "ctx",
        "args",
        "incomplete",
    ]
    opt = click.Option(["--x"])
    assert hasattr(opt, "_custom_shell_complete")
    ctx = click.Context(click.Group("g"))
    major, minor = (int(x) for x in version("click").split(".")[:2])
    if (major, minor) >= (8, 2):
        assert isinstance(ctx._protected_args, list)
    else:
        assert isinstance(ctx.protected_args, list)


def test_resolve_names_the_command_or_parameter_under_the_cursor() -> None:
    root = _demo()
    obj, ctx, value = click_seam.resolve(root, "demo", [], "sh")
    assert obj is root and value == "sh" and ctx.command is root
    obj, ctx, value = click_seam.resolve(root, "demo", ["show", "--agent"], "a1")
    assert isinstance(obj, click.Option) and obj.name == "agent" and value == "a1"
    assert ctx.command.name == "show"
    obj, _, value = click_seam.resolve(root, "demo", ["show"], "--name=bo")
    assert isinstance(obj, click.Option) and obj.name == "name" and value == "bo"
    obj, _, value = click_seam.resolve(root, "demo", ["show"], "fi")
    assert isinstance(obj, click.Argument) and obj.name == "path" and value == "fi"


def test_unresolved_words_are_an_unknown_command_name() -> None:
    root = _demo()
    _, ctx, _ = click_seam.resolve(root, "demo", ["nosuch"], "")
    assert click_seam.unresolved_words(ctx) == ["nosuch"]
    _, ctx, _ = click_seam.resolve(root, "demo", ["show"], "")
    assert click_seam.unresolved_words(ctx) == []


def test_own_completion_is_a_shell_complete_callback() -> None:
    show = _demo().commands["show"]
    by_name = {p.name: p for p in show.params}
    assert click_seam.has_own_completion(by_name["agent"])
    assert not click_seam.has_own_completion(by_name["name"])
    assert not click_seam.has_own_completion(by_name["path"])
