"""The ``holon`` entry point.

:func:`main` checks argv and the environment, then runs the command through
the click-free fast path when it can (:mod:`holon_cli.cli.fast`: the plain
forms of the commands scripts call most) and through the click group
(:mod:`holon_cli.cli.group`) otherwise. Subcommands are loaded from an
explicit name -> module map on first use, so ``holon enqueue`` never imports
click, rich, yaml or the model transports.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# COMMANDS stays importable from here (tests, docs, completion)
from holon_cli.cli.commands import COMMANDS as COMMANDS
from holon_cli.cli.commands import command_words, json_requested


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


def main(argv: list[str] | None = None) -> None:
    """Run ``holon ARGS`` and exit with its code (``SystemExit``)."""
    sys.exit(run(list(sys.argv[1:] if argv is None else argv)))


# click commands that end like the fast path (:func:`_end_fast`): they run the
# same runtime as ``holon run`` (a turn, a tick), or the MCP host a turn
# uses, whose every write is closed and synced before it prints, and stop
# their MCP servers before they return; their teardown cost 60-75 ms a turn,
# ~170 ms once the MCP SDK was loaded (benchmarks/README.md)
ENDS_FAST = frozenset({"turn", "tick", "mcp call", "mcp check", "mcp refresh", "mcp answer"})


def entry() -> None:
    """The ``holon`` console script: :func:`main`, and a process that ran the
    fast path, a turn or a tick ends without the interpreter's teardown (see
    :func:`_end_fast`)."""
    args = sys.argv[1:]
    code = run(args, fast_exit=True)
    sys.exit(code)


def run(args: list[str], *, fast_exit: bool = False) -> int:
    from holon_cli.cli import output
    from holon_cli.errors import HolonError

    instruction = os.environ.get("_HOLON_COMPLETE")
    if instruction:  # a TAB press: the completion script asks (cli/completion_shells.py)
        from holon_cli.cli.completion_shells import complete
        from holon_cli.cli.group import cli

        return complete(cli, instruction)
    _strict_stdin()
    try:
        _check_utf8_args(args)
        _check_utf8_env()
    except HolonError as err:
        output.render_error(err, as_json=json_requested(args), command=command_words(args))
        return err.exit_code
    from holon_cli import umask
    from holon_cli.cli.fast import run_fast

    # every file and folder holon creates under HOLON_HOME is 0600 / 0700,
    # whichever command creates it first (commands run with the user's umask)
    saved = umask.enter_private()
    try:
        code = run_fast(args, end=_end_fast if fast_exit else None)
        if code is None:
            from holon_cli.cli.group import run_click

            code = run_click(args)
            if fast_exit and command_words(args) in ENDS_FAST:
                _end_fast(code)
    finally:
        umask.leave_private(saved)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        from holon_cli.cli.failures import silence_stdout

        silence_stdout()
    return code


def _end_fast(code: int) -> None:
    """Flush what was printed and end the process without the interpreter's
    teardown, which takes longer than a fast command's whole work (clearing a
    hundred modules one by one; measured in benchmarks/cli_startup.py).

    Only for the real console script: stdout and stderr are the process's own
    (an in-process runner swaps them) and no other thread runs but the
    turn's idle call threads (``runtime/turn/abort.py``). The ``atexit``
    hooks run first, as the interpreter would run them before its teardown
    (logging's handler flush, which every process that imported httpx2 has;
    ``weakref.finalize`` clean-ups). Durable state never depends on teardown:
    every write that matters was fsync'd and closed before the command
    printed anything.
    """
    out, err = sys.stdout, sys.stderr
    if out is not sys.__stdout__ or err is not sys.__stderr__ or out is None or err is None:
        return
    threading = sys.modules.get("threading")
    abort = sys.modules.get("holon_cli.runtime.turn.abort")
    idle = abort.idle_call_threads() if abort is not None else 0  # waiting for a call
    if threading is not None and threading.active_count() - idle > 1:
        return
    from holon_cli.cpython_seam import run_exit_hooks

    if not run_exit_hooks():  # not CPython: the normal exit runs them
        return
    try:
        out.flush()
    except BrokenPipeError:  # the reader went away: as the normal exit does
        from holon_cli.cli.failures import silence_stdout

        silence_stdout()
    except (OSError, ValueError):
        return  # let the normal exit report it
    try:
        err.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def __getattr__(name: str) -> Any:
    # ``holon_cli.cli.cli`` (the click group) for docs, tests and library
    # callers, imported only when asked for
    if name in ("cli", "LazyGroup"):
        from holon_cli.cli import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
