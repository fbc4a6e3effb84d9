"""``holon completion``: print the static shell completion script.

The scripts come from :mod:`holon_cli.cli.completion_gen` (the same generator
writes the committed ``completions/``): plain shell that completes from the
command tree without starting Python on TAB.
"""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")


def completion_source(shell: str) -> str:
    """The completion script for ``shell``, exactly as ``completions/`` holds it."""
    from holon_cli.cli.completion_gen import render

    return render(shell)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL.

    The script is static: completing a word never starts Python. Re-run this
    (or reinstall the file) after upgrading holon.

    \b
    Examples:
      eval "$(holon completion bash)"            # in ~/.bashrc
      eval "$(holon completion zsh)"             # in ~/.zshrc, after compinit
      holon completion fish > ~/.config/fish/completions/holon.fish
    """
    click.echo(completion_source(shell), nl=False)
