"""The ``holon`` command: a lazy click group and the one place exceptions
become exit codes.

Subcommands are loaded from an explicit name -> module map on first use, so
``holon enqueue`` never imports httpx, rich or yaml.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from holon_cli import __version__

if TYPE_CHECKING:
    from holon_cli.errors import HolonError

# name -> "module:attribute"; order is the order of `holon --help`
COMMANDS: dict[str, str] = {
    "enqueue": "holon_cli.cli.cmd_enqueue:enqueue",
    "turn": "holon_cli.cli.cmd_turn:turn",
    "tick": "holon_cli.cli.cmd_tick:tick",
    "run": "holon_cli.cli.cmd_run:run",
    "status": "holon_cli.cli.cmd_inspect:status",
    "tail": "holon_cli.cli.cmd_inspect:tail",
    "transcript": "holon_cli.cli.cmd_inspect:transcript",
    "queue": "holon_cli.cli.cmd_queue:queue",
    "agent": "holon_cli.cli.cmd_agent:agent",
    "workitem": "holon_cli.cli.cmd_workitem:workitem",
    "task": "holon_cli.cli.cmd_task:task",
    "timer": "holon_cli.cli.cmd_timer:timer",
    "trigger": "holon_cli.cli.cmd_trigger:trigger",
    "serve": "holon_cli.cli.cmd_serve:serve",
    "daemon": "holon_cli.cli.cmd_daemon:daemon",
    "home": "holon_cli.cli.cmd_home:home",
    "debug": "holon_cli.cli.cmd_debug:debug",
    "completion": "holon_cli.cli.cmd_completion:completion",
}


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
        from holon_cli.cli import output
        from holon_cli.errors import HolonError

        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # The reader went away (`holon tail -f | head -1`): not an error.
            # click would turn EPIPE into exit 1; stop quietly with 0 instead.
            _silence_stdout()
            raise click.exceptions.Exit(0) from None
        except (KeyboardInterrupt, click.exceptions.Abort):
            # Ctrl-C: under --json still exactly one object on stdout
            from holon_cli.errors import InterruptedError_

            intr = InterruptedError_(
                "interrupted",
                hint="see `holon status`; an interrupted turn's message is replayed "
                "by the next turn",
            )
            if output.json_mode():
                output.render_error(intr)
            else:
                click.echo("Interrupted.", err=True)
            raise click.exceptions.Exit(intr.exit_code) from None
        except UnicodeEncodeError as exc:
            if "surrogates" not in str(exc.reason):
                raise
            # an undecodable byte from the outside (a path, e.g. the current
            # directory, or an environment value) reached a write
            from holon_cli.errors import UsageError

            bad = UsageError(
                "a path or text that is not valid UTF-8 reached holon "
                "(e.g. the current directory's name)",
                hint="run holon from a folder whose path is UTF-8 and pass UTF-8 text",
                kind="invalid_utf8",
            )
            output.render_error(bad)
            raise click.exceptions.Exit(bad.exit_code) from None
        except (HolonError, OSError) as exc:
            # rendered here, while ctx.meta still says how the command wants
            # its output (the --json envelope or text)
            err = exc if isinstance(exc, HolonError) else _io_error(exc)
            output.render_error(err)
            raise click.exceptions.Exit(err.exit_code) from None


def _io_error(exc: OSError) -> HolonError:
    """e.g. HOLON_HOME on a read-only or full disk: a clear message, no traceback."""
    from holon_cli.errors import HolonError

    return HolonError(
        f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""),
        kind="io_error",
        hint="check that $HOLON_HOME is writable and the disk has space",
    )


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so flushing what is still buffered cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


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


def _json_requested(argv: list[str]) -> bool:
    # a usage error can come before --json is parsed: look at the words
    return "--json" in argv


def _not_utf8(text: str) -> bool:
    # Python decodes argv (and, under a C/UTF-8 locale, stdin) with
    # surrogateescape: an undecodable byte becomes a lone surrogate that
    # fails only later, deep inside a write, as a traceback
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_utf8_args(args: list[str]) -> None:
    from holon_cli.errors import UsageError

    for i, arg in enumerate(args, 1):
        if _not_utf8(arg):
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise UsageError(
                f"argument {i} is not valid UTF-8 text: {shown}",
                hint="pass text in UTF-8; put binary data in a file and pass its path",
                kind="invalid_utf8",
            )


def _check_utf8_env() -> None:
    # every record stores paths as UTF-8 JSON: a home whose path is not UTF-8
    # would dequeue a message and then fail mid-turn on every retry
    from holon_cli.errors import UsageError

    home = os.environ.get("HOLON_HOME")
    if home and _not_utf8(home):
        shown = home.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise UsageError(
            f"HOLON_HOME is not valid UTF-8: {shown}",
            hint="use a folder whose path is UTF-8 text",
            kind="invalid_utf8",
        )


def _strict_stdin() -> None:
    """Undecodable stdin raises UnicodeDecodeError (each reader turns it into exit 2)."""
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None and getattr(sys.stdin, "encoding", "").lower() in ("utf-8", "utf8"):
        try:
            reconfigure(errors="strict")
        except (ValueError, OSError):  # closed or unusual stream: leave it alone
            pass


def _command_words(args: list[str]) -> str:
    words = [a for a in args if not a.startswith("-")][:2]
    if not words or words[0] not in COMMANDS:
        return "holon"
    return " ".join(words) if len(words) > 1 and words[0] in _GROUPS else words[0]


_GROUPS = frozenset(
    {"agent", "workitem", "task", "home", "debug", "timer", "trigger", "queue", "daemon"}
)


def main(argv: list[str] | None = None) -> None:
    from holon_cli.cli import output
    from holon_cli.errors import EXIT_INTERRUPTED, HolonError

    args = list(sys.argv[1:] if argv is None else argv)
    _strict_stdin()
    code = 0
    try:
        _check_utf8_args(args)
        _check_utf8_env()
        rv: Any = cli.main(args=args, prog_name="holon", standalone_mode=False)
        if isinstance(rv, int):
            code = rv
    except HolonError as err:  # raised outside a command (while resolving one)
        output.render_error(err, as_json=_json_requested(args), command=_command_words(args))
        code = err.exit_code
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        code = EXIT_INTERRUPTED
    except click.ClickException as e:
        if _json_requested(args):
            ctx = getattr(e, "ctx", None)
            output.emit_json_error(
                output.command_name(ctx) if ctx is not None else "holon",
                "usage_error",
                e.format_message(),
                "see --help for usage",
            )
        else:
            e.show()
        code = e.exit_code
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (e.g. `holon tail | head`): exit quietly
        _silence_stdout()
        code = 0
    except OSError as exc:
        output.render_error(_io_error(exc), as_json=_json_requested(args), command="holon")
        code = 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    sys.exit(code)
