"""How ExecCommand starts its supervisor (forked from the caller, no Python
start) and hands a promoted call to a fresh interpreter: real processes."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime.tasks import plane as tasks
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.locks import pid_alive
from holon_cli.tools.base import ToolContext, ToolResult

Call = Callable[..., ToolResult]
TERMINAL = ("completed", "failed", "cancelled", "interrupted")


@pytest.fixture(autouse=True)
def _no_task_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    # a failing test must not leave a task (and its supervisor) running
    if "ctx" not in request.fixturenames:
        yield
        return
    store = request.getfixturevalue("ctx").store
    yield
    for rec in tasks.unsettled_tasks(store):
        if rec["status"] not in TERMINAL:
            tasks.task_stop(store, rec["id"], wait_s=2)


def wait_reported(store: AgentStore, tid: str, within: float = 20.0) -> dict[str, Any]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        rec = tasks.read_task(store, tid)
        if rec["status"] in TERMINAL and (
            rec.get("result_message_id") or rec.get("result_undeliverable")
        ):
            return rec
        time.sleep(0.05)
    raise AssertionError(f"task {tid} did not report: {tasks.read_task(store, tid)}")


def task_results(store: AgentStore, tid: str) -> list[dict[str, Any]]:
    msgs = (store.inbox.read(p) for p in store.inbox.pending())
    return [m for m in msgs if m.get("kind") == "task_result" and m.get("task_id") == tid]


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def wait_handed_off(store: AgentStore, tid: str, within: float = 10.0) -> None:
    """Until the task's supervisor runs as the fresh interpreter and has read
    its hand-off state."""
    sup = tasks.read_task(store, tid)["supervisor"]["pid"]
    handoff = tasks.task_dir(store, tid) / "handoff.json"
    end = time.monotonic() + within
    while time.monotonic() < end:
        if "holon_cli.runtime.tasks.supervisor" in cmdline(sup) and not handoff.exists():
            return
        time.sleep(0.02)
    raise AssertionError(f"task {tid} was not handed off: {cmdline(sup)!r}")


def promoted_id(r: ToolResult) -> str:
    assert r.ok, r.content
    assert r.data["disposition"] == "promoted_to_task", r.content
    return str(r.data["task_handle"]["task_id"])


def test_a_short_command_starts_no_python_interpreter(call: Call, on_host: ToolContext) -> None:
    # the command reports its parent (the supervisor) and the supervisor's parent
    r = call(
        "ExecCommand",
        cmd="echo $PPID; tr '\\0' ' ' < /proc/$PPID/cmdline; echo; "
        "awk '{print $4}' /proc/$PPID/stat",
    )
    assert r.ok and r.data["exit_status"] == 0, r.content
    sup_pid, sup_cmdline, sup_parent = r.data["stdout_preview"].splitlines()
    assert int(sup_pid) != os.getpid()
    assert int(sup_parent) == os.getpid(), "the supervisor is forked from the caller"
    # a fork that never exec'd: the caller's own command line, not `python -S -c ...`
    assert sup_cmdline.strip() == cmdline(os.getpid())
    assert "supervisor" not in sup_cmdline and " -S " not in sup_cmdline


@pytest.mark.slow
def test_a_promoted_exit_code_and_signal_are_recorded(
    call: Call, ctx: ToolContext, on_host: ToolContext
) -> None:
    # unsandboxed: under bwrap a command killed by a signal ends its sandbox
    # with exit status 128 + N (bwrap's own exit), the signal is not seen
    assert ctx.store is not None
    tid = promoted_id(
        call("ExecCommand", cmd="echo begun; sleep 0.45; echo ended; exit 7", yield_time_ms=150)
    )
    killed = promoted_id(call("ExecCommand", cmd="sleep 0.45; kill -KILL $$", yield_time_ms=150))
    rec = wait_reported(ctx.store, tid)
    assert rec["status"] == "failed" and rec["exit_status"] == 7 and rec["signal"] is None
    (msg,) = task_results(ctx.store, tid)
    assert "exit status 7" in msg["body"]["text"] and "ended" in msg["body"]["text"]
    # after the hand-off the supervisor is a fresh interpreter, not a copy of this process
    assert rec["supervisor"]["pid"] != os.getpid()
    rec = wait_reported(ctx.store, killed)
    assert rec["exit_status"] == 128 + 9 and rec["signal"] == "SIGKILL"
    ledger = [
        json.loads(line)
        for line in (ctx.store.layout.ledger_dir / "tasks.jsonl").read_text().splitlines()
    ]
    finals = [x for x in ledger if x["id"] == tid and x["status"] in TERMINAL]
    assert [x["exit_status"] for x in finals] == [7]
    assert not (tasks.task_dir(ctx.store, tid) / "handoff.json").exists()


@pytest.mark.slow
def test_the_handed_off_supervisor_is_a_fresh_interpreter(call: Call, ctx: ToolContext) -> None:
    assert ctx.store is not None
    tid = promoted_id(call("ExecCommand", cmd="sleep 30", yield_time_ms=100))
    sup = tasks.read_task(ctx.store, tid)["supervisor"]["pid"]
    end = time.monotonic() + 10
    while "holon_cli.runtime.tasks.supervisor" not in cmdline(sup) and time.monotonic() < end:
        time.sleep(0.02)
    line = cmdline(sup)
    assert " -S -c " in line and line.endswith("resume"), line
    # same process (pid and start time) across the exec: recovery still knows it
    rec = tasks.read_task(ctx.store, tid)
    assert pid_alive(sup, rec["supervisor"]["start_time"])
    stop = tasks.task_stop(ctx.store, tid)
    assert stop["task"]["status"] == "cancelled"
    assert len(task_results(ctx.store, tid)) == 1


@pytest.mark.slow
def test_stop_right_after_promotion_is_not_lost_in_the_hand_off(
    call: Call, ctx: ToolContext
) -> None:
    assert ctx.store is not None
    for _ in range(3):
        tid = promoted_id(call("ExecCommand", cmd="sleep 30", yield_time_ms=80))
        # TERM lands before, during or after the supervisor's exec
        t0 = time.monotonic()
        stop = tasks.task_stop(ctx.store, tid, wait_s=8)
        assert stop["task"]["status"] == "cancelled", stop
        # the supervisor acted on it: a lost TERM shows as a stop that ran to
        # its 8 s limit and then stopped the tree itself
        assert time.monotonic() - t0 < 6
        rec = wait_reported(ctx.store, tid)
        assert rec["stop_reason"] == "stop_requested"
        assert len(task_results(ctx.store, tid)) == 1


@pytest.mark.slow
def test_input_output_cap_and_tty_survive_the_hand_off(call: Call, ctx: ToolContext) -> None:
    assert ctx.store is not None
    ctx.config = {"runtime": {"task_output_max_bytes": 300_000}}
    reader = promoted_id(
        call("ExecCommand", cmd="read a; echo got:$a", yield_time_ms=150, accepts_input=True)
    )
    term = promoted_id(
        call(
            "ExecCommand",
            cmd="test -t 0 && echo is-tty; read a; echo tty:$a",
            yield_time_ms=150,
            tty=True,
            accepts_input=True,
        )
    )
    # writes 100 KB before the yield, then without end: the cap counts both sides
    capped = promoted_id(
        call(
            "ExecCommand",
            cmd="head -c 100000 /dev/zero; sleep 0.45; yes",
            yield_time_ms=250,
        )
    )
    wait_handed_off(ctx.store, reader)
    wait_handed_off(ctx.store, term)
    assert tasks.task_input(ctx.store, reader, "one\n")["accepted_input"]
    assert tasks.task_input(ctx.store, term, "two\n")["accepted_input"]
    rec = wait_reported(ctx.store, reader)
    assert rec["status"] == "completed"
    assert "got:one" in (tasks.task_dir(ctx.store, reader) / "output.log").read_text()
    wait_reported(ctx.store, term)
    text = (tasks.task_dir(ctx.store, term) / "output.log").read_text()
    assert "is-tty" in text and "tty:two" in text
    rec = wait_reported(ctx.store, capped)
    assert rec["stop_reason"] == "output_limit" and rec["output_bytes"] == 300_000
    assert (tasks.task_dir(ctx.store, capped) / "output.log").stat().st_size == 300_000


@pytest.mark.slow
def test_the_supervisor_does_not_inherit_the_callers_locks(
    call: Call, ctx: ToolContext, tmp_path: Path
) -> None:
    assert ctx.store is not None
    lockfile = tmp_path / "held.lock"
    fd = os.open(lockfile, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    tid = promoted_id(call("ExecCommand", cmd="sleep 30", yield_time_ms=100))
    os.close(fd)  # our lock is released only if no supervisor holds a copy of the fd
    other = os.open(lockfile, os.O_RDWR)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)
        tasks.task_stop(ctx.store, tid)


@pytest.mark.slow
def test_promotion_survives_a_sigkill_of_the_caller_right_after_it(tmp_path: Path) -> None:
    """The turn process dies the moment ExecCommand returned promoted_to_task:
    the task still runs to its end and reports its exit code, once."""
    root = tmp_path / "root"
    root.mkdir()
    script = tmp_path / "caller.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, signal, sys
            from holon_cli.providers.base import ToolCall
            from holon_cli.runtime.agents.lifecycle import open_agent
            from holon_cli.tools.base import ToolContext, execute
            from holon_cli.tools.catalog import registry

            store = open_agent(None)
            root = {str(root)!r}
            ctx = ToolContext(store=store, agent_id=store.agent_id, execution_root=root,
                              cwd=root, workspace_anchor=root, turn_id="turn_x")
            args = {{"cmd": "echo start; sleep 1; echo finish; exit 5", "yield_time_ms": 200}}
            r = execute(registry()["ExecCommand"], ctx,
                        ToolCall(id="c1", name="ExecCommand", arguments=args))
            print(r.data["task_handle"]["task_id"], flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), *sys.path])}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    tid = proc.stdout.strip()
    assert tid.startswith("task_"), proc.stderr
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(None)
    rec = wait_reported(store, tid)
    assert rec["status"] == "failed" and rec["exit_status"] == 5
    (msg,) = task_results(store, tid)
    assert "finish" in msg["body"]["text"]
    assert tasks.reap_orphans(store)["reported"] == []  # never twice


@pytest.mark.slow
def test_the_forked_supervisor_takes_no_lock_held_at_fork_time(
    call: Call, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork copies only the calling thread: a lock another thread held at
    that instant stays held in the child forever. Simulate the worst case
    (``clock``'s id lock, which admitting a message needs) and check that
    short commands, promotion and the ONE result still work."""
    from holon_cli import clock
    from holon_cli.runtime.tasks import forked

    real_fork = os.fork

    def fork_with_lock_held() -> int:
        clock._lock.acquire()
        pid = real_fork()
        if pid != 0:
            clock._lock.release()  # the parent goes on; the child keeps it held
        return pid

    monkeypatch.setattr(forked.os, "fork", fork_with_lock_held)
    assert ctx.store is not None
    r = call("ExecCommand", cmd="echo short")
    assert r.ok and r.data["stdout_preview"] == "short\n", r.content
    tid = promoted_id(call("ExecCommand", cmd="sleep 0.4; exit 4", yield_time_ms=100))
    rec = wait_reported(ctx.store, tid)
    assert rec["exit_status"] == 4 and rec.get("result_message_id")
    assert len(task_results(ctx.store, tid)) == 1


@pytest.mark.slow
def test_commands_from_concurrent_threads_like_serve(call: Call, ctx: ToolContext) -> None:
    """``holon serve`` runs turns in threads: each fork happens while other
    threads are mid-call (holding sockets, waiting, forking themselves)."""
    import threading

    assert ctx.store is not None
    out: dict[int, list[ToolResult]] = {}
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            res = [call("ExecCommand", cmd=f"echo w{n}-{i}; exit {i}") for i in range(4)]
            res.append(call("ExecCommand", cmd=f"sleep 0.4; exit {10 + n}", yield_time_ms=100))
            out[n] = res
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(out) == 4
    for n, res in out.items():
        for i, r in enumerate(res[:4]):
            assert r.data["stdout_preview"] == f"w{n}-{i}\n" and r.data["exit_status"] == i
        tid = promoted_id(res[4])
        rec = wait_reported(ctx.store, tid)
        assert rec["exit_status"] == 10 + n
        assert len(task_results(ctx.store, tid)) == 1
