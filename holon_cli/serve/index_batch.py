"""serve's writes into the wake index (``store/wake.py``): the entries its
passes leave, batched, and the claims they release.

A pass claims its agent's marker before it reads the agent and leaves an
entry (its next deadline, whether it has work) when it ends. The entries
are written together, at most every ``FLUSH_S``; a claim is released only
once its entry (or a newer one of the agent) is in ``wake.json``, or when a
newer claim of the agent is held (one is enough to keep the agent marked):
a serve killed before its write leaves its agents marked, never skipped.
While the index is in doubt (``rebuild``: the agents whose passes complete
it), nothing is written until every agent passed; then the index is
written whole at once.

Not thread-safe: the scheduler calls :meth:`add`, :meth:`take` and
:meth:`put_back` under its lock, :meth:`write` outside it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from holon_cli.store import wake as W

# passes' entries go into the wake index in batches, at most this often
FLUSH_S = 2.0


class Taken(NamedTuple):
    """A batch taken for writing: its entries, their claims' files, what it is
    valid for and whether it is the whole index (the end of a rebuild)."""

    entries: dict[str, W.Entry]
    names: dict[str, str]
    valid: W.Validity
    full: bool


class IndexBatch:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.entries: dict[str, W.Entry] = {}
        self.names: dict[str, str] = {}  # agent -> its newest claim's file
        self.orphans: dict[str, str] = {}  # claims whose entries went void
        self.valid: W.Validity | None = None
        # agents whose passes complete an index that was in doubt (None: sound)
        self.rebuild: set[str] | None = None
        self.next_flush: float | None = None  # monotonic; None: nothing to write

    def rebuild_with(self, ids: Iterable[str]) -> None:
        """The index is in doubt: written again whole once these agents passed."""
        self.rebuild = set(ids) | (self.rebuild or set())

    def add(self, aid: str, entry: W.Entry, valid: W.Validity, claim: W.Claim) -> None:
        """A pass's entry and its claim, kept for the next write."""
        if self.valid is not None and self.valid != valid:
            # the home moved on (config.yaml) between passes: the older entries
            # are void; their claims keep their agents marked until newer ones
            self.orphans.update(self.names)
            self.entries.clear()
            self.names.clear()
        self.valid = valid
        old = self.entries.get(aid)
        if old is None or old.at <= entry.at:
            self.entries[aid] = entry
        if claim.path is not None:
            prev = [n for n in (self.names.get(aid), self.orphans.pop(aid, None)) if n]
            self.names[aid] = os.path.basename(claim.path)
            W.release(self.root, prev)
        if self.rebuild is not None:
            self.rebuild.discard(aid)
            if not self.rebuild:
                self.next_flush = time.monotonic()  # the index is whole: write it now
                return
        if self.next_flush is None:
            self.next_flush = time.monotonic() + FLUSH_S

    def take(self) -> Taken | None:
        """The batch to write now, emptied here; None when there is nothing
        to write or the index is still being rebuilt."""
        self.next_flush = None
        if not self.entries or self.valid is None:
            return None
        full = self.rebuild is not None and not self.rebuild
        if self.rebuild is not None and not full:
            # still rebuilding: the index is in doubt until every agent passed
            return None
        out = Taken(self.entries, self.names, self.valid, full)
        self.entries, self.names, self.valid = {}, {}, None
        if full:
            self.rebuild = None
        return out

    def write(self, taken: Taken) -> bool:
        """Merge a taken batch into ``wake.json`` and release its claims;
        False when refused (the index in doubt, the home moved on). Raises
        what the write raises."""
        if not W.merge(self.root, taken.entries, taken.valid, full=taken.full):
            return False
        W.release(self.root, taken.names.values())
        return True

    def put_back(self, taken: Taken) -> None:
        """A batch not written goes back, under whatever came meanwhile."""
        if self.valid is None or self.valid == taken.valid:
            self.valid = taken.valid
            for aid, e in taken.entries.items():
                self.entries.setdefault(aid, e)
            for aid, name in taken.names.items():
                if aid in self.names:
                    W.release(self.root, [name])  # a newer claim holds the agent
                else:
                    self.names[aid] = name
        else:
            self.orphans.update(taken.names)
