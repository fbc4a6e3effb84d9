"""Rendering: the ``--json`` envelope, plain text, and rich on a terminal.

rich is imported only when stdout is a terminal and NO_COLOR is unset, so
scripts and pipes never pay for it. This module does not import click
either: the click-free fast path (:mod:`holon_cli.cli.fast`) renders through
the same functions as the click commands.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from holon_cli.errors import HolonError

if TYPE_CHECKING:
    import click

SCHEMA_VERSION = 1

# How a command asked to be rendered lives in click's ``ctx.meta`` (one dict
# shared by the whole context chain of one invocation), never in a module
# global: in-process runs and library callers cannot leak it into each other.
_META_JSON = "holon.json"
_META_COMMAND = "holon.command"

# The fast path has no click context: it runs its command inside one of these
# (set and reset around the call, so nothing leaks into the next invocation).
FAST_META: ContextVar[dict[str, object] | None] = ContextVar("holon_fast_meta", default=None)


def _click_context() -> click.Context | None:
    click_mod = sys.modules.get("click")  # never imported here just to ask
    return None if click_mod is None else click_mod.get_current_context(silent=True)


def _meta() -> dict[str, object]:
    fast = FAST_META.get()
    if fast is not None:
        return fast
    ctx = _click_context()
    return ctx.meta if ctx is not None else {}


def command_name(ctx: click.Context | None = None) -> str:
    """``holon agent create`` -> ``agent create`` (the envelope's ``command``)."""
    fast = FAST_META.get()
    if ctx is None and fast is not None:
        return str(fast.get(_META_COMMAND, "holon"))
    ctx = ctx or _click_context()
    if ctx is None:
        return "holon"
    if _META_COMMAND in ctx.meta:
        return str(ctx.meta[_META_COMMAND])
    words = ctx.command_path.split()
    return " ".join(words[1:]) or "holon"


def begin(command: str, as_json: bool) -> None:
    """Name the running command and its output mode explicitly.

    Optional: :func:`json_option` records both by itself. Kept for commands
    whose envelope name differs from their click path (``agent status``).
    """
    meta = _meta()
    meta[_META_COMMAND] = command
    meta[_META_JSON] = as_json


def json_mode() -> bool:
    return bool(_meta().get(_META_JSON, False))


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=None, default=str)


def write_line(text: str, err: bool = False) -> None:
    """One line on stdout (or stderr), flushed: what ``click.echo`` does for
    text that is already safe (JSON, or passed through :func:`visible`)."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def emit_json(data: Any, command: str | None = None) -> None:
    write_line(
        _dump(
            {
                "schema_version": SCHEMA_VERSION,
                "ok": True,
                "command": command or command_name(),
                "data": data,
            }
        )
    )


def emit_json_error(
    command: str,
    kind: str,
    message: str,
    hint: str | None = None,
    details: Mapping[str, object] | None = None,
) -> None:
    err: dict[str, object] = {"kind": kind, "message": message, "hint": hint or ""}
    if details:
        err["details"] = details
    write_line(
        _dump({"schema_version": SCHEMA_VERSION, "ok": False, "command": command, "error": err})
    )


def emit_json_per_agent(data: Any, code: int, failed: list[str]) -> None:
    """The one envelope of an ``--all`` command: ``ok`` is true only when every
    agent's outcome was (exit 0), so ``jq -e .ok`` agrees with the exit code;
    the per-agent entries in ``data`` say what happened to each."""
    if not code:
        emit_json(data)
        return
    emit_json_failure_with_data(
        "agents_failed",
        f"{len(failed)} agent(s) did not succeed: {', '.join(failed)}",
        "see each agent's entry; the exit code is the worst per-agent outcome",
        data,
    )


def emit_json_failure_with_data(kind: str, message: str, hint: str, data: Any) -> None:
    """A failure envelope that still carries the command's data (``run``)."""
    write_line(
        _dump(
            {
                "schema_version": SCHEMA_VERSION,
                "ok": False,
                "command": command_name(),
                "error": {"kind": kind, "message": message, "hint": hint},
                "data": data,
            }
        )
    )


def render_error(
    err: HolonError, *, as_json: bool | None = None, command: str | None = None
) -> None:
    """An expected failure on stderr (text) or as the error envelope (``--json``)."""
    if as_json is None:
        as_json = json_mode()
    if as_json:
        emit_json_error(
            command or command_name(), err.kind, err.message, err.hint, err.details or None
        )
        return
    echo(f"Error: {err.message}", err=True)
    if err.hint:
        echo(f"Hint: {err.hint}", err=True)


# C0 controls (but newline and tab), DEL, C1 controls and the bidi overrides
# that can reorder what a reader sees. Escape sequences (CSI, OSC, ...) all
# start with one of these, so none reaches the terminal raw.
_BIDI = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))


def _visible_char(c: str) -> str:
    o = ord(c)
    if o < 0x20:
        return chr(0x2400 + o)  # the Unicode "control pictures": ESC -> ␛, BEL -> ␇
    if o == 0x7F:
        return "\u2421"  # ␡
    if 0x80 <= o <= 0x9F:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}"


_VISIBLE = {
    o: _visible_char(chr(o))
    for o in [*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI]
    if chr(o) not in "\n\t"
}


def visible(text: Any) -> str:
    """Text safe for a terminal: control characters made visible, not executed.

    Every human-readable view passes text that came from outside (message
    bodies, origin ids, tool output, model text, plan previews) through this;
    ``--json`` output is never altered.
    """
    return str(text).translate(_VISIBLE)


def echo(text: Any = "", err: bool = False) -> None:
    """Human-readable output: control characters made visible."""
    write_line(visible(text), err=err)


def plain() -> bool:
    return bool(os.environ.get("NO_COLOR")) or not sys.stdout.isatty()


def console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


def print_kv(rows: list[tuple[str, Any]]) -> None:
    """A two-column key/value listing."""
    width = max((len(k) for k, _ in rows), default=0)
    if plain():
        for k, v in rows:
            echo(f"{k.ljust(width)}  {'' if v is None else v}")
        return
    from rich.table import Table
    from rich.text import Text

    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold cyan")
    t.add_column()
    for k, v in rows:
        # Text, not str: values are data, never rich markup ("[link=...]")
        t.add_row(Text(visible(k)), Text(visible("" if v is None else v)))
    console().print(t)


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    rows = [[visible(c) for c in r] for r in rows]
    if plain():
        widths = [len(h) for h in headers]
        for r in rows:
            for i, c in enumerate(r):
                widths[i] = max(widths[i], len(str(c)))
        echo("  ".join(h.upper().ljust(widths[i]) for i, h in enumerate(headers)).rstrip())
        for r in rows:
            echo("  ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)).rstrip())
        return
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, header_style="bold")
    for h in headers:
        t.add_column(h.upper())
    for r in rows:
        t.add_row(*[Text(visible(c)) for c in r])
    console().print(t)


def _record_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    ctx.meta[_META_JSON] = bool(value)
    # the name too: an error may be rendered after this context is gone
    ctx.meta.setdefault(_META_COMMAND, " ".join(ctx.command_path.split()[1:]) or "holon")
    return value


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--json``: the one way a command chooses JSON; errors raised anywhere in
    the command then render as the error envelope too."""
    import click

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        is_eager=True,
        callback=_record_json,
        help="Print one JSON object (the contract's envelope) on stdout.",
    )(fn)


AGENT_HELP = "Agent id (default: $HOLON_AGENT_ID or 'main')."
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def agent_option_with(help: str) -> Decorator:
    """``--agent/-a ID`` with live completion and a command's own help text
    (where its default differs from the default agent)."""
    import click

    from holon_cli.cli.params import complete_agents

    return click.option(
        "--agent",
        "-a",
        "agent_id",
        metavar="ID",
        default=None,
        shell_complete=complete_agents,
        help=help,
    )


def agent_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return agent_option_with(AGENT_HELP)(fn)
