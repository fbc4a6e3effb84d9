"""Shell completion: the static scripts of holon_cli/cli/completion_gen.py (over
the spec of completion_tree.py).

The committed completions/ are run in real shells: bash always (its function
called with COMP_WORDS, and through readline on a pty), fish and zsh when they
are installed. Nothing here depends on the click version: the scripts never
call back into Python.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import click
import pytest

from holon_cli.cli.completion_gen import SHELLS, render
from holon_cli.cli.completion_tree import EXTRA_CHOICES, CommandSpec, command_tree, summary
from holon_cli.model.envelope import MESSAGE_KINDS, PRIORITIES

REPO = Path(__file__).resolve().parents[2]
BASH_FILE = REPO / "completions" / "holon.bash"
ZSH_FILE = REPO / "completions" / "_holon"
FISH_FILE = REPO / "completions" / "holon.fish"

needs_fish = pytest.mark.skipif(shutil.which("fish") is None, reason="fish not installed")
needs_zsh = pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh not installed")

ROOT_COMMANDS = sorted(
    ["enqueue", "turn", "tick", "run", "status", "tail", "transcript"]
    + ["agent", "workitem", "task", "serve", "daemon", "home", "debug", "completion", "queue"]
    + ["timer", "trigger", "skills", "memory", "workspace"]
)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A current directory with known files, for file and directory completion.

    The shells find a `holon` on PATH that only records that it ran: completing
    must never run it (nor Python)."""
    d = tmp_path / "cwd"
    (d / "sub").mkdir(parents=True)
    (d / "src").mkdir()
    (d / "plan.md").write_text("# plan\n")
    (d / "notes.txt").write_text("notes\n")
    fakebin, ran = tmp_path / "fakebin", tmp_path / "holon-ran"
    fakebin.mkdir()
    for name in ("holon", "python", "python3"):
        (fakebin / name).write_text(
            f'#!/bin/sh\necho {name} "$@" >> {shlex.quote(str(ran))}\nexit 1\n'
        )
        (fakebin / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fakebin}{os.pathsep}{os.environ.get('PATH', '')}")
    yield d
    assert not ran.exists(), f"completion ran a program: {ran.read_text()}"


def shell_env() -> dict[str, str]:
    # HOME is a temp dir (conftest): no user rc files
    return {**os.environ, "INPUTRC": "/dev/null", "TERM": "dumb"}


# -- bash: the completion function with COMP_WORDS ------------------------------------


def bash_complete(words: Sequence[str], cwd: Path, script: Path = BASH_FILE) -> list[str]:
    """Call _holon as bash does for the cursor at the end of ``words`` (the last
    word is the one being completed); return COMPREPLY, sorted."""
    src = "\n".join(
        [
            f"source {shlex.quote(str(script))}",
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})",
            f"COMP_CWORD={len(words) - 1}",
            "_holon",
            "printf '%s\\n' \"${COMPREPLY[@]}\"",
        ]
    )
    res = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", src],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=shell_env(),
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    return sorted(ln for ln in res.stdout.splitlines() if ln)


BASH_CASES: list[tuple[list[str], list[str]]] = [
    (["holon", ""], ROOT_COMMANDS),
    (["holon", "en"], ["enqueue"]),
    (["holon", "-"], ["--help", "--version", "-V", "-h"]),
    (["holon", "agent", "c"], ["create"]),
    (["holon", "agent", "st"], ["start", "status", "stop"]),
    (["holon", "home", ""], ["check", "init", "path"]),
    (["holon", "debug", ""], ["latency", "prompt", "providers"]),
    (["holon", "workitem", "p"], ["path", "pick"]),
    (["holon", "enqueue", "--priority", ""], sorted(PRIORITIES)),
    (["holon", "enqueue", "-p", "n"], ["next", "normal"]),
    # bash splits --priority=ne into --priority, =, ne
    (["holon", "enqueue", "--priority", "="], sorted(PRIORITIES)),
    (["holon", "enqueue", "--priority", "=", "ne"], ["next"]),
    (["holon", "enqueue", "--priority=ne"], ["--priority=next"]),
    (["holon", "enqueue", "--kind", "t"], ["task_result", "task_status", "timer_tick"]),
    (["holon", "enqueue", "-k", ""], sorted(MESSAGE_KINDS)),
    (["holon", "enqueue", "--agent", "main", "--pri"], ["--priority"]),
    # "workitem" is the value of --agent, not the workitem group
    (["holon", "enqueue", "--agent", "workitem", "--pri"], ["--priority"]),
    (["holon", "enqueue", "--agent", "workitem", ""], []),
    (
        ["holon", "workitem", "list", "--filter", ""],
        sorted(["all", "current", "open", "queued", "blocked", "completed"]),
    ),
    (["holon", "workitem", "list", "--agent", "list", "--filter", "c"], ["completed", "current"]),
    (["holon", "workitem", "update", "x", "--plan-status", ""], ["draft", "needs_input", "ready"]),
    (["holon", "completion", ""], ["bash", "fish", "zsh"]),
    (["holon", "completion", "z"], ["zsh"]),
    (["holon", "completion", "bash", ""], []),
    (
        ["holon", "agent", "create", "bot", "-"],
        ["--help", "--json", "--model", "--template", "-h", "-m", "-t"],
    ),
    # a hidden option is not offered, but its value is still skipped
    (["holon", "tail", "--p"], []),
    (["holon", "tail", "--poll", "1", "--l"], ["--limit"]),
    (["holon", "run", "--cwd", ""], ["src", "sub"]),
    (["holon", "run", "--workspace-root", "su"], ["sub"]),
    (["holon", "workitem", "create", "--plan-file", "p"], ["plan.md"]),
    (["holon", "workitem", "create", "--plan-file", ""], ["notes.txt", "plan.md", "src", "sub"]),
    # after --, everything is an argument
    (["holon", "enqueue", "--", "-"], []),
]


@pytest.mark.parametrize(
    ("words", "expected"), BASH_CASES, ids=[" ".join(w) for w, _ in BASH_CASES]
)
def test_bash_completes(words: list[str], expected: list[str], workdir: Path) -> None:
    assert bash_complete(words, workdir) == expected


def test_bash_root_commands_are_the_registered_commands(workdir: Path) -> None:
    from holon_cli.cli import COMMANDS

    assert bash_complete(["holon", ""], workdir) == sorted(COMMANDS)


def pty_session(argv: list[str], setup: str, lines: Sequence[str], cwd: Path) -> list[str]:
    """Type each line plus TAB into an interactive shell on a pty; return the
    command line after completion (read back by echoing it)."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(cwd)
        os.execvpe(argv[0], argv, {**shell_env(), "PS1": "> "})

    def read_until(pattern: bytes, timeout: float) -> bytes:
        buf, end = b"", time.monotonic() + timeout
        while time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                buf += chunk
                if re.search(pattern, buf):
                    break
        return buf

    out: list[str] = []
    try:
        os.write(fd, setup.encode() + b"\n")
        os.write(fd, b"echo READ''Y\n")
        read_until(rb"READY", 20)
        for line in lines:
            os.write(fd, line.encode() + b"\t")
            time.sleep(0.3)
            # Ctrl-A: prepend an echo ("RES""ULT": the echo of the typing never matches)
            os.write(fd, b'\x01echo "RES""ULT:{\x05}"\n')
            m = re.search(rb"RESULT:\{(.*?)\}", read_until(rb"RESULT:\{.*?\}", 10))
            out.append(m.group(1).decode().rstrip() if m else "<no answer>")
        os.write(fd, b"exit\n")
        read_until(rb"$^", 2)
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return out


@pytest.mark.slow
def test_bash_readline_completion_on_a_pty(workdir: Path) -> None:
    """Through readline: complete -o default, compopt -o filenames / +o default."""
    lines = {
        "holon en": "holon enqueue",
        "holon agent cr": "holon agent create",
        "holon enqueue --priority ba": "holon enqueue --priority background",
        "holon enqueue --priority=ba": "holon enqueue --priority=background",
        # free text (TEXT) falls back to file names
        "holon enqueue --agent workitem no": "holon enqueue --agent workitem notes.txt",
        # a directory option: directories only, with the slash of -o filenames
        "holon run --cwd su": "holon run --cwd sub/",
        # a command without arguments: no file-name fallback
        "holon status no": "holon status no",
        "holon completion f": "holon completion fish",
    }
    got = pty_session(
        ["bash", "--norc", "--noprofile", "-i"],
        f"source {shlex.quote(str(BASH_FILE))}",
        list(lines),
        workdir,
    )
    assert got == list(lines.values())


# -- zsh ----------------------------------------------------------------------------

ZSH_DRIVER = r"""
# zsh -f driver MODE SCRIPT LINE...: type each LINE and TAB into an interactive
# zsh on a pty and print the command line after completion, one per LINE.
zmodload zsh/zpty
mode=$1 script=$2; shift 2
zpty z zsh -f -i
zpty -w z 'PS1="> "; unsetopt beep'
if [[ $mode == fpath ]]; then
  zpty -w z "fpath=(${script:h} \$fpath); autoload -U compinit; compinit -u -D"
else
  zpty -w z "autoload -U compinit; compinit -u -D; eval \"\$(<$script)\""
fi
for line in "$@"; do
  zpty -w -n z "$line"$'\t'
  sleep 0.3
  zpty -w -n z $'\C-aprint -r -- "${:-RES}ULT:{\C-e}"\n'
  out=
  for i in {1..200}; do
    while zpty -r -t z chunk; do out+=$chunk; done
    [[ $out == *RESULT:\{*\}* ]] && break
    sleep 0.05
  done
  if [[ $out == *RESULT:\{*\}* ]]; then
    print -r -- "${${${out##*RESULT:\{}%%\}*}% }"
  else
    print -r -- "<no answer>"
  fi
done
zpty -d z
"""

ZSH_LINES = {
    "holon en": "holon enqueue",
    "holon agent cr": "holon agent create",
    "holon enqueue --priority ba": "holon enqueue --priority background",
    "holon enqueue --priority=ba": "holon enqueue --priority=background",
    "holon enqueue --agent workitem no": "holon enqueue --agent workitem notes.txt",
    "holon workitem list --filter compl": "holon workitem list --filter completed",
    "holon completion f": "holon completion fish",
    "holon run --cwd su": "holon run --cwd sub",
}


@needs_zsh
def test_zsh_script_parses() -> None:
    res = subprocess.run(["zsh", "-n", str(ZSH_FILE)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr


@needs_zsh
def test_zsh_script_registers_through_bashcompinit(workdir: Path) -> None:
    src = (
        f"autoload -U compinit && compinit -u -D; source {shlex.quote(str(ZSH_FILE))}; "
        "print -r -- $_comps[holon]"
    )
    res = subprocess.run(
        ["zsh", "-f", "-c", src],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=shell_env(),
        timeout=30,
    )
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.split() == ["_bash_complete", "-o", "default", "-F", "_holon_bash"]


@needs_zsh
@pytest.mark.parametrize("mode", ["eval", "fpath"])
def test_zsh_completes_interactively(mode: str, workdir: Path, tmp_path: Path) -> None:
    """Real zsh line editing on a pty, with the script eval'ed or autoloaded from
    $fpath (where the first TAB loads the file and must complete already)."""
    fpath = tmp_path / "fpath"
    fpath.mkdir()
    shutil.copy(ZSH_FILE, fpath / "_holon")
    driver = tmp_path / "driver.zsh"
    driver.write_text(ZSH_DRIVER)
    res = subprocess.run(
        ["zsh", "-f", str(driver), mode, str(fpath / "_holon"), *ZSH_LINES],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=shell_env(),
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == list(ZSH_LINES.values())


# -- fish ---------------------------------------------------------------------------


def fish_complete(line: str, cwd: Path) -> list[tuple[str, str]]:
    src = f"source {shlex.quote(str(FISH_FILE))}; complete -C{shlex.quote(line)}"
    res = subprocess.run(
        ["fish", "--no-config", "-c", src],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=shell_env(),
        timeout=30,
    )
    assert res.returncode == 0 and res.stderr == "", res.stderr
    pairs = [(ln.split("\t", 1) + [""])[:2] for ln in res.stdout.splitlines()]
    return sorted((value, desc) for value, desc in pairs)


FISH_CASES: list[tuple[str, list[str]]] = [
    ("holon ", ROOT_COMMANDS),
    ("holon en", ["enqueue"]),
    ("holon agent c", ["create"]),
    ("holon agent st", ["start", "status", "stop"]),
    ("holon agent foo ", []),
    ("holon enqueue --priority ", sorted(PRIORITIES)),
    ("holon enqueue -p n", ["next", "normal"]),
    ("holon enqueue --priority=n", ["--priority=next", "--priority=normal"]),
    ("holon enqueue --kind t", ["task_result", "task_status", "timer_tick"]),
    ("holon enqueue --agent main --pri", ["--priority"]),
    ("holon enqueue --agent workitem --pri", ["--priority"]),
    (
        "holon workitem list --filter ",
        sorted(["all", "current", "open", "queued", "blocked", "completed"]),
    ),
    ("holon workitem list --agent list --filter c", ["completed", "current"]),
    ("holon completion ", ["bash", "fish", "zsh"]),
    ("holon completion bash ", []),
    ("holon tail --poll 1 --l", ["--limit"]),
    ("holon run --cwd ", ["src/", "sub/"]),
    ("holon workitem create --plan-file p", ["plan.md"]),
    # commands without arguments offer no file names; free text does
    ("holon status ", []),
    ("holon enqueue --agent workitem ", ["notes.txt", "plan.md", "src/", "sub/"]),
]


@needs_fish
@pytest.mark.parametrize(("line", "expected"), FISH_CASES, ids=[c[0] for c in FISH_CASES])
def test_fish_completes(line: str, expected: list[str], workdir: Path) -> None:
    assert [value for value, _ in fish_complete(line, workdir)] == expected


@needs_fish
def test_fish_describes_commands_and_options(workdir: Path) -> None:
    got = dict(fish_complete("holon ", workdir))
    assert got["enqueue"] == "Admit a message into an agent's queue and print its id"
    assert got["home"] == "Manage the state home ($HOLON_HOME, default ~/.holon)"
    opts = dict(fish_complete("holon workitem update --", workdir))
    assert opts["--clear-todos"] == "Replace the todo list with an empty one"
    assert opts["--help"] == "Show this message and exit"


# -- the generator --------------------------------------------------------------------


def test_scripts_are_static_and_deterministic() -> None:
    from holon_cli import __version__

    for shell in SHELLS:
        text = render(shell)
        assert text == render(shell) and text.endswith("\n")
        assert "_HOLON_COMPLETE" not in text  # click's callback protocol
        # (that completing runs neither holon nor Python: the `workdir` fixture)
        assert __version__ not in text


def test_a_registered_command_without_its_module_fails_loudly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from holon_cli.cli import COMMANDS

    monkeypatch.setitem(COMMANDS, "ghost", "holon_cli.cli.cmd_ghost:ghost")
    with pytest.raises(ModuleNotFoundError, match="cmd_ghost"):
        command_tree()


def test_tree_loads_lazy_commands() -> None:
    tree = command_tree()
    keys = {spec.key for spec in tree.walk()}
    assert {
        "",
        "enqueue",
        "agent create",
        "workitem list",
        "home check",
        "debug prompt",
        "completion",
    } <= keys
    enqueue = next(s for s in tree.subcommands if s.name == "enqueue")
    assert enqueue.value_options()[:4] == ["--agent", "-a", "--kind", "-k"]
    assert "--json" not in enqueue.value_options()
    tail = next(s for s in tree.subcommands if s.name == "tail")
    assert "--poll" in tail.value_options()
    assert "--poll" not in [n for o in tail.visible_options() for n in o.names]


def test_extra_choices_must_name_a_value_option() -> None:
    with pytest.raises(ValueError, match="holon enqueue --nope"):
        command_tree(extra_choices={**EXTRA_CHOICES, ("enqueue", "--nope"): ("a",)})
    with pytest.raises(ValueError, match="takes no value"):
        command_tree(extra_choices={("enqueue", "--json"): ("a",)})
    # a command that is not in this build: nothing to check
    tree = command_tree(extra_choices={("ghost", "--x"): ("a",)})
    enqueue = next(s for s in tree.subcommands if s.name == "enqueue")
    assert all(o.values.kind == "any" for o in enqueue.options if o.takes_value)


def test_values_that_would_need_quoting_are_an_error() -> None:
    @click.command()
    @click.option("--mode", type=click.Choice(["fast", "very slow"]))
    def odd(mode: str) -> None: ...

    with pytest.raises(ValueError, match="'very slow'"):
        command_tree(odd, extra_choices={})


def test_summary_is_the_first_sentence() -> None:
    assert (
        summary("Mark it done (operator). Releases focus.\n\n  More.") == "Mark it done (operator)"
    )
    assert summary("Model ref, e.g. openai/gpt-4.1.") == "Model ref, e.g. openai/gpt-4.1"
    assert summary(
        "One scheduling pass: ingest,\n    wake, deliver.\n\n    \b\n    Example:\n"
    ) == ("One scheduling pass: ingest, wake, deliver")
    assert summary("\b\nverbatim\nblock\f hidden") == "verbatim block"
    assert summary(None) == "" and summary("") == ""


@pytest.fixture
def synthetic_tree() -> CommandSpec:
    """A tree with what holon does not use (yet): variadic Choice arguments, a
    --flag/--no-flag pair, a group without -h."""

    @click.group()
    def root() -> None: ...

    @root.command()
    @click.option("--out", "-o", type=click.Path(file_okay=False))
    @click.option("--color/--no-color")
    @click.option("--level", type=click.Choice(["low", "high"]))
    @click.argument("name")
    @click.argument("shells", nargs=-1, type=click.Choice(["bash", "zsh"]))
    def pick(out: str, color: bool, level: str, name: str, shells: tuple[str, ...]) -> None: ...

    return command_tree(root, extra_choices={})


def test_synthetic_tree_in_bash(synthetic_tree: CommandSpec, workdir: Path, tmp_path: Path) -> None:
    script = tmp_path / "synthetic.bash"
    script.write_text(render("bash", synthetic_tree))
    cases = [
        (["holon", ""], ["pick"]),
        (["holon", "-"], ["--help"]),
        (["holon", "pick", "--"], ["--color", "--help", "--level", "--no-color", "--out"]),
        (["holon", "pick", "--level", ""], ["high", "low"]),
        (["holon", "pick", "-o", ""], ["src", "sub"]),
        (["holon", "pick", "--no-color", "x", ""], ["bash", "zsh"]),
        (["holon", "pick", "x", "bash", "z"], ["zsh"]),
        (["holon", "pick", "--level", "low", "x", "zsh", ""], ["bash", "zsh"]),
    ]
    for words, expected in cases:
        assert bash_complete(words, workdir, script) == expected, words


@needs_fish
def test_synthetic_tree_in_fish(synthetic_tree: CommandSpec, workdir: Path, tmp_path: Path) -> None:
    script = tmp_path / "synthetic.fish"
    script.write_text(render("fish", synthetic_tree))
    for line, expected in [
        ("holon pick x ", ["bash", "zsh"]),
        ("holon pick x zsh b", ["bash"]),
        ("holon pick --no", ["--no-color"]),
    ]:
        src = f"source {shlex.quote(str(script))}; complete -C{shlex.quote(line)}"
        res = subprocess.run(
            ["fish", "--no-config", "-c", src],
            capture_output=True,
            text=True,
            cwd=workdir,
            timeout=30,
        )
        assert sorted(ln.split("\t")[0] for ln in res.stdout.splitlines()) == expected, line


def test_completion_command_prints_the_generated_script(script_runner) -> None:  # type: ignore[no-untyped-def]
    for shell in SHELLS:
        res = script_runner.run(["holon", "completion", shell])
        assert res.returncode == 0, res.stderr
        assert res.stdout == render(shell)
    res = script_runner.run(["holon", "completion", "--help"])
    assert "Example" in res.stdout and 'eval "$(holon completion bash)"' in res.stdout
