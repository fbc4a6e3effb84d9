"""`pid_alive`: the one pid-liveness probe (status's stale-run check, wake
hints, inbox sweeps, agent-creation sweeps, task recovery without /proc)."""

from __future__ import annotations

import os

import pytest

from holon_cli.store.locks import pid_alive


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
