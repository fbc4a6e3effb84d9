"""One forked supervisor serves a caller's commands one after another
(``runtime/tasks/forked.py``): what it is handed, what it must never carry
from one call into the next, when it lets go. Real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from holon_cli.runtime.tasks import forked
from holon_cli.runtime.tasks import plane as tasks
from holon_cli.tools.base import ToolContext, ToolResult

Call = Callable[..., ToolResult]
# whatever a failing test's tasks left running is killed at teardown
pytestmark = pytest.mark.usefixtures("reap_test_tasks")

# the command prints its parent: the supervisor (setpriv execs the shell)
PARENT = "echo $PPID"


def supervisor_of(r: ToolResult) -> int:
    assert r.ok and r.data["exit_status"] == 0, r.content
    return int(r.data["stdout_preview"].splitlines()[0])


def proc_state(pid: int) -> str | None:
    """``pid``'s state letter (``Z``: exited, not collected); None once gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def gone(pid: int, within: float = 5.0) -> bool:
    """``pid`` (a child of this process) has exited; it is collected."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        forked.reap()
        state = proc_state(pid)
        if state is None:
            return True
        if state in ("Z", "X"):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.02)
    return False


def open_fds(pid: int) -> list[str]:
    return sorted(os.listdir(f"/proc/{pid}/fd"))


def test_the_calls_of_a_turn_share_one_supervisor(
    call: Call, on_host: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One fork for five commands; each gets its own output and exit
    status; what a call opened is closed before the next (the supervisor
    holds the same descriptors after the fifth as after the second)."""
    forks: list[int] = []
    real_fork = os.fork

    def counted() -> int:
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(forked.os, "fork", counted)
    sups, fds = [], []
    for i in range(5):
        r = call("ExecCommand", cmd=f"{PARENT}; echo call-{i} >&2; exit {i}")
        assert r.data["exit_status"] == i and r.data["stderr_preview"] == f"call-{i}\n"
        sups.append(int(r.data["stdout_preview"].splitlines()[0]))
        fds.append(open_fds(sups[-1]))
    assert len(set(sups)) == 1 and forks == sups[:1], (sups, forks)
    assert fds[1] == fds[4], fds
    # nothing of a call is left behind: its directory is gone
    assert on_host.store is not None
    assert not list(tasks.tasks_root(on_host.store).glob("task_*"))


def test_each_call_gets_the_environment_built_for_it(
    call: Call, on_host: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment travels with each call: a change between two calls
    reaches the second, served by the same supervisor."""
    first = call("ExecCommand", cmd=f"{PARENT}; echo $LANG")
    monkeypatch.setenv("LANG", "holon-test.UTF-8")
    second = call("ExecCommand", cmd=f"{PARENT}; echo $LANG")
    assert supervisor_of(first) == supervisor_of(second)
    assert second.data["stdout_preview"].splitlines()[1] == "holon-test.UTF-8"


def test_a_call_stopped_by_a_signal_retires_its_supervisor(
    call: Call, on_host: ToolContext
) -> None:
    """A stop signal to the supervisor (what ``task_stop`` sends, after
    recording the stop) ends its call ``cancelled``; that supervisor then
    serves nothing more (another signal sent late for that call must not
    reach the next one). The next call gets a new supervisor."""
    store = on_host.store
    assert store is not None
    sup = supervisor_of(call("ExecCommand", cmd=PARENT))
    launched = tasks.launch(
        store,
        argv=["/bin/bash", "-c", "sleep 30"],
        cmd="sleep 30",
        cwd=on_host.cwd,
        shell=None,
        login=False,
        config=on_host.config,
    )
    assert launched.pid == sup  # the idle one took it
    end = time.monotonic() + 5
    while (tasks.read_record_file(launched.dir) or {}).get("status") != "running":
        assert time.monotonic() < end
        time.sleep(0.01)
    os.kill(sup, signal.SIGTERM)
    rec = tasks.wait_foreground(launched, 10)
    assert rec is not None and rec["status"] == "cancelled", rec
    assert launched.ended == b"" and gone(sup)
    tasks.discard_foreground(launched)
    assert supervisor_of(call("ExecCommand", cmd=PARENT)) != sup


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_an_idle_supervisor_signalled_or_killed_is_replaced(
    call: Call, on_host: ToolContext, sig: signal.Signals
) -> None:
    """A stop signal reaching an idle supervisor ends it (it would
    otherwise be carried into the next call); one killed while idle is
    found missing. Either way the next call runs, on a new supervisor."""
    sup = supervisor_of(call("ExecCommand", cmd=PARENT))
    os.kill(sup, sig)
    assert gone(sup)
    r = call("ExecCommand", cmd=f"{PARENT}; echo after")
    assert supervisor_of(r) != sup and r.data["stdout_preview"].endswith("after\n")


def test_an_idle_supervisor_leaves_after_its_idle_time(
    call: Call, on_host: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forked, "IDLE_S", 0.3)  # before the fork: the supervisor inherits it
    sup = supervisor_of(call("ExecCommand", cmd=PARENT))
    assert gone(sup, within=5.0)
    assert supervisor_of(call("ExecCommand", cmd=PARENT)) != sup


def test_a_supervisor_past_its_age_takes_no_more_calls(
    call: Call, on_host: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle supervisor forked longer ago than MAX_AGE_S is let go (it
    holds a copy of what its caller wrote since) and collected; the call
    goes to a new one."""
    first = supervisor_of(call("ExecCommand", cmd=PARENT))
    monkeypatch.setattr(forked, "MAX_AGE_S", 0.0)
    second = supervisor_of(call("ExecCommand", cmd=PARENT))
    assert second != first and gone(first)


def test_a_supervisor_gone_idle_is_collected_at_the_next_call(
    call: Call, on_host: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One that left the pool on its own (its idle time passed) leaves no
    zombie once this process starts its next command."""
    monkeypatch.setattr(forked, "IDLE_S", 0.2)
    sup = supervisor_of(call("ExecCommand", cmd=PARENT))
    end = time.monotonic() + 5
    while proc_state(sup) != "Z":
        assert time.monotonic() < end
        time.sleep(0.02)
    monkeypatch.setattr(forked, "IDLE_S", 60.0)
    supervisor_of(call("ExecCommand", cmd=PARENT))
    assert not Path(f"/proc/{sup}").exists()
    assert all(idle.pid != sup for idle in forked._pool)


def test_a_supervisor_serves_at_most_max_calls(
    call: Call, on_host: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forked, "MAX_CALLS", 2)
    sups = [supervisor_of(call("ExecCommand", cmd=PARENT)) for _ in range(3)]
    assert sups[0] == sups[1] != sups[2]


@pytest.mark.slow
def test_a_reused_supervisor_promotes_and_reports_once(call: Call, on_host: ToolContext) -> None:
    """A call served by a supervisor that served another before it runs
    past its yield: it is handed off (a fresh interpreter, out of the
    pool) and reports its ONE result."""
    from test_exec_command_promotion import promoted_id, task_results, wait_reported

    store = on_host.store
    assert store is not None
    sup = supervisor_of(call("ExecCommand", cmd=PARENT))
    r = call("ExecCommand", cmd=f"{PARENT}; sleep 0.5; exit 3", yield_time_ms=150)
    tid = promoted_id(r)
    assert int(r.data["initial_output_preview"].splitlines()[0]) == sup
    rec = wait_reported(store, tid)
    assert rec["exit_status"] == 3 and rec["supervisor"]["pid"] == sup
    assert len(task_results(store, tid)) == 1
    assert supervisor_of(call("ExecCommand", cmd=PARENT)) != sup  # it left the pool


@pytest.mark.slow
def test_letting_idle_supervisors_go_does_not_wait_for_a_promoted_task(
    call: Call, on_host: ToolContext
) -> None:
    """A process's exit lets its idle supervisors go and waits for them; a
    promoted task's supervisor, which runs on, is not waited for (a turn
    that promoted a command ended a second late)."""
    from test_exec_command_promotion import promoted_id, wait_reported

    store = on_host.store
    assert store is not None
    supervisor_of(call("ExecCommand", cmd=PARENT))  # one idle
    tid = promoted_id(call("ExecCommand", cmd="sleep 2", yield_time_ms=100))
    idle = supervisor_of(call("ExecCommand", cmd=PARENT))
    t0 = time.monotonic()
    assert forked.retire_idle(wait_s=1.5) == [idle]
    assert time.monotonic() - t0 < 0.5
    assert gone(idle)
    wait_reported(store, tid)


SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.tasks import plane as tasks

    store = open_agent(None)
    launched = tasks.launch(
        store, argv=["/bin/bash", "-c", "true"], cmd="true", cwd=Path.cwd(),
        shell=None, login=False, config={"execution": {"sandbox": "none"}},
    )
    assert tasks.wait_foreground(launched, 10)["status"] == "completed"
    print(launched.pid, flush=True)
    if sys.argv[1] == "kill-mid":  # the same supervisor's second call runs
        second = tasks.launch(
            store, argv=["/bin/bash", "-c", "sleep 30"], cmd="sleep 30", cwd=Path.cwd(),
            shell=None, login=False, config={"execution": {"sandbox": "none"}},
        )
        assert second.pid == launched.pid
        while (tasks.read_record_file(second.dir) or {}).get("status") != "running":
            pass
        print(second.task_id, flush=True)
    if sys.argv[1] in ("kill", "kill-mid"):
        os.kill(os.getpid(), signal.SIGKILL)  # no exit hooks
    """
)


@pytest.mark.parametrize("how", ["exit", "kill", "kill-mid"])
def test_an_idle_supervisor_ends_with_its_caller(
    holon_home: Path, tmp_path: Path, how: str
) -> None:
    """A caller that exits collects its idle supervisor (its CPU then counts
    as the caller's children's, as it did with one supervisor per call); a
    caller killed outright leaves it its socket's EOF, and it exits too;
    killed while the supervisor runs its second call, that call's command
    is stopped with it, as a first call's is."""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, how],
        cwd=tmp_path,
        env={**os.environ, "HOLON_HOME": str(holon_home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    sup = int(proc.stdout.split()[0])
    if how == "exit":
        assert proc.returncode == 0, proc.stderr
        assert not Path(f"/proc/{sup}").exists(), "collected before its caller ended"
        return
    assert proc.returncode == -signal.SIGKILL
    if how == "kill-mid":
        from task_reaper import leftovers

        tid = proc.stdout.split()[1]
        rec_path = next(holon_home.glob(f"agents/*/.holon/tasks/{tid}/task.json"))
        end = time.monotonic() + 10
        while True:
            rec = json.loads(rec_path.read_text())
            if rec["status"] == "interrupted" and not leftovers(rec):
                break
            assert time.monotonic() < end, (rec, leftovers(rec))
            time.sleep(0.05)
    end = time.monotonic() + 5
    while proc_state(sup) not in (None, "Z"):  # reparented: init collects it
        assert time.monotonic() < end, "the idle supervisor outlived its killed caller"
        time.sleep(0.02)
