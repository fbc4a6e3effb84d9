"""Shell completion through click's own machinery (``click.shell_completion``).

Owns the activation scripts (:func:`source`: what ``holon completion SHELL``
prints and ``completions/`` holds) and the answer to one TAB press
(:func:`complete`): the script runs ``holon`` with ``_HOLON_COMPLETE=SHELL_complete``
and the words before the cursor (``COMP_WORDS``, ``COMP_CWORD``); click parses
them as it would parse the command, loading only the subcommand modules on
the way, and asks the parameter under the cursor for its values (its
``shell_complete`` callback: live agent, work-item, task and timer ids, see
:mod:`holon_cli.cli.params`; a ``Choice``'s values; a path).

What this adds on top of click's classes, on both sides of the protocol (so
the committed scripts and the Python side change together, whatever the
click version):

- ``--opt=value`` completes alike in every shell: bash splits the word at
  ``=`` (``COMP_WORDBREAKS``), zsh and fish do not; the value is completed and
  the ``--opt=`` put back where the shell replaces the whole word.
- A free-text value (a plain string with nothing to offer) falls back to file
  names, as the shell's default would; a place where nothing is expected (a
  command that takes no argument) offers nothing.
- Descriptions (zsh, fish) are one line: a command's or option's first
  sentence, an id's state.
- Listing ``holon``'s commands for bash (which shows no descriptions) imports
  none of their modules.

What click does not say publicly (the object under the cursor, the words a
group could not resolve, whether a parameter has its own completion) comes
from :mod:`holon_cli.cli.click_seam`, the one module touching click's
private names.

Invariants: the scripts depend only on the program name (no version, no
date, no command tree), so the drift test compares them with ``completions/``;
completing never prints to stderr on purpose, never takes a lock and never
creates anything in the home.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import click
from click.shell_completion import (
    BashComplete,
    CompletionItem,
    FishComplete,
    ShellComplete,
    ZshComplete,
    split_arg_string,
)

from holon_cli.cli import click_seam

if TYPE_CHECKING:
    Item = CompletionItem[str]

PROG = "holon"
COMPLETE_VAR = "_HOLON_COMPLETE"
SHELLS = ("bash", "zsh", "fish")

# item types: click's "plain", "file", "dir", and "any": free text, the shell's
# default (file names) with nothing of ours offered
FREE_TEXT = "any"
NO_PREFIX = "_"  # zsh: an empty line cannot travel in the reply, so "no prefix" is "_"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(\[])")


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


# -- what completes at the cursor ---------------------------------------------------


def _value_prefix(word: str) -> str:
    """``--opt=`` when the shell's current word is ``--opt=value``, else ``""``."""
    if word.startswith("--") and "=" in word:
        return word.partition("=")[0] + "="
    return ""


def _free_text(param: click.Parameter) -> bool:
    """A plain string with no values of its own (no ``shell_complete`` callback)."""
    if click_seam.has_own_completion(param):
        return False
    return isinstance(param.type, click.types.StringParamType | click.types.UnprocessedParamType)


def _lazy(group: click.Group) -> bool:
    """A group that loads a command when asked for it (the root's lazy map)."""
    return type(group).get_command is not click.Group.get_command


def _commands(ctx: click.Context, group: click.Group, incomplete: str, help_: bool) -> list[Item]:
    """The group's visible subcommands starting with ``incomplete``, described
    by their first sentence; with ``help_`` off, a lazy group's are listed by
    name without loading their modules."""
    out: list[Item] = []
    for name in group.list_commands(ctx):
        if not name.startswith(incomplete):
            continue
        if not help_ and _lazy(group):
            out.append(CompletionItem(name))
            continue
        cmd = group.get_command(ctx, name)
        if cmd is not None and not cmd.hidden:
            out.append(CompletionItem(name, help=summary(cmd.short_help or cmd.help) or None))
    return out


def _resolve(
    cli: click.Command, args: list[str], incomplete: str
) -> tuple[Any, click.Context, str]:
    """click's own walk (what ``ShellComplete.get_completions`` calls), so the
    object under the cursor is known (free text, ``--opt=`` on an option)."""
    return click_seam.resolve(cli, PROG, args, incomplete)


def _unresolved(ctx: click.Context) -> bool:
    """Words left over after the walk: a command name the group does not know."""
    return bool(click_seam.unresolved_words(ctx))


class _Holon(ShellComplete):
    """What the three shells share: resolution, fallbacks, the ``--opt=`` prefix."""

    shows_help: ClassVar[bool] = True

    def source(self) -> str:
        # ours, not click's template (whose bash one also checks the version on stderr)
        return source(self.name)

    def word(self) -> str:
        """The shell's own current word (bash: after a split at ``=``)."""
        raise NotImplementedError

    def get_completions(self, args: list[str], incomplete: str) -> list[Item]:
        obj, ctx, value = _resolve(self.cli, args, incomplete)
        prefix = _value_prefix(self.word())
        if prefix and not (isinstance(obj, click.Option) and prefix[:-1] in obj.opts):
            return []  # --flag=x, --unknown=x: nothing goes there
        if isinstance(obj, click.Group):
            if _unresolved(ctx):
                return []  # `holon agent nosuch <TAB>`: no command of that name
            items = _commands(ctx, obj, value, self.shows_help)
            items += click.Command.shell_complete(obj, ctx, value)
        else:
            items = list(obj.shell_complete(ctx, value))
        if not items and isinstance(obj, click.Parameter) and _free_text(obj):
            items = [CompletionItem(value, type=FREE_TEXT)]
        out: list[Item] = []
        for item in items:
            text = str(item.value)
            if item.type == "plain":
                out.append(CompletionItem(prefix + text, help=summary(item.help) or None))
            else:  # file, dir, free text: the shell completes `value` after the prefix
                out.append(CompletionItem(text, type=item.type, prefix=prefix))
        return out


def _merge_equals(words: Sequence[str], cword: int) -> tuple[list[str], int]:
    """Glue bash's ``--opt``, ``=``, ``value`` back into ``--opt=value`` (up to
    the cursor's word); the merged words and the cursor's index in them."""
    out: list[str] = []
    glue = False
    for i, word in enumerate(words[: cword + 1]):
        if word == "=" and out and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] += "="
            glue = i < cword
        elif glue:
            out[-1] += word
            glue = False
        else:
            out.append(word)
    return out, len(out) - 1 if cword < len(words) else len(out)


class HolonBash(_Holon, BashComplete):
    shows_help = False

    def _words(self) -> tuple[list[str], int]:
        return split_arg_string(os.environ["COMP_WORDS"]), int(os.environ["COMP_CWORD"])

    def word(self) -> str:
        words, cword = self._words()
        return words[cword] if 0 <= cword < len(words) else ""

    def get_completion_args(self) -> tuple[list[str], str]:
        words, cword = _merge_equals(*self._words())
        current = words[cword] if cword < len(words) else ""
        return words[1:cword], "" if current == "=" else current

    def format_completion(self, item: Item) -> str:
        return f"{item.type},{item.value if item.type == 'plain' else item.prefix}"


class HolonZsh(_Holon, ZshComplete):
    def word(self) -> str:
        words, cword = split_arg_string(os.environ["COMP_WORDS"]), int(os.environ["COMP_CWORD"])
        return words[cword] if 0 <= cword < len(words) else ""

    def format_completion(self, item: Item) -> str:
        if item.type != "plain":
            return f"{item.type}\n{item.prefix or NO_PREFIX}\n_"
        if not item.help:
            return f"plain\n{item.value}\n_"
        return "plain\n{}\n{}".format(item.value.replace(":", r"\:"), item.help)


class HolonFish(_Holon, FishComplete):
    def word(self) -> str:
        token = os.environ["COMP_CWORD"]
        return split_arg_string(token)[0] if token else ""

    def format_completion(self, item: Item) -> str:
        if item.type != "plain":
            return f"{item.type},{item.prefix or ''},{item.value}"
        return f"plain,{item.value}\t{item.help}" if item.help else f"plain,{item.value}"


CLASSES: dict[str, type[_Holon]] = {"bash": HolonBash, "zsh": HolonZsh, "fish": HolonFish}


def complete(cli: click.Command, instruction: str) -> int:
    """Answer ``_HOLON_COMPLETE=INSTRUCTION``: ``SHELL_complete`` prints the
    completions of the words in the environment, ``SHELL_source`` the script.
    An unknown instruction is exit 1 (a script from another version)."""
    shell, _, action = instruction.partition("_")
    cls = CLASSES.get(shell)
    if cls is None or action not in ("complete", "source"):
        click.echo(f"holon: unknown completion instruction {instruction!r}", err=True)
        return 1
    if action == "source":
        click.echo(source(shell), nl=False)
        return 0
    out = cls(cli, {}, PROG, COMPLETE_VAR).complete()
    click.echo(out, nl=bool(out))
    return 0


# -- the scripts --------------------------------------------------------------------


def source(shell: str) -> str:
    """The activation script for ``shell``, exactly as ``completions/`` holds it."""
    if shell not in _SCRIPTS:
        raise ValueError(f"unknown shell {shell!r}: use one of {', '.join(SHELLS)}")
    return _SCRIPTS[shell]


_BASH = r"""# bash completion for holon                                   -*- shell-script -*-
# Generated by holon_cli/cli/completion_shells.py; do not edit.
# Each TAB asks holon itself (_HOLON_COMPLETE=bash_complete), so live ids
# complete: `holon agent status al<TAB>` offers your agents. Load it with one of
#   eval "$(holon completion bash)"                           # in ~/.bashrc
#   holon completion bash > ~/.local/share/bash-completion/completions/holon

# compopt exists in bash 4 and later only
_holon_compopt() {
    type compopt > /dev/null 2>&1 && compopt "$@" 2> /dev/null
    return 0
}

# _holon_reply COMPGEN-ARGS...: add compgen's matches, one a line, to COMPREPLY
_holon_reply() {
    local match
    while IFS= read -r match; do
        [[ -n $match ]] && COMPREPLY+=("$match")
    done <<< "$(compgen "$@")"
}

# _holon_completion: the completion function (complete -F). holon answers one
# line per item: plain,WORD (a value), file,PREFIX or dir,PREFIX (the shell
# completes a path after PREFIX, e.g. --plan-file=), any,PREFIX (free text:
# file names, the shell's default). Nothing at all: nothing goes there.
_holon_completion() {
    local cur=${COMP_WORDS[COMP_CWORD]} kind=none line value response IFS=$'\n'
    COMPREPLY=()
    # bash splits --opt=value at '=': right after it, the word is '='
    if [[ $cur == '=' ]]; then cur=''; fi
    response=$(COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD=$COMP_CWORD \
        _HOLON_COMPLETE=bash_complete "$1" 2> /dev/null) || return 0
    for line in $response; do
        kind=${line%%,*} value=${line#*,}
        case $kind in
        plain) COMPREPLY+=("$value") ;;
        file) _holon_compopt -o filenames; _holon_reply -f -P "$value" -- "${cur#"$value"}" ;;
        dir) _holon_compopt -o filenames; _holon_reply -d -P "$value" -- "${cur#"$value"}" ;;
        esac
    done
    # free text falls back to file names (complete -o default); nothing else does
    if [[ $kind != any ]]; then _holon_compopt +o default; fi
    return 0
}

complete -o default -F _holon_completion holon
"""

_ZSH = r"""#compdef holon
# zsh completion for holon
# Generated by holon_cli/cli/completion_shells.py; do not edit.
# Each TAB asks holon itself (_HOLON_COMPLETE=zsh_complete), so live ids
# complete: `holon agent status al<TAB>` offers your agents. Load it with one of
#   eval "$(holon completion zsh)"          # in ~/.zshrc, after compinit
#   holon completion zsh > ~/.zfunc/_holon  # a directory on $fpath, before compinit

# holon answers three lines per item: TYPE, KEY, DESCRIPTION. plain: KEY is a
# value (DESCRIPTION _ for none); file, dir, any (free text: file names): KEY
# is the text before the path in the word (--plan-file=), or _ for none.
_holon_completion() {
    local -a response described plain
    local kind key descr
    (( $+commands[holon] )) || return 1
    response=("${(@f)$(COMP_WORDS="${words[*]}" COMP_CWORD=$((CURRENT - 1)) \
        _HOLON_COMPLETE=zsh_complete holon 2> /dev/null)}")
    for kind key descr in "${response[@]}"; do
        case $kind in
        plain)
            if [[ $descr == _ ]]; then plain+=("$key"); else described+=("$key:$descr"); fi ;;
        file|dir|any)
            if [[ $key != _ ]]; then compset -P '*='; fi
            if [[ $kind == dir ]]; then _files -/; else _files; fi ;;
        esac
    done
    if (( $#described )); then _describe -V holon described -U; fi
    if (( $#plain )); then compadd -U -V holon -a plain; fi
}

compdef _holon_completion holon
if (( $+compstate )); then
    # run as the completion function _holon (autoloaded from $fpath): a TAB
    # is waiting, so complete it too (later TABs call _holon_completion)
    _holon_completion "$@"
fi
"""

_FISH = r"""# fish completion for holon
# Generated by holon_cli/cli/completion_shells.py; do not edit.
# Each TAB asks holon itself (_HOLON_COMPLETE=fish_complete), so live ids
# complete: `holon agent status al<TAB>` offers your agents. Install it with
#   holon completion fish > ~/.config/fish/completions/holon.fish

# holon answers one line per item: plain,VALUE[<tab>DESCRIPTION], or
# file,PREFIX,PATH / dir,PREFIX,PATH / any,PREFIX,TEXT (free text: file names)
# where PREFIX is the text before the path in the token (--plan-file=).
function __holon_complete
    set -l response (env _HOLON_COMPLETE=fish_complete COMP_WORDS=(commandline -cp) \
        COMP_CWORD=(commandline -ct) holon 2> /dev/null)
    for line in $response
        set -l kind (string replace -r ',.*' '' -- $line)
        set -l rest (string replace -r '^[^,]*,' '' -- $line)
        switch $kind
            case plain
                printf '%s\n' $rest
            case file any dir
                set -l prefix (string replace -r ',.*' '' -- $rest)
                set -l value (string replace -r '^[^,]*,' '' -- $rest)
                set -l paths
                if test $kind = dir
                    set paths (__fish_complete_directories $value)
                else
                    set paths (__fish_complete_path $value)
                end
                for p in $paths
                    printf '%s%s\n' $prefix $p
                end
        end
    end
end

complete -c holon -f -a '(__holon_complete)'
"""

_SCRIPTS = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}
