"""Starting the background builder of a memory index (the process is
``runtime/memory/builder.py``): its lock and log beside the index, whether
one runs, spawning one detached, the one this process started."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    import subprocess

# index path -> the builder this process started
_STARTED: dict[str, subprocess.Popen[bytes]] = {}


def builder_lock_path(store: AgentStore) -> Path:
    return store.layout.runtime / "indexes" / "memory.builder.lock"


def builder_log_path(store: AgentStore) -> Path:
    return store.layout.runtime / "indexes" / "memory.builder.log"


def builder_running(store: AgentStore) -> bool:
    """Whether a builder holds this index's lock (a try, never a wait)."""
    import fcntl

    try:
        fd = os.open(builder_lock_path(store), os.O_RDWR)
    except OSError:
        return False  # never started here
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases what we took
    return False


def spawn_builder(store: AgentStore) -> None:
    """Start a builder (``runtime.memory.builder``) for ``store``'s index
    unless this process already started one that still runs (one that loses
    the lock exits at once). Its own session (a Ctrl-C of the search does
    not reach it), ``HOLON_HOME`` as this process sees it, stderr to
    ``memory.builder.log`` (the last run's)."""
    import subprocess

    from holon_cli.store.layout import HomeLayout

    key = str(builder_lock_path(store))
    prev = _STARTED.get(key)
    if prev is not None and prev.poll() is None:
        return
    builder_lock_path(store).parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOLON_HOME=str(HomeLayout.current().root))
    with open(builder_log_path(store), "wb") as log:
        _STARTED[key] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                f"{__package__}.builder",  # another process: this module imports nothing of it
                str(store.layout.home),
                store.agent_id,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
            close_fds=True,
            start_new_session=True,
        )


def started_builder(store: AgentStore) -> subprocess.Popen[bytes] | None:
    """The builder process this process started for ``store`` (tests wait on it)."""
    return _STARTED.get(str(builder_lock_path(store)))
