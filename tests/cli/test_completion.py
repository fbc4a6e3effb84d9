"""Shell completion: click's, through the scripts of cli/completion_shells.py,
with live ids from cli/completion_ids.py.

The committed completions/ run in real shells: bash always (the script
sourced, its function called with COMP_WORDS and COMP_CWORD, COMPREPLY read
back; and through readline on a pty), fish and zsh when they are installed.
Each TAB runs the real `holon` (the one next to this interpreter) against a
home with agents, work items, a task and timers, some of them damaged.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import click
import pytest

from holon_cli.cli.completion_shells import SHELLS, source, summary
from holon_cli.model.envelope import MESSAGE_KINDS, PRIORITIES
from tests.inprocess_cli import bind_runner, run  # noqa: F401  (bind_runner: autouse)

REPO = Path(__file__).resolve().parents[2]
BASH_FILE = REPO / "completions" / "holon.bash"
ZSH_FILE = REPO / "completions" / "_holon"
FISH_FILE = REPO / "completions" / "holon.fish"

needs_fish = pytest.mark.skipif(shutil.which("fish") is None, reason="fish not installed")
needs_zsh = pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh not installed")

ROOT_COMMANDS = sorted(
    ["enqueue", "turn", "tick", "run", "status", "tail", "transcript", "replay"]
    + ["agent", "workitem", "task", "serve", "daemon", "home", "debug", "completion", "queue"]
    + ["timer", "trigger", "skills", "memory", "workspace", "tui", "mcp", "usage"]
)


# -- a home with live ids -------------------------------------------------------------


class Live(NamedTuple):
    home: Path
    open1: str  # "Fix the flaky test", open
    open2: str  # "Write the release notes", open
    done: str  # completed
    timer: str  # active
    cancelled: str  # a cancelled timer
    task: str  # a finished command task
    ws: str  # a workspace attached to alpha-742 (not the active one)

    def fill(self, words: Sequence[str]) -> list[str]:
        return [w.format(**self._asdict()) for w in words]


# Runs in one child process (the commands in process, one interpreter start):
# `h(ARGS...)` is `holon ARGS` and returns its stdout.
SETUP = r"""
import contextlib, io, json, os, sys, time
from pathlib import Path
from holon_cli.cli import run
from holon_cli.runtime.agents.lifecycle import create_agent

def h(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run(list(args))
    assert code == 0, (args, code)
    return out.getvalue()

def new(*args):
    data = json.loads(h(*args, "--json"))["data"]
    return data["work_item"]["id"] if "work_item" in data else data["id"]

a = ("--agent", "alpha-742")
for agent in ("alpha-742", "beta", "broken", "gamma"):
    h("agent", "create", agent)
h("agent", "stop", "beta")
create_agent(
    "child-1",
    kind="child",
    visibility="private",
    ownership="parent_supervised",
    profile_preset="private_child",
    lineage_parent_agent_id="alpha-742",
)
ids = {
    "open1": new("workitem", "create", "Fix the flaky test", *a),
    "open2": new("workitem", "create", "Write the release notes", *a),
    "done": new("workitem", "create", "Ship it", *a),
    "timer": new("timer", "add", "--after", "1h", "--message", "check CI", *a),
    "cancelled": new("timer", "add", "--after", "2h", *a),
    "task": h("task", "run", *a, "--", "true").strip(),
}
h("workitem", "complete", ids["done"], "--report", "shipped", *a)
h("timer", "cancel", ids["cancelled"], *a)
# settled: ended, its result admitted and its supervisor gone (it still
# writes after the record says `completed`: its result, its last words; on a
# loaded machine that landed between a test's two looks at the home)
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.tasks import plane, procs
deadline = time.monotonic() + 90
while True:
    rec = plane.read_task(open_agent("alpha-742"), ids["task"])
    if (
        rec.get("status") == "completed"
        and rec.get("result_message_id")
        and not procs.identity_alive(rec.get("supervisor"))
    ):
        break
    assert time.monotonic() < deadline, ("the task did not settle", rec)
    time.sleep(0.05)
h("workitem", "create", "Gamma's item", "--agent", "gamma")
proj = Path(os.environ["HOLON_HOME"]).parent / "proj"
proj.mkdir()
ids["ws"] = json.loads(h("workspace", "use", str(proj), *a, "--json"))["data"]["workspace_id"]
h("workspace", "use", "agent_home", *a)
print(json.dumps(ids))
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    """alpha-742 (work items, timers, a task), beta (stopped), child-1 (private),
    broken (a record that is not JSON), delta (no record), gamma (a damaged
    work-item ledger), a staging folder and a stray file; no `main` agent."""
    home = tmp_path_factory.mktemp("live") / "holon-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLON_", "_HOLON", "COMP_"))}
    env["HOLON_HOME"] = str(home)
    res = subprocess.run(
        [sys.executable, "-c", SETUP], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    ids = json.loads(res.stdout.splitlines()[-1])
    agents = home / "agents"
    (agents / "broken" / ".holon" / "state" / "agent.json").write_text("{not json")
    ledger = agents / "gamma" / ".holon" / "ledger" / "work_items.jsonl"
    ledger.write_bytes(b"{torn in the middle\n" + ledger.read_bytes())
    (agents / "gamma" / ".holon" / "state" / "work_items.json").unlink(missing_ok=True)
    (agents / ".staging-zz").mkdir()
    (agents / "delta").mkdir()  # a folder without a record: damaged too
    (agents / "stray-file").write_text("")
    return Live(home=home, **ids)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: Live) -> Path:
    """A current directory with known files, for path completion; HOLON_HOME
    is the live home."""
    d = tmp_path / "cwd"
    (d / "sub").mkdir(parents=True)
    (d / "src").mkdir()
    (d / "plan.md").write_text("# plan\n")
    (d / "notes.txt").write_text("notes\n")
    monkeypatch.setenv("HOLON_HOME", str(live.home))
    monkeypatch.chdir(d)
    return d


def shell_env() -> dict[str, str]:
    # HOME is a temp dir (conftest): no user rc files
    return {**os.environ, "INPUTRC": "/dev/null", "TERM": "dumb"}


def home_state(home: Path) -> dict[str, tuple[int, int]]:
    """Every path under the home with its size and mtime."""
    out = {}
    for p in sorted(home.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(home))] = (st.st_size, st.st_mtime_ns)
    return out


# -- bash: the completion function with COMP_WORDS -------------------------------------

END = "@@end@@"


def bash_complete_many(
    cases: Sequence[Sequence[str]], cwd: Path, script: Path = BASH_FILE
) -> list[list[str]]:
    """Call _holon_completion as bash does for the cursor at the end of each
    case's words (the last word is the one being completed), all in one bash;
    each case's COMPREPLY, sorted."""
    lines = [f"source {shlex.quote(str(script))}"]
    for words in cases:
        lines += [
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})",
            f"COMP_CWORD={len(words) - 1}",
            "_holon_completion holon",
            f"printf '%s\\n' \"${{COMPREPLY[@]}}\" {END}",
        ]
    res = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", "\n".join(lines)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=shell_env(),
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    blocks = res.stdout.split(END + "\n")
    assert blocks[-1] == "" and len(blocks) == len(cases) + 1
    return [sorted(ln for ln in block.splitlines() if ln) for block in blocks[:-1]]


AGENTS = ["alpha-742", "beta", "child-1", "gamma"]  # `broken`, `delta` are damaged: skipped

BASH_CASES: list[tuple[list[str], list[str]]] = [
    (["holon", ""], ROOT_COMMANDS),
    (["holon", "en"], ["enqueue"]),
    (["holon", "-"], ["--help", "--version", "-V", "-h"]),
    (["holon", "agent", "c"], ["create"]),
    (["holon", "agent", "st"], ["start", "status", "stop"]),
    (["holon", "home", ""], ["audit", "check", "gc", "init", "path"]),
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
    # an option already given is not offered again
    (["holon", "enqueue", "--priority", "next", "--pri"], []),
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
    (["holon", "tail", "--po"], []),
    (["holon", "tail", "--poll", "1", "--l"], ["--limit"]),
    (["holon", "run", "--cwd", ""], ["src", "sub"]),
    (["holon", "run", "--workspace-root", "su"], ["sub"]),
    (["holon", "workitem", "create", "--plan-file", "p"], ["plan.md"]),
    (["holon", "workitem", "create", "--plan-file", ""], ["notes.txt", "plan.md", "src", "sub"]),
    (["holon", "workitem", "create", "--plan-file", "=", "p"], ["plan.md"]),
    (["holon", "workitem", "create", "--plan-file=p"], ["--plan-file=plan.md"]),
    # after --, everything is an argument (free text: the shell's default)
    (["holon", "enqueue", "--", "-"], []),
    # a flag takes no value
    (["holon", "enqueue", "--json=x"], []),
    # live ids: agents (damaged `broken`, the staging folder and the stray file left out)
    (["holon", "agent", "status", "al"], ["alpha-742"]),
    (["holon", "agent", "status", ""], AGENTS),
    (["holon", "agent", "rm", "c"], ["child-1"]),
    (["holon", "agent", "stop", "b"], ["beta"]),
    (["holon", "status", "--agent", ""], AGENTS),
    (["holon", "enqueue", "-a", "g"], ["gamma"]),
    (["holon", "enqueue", "--agent=al"], ["--agent=alpha-742"]),
    (["holon", "enqueue", "--agent", "=", "al"], ["alpha-742"]),
    (["holon", "turn", "--agent", "zz"], []),
    # work items of the --agent: open ones where only those make sense
    (["holon", "workitem", "pick", "--agent", "alpha-742", ""], ["{open1}", "{open2}"]),
    (["holon", "workitem", "complete", "-a", "alpha-742", "wi"], ["{open1}", "{open2}"]),
    (["holon", "workitem", "show", "--agent", "alpha-742", ""], ["{done}", "{open1}", "{open2}"]),
    (["holon", "workitem", "path", "-a", "alpha-742", "{open1}"], ["{open1}"]),
    (["holon", "enqueue", "-a", "alpha-742", "--work-item", ""], ["{open1}", "{open2}"]),
    (["holon", "timer", "add", "-a", "alpha-742", "--work-item", "wi"], ["{open1}", "{open2}"]),
    # the default agent does not exist (and completing does not create it)
    (["holon", "workitem", "show", ""], []),
    (["holon", "workitem", "show", "--agent", "broken", ""], []),
    (["holon", "workitem", "show", "--agent", "gamma", ""], []),
    (["holon", "workitem", "show", "--agent", "../etc", ""], []),
    # tasks and timers
    (["holon", "task", "status", "-a", "alpha-742", "task_"], ["{task}"]),
    (["holon", "task", "output", "-a", "alpha-742", ""], ["{task}"]),
    (["holon", "task", "stop", "-a", "alpha-742", ""], []),
    (["holon", "timer", "cancel", "-a", "alpha-742", ""], ["{timer}"]),
    # workspaces: the attached ids (and agent_home and directories for `use`)
    (["holon", "workspace", "detach", "-a", "alpha-742", "ws_"], ["{ws}"]),
    (["holon", "workspace", "detach", "-a", "alpha-742", ""], ["{ws}"]),
    (["holon", "workspace", "detach", "-a", "gamma", ""], []),
    (["holon", "workspace", "use", "-a", "alpha-742", ""], ["agent_home", "{ws}", "src", "sub"]),
    (["holon", "workspace", "use", "-a", "alpha-742", "ag"], ["agent_home"]),
    (["holon", "workspace", "use", "-a", "alpha-742", "su"], ["sub"]),
    # a command without arguments offers nothing
    (["holon", "status", "x"], []),
]


# one of each kind, for the quick run (each TAB is one `holon` process)
QUICK = {
    "holon ",
    "holon agent st",
    "holon enqueue --priority = ne",
    "holon enqueue --priority=ne",
    "holon enqueue --agent workitem --pri",
    "holon run --workspace-root su",
    "holon workitem create --plan-file=p",
    "holon agent status ",
    "holon enqueue --agent=al",
    "holon workitem complete -a alpha-742 wi",
    "holon workitem show --agent gamma ",
    "holon task status -a alpha-742 task_",
    "holon timer cancel -a alpha-742 ",
    "holon workspace use -a alpha-742 ",
    "holon status x",
}


@pytest.mark.slow
def test_bash_completes(workdir: Path, live: Live) -> None:
    """The cases of each kind, in one bash: commands, options, choices,
    --opt=value both ways, paths, live ids of every kind, damage."""
    table = [case for case in BASH_CASES if " ".join(case[0]) in QUICK]
    assert len(table) == len(QUICK)
    check_bash(table, workdir, live)


@pytest.mark.slow
def test_bash_completes_every_case(workdir: Path, live: Live) -> None:
    check_bash(BASH_CASES, workdir, live)


def check_bash(table: list[tuple[list[str], list[str]]], workdir: Path, live: Live) -> None:
    cases = [(live.fill(words), live.fill(expected)) for words, expected in table]
    before = home_state(live.home)
    got = bash_complete_many([w for w, _ in cases], workdir)
    wrong = {
        " ".join(words): (reply, expected)
        for (words, expected), reply in zip(cases, got, strict=True)
        if reply != sorted(expected)
    }
    assert wrong == {}
    assert home_state(live.home) == before  # nothing created, nothing rewritten


def test_bash_root_commands_are_the_registered_commands(workdir: Path) -> None:
    from holon_cli.cli import COMMANDS

    assert bash_complete_many([["holon", ""]], workdir) == [sorted(COMMANDS)]


def test_completing_takes_no_lock(workdir: Path, live: Live) -> None:
    """The agent lock, the work-item ledger's lock and the timers' lock held
    here (flock: another process would wait): completing still answers."""
    from holon_cli.store.layout import HomeLayout
    from holon_cli.store.locks import locked

    layout = HomeLayout(live.home).agent("alpha-742")
    locks = [
        layout.agent_lock,
        layout.ledger_lock("work_items"),
        layout.locks_dir / "timer_schedule.lock",
    ]
    for lock in locks:
        assert lock.exists(), lock
    with locked(locks[0]), locked(locks[1]), locked(locks[2]):
        got = bash_complete_many(
            [
                ["holon", "workitem", "pick", "-a", "alpha-742", ""],
                ["holon", "timer", "cancel", "-a", "alpha-742", ""],
                ["holon", "agent", "status", "al"],
            ],
            workdir,
        )
    assert got == [sorted([live.open1, live.open2]), [live.timer], ["alpha-742"]]


def test_running_tasks_for_stop_and_input(workdir: Path, tmp_path: Path) -> None:
    """`task stop`/`task input` offer running tasks only; `task status` all."""
    home = tmp_path / "tasks-home"
    env = {**os.environ, "HOLON_HOME": str(home)}
    running = run("task", "run", "--", "sleep 30", env=env).stdout.strip()
    finished = run("task", "run", "--", "true", env=env).stdout.strip()
    try:
        deadline = time.monotonic() + 30
        while '"running"' in run("task", "status", finished, "--json", env=env).stdout:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        lines = [["holon", "task", cmd, ""] for cmd in ("stop", "input", "status")]
        got = [
            sorted(
                ln.partition(",")[2]
                for ln in complete_in_process("bash", w, HOLON_HOME=str(home)).stdout.splitlines()
            )
            for w in lines
        ]
        assert got == [[running], [running], sorted([running, finished])]
    finally:
        assert run("task", "stop", running, env=env).returncode == 0


def test_completing_creates_no_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "no-home"
    monkeypatch.setenv("HOLON_HOME", str(home))
    cases = [
        ["holon", "agent", "status", ""],
        ["holon", "workitem", "pick", ""],
        ["holon", "task", "status", ""],
        ["holon", "timer", "cancel", ""],
        ["holon", "enqueue", "--work-item", ""],
    ]
    assert bash_complete_many(cases, tmp_path) == [[]] * len(cases)
    assert not home.exists()


def test_a_missing_holon_completes_nothing(workdir: Path, tmp_path: Path) -> None:
    """The script runs `holon` from PATH; when that fails, TAB offers nothing
    and prints nothing (no traceback in the prompt)."""
    fakebin = tmp_path / "fakebin"
    fakebin.mkdir()
    (fakebin / "holon").write_text("#!/bin/sh\necho 'Traceback: boom' >&2\nexit 1\n")
    (fakebin / "holon").chmod(0o755)
    env = {**shell_env(), "PATH": f"{fakebin}{os.pathsep}{os.environ['PATH']}"}
    src = (
        f"source {shlex.quote(str(BASH_FILE))}; COMP_WORDS=(holon ''); COMP_CWORD=1; "
        '_holon_completion holon; echo "${#COMPREPLY[@]}"'
    )
    res = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", src],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=30,
    )
    assert (res.returncode, res.stdout, res.stderr) == (0, "0\n", "")


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
            time.sleep(1.0)  # each TAB runs holon
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
        "holon agent status al": "holon agent status alpha-742",
        "holon enqueue --priority ba": "holon enqueue --priority background",
        "holon enqueue --priority=ba": "holon enqueue --priority=background",
        # free text (TEXT) falls back to file names
        "holon enqueue no": "holon enqueue notes.txt",
        # an id with no match: no file-name fallback
        "holon agent status no": "holon agent status no",
        # a directory option: directories only, with the slash of -o filenames
        "holon run --cwd su": "holon run --cwd sub/",
        # a command without arguments: no file-name fallback
        "holon status no": "holon status no",
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
  sleep 1
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
    "holon agent status al": "holon agent status alpha-742",
    "holon enqueue --priority=ba": "holon enqueue --priority=background",
    "holon workitem list --filter compl": "holon workitem list --filter completed",
    # (the next key typed takes the slash back off: AUTO_REMOVE_SLASH)
    "holon run --cwd su": "holon run --cwd sub",
    "holon enqueue no": "holon enqueue notes.txt",
    "holon workitem create --plan-file=pl": "holon workitem create --plan-file=plan.md",
}


@needs_zsh
def test_zsh_script_parses() -> None:
    res = subprocess.run(["zsh", "-n", str(ZSH_FILE)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr


@needs_zsh
def test_zsh_script_registers_with_compdef(workdir: Path) -> None:
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
    assert res.stdout.split() == ["_holon_completion"]


@pytest.mark.slow
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
    lines = ZSH_LINES
    res = subprocess.run(
        ["zsh", "-f", str(driver), mode, str(fpath / "_holon"), *lines],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=shell_env(),
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == list(lines.values())


# -- fish ---------------------------------------------------------------------------


def fish_complete_many(lines: Sequence[str], cwd: Path) -> list[list[tuple[str, str]]]:
    """`complete -C LINE` for each line, all in one fish; (value, description) pairs."""
    src = [f"source {shlex.quote(str(FISH_FILE))}"]
    for line in lines:
        src += [f"complete -C{shlex.quote(line)}", f"echo {END}"]
    res = subprocess.run(
        ["fish", "--no-config", "-c", "\n".join(src)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=shell_env(),
        timeout=120,
    )
    assert res.returncode == 0 and res.stderr == "", res.stderr
    blocks = res.stdout.split(END + "\n")
    assert blocks[-1] == "" and len(blocks) == len(lines) + 1
    out = []
    for block in blocks[:-1]:
        pairs = [(ln.split("\t", 1) + [""])[:2] for ln in block.splitlines()]
        out.append(sorted((value, desc) for value, desc in pairs))
    return out


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
    ("holon workitem create --plan-file=p", ["--plan-file=plan.md"]),
    # commands without arguments offer no file names; free text does
    ("holon status ", []),
    ("holon enqueue ", ["notes.txt", "plan.md", "src/", "sub/"]),
    ("holon agent status ", AGENTS),
    ("holon enqueue --agent=al", ["--agent=alpha-742"]),
    ("holon workitem pick -a alpha-742 ", ["{open1}", "{open2}"]),
    ("holon timer cancel -a alpha-742 ", ["{timer}"]),
]


@pytest.mark.slow
@needs_fish
def test_fish_completes(workdir: Path, live: Live) -> None:
    cases = [(live.fill([line])[0], live.fill(expected)) for line, expected in FISH_CASES]
    got = fish_complete_many([line for line, _ in cases], workdir)
    wrong = {
        line: (reply, sorted(expected))
        for (line, expected), reply in zip(cases, got, strict=True)
        if [value for value, _ in reply] != sorted(expected)
    }
    assert wrong == {}


@needs_fish
def test_fish_describes_commands_options_and_ids(workdir: Path, live: Live) -> None:
    roots, opts, items, agents = map(
        dict,
        fish_complete_many(
            [
                "holon ",
                "holon workitem update --",
                "holon workitem show -a alpha-742 ",
                "holon agent status ",
            ],
            workdir,
        ),
    )
    assert roots["enqueue"] == "Admit a message into an agent's queue and print its id"
    assert roots["home"] == "Manage the state home ($HOLON_HOME, default ~/.holon)"
    assert opts["--clear-todos"] == "Replace the todo list with an empty one"
    assert opts["--help"] == "Show this message and exit"
    assert items[live.open1] == "open Fix the flaky test"
    assert items[live.done] == "completed Ship it"
    assert agents["beta"].startswith("stopped")
    assert "private" in agents["child-1"]


# -- the Python side, in process ----------------------------------------------------


def complete_in_process(shell: str, words: Sequence[str], **env: str) -> Any:
    """One TAB's answer from `holon` run in this process, for the cursor at
    the end of ``words``."""
    line = " ".join(shlex.quote(w) for w in words)
    if shell == "fish" and not words[-1]:
        line = " ".join(shlex.quote(w) for w in words[:-1]) + " "  # `commandline -cp`
    environ = {
        **os.environ,
        "_HOLON_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": line,
        # fish passes the token under the cursor, bash and zsh its index
        "COMP_CWORD": words[-1] if shell == "fish" else str(len(words) - 1),
        **env,
    }
    return run(env=environ)


def test_every_command_completes_its_options_and_subcommands(workdir: Path) -> None:
    """Lazy loading and the fast path notwithstanding, each command of the tree
    completes its visible options after `--`, and each group its subcommands."""
    from holon_cli.cli import cli

    def walk(cmd: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
        yield path, cmd
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd, info_name=path[-1] if path else "holon")
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                yield from walk(sub, [*path, name])

    wrong = {}
    count = 0
    for path, cmd in walk(cli, []):
        count += 1
        longs = {
            name
            for p in cmd.params
            if isinstance(p, click.Option) and not p.hidden
            for name in (*p.opts, *p.secondary_opts)
            if name.startswith("--")
        }
        longs.add("--help")
        res = complete_in_process("bash", ["holon", *path, "--"])
        got = {ln.partition(",")[2] for ln in res.stdout.splitlines()}
        if res.returncode != 0 or got != longs:
            wrong[" ".join(path) + " --"] = (sorted(got), sorted(longs), res.stderr)
        if isinstance(cmd, click.Group):
            res = complete_in_process("bash", ["holon", *path, ""])
            subs = {ln.partition(",")[2] for ln in res.stdout.splitlines()}
            if subs != set(cmd.list_commands(click.Context(cmd))):
                wrong[" ".join(path)] = (sorted(subs), res.stderr)
    assert wrong == {}
    assert count > 60


def test_zsh_protocol_escapes_colons_and_describes(workdir: Path, live: Live) -> None:
    res = complete_in_process("zsh", ["holon", "workitem", "show", "-a", "alpha-742", ""])
    lines = res.stdout.splitlines()
    triples = [lines[i : i + 3] for i in range(0, len(lines), 3)]
    assert ["plain", live.open1, "open Fix the flaky test"] in triples
    res = complete_in_process("zsh", ["holon", "run", "--cwd=s"])
    assert res.stdout.splitlines() == ["dir", "--cwd=", "_"]
    from click.shell_completion import CompletionItem

    from holon_cli.cli.completion_shells import HolonZsh

    zsh = HolonZsh(click.Command("holon"), {}, "holon", "_HOLON_COMPLETE")
    # _describe splits VALUE:DESCRIPTION at the first unescaped colon
    assert zsh.format_completion(CompletionItem("a:b", help="c:d")) == "plain\na\\:b\nc:d"
    assert zsh.format_completion(CompletionItem("a:b")) == "plain\na:b\n_"  # compadd
    res = complete_in_process("zsh", ["holon", "enqueue", "-k", "ti"])
    assert res.stdout.splitlines() == ["plain", "timer_tick", "_"]
    res = complete_in_process("zsh", ["holon", "enqueue", "--priority=ne"])
    assert res.stdout.splitlines() == ["plain", "--priority=next", "_"]


def test_ids_are_the_default_agents_without_agent(workdir: Path, live: Live) -> None:
    """Without --agent, the ids are $HOLON_AGENT_ID's (as the command would use)."""
    res = complete_in_process("bash", ["holon", "workitem", "pick", ""], HOLON_AGENT_ID="alpha-742")
    assert sorted(res.stdout.splitlines()) == sorted(f"plain,{w}" for w in (live.open1, live.open2))


def test_free_text_falls_back_to_the_shells_default(workdir: Path) -> None:
    assert complete_in_process("bash", ["holon", "enqueue", "hel"]).stdout == "any,\n"
    # a value with completions of its own never falls back, even with no match
    assert complete_in_process("bash", ["holon", "enqueue", "--agent", "zz"]).stdout == ""
    assert complete_in_process("bash", ["holon", "status", "x"]).stdout == ""


def test_descriptions_are_one_printable_line(workdir: Path, tmp_path: Path) -> None:
    """An objective is the user's text: its control characters never reach
    the terminal through a description, and a long one is cut."""
    env = {**os.environ, "HOLON_HOME": str(tmp_path / "h")}
    objective = "Deploy \x1b[31mred\x1b[0m\tnow " + "x" * 100
    assert run("workitem", "create", objective, env=env).returncode == 0
    res = complete_in_process(
        "fish", ["holon", "workitem", "show", ""], HOLON_HOME=env["HOLON_HOME"]
    )
    (line,) = res.stdout.splitlines()
    value, _, desc = line.partition("\t")
    assert value.startswith("plain,wi_") and "\x1b" not in desc and "\t" not in desc
    assert desc.startswith("open Deploy [31mred [0m now xxx") and desc.endswith("...")
    assert len(desc) == 60


def test_a_damaged_home_completes_quietly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """agents/ is a file, an agent folder is unreadable, a ledger is a folder:
    no ids, no error, exit 0."""
    home = tmp_path / "h"
    home.mkdir()
    (home / "agents").write_text("not a folder")
    monkeypatch.setenv("HOLON_HOME", str(home))
    for words in (["holon", "agent", "status", ""], ["holon", "workitem", "pick", ""]):
        res = complete_in_process("bash", words)
        assert (res.returncode, res.stdout, res.stderr) == (0, "", "")


def test_instructions(workdir: Path) -> None:
    for shell in SHELLS:
        res = run(env={**os.environ, "_HOLON_COMPLETE": f"{shell}_source"})
        assert (res.returncode, res.stdout) == (0, source(shell))
    res = run(env={**os.environ, "_HOLON_COMPLETE": "tcsh_complete"})
    assert res.returncode == 1 and "unknown completion instruction 'tcsh_complete'" in res.stderr
    assert res.stdout == ""


def test_listing_commands_for_bash_loads_no_command_module(workdir: Path) -> None:
    """`holon <TAB>` in bash (no descriptions shown) imports none of the
    command modules; zsh and fish, which describe each command, do."""
    code = (
        "import sys, os\n"
        "from holon_cli.cli import run\n"
        "code = run([])\n"
        "mods = sorted(m for m in sys.modules if m.startswith('holon_cli.cli.cmd_'))\n"
        "print(mods, file=sys.stderr)\n"
    )
    for shell, loaded in (("bash", False), ("zsh", True)):
        env = {
            **os.environ,
            "_HOLON_COMPLETE": f"{shell}_complete",
            "COMP_WORDS": "holon ",
            "COMP_CWORD": "1",
        }
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
        )
        assert res.returncode == 0, res.stderr
        modules = eval(res.stderr.strip().splitlines()[-1])  # noqa: S307 - our own repr
        assert bool(modules) is loaded, (shell, modules)
        assert "enqueue" in res.stdout


# -- the scripts --------------------------------------------------------------------


def test_scripts_depend_only_on_the_program() -> None:
    from holon_cli import __version__

    for shell in SHELLS:
        text = source(shell)
        assert text.endswith("\n") and f"_HOLON_COMPLETE={shell}_complete" in text
        assert __version__ not in text
        assert "enqueue" not in text  # no command tree: holon answers each TAB
    with pytest.raises(ValueError, match="unknown shell 'tcsh'"):
        source("tcsh")


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


def test_completion_command_prints_the_script(script_runner) -> None:  # type: ignore[no-untyped-def]
    for shell in SHELLS:
        res = script_runner.run(["holon", "completion", shell])
        assert res.returncode == 0, res.stderr
        assert res.stdout == source(shell)
    res = script_runner.run(["holon", "completion", "--help"])
    assert "Example" in res.stdout and 'eval "$(holon completion bash)"' in res.stdout
    res = script_runner.run(["holon", "completion", "tcsh"])
    assert res.returncode == 2 and "'tcsh' is not one of" in res.stderr
