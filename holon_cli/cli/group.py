"""The click group: ``holon --help``, every subcommand, click's own errors.

Subcommands are loaded from :data:`holon_cli.cli.commands.COMMANDS` on first use, so
``holon turn`` never imports what ``holon serve`` needs.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from holon_cli import __version__
from holon_cli.cli import failures, output
from holon_cli.cli.commands import COMMANDS, command_words, json_requested
from holon_cli.errors import EXIT_INTERRUPTED, HolonError


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        mod_name, attr = target.split(":")
        cmd: click.Command = getattr(importlib.import_module(mod_name), attr)
        return cmd

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.Abort:
            code = failures.exit_code_for(KeyboardInterrupt())
        except failures.HANDLED as exc:
            # rendered here, while ctx.meta still says how the command wants
            # its output (the --json envelope or text)
            code = failures.exit_code_for(exc)
        raise click.exceptions.Exit(code)


CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(
    __version__, "--version", "-V", prog_name="holon", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Holon: a headless, event-driven runtime for long-lived LLM agents.

    State lives as files under $HOLON_HOME (default ~/.holon). Every command
    performs one runtime step and works with no daemon running.

    \b
    Example:
      holon enqueue "summarize today's CI failures"
      holon turn
      holon tail --limit 20
    """


def run_click(args: list[str]) -> int:
    """Run ``holon ARGS`` through click; the exit code."""
    try:
        rv: Any = cli.main(args=args, prog_name="holon", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except HolonError as err:  # raised outside a command (while resolving one)
        output.render_error(err, as_json=json_requested(args), command=command_words(args))
        return err.exit_code
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_INTERRUPTED
    except click.ClickException as e:
        if json_requested(args):
            ctx = getattr(e, "ctx", None)
            output.emit_json_error(
                output.command_name(ctx) if ctx is not None else "holon",
                "usage_error",
                e.format_message(),
                "see --help for usage",
            )
        else:
            e.show()
        return e.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (e.g. `holon tail | head`): exit quietly
        failures.silence_stdout()
        return 0
    except OSError as exc:
        output.render_error(failures.io_error(exc), as_json=json_requested(args), command="holon")
        return 1
