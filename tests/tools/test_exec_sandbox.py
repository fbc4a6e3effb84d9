"""Issue 29 items 5-6: ``execution.sandbox: bwrap`` confines model-run
commands (real ``bwrap``, real processes): a read-only system, the execution
root writable, ``$HOLON_HOME`` and the agent's ``.holon/`` invisible, a
private ``/tmp``, no network unless ``on``, fail closed without bwrap, the
same confinement after promotion, with ``TaskInput`` and a tty."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from holon_cli.providers.base import ToolCall
from holon_cli.runtime.tasks import plane as tasks
from holon_cli.runtime.tasks import sandbox
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import HomeLayout
from holon_cli.tools.base import ToolContext, ToolResult, execute
from holon_cli.tools.catalog import registry

TERMINAL = ("completed", "failed", "cancelled", "interrupted")


def _bwrap_works() -> str | None:
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap is not installed (bwrap not on PATH)"
    try:
        got = subprocess.run(
            [
                exe,
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--unshare-pid",
                "--unshare-net",
                "true",
            ],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot run here: {exc}"
    if got.returncode != 0:
        why = got.stderr.decode(errors="replace").strip()
        return f"bubblewrap cannot create namespaces here (user namespaces unavailable?): {why}"
    return None


WHY_NOT = _bwrap_works()
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")

Call = Callable[..., ToolResult]


def _config(network: str = "off", **extra: Any) -> dict[str, Any]:
    return {"execution": {"sandbox": "bwrap", "network": network, **extra}}


@pytest.fixture
def boxed(ctx: ToolContext) -> Iterator[ToolContext]:
    c = dataclasses.replace(ctx, config=_config())
    yield c
    for rec in tasks.unsettled_tasks(c.store):
        if rec["status"] not in TERMINAL:
            tasks.task_stop(c.store, rec["id"], wait_s=2)


def run(c: ToolContext, **arguments: Any) -> ToolResult:
    tool = registry()["ExecCommand"]
    return execute(tool, c, ToolCall(id="call_1", name="ExecCommand", arguments=arguments))


def out(r: ToolResult) -> str:
    assert r.ok, r.content
    return str(r.data.get("stdout_preview", "")) + str(r.data.get("stderr_preview", ""))


def wait_reported(store: AgentStore, tid: str, within: float = 20.0) -> dict[str, Any]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        rec = tasks.read_task(store, tid)
        if rec["status"] in TERMINAL and (
            rec.get("result_message_id") or rec.get("result_undeliverable")
        ):
            return dict(rec)
        time.sleep(0.05)
    raise AssertionError(f"task {tid} did not report: {tasks.read_task(store, tid)}")


@needs_bwrap
def test_the_root_is_writable_and_the_system_is_not(boxed: ToolContext, root: Path) -> None:
    r = run(boxed, cmd="echo in > inside.txt && cat inside.txt; echo x > /etc/holon-probe")
    text = out(r)
    assert "in" in text and "Read-only file system" in text
    assert (root / "inside.txt").read_text() == "in\n"
    assert not Path("/etc/holon-probe").exists()
    # the user's home folder is outside the root too
    r = run(boxed, cmd=f"touch {Path.home()}/holon-probe; echo rc=$?")
    assert "rc=1" in out(r) and not (Path.home() / "holon-probe").exists()


@needs_bwrap
def test_holon_home_and_dot_holon_are_invisible(boxed: ToolContext, root: Path) -> None:
    home = HomeLayout.current().root
    agent_json = boxed.store.layout.agent_file
    assert agent_json.exists()
    r = run(boxed, cmd=f"ls -A {home} | wc -l; cat {agent_json} || echo unreadable; ls -A /tmp")
    lines = out(r).split()
    assert lines[0] == "0" and "unreadable" in lines  # an empty folder: nothing of the home
    assert str(root.name) not in lines  # a private /tmp (the test's root lives under /tmp)
    # the agent home as execution root: writable, its .holon/ hidden
    ahome = boxed.store.layout.home
    c = dataclasses.replace(boxed, execution_root=ahome, cwd=ahome)
    r = run(c, cmd="ls -A .holon | wc -l; echo note > notes/probe.txt && echo wrote")
    text = out(r).split()
    assert text[0] == "0" and "wrote" in text
    assert (ahome / "notes" / "probe.txt").read_text() == "note\n"
    assert agent_json.exists()  # nothing of .holon/ was touched


@pytest.fixture
def listener() -> Iterator[int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(b"hello\n")
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(2)
    srv.close()


@needs_bwrap
def test_network_off_blocks_loopback_and_on_allows_it(boxed: ToolContext, listener: int) -> None:
    cmd = f"(exec 3<>/dev/tcp/127.0.0.1/{listener} && head -1 <&3) 2>&1 || echo refused"
    assert "refused" in out(run(boxed, cmd=cmd))
    on = dataclasses.replace(boxed, config=_config("on"))
    assert "hello" in out(run(on, cmd=cmd))
    # YAML booleans work too (`network: true` is on)
    yes = dataclasses.replace(boxed, config={"execution": {"sandbox": "bwrap", "network": True}})
    assert "hello" in out(run(yes, cmd=cmd))


def test_missing_bwrap_fails_closed(
    ctx: ToolContext, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    c = dataclasses.replace(ctx, config=_config())
    r = run(c, cmd="touch ran.txt")
    assert not r.ok and r.error is not None
    assert r.error["kind"] == "sandbox_unavailable"
    assert "bubblewrap" in (r.error["recovery_hint"] or "")
    assert "not on PATH" in r.content
    time.sleep(0.2)
    assert not (root / "ran.txt").exists()  # nothing ran, confined or not
    assert not list(tasks.tasks_root(c.store).glob("task_*"))  # nothing was even created


def test_the_model_cannot_turn_the_sandbox_off(ctx: ToolContext, root: Path) -> None:
    c = dataclasses.replace(ctx, config=_config())
    for extra in ({"sandbox": "none"}, {"execution": {"sandbox": "none"}}, {"network": "on"}):
        r = run(c, cmd="touch ran.txt", **extra)
        assert not r.ok and r.error is not None and r.error["kind"] == "invalid_arguments"
    assert not (root / "ran.txt").exists()


def test_policy_per_agent_over_the_default() -> None:
    cfg = {
        "execution": {"sandbox": "bwrap", "network": "off"},
        "agents": {
            "open": {"execution": {"sandbox": "none"}},
            "net": {"execution": {"network": "on"}},
        },
    }

    def got(c: dict[str, Any], aid: str) -> tuple[str, str, bool]:
        p = sandbox.policy(c, aid)
        return p.setting, p.backend if p.usable else "refused", p.network

    boxed = "bwrap" if WHY_NOT is None else "refused"
    assert got(cfg, "main") == ("bwrap", boxed, False)
    assert got(cfg, "open") == ("none", "none", False)
    assert got(cfg, "net") == ("bwrap", boxed, True)
    # the default: auto, network on
    assert got({}, "main") == ("auto", "bwrap" if WHY_NOT is None else "none", True)
    # secrets: the user's readable files (~/.ssh) stay readable inside, so the
    # projection never claims secret confinement
    axes = sandbox.Policy("bwrap", False).axes()
    assert {k for k, v in axes.items() if v != "enforced"} == {"secret_confinement"}
    assert sandbox.Policy("bwrap", True).axes()["network_confinement"] == "not_enforced"
    assert set(sandbox.Policy("none", True, "none").axes().values()) == {"not_enforced"}


@needs_bwrap
def test_secrets_stay_out_of_the_sandbox(
    boxed: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_sandboxed")
    monkeypatch.setenv("PLAIN_VALUE", "visible")
    c = dataclasses.replace(boxed, config=_config(env={"inherit": "all"}))
    text = out(run(c, cmd="env"))
    assert "PLAIN_VALUE=visible" in text and "ghp_sandboxed" not in text


@needs_bwrap
@pytest.mark.slow
def test_a_promoted_task_stays_confined_with_input_and_tty(boxed: ToolContext, root: Path) -> None:
    cmd = (
        "sleep 0.4; echo x > /etc/holon-probe 2>&1 || echo ro-system; "
        f"ls -A {HomeLayout.current().root} | wc -l; "
        "test -t 0 && echo is-tty; read a; echo got:$a; echo late > promoted.txt"
    )
    r = run(boxed, cmd=cmd, yield_time_ms=100, tty=True, accepts_input=True)
    assert r.ok and r.data["disposition"] == "promoted_to_task", r.content
    tid = str(r.data["task_handle"]["task_id"])
    time.sleep(0.6)
    assert tasks.task_input(boxed.store, tid, "one\n")["accepted_input"]
    rec = wait_reported(boxed.store, tid)
    assert rec["status"] == "completed"
    text = (tasks.task_dir(boxed.store, tid) / "output.log").read_text()
    assert "ro-system" in text and "is-tty" in text and "got:one" in text
    assert "\n0\r\n" in text or "\n0\n" in text  # the home is still an empty folder
    assert (root / "promoted.txt").read_text() == "late\n"
    assert not Path("/etc/holon-probe").exists()


@needs_bwrap
def test_a_promoted_task_gets_task_input_without_a_tty(boxed: ToolContext, root: Path) -> None:
    r = run(boxed, cmd="read a; echo got:$a > got.txt", yield_time_ms=100, accepts_input=True)
    assert r.ok and r.data["disposition"] == "promoted_to_task", r.content
    tid = str(r.data["task_handle"]["task_id"])
    assert tasks.task_input(boxed.store, tid, "two\n")["accepted_input"]
    assert wait_reported(boxed.store, tid)["status"] == "completed"
    assert (root / "got.txt").read_text() == "got:two\n"


@needs_bwrap
def test_stopping_a_sandboxed_task_kills_its_whole_tree(boxed: ToolContext, root: Path) -> None:
    # durations no other run uses: pgrep sees the whole machine's processes (other
    # test runs on the machine, an older checkout's leftovers included)
    a, b, c = _unique_durations(3)
    r = run(boxed, cmd=f"(sleep {a} &); setsid sleep {b} & sleep {c}", yield_time_ms=100)
    tid = str(r.data["task_handle"]["task_id"])
    tasks.task_stop(boxed.store, tid, wait_s=5)
    end = time.monotonic() + 5
    while time.monotonic() < end:
        left = subprocess.run(["pgrep", "-f", f"sleep ({a}|{b}|{c})$"], capture_output=True).stdout
        if not left.strip():
            break
        time.sleep(0.1)
    assert not left.strip(), left


def _unique_durations(n: int) -> list[int]:
    """Sleep durations no other process on the machine is likely to use."""
    import secrets

    base = 100_000 + secrets.randbelow(800_000)
    return [base + i for i in range(n)]


def _write_config(text: str) -> None:
    cfg = HomeLayout.current().config
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(text)


@needs_bwrap
def test_holon_task_run_is_sandboxed(script_runner: Any, tmp_path: Path) -> None:
    _write_config("execution:\n  sandbox: bwrap\n  network: off\n")
    wd = tmp_path / "wd"
    wd.mkdir()
    res = script_runner.run(
        [
            "holon",
            "task",
            "run",
            "--workdir",
            str(wd),
            "--json",
            "--",
            "echo in > in.txt; echo x > /etc/holon-probe || echo ro",
        ]
    )
    assert res.returncode == 0, res.stderr
    tid = json.loads(res.stdout)["data"]["task_id"]
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(None)
    rec = wait_reported(store, tid)
    assert rec["status"] == "completed"
    assert "Read-only" in (tasks.task_dir(store, tid) / "output.log").read_text()
    assert (wd / "in.txt").read_text() == "in\n"


def test_holon_task_run_fails_closed_without_bwrap(
    script_runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_config("execution:\n  sandbox: bwrap\n")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    wd = tmp_path / "wd"
    wd.mkdir()
    res = script_runner.run(
        ["holon", "task", "run", "--workdir", str(wd), "--json", "--", "touch ran.txt"]
    )
    assert res.returncode == 4, res.stdout + res.stderr
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "sandbox_unavailable" and "bubblewrap" in err["hint"]
    time.sleep(0.2)
    assert not (wd / "ran.txt").exists()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("execution:\n  sandbox: docker\n", "execution.sandbox"),
        ("execution:\n  network: maybe\n", "execution.network"),
        ("execution:\n  sandbx: bwrap\n", "execution.sandbx"),
        ("agents:\n  main:\n    execution:\n      sandbox: 1\n", "agents.main.execution.sandbox"),
    ],
)
def test_a_bad_execution_setting_names_its_key(script_runner: Any, text: str, key: str) -> None:
    _write_config(text)
    res = script_runner.run(["holon", "debug", "prompt", "--json"])
    assert res.returncode == 2
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "config_error" and key in err["message"]


@pytest.mark.parametrize(("network", "net_axis"), [("off", "enforced"), ("on", "not_enforced")])
def test_debug_prompt_shows_the_enforced_axes(
    script_runner: Any, network: str, net_axis: str
) -> None:
    _write_config(f"execution:\n  sandbox: bwrap\n  network: {network}\n")
    res = script_runner.run(["holon", "debug", "prompt", "--json", "--full"])
    d = json.loads(res.stdout)["data"]
    pol = d["execution_policy"]
    assert pol["backend"] == "bwrap"
    assert pol["sandbox_setting"] == "bwrap" and pol["network"] == network
    assert pol["capabilities"] == "dropped"
    axes = {k for k in pol if k.endswith("_confinement")}
    assert {k: v for k, v in pol.items() if k in axes} == {
        "path_confinement": "enforced",
        "write_confinement": "enforced",
        "network_confinement": net_axis,
        "secret_confinement": "not_enforced",
        "child_process_confinement": "enforced",
    }
    text = json.dumps(d)
    enforced = text.split("confinement enforced: ")[1].split(";")[0]
    assert ("network" in enforced) == (net_axis == "enforced")
    assert "execution policy: bwrap" in text


@needs_bwrap
@pytest.mark.slow
def test_a_sandboxed_tree_dies_with_its_supervisor(boxed: ToolContext) -> None:
    import signal

    a, b = _unique_durations(2)
    r = run(boxed, cmd=f"(setsid sleep {a} &); sleep {b}", yield_time_ms=100)
    assert r.ok and r.data["disposition"] == "promoted_to_task", r.content
    tid = str(r.data["task_handle"]["task_id"])
    end = time.monotonic() + 10
    while time.monotonic() < end:
        sup = (tasks.read_task(boxed.store, tid).get("supervisor") or {}).get("pid")
        running = subprocess.run(["pgrep", "-f", f"sleep ({a}|{b})$"], capture_output=True).stdout
        if sup and len(running.split()) >= 2:
            break
        time.sleep(0.05)
    os.kill(int(sup), signal.SIGKILL)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        left = subprocess.run(["pgrep", "-f", f"sleep ({a}|{b})$"], capture_output=True).stdout
        if not left.strip():
            break
        time.sleep(0.1)
    assert not left.strip(), left


def test_wrap_hides_the_home_inside_a_root_that_contains_it(tmp_path: Path) -> None:
    """A root that contains $HOLON_HOME (root = ~ and the home ~/.holon) is
    bound first and the home hidden over it; a root inside the home is bound
    back over the hidden home."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\n")
    (fake / "bwrap").chmod(0o755)
    env = {"PATH": str(fake)}
    outer, home = tmp_path / "user", tmp_path / "user" / ".holon"
    (home / "agents" / "a" / ".holon").mkdir(parents=True)
    pol = sandbox.Policy("bwrap", False)
    argv = sandbox.wrap(["true"], pol, root=outer, cwd=outer, hidden=[home], env=env).argv
    assert argv.index("--bind") < argv.index(str(home)) - 1  # bind, then hide the home
    agent = home / "agents" / "a"
    argv = sandbox.wrap(
        ["true"], pol, root=agent, cwd=agent, hidden=[home, agent / ".holon"], env=env
    ).argv
    i_home = argv.index(str(home))
    i_bind = argv.index("--bind")
    i_dot = argv.index(str(agent / ".holon"))
    assert argv[i_home - 1] == "--tmpfs" and i_home < i_bind < i_dot
    assert argv[argv.index("--") + 1 :] == ["true"] and "--unshare-net" in argv
    assert "--cap-drop" in argv and "--seccomp" in argv  # network off: no Unix socket
    on = sandbox.wrap(
        ["true"], sandbox.Policy("bwrap", True), root=outer, cwd=outer, hidden=[], env=env
    )
    assert "--unshare-net" not in on.argv and "--seccomp" not in on.argv and on.seccomp is None
    assert "--cap-drop" in on.argv  # no capability, network or not
    assert sandbox.wrap(
        ["true"], sandbox.Policy("none", True, "none"), root=outer, cwd=outer, hidden=[], env={}
    ).argv == ["true"]
