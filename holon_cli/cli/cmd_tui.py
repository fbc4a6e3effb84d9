"""``holon tui``: the operator console over a running serve (its Unix socket).

The console owns no runtime: it reads and admits through serve's control
surface, so closing it stops nothing. Order of checks: a usable display
mode, a serve answering on ``run/holon.sock`` (both before anything heavy
is imported), then for the interactive console Textual, the agent (known
and public) and a terminal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from holon_cli.cli import output

CTX = {"help_option_names": ["-h", "--help"]}


def _require_textual() -> None:
    import importlib.util

    from holon_cli.errors import HolonError

    if importlib.util.find_spec("textual") is None:
        raise HolonError(
            "the interactive console needs Textual, which is not installed",
            kind="missing_extra",
            hint="pip install 'holon-cli[tui]' (or use `holon tui --script` on the base install)",
        )


def _require_agent(sock: Path, agent_id: str) -> None:
    """An unknown or private agent is exit 3 before the console opens."""
    from holon_cli.serve.client import ServeClient

    client = ServeClient(sock)
    try:
        client.get(f"/agents/{agent_id}/status")
    finally:
        client.close()


@click.command(context_settings=CTX)
@output.agent_option
@click.option(
    "--no-alt-screen",
    is_flag=True,
    help="Draw inline below the prompt instead of the alternate screen (keeps scrollback).",
)
@click.option(
    "--script",
    is_flag=True,
    help="Read lines from stdin (text = a prompt; /display MODE, /agent ID, /quit), "
    "wait until each prompt is settled, print the presented conversation. No Textual needed.",
)
@click.option(
    "--display",
    "display",
    default="info",
    show_default=True,
    metavar="MODE",
    help="What the conversation shows: info|verbose|debug (or 3|4|5).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    default=300.0,
    show_default=True,
    help="With --script: seconds to wait for each prompt to be settled.",
)
@click.option(
    "--socket",
    "socket_path",
    metavar="PATH",
    type=click.Path(dir_okay=False),
    help="The serve to attach to, by its Unix socket [default: the first that answers of "
    "run/holon.sock, the recorded --socket, a DBOS worker's run/holon-*.sock].",
)
def tui(
    agent_id: str | None,
    no_alt_screen: bool,
    script: bool,
    display: str,
    timeout_s: float,
    socket_path: str | None,
) -> None:
    """Operator console attached to a running serve (its Unix socket).

    Type a prompt and press Enter; /help lists the commands, Esc closes an
    overlay, Ctrl-Q or /quit leaves. Closing the console stops nothing.
    Without --socket it finds the home's serve (run/holon.sock) or, under
    `serve --engine dbos`, one of its workers (run/holon-<executor>.sock).

    \b
    Examples:
      holon daemon start && holon tui
      printf 'hello\\n/quit\\n' | holon tui --script --display verbose
      holon tui --socket "$(holon home path)/run/holon-worker-a.sock"
    """
    from holon_cli.cli.tui.session import parse_display_option
    from holon_cli.errors import UsageError
    from holon_cli.serve.client import require_serve
    from holon_cli.store.layout import default_agent_id

    mode = parse_display_option(display)
    sock = require_serve(socket_path)
    agent = agent_id or default_agent_id()
    if script:
        _script(sock, agent, mode, timeout_s)
        return
    _require_textual()
    _require_agent(sock, agent)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "the interactive console needs a terminal",
            hint="use `holon tui --script` to drive it from a pipe",
        )
    from holon_cli.cli.tui.app import run_app

    run_app(sock, agent, mode, inline=no_alt_screen)


def _script(sock: Path, agent: str, mode: str, timeout_s: float) -> None:
    from holon_cli.cli.tui.script import run_script
    from holon_cli.cli.tui.session import Conversation, parse_display_option
    from holon_cli.serve.client import ServeClient

    def out(text: str) -> None:
        click.echo(text)
        sys.stdout.flush()

    client = ServeClient(sock)
    try:
        code = run_script(
            client,
            agent,
            Conversation(parse_display_option(mode)),
            sys.stdin,
            out,
            lambda text: output.echo(text, err=True),
            timeout_s,
        )
    finally:
        client.close()
    if code:
        raise click.exceptions.Exit(code)
