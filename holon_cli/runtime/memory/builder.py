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

Started by ``runtime.memory.background.spawn_builder`` as ``python -m
holon_cli.runtime.memory.builder AGENT_HOME AGENT_ID``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from holon_cli.store.agent_store import AgentStore


def build(store: AgentStore) -> int:
    """Hold the builder lock and bring the index up to date; 0 also when
    another builder holds the lock (it does the work)."""
    from holon_cli.errors import BusyError
    from holon_cli.runtime.memory.background import builder_lock_path
    from holon_cli.runtime.memory.sync import freshen, index_path
    from holon_cli.store.locks import HeldLock
    from holon_cli.store.memory_index import open_index

    lock = HeldLock(builder_lock_path(store), "the memory index builder")
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
