"""The background builder of a memory index: what a search hands a large
build (or a large backlog) to, so the user's turn does not wait for it.

One per index: the builder holds ``indexes/memory.builder.lock`` (an
``flock``: released by the kernel when it exits or dies) for its whole
life; a second one started meanwhile exits at once. It runs the same
chunks as a search (``runtime.memory.sync``), to the end; each chunk is
one transaction with its progress, so a builder killed in the middle
leaves an index that answers (with what it holds) and a build the next
search or builder resumes. Its stderr goes to ``memory.builder.log``
beside the index (the last run's).

Started as ``python -m holon_cli.runtime.memory.builder AGENT_HOME
AGENT_ID`` in its own session (a Ctrl-C of the search that started it
does not reach it), with ``HOLON_HOME`` as the search saw it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from holon_cli.store.agent_store import AgentStore

_STARTED: dict[str, Any] = {}  # index path -> the Popen of the builder this process started


def lock_path(store: AgentStore) -> Path:
    return store.layout.runtime / "indexes" / "memory.builder.lock"


def log_path(store: AgentStore) -> Path:
    return store.layout.runtime / "indexes" / "memory.builder.log"


def running(store: AgentStore) -> bool:
    """Whether a builder holds this index's lock (a try, never a wait)."""
    import fcntl

    try:
        fd = os.open(lock_path(store), os.O_RDWR)
    except OSError:
        return False  # never started here
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases what we took
    return False


def spawn(store: AgentStore) -> None:
    """Start a builder for ``store``'s index unless this process already
    started one that still runs (one that loses the lock exits at once)."""
    import subprocess

    from holon_cli.store.layout import HomeLayout

    key = str(lock_path(store))
    prev = _STARTED.get(key)
    if prev is not None and prev.poll() is None:
        return
    lock_path(store).parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOLON_HOME=str(HomeLayout.current().root))
    with open(log_path(store), "wb") as log:
        _STARTED[key] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "holon_cli.runtime.memory.builder",
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


def started_by_this_process(store: AgentStore) -> Any:
    """The builder process this process started for ``store`` (tests wait on it)."""
    return _STARTED.get(str(lock_path(store)))


def build(store: AgentStore) -> int:
    """Hold the builder lock and bring the index up to date; 0 also when
    another builder holds the lock (it does the work)."""
    from holon_cli.errors import BusyError
    from holon_cli.runtime.memory.sync import freshen, index_path
    from holon_cli.store.locks import HeldLock
    from holon_cli.store.memory_index import open_index

    lock = HeldLock(lock_path(store), "the memory index builder")
    try:
        lock.try_acquire()
    except BusyError:
        return 0
    try:
        freshen(store, open_index(index_path(store)), budget=None)
    finally:
        lock.release()
    return 0


def main(argv: list[str]) -> int:
    from holon_cli.store.layout import AgentLayout

    if len(argv) != 2:
        print(
            "usage: python -m holon_cli.runtime.memory.builder AGENT_HOME AGENT_ID",
            file=sys.stderr,
        )
        return 2
    home, agent_id = argv
    return build(AgentStore(AgentLayout(Path(home), agent_id)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
