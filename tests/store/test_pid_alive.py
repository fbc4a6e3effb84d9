"""`pid_alive`: the one pid-liveness probe (status's stale-run check, wake
hints, inbox sweeps, agent-creation sweeps, task and supervisor identities
with their start time, the daemon's recorded pid)."""

from __future__ import annotations

import os
import time

import pytest

from holon_cli.store.locks import pid_alive, proc_stat

needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="no /proc")


def test_our_own_process_is_alive() -> None:
    assert pid_alive(os.getpid())


def test_a_reaped_child_is_not_alive() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert not pid_alive(pid)


@pytest.mark.parametrize("bad", [None, "123", 0, -1, True, 2**80, 1.5, [1]])
def test_a_missing_or_damaged_pid_field_is_not_alive(bad: object) -> None:
    assert pid_alive(bad) is False


@needs_proc
def test_a_zombie_is_not_alive() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while (proc_stat(pid) or [b"?"])[0] != b"Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (proc_stat(pid) or [b"?"])[0] == b"Z"
        assert not pid_alive(pid)
    finally:
        os.waitpid(pid, 0)


@needs_proc
def test_the_start_time_names_one_process() -> None:
    fields = proc_stat(os.getpid())
    assert fields is not None
    started = int(fields[19])
    assert pid_alive(os.getpid(), started)
    assert not pid_alive(os.getpid(), started + 1)  # a later process under a reused pid
    assert not pid_alive(None, started)
