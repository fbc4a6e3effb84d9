"""The one place an exception escaping a command becomes an exit code.

Both ways a command runs use it: the click group (:mod:`holon_cli.cli.group`)
and the click-free fast path (:mod:`holon_cli.cli.fast`). Rendering happens
here, while the command's output mode (``--json`` or text) is still known.
"""

from __future__ import annotations

import os
import sys

from holon_cli.cli import output
from holon_cli.errors import EXIT_INTERRUPTED, HolonError, InterruptedError_, UsageError

# what a command body may raise that is not a bug: each has a clear rendering
HANDLED: tuple[type[BaseException], ...] = (
    BrokenPipeError,
    KeyboardInterrupt,
    UnicodeEncodeError,
    HolonError,
    OSError,
)


def exit_code_for(exc: BaseException) -> int:
    """Render ``exc`` (one of :data:`HANDLED`) and return the exit code.

    Re-raises what it does not know (a bug keeps its traceback).
    """
    if isinstance(exc, BrokenPipeError):
        # The reader went away (`holon tail -f | head -1`): not an error.
        silence_stdout()
        return 0
    if isinstance(exc, KeyboardInterrupt):
        # Ctrl-C: under --json still exactly one object on stdout
        intr = InterruptedError_(
            "interrupted",
            hint="see `holon status`; an interrupted turn's message is replayed by the next turn",
        )
        if output.json_mode():
            output.render_error(intr)
        else:
            output.write_line("Interrupted.", err=True)
        return EXIT_INTERRUPTED
    if isinstance(exc, UnicodeEncodeError):
        if "surrogates" not in str(exc.reason):
            raise exc
        # an undecodable byte from the outside (a path, e.g. the current
        # directory, or an environment value) reached a write
        bad = UsageError(
            "a path or text that is not valid UTF-8 reached holon "
            "(e.g. the current directory's name)",
            hint="run holon from a folder whose path is UTF-8 and pass UTF-8 text",
            kind="invalid_utf8",
        )
        output.render_error(bad)
        return bad.exit_code
    if isinstance(exc, HolonError | OSError):
        err = exc if isinstance(exc, HolonError) else io_error(exc)
        output.render_error(err)
        return err.exit_code
    raise exc


def io_error(exc: OSError) -> HolonError:
    """e.g. HOLON_HOME on a read-only or full disk: a clear message, no traceback."""
    return HolonError(
        f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""),
        kind="io_error",
        hint="check that $HOLON_HOME is writable and the disk has space",
    )


def silence_stdout() -> None:
    """Point fd 1 at /dev/null so flushing what is still buffered cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
