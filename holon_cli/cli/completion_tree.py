"""The completion spec of the click tree: what completes where, for every command.

Owns the walk of ``holon_cli.cli.cli`` into a small, shell-neutral
:class:`CommandSpec` tree (:func:`command_tree`); ``completion_gen.py`` renders
it as bash, zsh and fish code. Imported only by ``holon completion`` and
``scripts/gen_docs.py``.

Invariants:

- The spec depends only on the command tree (subcommands sorted, options in
  declaration order, no version or date), so the scripts rendered from it can
  be compared with the committed ``completions/``.
- Every option that takes a value is listed (hidden ones too), so every shell
  can tell that the word after it is a value, never a command.
- Only names and values that need no quoting in any shell are kept; anything
  else is a :class:`ValueError` here, not a broken script.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import click

from holon_cli.model.envelope import MESSAGE_KINDS, PRIORITIES

PROG = "holon"

# Plain string options whose values are nevertheless a closed set (the command
# validates them itself, so they are not click.Choice): (command path, option) -> values.
EXTRA_CHOICES: Mapping[tuple[str, str], Sequence[str]] = {
    ("enqueue", "--kind"): MESSAGE_KINDS,
    ("enqueue", "--priority"): PRIORITIES,
}

ValueKind = Literal["any", "none", "words", "file", "dir"]

HELP_TEXT = "Show this message and exit"

_COMMAND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_OPTION_NAME = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")
_WORD = re.compile(r"^[A-Za-z0-9_.,:@%+/=-]+$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(\[])")


@dataclass(frozen=True)
class Values:
    """What completes at one place: free text (``any``, the shell's default, i.e.
    file names), ``none`` (nothing is expected there), ``words``, ``file`` or ``dir``."""

    kind: ValueKind = "any"
    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class OptionSpec:
    names: tuple[str, ...]  # long names (--no-x ones too), then short ones
    takes_value: bool
    values: Values  # of the value, when it takes one
    help: str
    hidden: bool


@dataclass(frozen=True)
class CommandSpec:
    path: tuple[str, ...]  # () is holon itself
    help: str
    is_group: bool
    options: tuple[OptionSpec, ...]
    slots: tuple[Values, ...]  # one per positional value, in order
    rest: Values  # beyond the slots: a variadic argument's values, else nothing
    subcommands: tuple[CommandSpec, ...]  # sorted by name

    @property
    def key(self) -> str:
        return " ".join(self.path)

    @property
    def name(self) -> str:
        return self.path[-1] if self.path else PROG

    def walk(self) -> Iterator[CommandSpec]:
        yield self
        for sub in self.subcommands:
            yield from sub.walk()

    def value_options(self) -> list[str]:
        """Every option name that takes a value, hidden ones included."""
        return [n for o in self.options if o.takes_value for n in o.names]

    def visible_options(self) -> list[OptionSpec]:
        return [o for o in self.options if not o.hidden]


# -- the command tree -----------------------------------------------------------------


def summary(text: str | None) -> str:
    """The first sentence of a help text, on one line, without its final period."""
    if not text:
        return ""
    text = text.split("\f", 1)[0].strip()
    para = re.split(r"\n\s*\n", text, maxsplit=1)[0]
    para = " ".join(ln.strip() for ln in para.splitlines() if ln.strip() not in ("", "\b"))
    para = re.sub(r"[\x00-\x1f\x7f]", "", para)
    first = _SENTENCE_END.split(para, maxsplit=1)[0].strip()
    return first[:-1] if first.endswith(".") and not first.endswith("..") else first


def _check(pattern: re.Pattern[str], what: str, value: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"cannot complete {what} {value!r}: it would need shell quoting")
    return value


def _choice_word(choice: object) -> str:
    return choice.name if isinstance(choice, enum.Enum) else str(choice)


def _values(param: click.Parameter, extra: Sequence[str] | None, where: str) -> Values:
    ptype = param.type
    words: Sequence[object] | None = extra
    if words is None and isinstance(ptype, click.Choice):
        words = ptype.choices
    if words is not None:
        return Values(
            "words", tuple(_check(_WORD, f"a value of {where}", _choice_word(w)) for w in words)
        )
    if isinstance(ptype, click.Path):
        return Values("dir" if ptype.dir_okay and not ptype.file_okay else "file")
    if isinstance(ptype, click.File):
        return Values("file")
    return Values("any")


def _help_option_names(cmd: click.Command, ctx: click.Context) -> tuple[str, ...]:
    """The help option's names as ``holon`` parses them.

    Not from ``cmd.get_params``: click caches the help option per command with
    the names of the first context that asked (gen_docs asks without settings),
    and keeps them in a set.
    """
    if not cmd.add_help_option:
        return ()
    taken = {n for p in cmd.params if isinstance(p, click.Option) for n in p.opts}
    names = {n for n in ctx.help_option_names if n not in taken}
    return tuple(_check(_OPTION_NAME, "the help option", n) for n in sorted(names, key=_long_first))


def _long_first(name: str) -> tuple[bool, str]:
    return (name[:2] != "--", name)


def _context(cmd: click.Command, name: str, parent: click.Context | None) -> click.Context:
    # context_settings as make_context would apply them (e.g. -h for help)
    return click.Context(cmd, info_name=name, parent=parent, **cmd.context_settings)


def _spec(
    cmd: click.Command,
    ctx: click.Context,
    path: tuple[str, ...],
    extra: Mapping[tuple[str, str], Sequence[str]],
    used: set[tuple[str, str]],
) -> CommandSpec:
    key = " ".join(path)
    where = " ".join((PROG, *path))
    options: list[OptionSpec] = []
    slots: list[Values] = []
    rest = Values("none")
    variadic_seen = False
    for param in cmd.params:  # as declared; the help option is added below
        if isinstance(param, click.Option):
            # long names first, then short ones: a stable order for any click
            names = tuple(
                _check(_OPTION_NAME, f"the option of {where}", n)
                for n in sorted({*param.opts, *param.secondary_opts}, key=_long_first)
            )
            # (an option taking several values, nargs > 1, is not told apart: none here)
            takes_value = not param.is_flag and not param.count
            choices = None
            for n in names:
                if (key, n) in extra:
                    choices = extra[(key, n)]
                    used.add((key, n))
            if choices is not None and not takes_value:
                raise ValueError(f"extra choices for {where} {names[0]}: it takes no value")
            options.append(
                OptionSpec(
                    names=names,
                    takes_value=takes_value,
                    values=_values(param, choices, f"{where} {names[0]}")
                    if takes_value
                    else Values("none"),
                    help=summary(param.help),
                    hidden=bool(param.hidden),
                )
            )
        elif isinstance(param, click.Argument) and not variadic_seen:
            values = _values(param, None, f"{where} {param.human_readable_name}")
            if param.nargs < 0:
                # what follows a variadic argument cannot be told apart from it
                variadic_seen, rest = True, values
            else:
                slots += [values] * param.nargs
    help_names = _help_option_names(cmd, ctx)
    if help_names:
        options.append(OptionSpec(help_names, False, Values("none"), HELP_TEXT, False))
    subs: list[CommandSpec] = []
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            _check(_COMMAND_NAME, "the command", name)
            subs.append(_spec(sub, _context(sub, name, ctx), (*path, name), extra, used))
    return CommandSpec(
        path=path,
        help=summary(cmd.short_help or cmd.help),
        is_group=isinstance(cmd, click.Group),
        options=tuple(options),
        slots=tuple(slots),
        rest=rest,
        subcommands=tuple(subs),
    )


def command_tree(
    root: click.Command | None = None,
    extra_choices: Mapping[tuple[str, str], Sequence[str]] = EXTRA_CHOICES,
) -> CommandSpec:
    """The completion spec of ``root`` (default: ``holon_cli.cli.cli``).

    ``extra_choices`` maps (command path, option name) to the values of a plain
    option; an entry for a command of this build that has no such option (or
    one that takes no value) is an error, so the map cannot go stale quietly.
    """
    if root is None:
        from holon_cli.cli.group import cli

        root = cli
    used: set[tuple[str, str]] = set()
    tree = _spec(root, _context(root, PROG, None), (), extra_choices, used)
    present = {spec.key for spec in tree.walk()}
    stale = sorted(k for k in extra_choices if k[0] in present and k not in used)
    if stale:
        listed = ", ".join(" ".join((PROG, *([p] if p else []), o)) for p, o in stale)
        raise ValueError(f"extra choices for options that do not exist: {listed}")
    return tree
