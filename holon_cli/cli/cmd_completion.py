"""``holon completion``: print the shell completion script."""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")


def completion_source(shell: str) -> str:
    from click.shell_completion import get_completion_class

    from holon_cli.cli import cli

    cls = get_completion_class(shell)
    assert cls is not None
    return cls(cli, {}, "holon", "_HOLON_COMPLETE").source()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    Examples:
      eval "$(holon completion bash)"            # in ~/.bashrc
      holon completion fish > ~/.config/fish/completions/holon.fish
    """
    click.echo(completion_source(shell), nl=False)
