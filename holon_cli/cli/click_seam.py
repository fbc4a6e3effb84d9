"""The one seam onto click's private names (pinned ``click>=8.1,<9``).

Shell completion (:mod:`holon_cli.cli.completion_shells`) answers a TAB
press with click's own machinery, and needs to know *what* is under the
cursor (free text, an option written ``--opt=value``, an unknown command),
which ``ShellComplete.get_completions`` does not say. So it walks the words
the way that method does, through the helpers it calls, and reads two
things click keeps on its objects:

- ``click.shell_completion._resolve_context`` and ``_resolve_incomplete``:
  the context of the complete words, then the command or parameter that
  completes the word at the cursor (the same names and signatures from click
  8.0 to 8.5);
- ``Context._protected_args`` (click >= 8.2; the public ``protected_args``
  of 8.1 is deprecated there): the words a group could not resolve;
- ``Parameter._custom_shell_complete``: whether a parameter has a
  ``shell_complete`` callback of its own.

The contract test is ``tests/cli/test_click_seam.py``: a click release that
renames or reshapes one of these fails there, naming it, before a TAB press
prints a traceback.
"""

from __future__ import annotations

from typing import Any

import click


def resolve(
    cli: click.Command, prog: str, args: list[str], incomplete: str
) -> tuple[Any, click.Context, str]:
    """click's own walk: the context of the complete ``args``, then the
    command or parameter that completes ``incomplete`` (and the part of it to
    complete: the value of ``--opt=value``)."""
    from click import shell_completion as sc

    ctx = sc._resolve_context(cli, {}, prog, list(args))
    obj, value = sc._resolve_incomplete(ctx, list(args), incomplete)
    return obj, ctx, value


def unresolved_words(ctx: click.Context) -> list[str]:
    """Words a group left over after the walk (a command name it does not know)."""
    left = getattr(ctx, "_protected_args", None)  # click >= 8.2
    if left is None:
        left = ctx.protected_args  # click 8.1
    return [*left, *ctx.args]


def has_own_completion(param: click.Parameter) -> bool:
    """The parameter was given a ``shell_complete`` callback."""
    return getattr(param, "_custom_shell_complete", None) is not None
