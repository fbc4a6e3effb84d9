"""File locks: exclusive, released by closing, never deleted; busy is exit 75."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from holon_cli.errors import EXIT_BUSY, BusyError
from holon_cli.store.locks import HeldLock, locked

HOLDER = """
import sys, time
from filelock import UnixFileLock
lk = UnixFileLock(sys.argv[1], is_singleton=False)
lk.acquire()
print("held", flush=True)
time.sleep(30)
"""


@pytest.fixture
def held_elsewhere(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "locks" / "x.lock"
    path.parent.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        yield path, proc
    finally:
        proc.kill()
        proc.wait()


def test_locked_blocks_until_timeout_then_busy(held_elsewhere) -> None:  # type: ignore[no-untyped-def]
    path, _ = held_elsewhere
    t0 = time.monotonic()
    with pytest.raises(BusyError) as ei:
        with locked(path, timeout=0.2, what="agent 'main'"):
            pass
    assert time.monotonic() - t0 >= 0.15
    assert ei.value.exit_code == EXIT_BUSY and "agent 'main'" in ei.value.message


def test_lock_released_when_holder_dies(held_elsewhere) -> None:  # type: ignore[no-untyped-def]
    path, proc = held_elsewhere
    proc.kill()
    proc.wait()
    with locked(path, timeout=5):
        pass


def test_held_lock_never_waits(held_elsewhere) -> None:  # type: ignore[no-untyped-def]
    path, _ = held_elsewhere
    lk = HeldLock(path, "a turn for agent 'main'")
    t0 = time.monotonic()
    with pytest.raises(BusyError, match="already running"):
        lk.try_acquire()
    assert time.monotonic() - t0 < 1.0


def test_lock_file_survives_release(tmp_path: Path) -> None:
    path = tmp_path / "l" / "a.lock"
    with locked(path):
        assert path.exists()
    assert path.exists()
    with HeldLock(path, "x"):
        with pytest.raises(BusyError):
            HeldLock(path, "x").try_acquire()  # a second fd in the same process contends
    with HeldLock(path, "x"):
        pass
    assert path.exists()
