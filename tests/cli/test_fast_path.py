"""The click-free fast path (holon_cli/cli/fast.py) decides exactly what click
would, or hands the command to click; both print the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import pytest

from holon_cli.cli import fast
from holon_cli.cli.group import cli
from holon_cli.cli.params import Duration, ModelRefType

REPO = Path(__file__).resolve().parents[2]


def click_command(words: tuple[str, ...]) -> click.Command:
    cmd: Any = cli
    for w in words:
        cmd = cmd.get_command(click.Context(cmd), w)
    assert isinstance(cmd, click.Command)
    return cmd


@pytest.mark.parametrize("words", list(fast.SPECS), ids=" ".join)
def test_each_spec_matches_its_click_declaration(words: tuple[str, ...]) -> None:
    spec = fast.SPECS[words]
    cmd = click_command(words)
    options = {
        p.name: p
        for p in cmd.params
        if isinstance(p, click.Option) and p.name != "help" and not p.hidden
    }
    declared = {dest: (set(flags), kind) for flags, dest, kind in spec.options}
    assert set(declared) == set(options)
    for dest, (flags, kind) in declared.items():
        opt = options[dest]
        assert flags == set(opt.opts) | set(opt.secondary_opts), dest
        assert (kind == "flag") == opt.is_flag, dest
        assert not opt.multiple and not opt.count, dest
        if isinstance(opt.type, click.Choice):
            from holon_cli.model.workitem import LIST_FILTERS

            assert kind == "workitem_filter" and tuple(opt.type.choices) == LIST_FILTERS
        elif isinstance(opt.type, click.types.IntRange):
            assert kind == "int>=1" and opt.type.min == 1 and not opt.type.min_open
        elif isinstance(opt.type, click.types.FloatRange):
            assert kind == "float>0" and opt.type.min == 0 and opt.type.min_open, dest
            assert opt.type.max is None, dest
        elif isinstance(opt.type, ModelRefType):
            assert kind == "model", dest
        elif isinstance(opt.type, Duration):
            assert kind == "duration", dest
        elif isinstance(opt.type, click.Path):
            t = opt.type
            assert kind == "dir" and not t.file_okay and t.dir_okay and not t.exists, dest
            assert not (t.resolve_path or t.allow_dash or t.writable or t.executable), dest
            assert t.readable and t.type is None, dest
        elif kind != "flag":
            assert kind == "text" and opt.type == click.STRING, dest
    arguments = [p for p in cmd.params if isinstance(p, click.Argument)]
    assert [a.name for a in arguments] == ([spec.positional] if spec.positional else [])
    assert all(a.nargs == 1 and a.required == spec.required for a in arguments)
    assert all(a.type == click.STRING for a in arguments)
    # the defaults click fills in
    words = ["x"] if spec.required else []
    with cmd.make_context(cmd.name or "", list(words)) as ctx:
        assert fast.parse(spec, words) == ctx.params


CORPUS: list[list[str]] = [
    ["enqueue", "hello"],
    ["enqueue", "hello", "--json"],
    ["enqueue", "--json", "hello"],
    ["enqueue", "-"],
    ["enqueue", "hi", "-a", "alpha", "-k", "channel_event", "-o", "channel:x"],
    ["enqueue", "hi", "--agent=alpha", "--priority=next", "--json-body"],
    ["enqueue", "hi", "--work-item", "wi_1", "--correlation-id", "c", "--causation-id", "m"],
    ["enqueue", ""],
    ["enqueue", "--origin=-odd", "x"],
    ["enqueue", "x", "--wait", "--timeout", "90s", "--idempotency-key", "k-1"],
    ["enqueue", "x", "--timeout=500ms", "--wait"],
    ["status"],
    ["status", "--json", "-a", "main"],
    ["workitem", "list"],
    ["workitem", "list", "--filter", "open", "-n", "3", "--json"],
    ["workitem", "list", "--limit=12", "--filter=completed"],
    ["workitem", "list", "-n", "007"],
    ["run", "hi"],
    ["run", "-", "--json"],
    ["run", "hi", "-m", "scripted:x.yaml", "--max-turns", "3", "--keep-agent"],
    ["run", "--model=openai/gpt-4.1", "--no-wait-for-tasks", "--create-agent", "-a", "b", "x"],
    ["run", "hi", "--workspace-root", ".", "--cwd", "does/not/exist/yet"],
]

# click's job: help, typos, clusters, repeats, missing or odd values, extras
BAIL: list[list[str]] = [
    ["enqueue", "--help"],
    ["enqueue", "-h"],
    ["enqueue", "hi", "--kidn", "x"],
    ["enqueue", "a", "b"],
    ["enqueue", "--", "-5 degrees"],
    ["enqueue", "-5 degrees"],
    ["enqueue", "hi", "-a"],
    ["enqueue", "hi", "-a", "one", "-a", "two"],
    ["enqueue", "hi", "-aalpha"],
    ["enqueue", "hi", "-a=alpha"],
    ["enqueue", "hi", "--json=yes"],
    ["enqueue", "hi", "--origin", "-x"],
    ["enqueue", "hi", "--wait", "--timeout", "soon"],
    ["enqueue", "hi", "--wait", "--timeout"],
    ["status", "extra"],
    ["status", "--agent"],
    ["workitem", "list", "--filter", "nope"],
    ["workitem", "list", "-n", "0"],
    ["workitem", "list", "-n", "-1"],
    ["workitem", "list", "-n", "1.5"],
    ["workitem", "list", "-n", "+3"],
    ["workitem", "list", "-n", "٣"],
    ["workitem", "show", "wi_1"],
    ["run"],
    ["run", "--json"],
    ["run", "a", "b"],
    ["run", "hi", "--model", "nope/x"],
    ["run", "hi", "--model", "not a ref"],
    ["run", "hi", "--max-turns", "0"],
    ["run", "hi", "--workspace-root", "pyproject.toml"],
    ["run", "hi", "--cwd", ""],
    ["run", "hi", "-m"],
    ["run", "--help"],
    ["workitem"],
    ["turn"],
    [],
]


@pytest.mark.parametrize("argv", CORPUS, ids=" ".join)
def test_fast_parse_equals_clicks_parse(argv: list[str]) -> None:
    found = fast.match(argv)
    assert found is not None
    spec, words = found
    ours = fast.parse(spec, words)
    assert ours is not None
    cmd = click_command(next(w for w in fast.SPECS if fast.SPECS[w] is spec))
    with cmd.make_context(cmd.name or "", list(words)) as ctx:
        assert ours == ctx.params


@pytest.mark.parametrize("argv", BAIL, ids=lambda a: " ".join(a) or "(none)")
def test_what_click_must_decide_is_left_to_click(argv: list[str]) -> None:
    found = fast.match(argv)
    assert found is None or fast.parse(*found) is None
    assert fast.run_fast(argv) is None


def _run(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> tuple[int, str, str]:
    res = subprocess.run(
        [sys.executable, "-m", "holon_cli", *argv],
        input=stdin,
        capture_output=True,
        env={**env, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    return res.returncode, res.stdout.decode(), res.stderr.decode()


def _normalize(text: str) -> str:
    # message ids and timestamps differ between two admissions
    import re

    text = re.sub(r"msg_[0-9a-z]{20}", "msg_X", text)
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "T", text)


SAME_OUTPUT: list[list[str]] = [
    ["--version"],
    ["-V"],
    ["enqueue", "hello"],
    ["enqueue", "hello", "--json"],
    ["enqueue", "   "],
    ["enqueue", "x", "--kind", "operator_prompt", "--origin", "channel:slack"],
    ["enqueue", "x", "--kind", "operator_prompt", "--origin", "channel:slack", "--json"],
    ["enqueue", "x", "--priority", "urgent"],
    ["enqueue", "{bad", "--json-body", "--json"],
    ["enqueue", "x", "--work-item", "wi_missing"],
    ["enqueue", "x", "-a", "Not Valid"],
    ["status"],
    ["status", "--json"],
    ["status", "-a", "ghost"],
    ["status", "-a", "ghost", "--json"],
    ["workitem", "list"],
    ["workitem", "list", "--json", "--filter", "open"],
    ["workitem", "list", "-a", "ghost", "--json"],
]


def test_fast_and_click_paths_print_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In-process (what is printed and the exit code; the process end is
    tested below with real processes), one home per path."""
    from holon_cli.cli import run

    results = []
    for name in ("fast", "click"):
        monkeypatch.setenv("HOLON_HOME", str(tmp_path / name))
        if name == "click":
            monkeypatch.setenv("HOLON_NO_FAST_PATH", "1")
        out = []
        for argv in SAME_OUTPUT:
            code = run(list(argv))
            cap = capsys.readouterr()
            out.append((code, cap.out, cap.err))
        results.append(out)

    def norm(r: tuple[int, str, str], name: str) -> tuple[int, str, str]:
        home = str(tmp_path / name)
        return r[0], _normalize(r[1].replace(home, "HOME")), _normalize(r[2].replace(home, "HOME"))

    for argv, f, c in zip(SAME_OUTPUT, *results, strict=True):
        assert norm(f, "fast") == norm(c, "click"), argv


@pytest.mark.script_launch_mode("subprocess")
def test_fast_exit_keeps_every_byte_and_the_exit_code(tmp_path: Path) -> None:
    env = {**os.environ, "HOLON_HOME": str(tmp_path / "h")}
    for i in range(3):
        code, out, _ = _run(["enqueue", f"message {i} " + "x" * 100_000, "--json"], env)
        assert code == 0 and len(json.loads(out)["data"]["body"]["text"]) > 100_000
    code, out, err = _run(["status", "--json"], env)
    assert code == 0 and json.loads(out)["data"]["pending"] == 3, err
    code, out, err = _run(["enqueue", "-"], env, stdin="é from stdin".encode())
    assert code == 0 and out.startswith("msg_") and out.endswith("\n")
    code, out, err = _run(["enqueue", "-"], env, stdin=b"\xff\xfe binary")
    assert code == 2 and "not valid UTF-8" in err and out == ""


@pytest.mark.script_launch_mode("subprocess")
def test_fast_path_to_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    env = {**os.environ, "HOLON_HOME": str(tmp_path / "h"), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "holon_cli", "enqueue", "x"], env=env, check=True)
    proc = subprocess.run(
        f"{sys.executable} -m holon_cli status | head -c 0; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert b"Traceback" not in proc.stderr and b"Error" not in proc.stderr


def test_the_fast_exit_runs_the_atexit_hooks_once_and_skips_the_teardown(
    tmp_path: Path,
) -> None:
    """Every process that sends a model request has an ``atexit`` hook
    (logging's: httpx2 imports logging). The console script runs the hooks,
    once, then ends without the interpreter's teardown (which cost a
    one-round ``holon run`` some 30 ms, its collector's pass included)."""
    code = (
        "import atexit, sys, threading\n"
        "atexit.register(lambda: print('atexit hook', file=sys.stderr))\n"
        "threading._register_atexit(lambda: print('teardown', file=sys.stderr))\n"
        "sys.argv = ['holon', 'status']\n"
        "from holon_cli.cli import entry\n"
        "entry()\n"
    )
    env = {**os.environ, "HOLON_HOME": str(tmp_path / "h"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "pending" in proc.stdout  # status ran
    assert proc.stderr.count("atexit hook") == 1
    assert "teardown" not in proc.stderr


def _entry_with_hooks(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``holon ARGV`` through the console entry, with an ``atexit`` hook and
    a hook of the interpreter's teardown that each say when they run."""
    code = (
        "import atexit, sys, threading\n"
        "atexit.register(lambda: print('atexit hook', file=sys.stderr))\n"
        "threading._register_atexit(lambda: print('teardown', file=sys.stderr))\n"
        f"sys.argv = {['holon', *argv]!r}\n"
        "from holon_cli.cli import entry\n"
        "entry()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_turn_and_a_tick_end_fast_too_other_click_commands_do_not(tmp_path: Path) -> None:
    """``holon turn`` and ``holon tick`` go through click but run the runtime
    ``holon run`` does: they end without the teardown (60-75 ms a turn), after
    the hooks ran once; a click command outside that list is left alone."""
    model = tmp_path / "s.yaml"
    model.write_text('steps:\n  - text: "done"\n')
    env = {**os.environ, "HOLON_HOME": str(tmp_path / "h"), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "holon_cli", "enqueue", "x"], env=env, check=True)
    for argv in (["turn", "--model", f"scripted:{model}"], ["tick"]):
        proc = _entry_with_hooks(argv, env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.count("atexit hook") == 1 and "teardown" not in proc.stderr, argv
        if argv[0] == "turn":
            assert "done" in proc.stdout, proc.stdout  # the turn ran, its answer printed
    other = _entry_with_hooks(["agent", "list"], env)
    assert other.returncode == 0 and "teardown" in other.stderr


def test_a_run_with_commands_ends_fast_with_its_call_threads_idle(tmp_path: Path) -> None:
    """A run's provider and tool calls run on call threads that wait for the
    next call (``runtime/turn/abort.py``) and its commands' supervisor
    waits too: neither keeps ``holon run`` from ending without the
    teardown, and the supervisor is collected, not left behind."""
    model = tmp_path / "s.yaml"
    model.write_text(
        "steps:\n"
        "  - tool_calls: [{name: ExecCommand, id: one, arguments: {cmd: 'echo $PPID'}}]\n"
        "  - tool_calls: [{name: ExecCommand, id: two, arguments: {cmd: 'echo $PPID'}}]\n"
        '  - text: "sup {{one.stdout_preview}} {{two.stdout_preview}} done"\n'
    )
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.yaml").write_text("execution:\n  sandbox: none\n")
    env = {**os.environ, "HOLON_HOME": str(home), "PYTHONPATH": str(REPO)}
    proc = _entry_with_hooks(["run", "--model", f"scripted:{model}", "--json", "go"], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("atexit hook") == 1 and "teardown" not in proc.stderr
    words = proc.stdout.split("sup ", 1)[1].split()
    assert words[2].startswith("done") and words[0] == words[1], proc.stdout  # one supervisor
    assert not Path(f"/proc/{words[0]}").exists(), "the supervisor outlived the run"


@pytest.mark.slow
def test_a_turn_that_called_an_mcp_server_ends_fast(tmp_path: Path) -> None:
    """The MCP host's loop thread ends with the turn's servers, so the turn's
    process is left with one thread and ends without the teardown, which with
    the SDK's modules loaded took ~170 ms."""
    pytest.importorskip("mcp", reason="needs the MCP SDK (pip install -e '.[mcp]')")
    import yaml

    sys.path.insert(0, str(REPO / "tests"))
    from mcp_helpers import fake

    home = tmp_path / "h"
    home.mkdir()
    (home / "config.yaml").write_text(
        yaml.safe_dump({"mcp_servers": {"fake": fake()}, "execution": {"sandbox": "none"}})
    )
    model = tmp_path / "s.yaml"
    steps = [
        {"tool_calls": [{"name": "mcp__fake__echo", "arguments": {"text": "hi"}, "id": "c1"}]},
        {"expect_tool_result_contains": "hi", "text": "done"},
    ]
    model.write_text(yaml.safe_dump({"steps": steps}))
    env = {**os.environ, "HOLON_HOME": str(home), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "holon_cli", "enqueue", "x"], env=env, check=True)
    proc = _entry_with_hooks(["turn", "--model", f"scripted:{model}"], env)
    assert proc.returncode == 0, proc.stderr
    assert "completed" in proc.stderr or "completed" in proc.stdout, proc.stderr
    assert proc.stderr.count("atexit hook") == 1 and "teardown" not in proc.stderr


def _running_with(word: str) -> list[int]:
    """Live (non-zombie) processes whose command line holds ``word``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        if word.encode() in cmdline and not stat[stat.rfind(b")") + 2 :].startswith(b"Z"):
            out.append(int(name))
    return out


def _mcp_home(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A home whose one MCP server, the fake, logs to a file named in its
    command line (how a test finds it running); its env and that file."""
    pytest.importorskip("mcp", reason="needs the MCP SDK (pip install -e '.[mcp]')")
    import yaml

    sys.path.insert(0, str(REPO / "tests"))
    from mcp_helpers import fake

    home = tmp_path / "h"
    home.mkdir()
    log = tmp_path / "server-log"
    (home / "config.yaml").write_text(
        yaml.safe_dump(
            {"mcp_servers": {"fake": fake("--log", str(log))}, "execution": {"sandbox": "none"}}
        )
    )
    return {**os.environ, "HOLON_HOME": str(home), "PYTHONPATH": str(REPO)}, log


@pytest.mark.slow
def test_the_operators_mcp_commands_end_fast_with_their_servers_stopped(tmp_path: Path) -> None:
    """``holon mcp call``, ``check`` and ``refresh`` stop the servers they
    started before they print, so they end like a turn: the ``atexit`` hooks
    once, no teardown (~170 ms with the SDK loaded), no server left running."""
    env, log = _mcp_home(tmp_path)
    for argv, said in (
        (["mcp", "call", "fake", "echo", '{"text": "hi there"}'], "hi there"),
        (["mcp", "check"], "fake"),
        (["mcp", "refresh", "fake"], "fake"),
    ):
        log.unlink(missing_ok=True)
        proc = _entry_with_hooks(argv, env)
        assert proc.returncode == 0, (argv, proc.stderr)
        assert said in proc.stdout + proc.stderr, (argv, proc.stdout, proc.stderr)
        assert proc.stderr.count("atexit hook") == 1 and "teardown" not in proc.stderr, argv
        assert log.exists() and not _running_with(str(log)), argv  # it ran, and ended


@pytest.mark.slow
def test_an_operators_mcp_answer_ends_fast_with_the_answer_kept(tmp_path: Path) -> None:
    """``holon mcp answer`` sends the call again (its server started and
    stopped) and ends like a turn; the answer is kept (the request closed)."""
    import yaml

    env, log = _mcp_home(tmp_path)
    model = tmp_path / "s.yaml"
    steps = [
        {"tool_calls": [{"name": "mcp__fake__color", "arguments": {}, "id": "c1"}]},
        {"text": "waiting for the operator"},
    ]
    model.write_text(yaml.safe_dump({"steps": steps}))
    holon = [sys.executable, "-m", "holon_cli"]
    subprocess.run([*holon, "enqueue", "pick a color"], env=env, check=True)
    subprocess.run([*holon, "turn", "--model", f"scripted:{model}"], env=env, check=True)
    listed = subprocess.run(
        [*holon, "mcp", "requests", "--json"], env=env, capture_output=True, check=True
    )
    (request,) = json.loads(listed.stdout)["data"]["requests"]
    log.unlink(missing_ok=True)
    proc = _entry_with_hooks(["mcp", "answer", request["id"], '{"color": "teal"}'], env)
    assert proc.returncode == 0 and "result" in proc.stdout, proc.stderr
    assert proc.stderr.count("atexit hook") == 1 and "teardown" not in proc.stderr
    assert log.exists() and not _running_with(str(log))
    after = subprocess.run(
        [*holon, "mcp", "requests", "--json"], env=env, capture_output=True, check=True
    )
    assert json.loads(after.stdout)["data"]["requests"] == []  # the answer was kept
    # the request's three lines (opened, answered, resolved) fit their types
    checked = subprocess.run([*holon, "home", "check"], env=env, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_library_callers_of_main_get_system_exit_not_a_dead_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from holon_cli.cli import entry, main

    with pytest.raises(SystemExit) as exc:
        main(["status", "--json"])
    assert exc.value.code == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    # the console entry point too: stdout here is pytest's, not the process's
    sys.argv = ["holon", "status"]
    with pytest.raises(SystemExit):
        entry()


def test_no_fast_path_switch_hands_everything_to_click(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOLON_NO_FAST_PATH", "1")
    assert fast.run_fast(["status"]) is None


def test_the_cycle_collector_is_off_only_inside_a_short_fast_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from holon_cli.cli import fast_bodies, run

    seen: dict[str, bool] = {}

    def spy(name: str, fail: bool = False):  # type: ignore[no-untyped-def]
        def body(**kwargs: object) -> int:
            seen[name] = gc.isenabled()
            if fail:
                raise RuntimeError("a bug in a fast command")
            return 0

        return body

    monkeypatch.setattr(fast_bodies, "status", spy("status"))
    monkeypatch.setattr(fast_bodies, "run", spy("run"))
    assert run(["status"]) == 0 and run(["run", "hi"]) == 0
    assert seen == {"status": False, "run": False}  # a run gets it back after start-up
    assert gc.isenabled()
    monkeypatch.setattr(fast_bodies, "status", spy("status", fail=True))
    with pytest.raises(RuntimeError):
        run(["status"])
    assert gc.isenabled()  # back on even when the body raises


def test_the_console_script_ends_before_the_collector_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Turned back on, the collector's first pass would scan everything the
    command allocated, just before the process ends: the console script's
    fast exit comes first; when it cannot end the process (an in-process
    runner), the caller gets its collector back as after any command."""
    import gc

    from holon_cli.cli import fast_bodies

    monkeypatch.setattr(fast_bodies, "status", lambda **kw: 0)
    monkeypatch.setattr(fast_bodies, "run", lambda **kw: 0)
    at_end: list[tuple[int, bool]] = []

    def end(code: int) -> None:
        at_end.append((code, gc.isenabled()))

    for words in (["status"], ["run", "hi"]):
        assert fast.run_fast(words, end=end) == 0
        assert gc.isenabled(), words
    assert at_end == [(0, False), (0, False)]  # each ended with the collector still off


def test_a_long_run_gets_the_collector_back_with_its_start_up_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``holon run`` can last hours: the collector is off for its start-up
    only, then back on with what start-up made frozen (never re-scanned);
    when the run returns, a library caller's process is as it was."""
    import gc

    from holon_cli.cli import fast_bodies, run

    seen: list[tuple[bool, int]] = []

    def body(**kwargs: object) -> int:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        deadline = time.monotonic() + 10
        while not gc.isenabled() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return 0

    monkeypatch.setattr(fast, "COLLECTOR_BACK_AFTER_S", 0.05)
    monkeypatch.setattr(fast_bodies, "run", body)
    assert run(["run", "hi"]) == 0
    (off, frozen_before), (back, frozen_after) = seen
    assert not off and frozen_before == 0
    assert back and frozen_after > 1000  # the interpreter's objects, frozen
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_short_run_keeps_the_collector_off_and_leaves_no_timer_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc
    import threading

    from holon_cli.cli import fast_bodies, run

    seen: list[bool] = []
    before = threading.active_count()
    monkeypatch.setattr(fast_bodies, "run", lambda **kw: seen.append(gc.isenabled()) or 0)
    assert run(["run", "hi"]) == 0
    assert seen == [False]
    time.sleep(0.05)
    assert threading.active_count() == before  # the timer was stopped
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_run_prints_the_same_on_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``holon run`` (fast since issue 12): answer, failure (exit 5 and what
    was kept), bad script, stdin; each in a fresh home per path."""
    import re

    from holon_cli.cli import run

    ok = tmp_path / "ok.yaml"
    ok.write_text('steps:\n  - text: "the answer"\n')
    fail = tmp_path / "fail.yaml"
    fail.write_text('steps:\n  - fail: {kind: client_error, message: "no model", status: 400}\n')
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: [[[\n")
    cases: list[tuple[list[str], str]] = [
        (["run", "hi", "-m", f"scripted:{ok}"], ""),
        (["run", "hi", "-m", f"scripted:{ok}", "--keep-agent"], ""),
        (["run", "hi", "-m", f"scripted:{fail}"], ""),
        (["run", "hi", "-m", f"scripted:{bad}"], ""),
        (["run", "hi", "-m", f"scripted:{bad}", "--json"], ""),
        (["run", "-", "-m", f"scripted:{ok}", "--max-turns", "2"], "from stdin"),
        (["run", "hi", "-m", f"scripted:{tmp_path / 'missing.yaml'}"], ""),
    ]
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")  # never a folder holding the home
    results = []
    for name in ("fast", "click"):
        monkeypatch.setenv("HOLON_HOME", str(tmp_path / name))
        monkeypatch.setenv("HOLON_NO_FAST_PATH", "1" if name == "click" else "")
        out = []
        for argv, stdin in cases:
            monkeypatch.setattr("sys.stdin", __import__("io").StringIO(stdin))
            code = run(list(argv))
            cap = capsys.readouterr()
            home = str(tmp_path / name)
            norm = [re.sub(r"run-[0-9a-z]+", "run-X", t.replace(home, "HOME")) for t in cap]
            out.append((code, *norm))
        results.append(out)
    assert results[0] == results[1]
    codes = [r[0] for r in results[0]]
    assert codes == [0, 0, 5, 5, 5, 0, 5]
    assert results[0][0][1] == "the answer\n"
    assert "[failed]" in results[0][2][2] and "kept at HOME/agents/run-X" in results[0][2][2]


@pytest.mark.slow  # a signal sent to a real process mid-turn (run by .ci/run)
@pytest.mark.script_launch_mode("subprocess")
def test_ctrl_c_on_a_fast_path_run_exits_130_and_keeps_the_message(tmp_path: Path) -> None:
    """A real ``holon run`` process (the fast path) interrupted mid-turn: exit
    130, one JSON error naming the kept agent, and its next turn completes."""
    import signal

    from child_signals import default_sigint
    from scenarios import wait_for_event

    script = tmp_path / "slow.yaml"
    script.write_text("steps:\n  - sleep_ms: 20000\n    text: slow\n  - text: replayed\n")
    home = tmp_path / "h"
    env = {**os.environ, "HOLON_HOME": str(home), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "holon_cli", "run", "--json", "-m", f"scripted:{script}", "hi"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        wait_for_event(home, "message_processing_started", agent="run-*")
        # Ctrl-C once the model call is under way (the script's cursor has
        # taken step 1), so the next turn's replay is answered by step 2; a
        # signal before the call would leave step 1 to answer it
        deadline = time.monotonic() + 30
        while not list(home.glob("agents/run-*/**/scripted-*.json")):
            assert time.monotonic() < deadline, "the model call never started"
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert len(out.splitlines()) == 1
    error = json.loads(out)["error"]
    assert error["kind"] == "interrupted"
    aid = error["message"].split("agent ", 1)[1].split(" ", 1)[0]
    again = subprocess.run(
        [sys.executable, "-m", "holon_cli", "turn", "-a", aid, "--json", f"-mscripted:{script}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["data"]["final_text"] == "replayed"
