"""Static shell completion scripts (bash, zsh, fish) generated from the click tree.

Owns the rendering of the completion spec (``completion_tree.py``'s
:func:`~holon_cli.cli.completion_tree.command_tree`) as shell code
(:func:`render`).
Imported only by ``holon completion`` and ``scripts/gen_docs.py``.

Invariants:

- The scripts are plain shell: pressing TAB never starts Python and never uses
  click's completion protocol, so they work the same with every click version.
- The text depends only on the command tree (no version, no date, subcommands
  sorted, options in declaration order), so a drift test can compare it with
  the committed ``completions/``.
- The command path is resolved the same way in every shell: words are matched
  against the subcommands of the current group, and the word after an option
  that takes a value is that value, never a command (hidden options included).
- Only names and values that need no quoting in any shell are emitted; anything
  else is a :class:`ValueError` at generation time, not a broken script.
"""

from __future__ import annotations

from collections.abc import Sequence

from holon_cli.cli.completion_tree import PROG, CommandSpec, Values, command_tree

SHELLS = ("bash", "zsh", "fish")


# -- bash (and zsh through bashcompinit) ----------------------------------------------


def _sq(text: str) -> str:
    """Single-quoted for sh; names and values are checked to need no escaping."""
    return "'" + text.replace("'", "'\\''") + "'"


def _bash_value_arm(patterns: list[str], values: Values) -> str:
    body = f"kind={values.kind}"
    if values.kind == "words":
        body += f" vals={_sq(' '.join(values.words))}"
    return f"    {'|'.join(patterns)}) {body} ;;"


def _bash_functions(tree: CommandSpec, main: str) -> str:
    commands: list[str] = []
    values: list[str] = []
    for spec in tree.walk():
        fixed = len(spec.slots)
        settings = [
            (var, text)
            for var, text in (
                ("cmds", " ".join(s.name for s in spec.subcommands)),
                ("opts", " ".join(n for o in spec.visible_options() for n in o.names)),
                ("vopts", " ".join(spec.value_options())),
                ("nargs", f"{fixed}+" if spec.rest.kind != "none" else str(fixed) if fixed else ""),
            )
            if text
        ]
        commands.append(f"    {_sq(spec.key)})")
        commands += [f"        {var}={_sq(text)}" for var, text in settings]
        commands.append("        ;;")
        for opt in spec.options:
            if opt.takes_value and opt.values.kind != "any":
                values.append(
                    _bash_value_arm([_sq(f"{spec.key}:{n}") for n in opt.names], opt.values)
                )
        for i, slot in enumerate(spec.slots):
            if slot.kind != "any":
                values.append(_bash_value_arm([_sq(f"{spec.key}:#{i}")], slot))
        if spec.rest.kind not in ("any", "none"):
            values.append(_bash_value_arm([_sq(f"{spec.key}:#+")], spec.rest))
    return _BASH_FUNCTIONS.format(main=main, commands="\n".join(commands), values="\n".join(values))


_BASH_FUNCTIONS = r"""# _holon_command PATH: for the command PATH ("" is holon itself) set cmds (its
# subcommands), opts (its options), vopts (its options that take a value) and
# nargs (how many positional values it takes; N+ is N, then any number more).
_holon_command() {{
    cmds='' opts='' vopts='' nargs=0
    case $1 in
{commands}
    esac
}}

# _holon_values PATH OPTION, _holon_values PATH '#'INDEX: set kind (and vals) for
# the value of OPTION, or of positional value INDEX (from 0; + for those beyond
# the fixed ones), of the command PATH.
# kind: words (vals), file, dir, none (nothing goes there) or any (free text).
_holon_values() {{
    kind=any vals=''
    case $1:$2 in
{values}
    esac
}}

# _holon_reply COMPGEN-ARGS...: add compgen's matches, one a line, to COMPREPLY
_holon_reply() {{
    local match
    while IFS= read -r match; do
        [[ -n $match ]] && COMPREPLY+=("$match")
    done <<< "$(compgen "$@")"
}}

# compopt exists in bash 4 and later only (not in bash 3, nor in zsh's bashcompinit)
_holon_compopt() {{
    type compopt > /dev/null 2>&1 && compopt "$@" 2> /dev/null
    return 0
}}

# {main}: the completion function (complete -F). Resolves the command path from
# COMP_WORDS before the cursor, skipping option values, then completes the word
# at COMP_CWORD: an option's value, an option, a subcommand or an argument.
{main}() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} word cmdpath='' pending='' prefix=''
    local i arg=0 dashdash=0 cmds opts vopts nargs kind vals
    COMPREPLY=()
    _holon_command ''
    for (( i = 1; i < COMP_CWORD; i++ )); do
        word=${{COMP_WORDS[i]}}
        if [[ -n $pending ]]; then
            # the option's value; bash splits --opt=value into --opt, =, value
            if [[ $word != '=' ]]; then pending=''; fi
        elif (( dashdash )); then
            arg=$((arg + 1))
        elif [[ $word == '--' ]]; then
            dashdash=1
        elif [[ $word == -?* ]]; then
            if [[ " $vopts " == *" $word "* ]]; then pending=$word; fi
        elif [[ -n $cmds && " $cmds " == *" $word "* ]]; then
            cmdpath=${{cmdpath:+$cmdpath }}$word
            _holon_command "$cmdpath"
        else
            arg=$((arg + 1)) cmds=''
        fi
    done

    if [[ -n $pending ]]; then
        if [[ $cur == '=' ]]; then cur=''; fi
        _holon_values "$cmdpath" "$pending"
    elif (( ! dashdash )) && [[ $cur == --?*=* ]]; then
        # --opt=value as one word (zsh, or a COMP_WORDBREAKS without =)
        prefix=${{cur%%=*}}=
        kind=none
        if [[ " $vopts " == *" ${{cur%%=*}} "* ]]; then
            _holon_values "$cmdpath" "${{cur%%=*}}"
        fi
        cur=${{cur#*=}}
    elif (( ! dashdash )) && [[ $cur == -* ]]; then
        kind=words vals=$opts
    elif [[ -n $cmds ]]; then
        kind=words vals=$cmds
    elif (( arg < ${{nargs%+}} )); then
        _holon_values "$cmdpath" "#$arg"
    elif [[ $nargs == *+ ]]; then
        _holon_values "$cmdpath" '#+'
    else
        kind=none
    fi

    case $kind in
    words) _holon_reply -W "$vals" -P "$prefix" -- "$cur" ;;
    file) _holon_compopt -o filenames; _holon_reply -f -P "$prefix" -- "$cur" ;;
    dir) _holon_compopt -o filenames; _holon_reply -d -P "$prefix" -- "$cur" ;;
    esac
    # free text falls back to file names (complete -o default); nothing else does
    if [[ $kind != any ]]; then _holon_compopt +o default; fi
    return 0
}}
"""

_BASH_HEADER = """\
# bash completion for holon                                   -*- shell-script -*-
# Generated by holon_cli/cli/completion_gen.py from the click command tree; do not edit.
# Static: pressing TAB never starts Python. Load it with one of
#   eval "$(holon completion bash)"                           # in ~/.bashrc
#   cp completions/holon.bash ~/.local/share/bash-completion/completions/holon

"""

_ZSH_HEADER = """\
#compdef holon
# zsh completion for holon
# Generated by holon_cli/cli/completion_gen.py from the click command tree; do not edit.
# Static: pressing TAB never starts Python. The bash completion function, run
# through zsh's bashcompinit. Load it with one of
#   eval "$(holon completion zsh)"          # in ~/.zshrc, after compinit
#   holon completion zsh > ~/.zfunc/_holon  # a directory on $fpath, before compinit

autoload -U +X bashcompinit && bashcompinit

"""

_ZSH_FOOTER = """
complete -o default -F _holon_bash holon

# Autoloaded from $fpath as _holon: this run is the first TAB, so complete it too.
if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
    _bash_complete -o default -F _holon_bash
fi
"""


def render_bash(tree: CommandSpec) -> str:
    return (
        _BASH_HEADER + _bash_functions(tree, "_holon") + f"\ncomplete -o default -F _holon {PROG}\n"
    )


def render_zsh(tree: CommandSpec) -> str:
    # the bash function is not named _holon: that is the name zsh autoloads this file as
    return _ZSH_HEADER + _bash_functions(tree, "_holon_bash") + _ZSH_FOOTER


# -- fish ---------------------------------------------------------------------------


def _fq(text: str) -> str:
    """Single-quoted for fish, where \\ and ' are the escapes inside quotes."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_words(words: Sequence[str]) -> str:
    return _fq(" ".join(words))


def _fish_values(values: Values) -> list[str]:
    """complete flags for a value (of an option or a positional argument)."""
    if values.kind == "words":
        return ["-f", "-a", _fish_words(values.words)]
    if values.kind == "file":
        return ["-F"]
    if values.kind == "dir":
        return ["-f", "-a", _fq("(__fish_complete_directories)")]
    if values.kind == "none":
        return ["-f"]
    return []


def _fish_cond(spec: CommandSpec, index: str | None = None) -> str:
    # command names and indexes are checked to need no escaping in either quote
    args = [f"'{spec.key}'"] + ([index] if index is not None else [])
    return '"' + " ".join(["__holon_is", *args]) + '"'


def _fish_line(*parts: str) -> str:
    return " ".join(["complete", "-c", PROG, *parts])


def _fish_state(tree: CommandSpec) -> str:
    arms: list[str] = []
    for spec in tree.walk():
        if not spec.path:
            continue
        sets = [
            f"                    set {var} {' '.join(names)}"
            for var, names in (
                ("cmds", [s.name for s in spec.subcommands]),
                ("vopts", spec.value_options()),
            )
            if names
        ]
        if sets:
            arms += [f"                case {_fq(spec.key)}", *sets]
    return _FISH_IS.format(
        cmds="".join(" " + s.name for s in tree.subcommands),
        vopts="".join(" " + n for n in tree.value_options()),
        arms="\n".join(arms),
    )


_FISH_IS = r"""# __holon_is PATH [INDEX]: whether the command line before the cursor is at the
# command PATH ('' is holon itself) and, with INDEX, whether the word being
# completed is its positional argument INDEX (from 0; N+ is N or later).
# The word after an option that takes a value is that value, never a command.
function __holon_is
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l cmdpath
    set -l cmds{cmds}
    set -l vopts{vopts}
    set -l nargs 0
    set -l pending 0
    set -l dashdash 0
    for t in $tokens
        if test $pending = 1
            set pending 0
        else if test $dashdash = 1
            set nargs (math $nargs + 1)
        else if test "$t" = --
            set dashdash 1
        else if string match -q -- '-?*' $t
            contains -- $t $vopts; and set pending 1
        else if test $nargs = 0; and contains -- $t $cmds
            set -a cmdpath $t
            set cmds
            set vopts
            switch "$cmdpath"
{arms}
            end
        else
            set nargs (math $nargs + 1)
            set cmds
        end
    end
    test "$cmdpath" = "$argv[1]"; or return 1
    set -q argv[2]; or return 0
    test $pending = 0; or return 1
    if string match -q -- '*+' $argv[2]
        test $nargs -ge (string trim -r -c + -- $argv[2])
    else
        test $nargs = $argv[2]
    end
end
"""

_FISH_HEADER = """\
# fish completion for holon
# Generated by holon_cli/cli/completion_gen.py from the click command tree; do not edit.
# Static: pressing TAB never starts Python. Install it with
#   holon completion fish > ~/.config/fish/completions/holon.fish

"""


def render_fish(tree: CommandSpec) -> str:
    lines: list[str] = [_fish_state(tree)]
    for spec in tree.walk():
        lines.append(f"# holon {spec.key}".rstrip())
        for opt in spec.visible_options():
            parts = ["-n", _fish_cond(spec)]
            for n in opt.names:
                if n.startswith("--"):
                    parts += ["-l", n[2:]]
                elif len(n) == 2:
                    parts += ["-s", n[1:]]
                else:
                    parts += ["-o", n[1:]]
            if opt.takes_value:
                parts.append("-r")
                parts += _fish_values(opt.values)
            if opt.help:
                parts += ["-d", _fq(opt.help)]
            lines.append(_fish_line(*parts))
        if spec.is_group:
            for sub in spec.subcommands:
                parts = ["-f", "-n", _fish_cond(spec, "0"), "-a", sub.name]
                if sub.help:
                    parts += ["-d", _fq(sub.help)]
                lines.append(_fish_line(*parts))
            lines.append(_fish_line("-f", "-n", _fish_cond(spec, "1+")))
        else:
            for i, slot in enumerate(spec.slots):
                if slot.kind != "any":
                    lines.append(_fish_line("-n", _fish_cond(spec, str(i)), *_fish_values(slot)))
            if spec.rest.kind != "any":
                index = f"{len(spec.slots)}+"
                lines.append(_fish_line("-n", _fish_cond(spec, index), *_fish_values(spec.rest)))
        lines.append("")
    return _FISH_HEADER + "\n".join(lines)


# -- entry point ----------------------------------------------------------------------


def render(shell: str, tree: CommandSpec | None = None) -> str:
    """The completion script for ``shell`` (one of :data:`SHELLS`), ending in a newline."""
    tree = command_tree() if tree is None else tree
    if shell == "bash":
        return render_bash(tree)
    if shell == "zsh":
        return render_zsh(tree)
    if shell == "fish":
        return render_fish(tree)
    raise ValueError(f"unknown shell {shell!r}: use one of {', '.join(SHELLS)}")
