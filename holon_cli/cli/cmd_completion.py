"""``holon completion``: print the shell's activation script.

The script (:mod:`holon_cli.cli.completion_shells`; ``completions/`` holds the
same text) asks ``holon`` itself on each TAB through click's shell completion,
so the values of the moment complete: agent, work-item, task and timer ids.
"""

from __future__ import annotations

import click

from holon_cli.cli.completion_shells import SHELLS, source


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL.

    Each TAB runs holon to complete the word (commands, options, choices, paths
    and live ids: `holon agent status al<TAB>` offers your agents, `holon
    workitem pick <TAB>` the agent's open work items). The script calls the
    `holon` on your PATH, so an upgrade needs no new script.

    \b
    Examples:
      eval "$(holon completion bash)"            # in ~/.bashrc
      eval "$(holon completion zsh)"             # in ~/.zshrc, after compinit
      holon completion fish > ~/.config/fish/completions/holon.fish
    """
    click.echo(source(shell), nl=False)
