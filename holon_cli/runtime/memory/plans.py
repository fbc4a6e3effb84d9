"""The plan check before every search: which open work items' plan files
changed since the index read them (:mod:`.sync` re-indexes those).

One ``stat`` per plan checked, relative to an open ``work-items`` folder,
compared with the plan part of the fingerprint the index holds. Up to
:data:`PLAN_CHECKS` open items, every plan; beyond, the :data:`PLAN_HOT`
most recently updated, the current item's and the next share of a round
over the rest, paced so that a plan edited by hand is seen by every search
that starts :data:`PLAN_ROUND_S` after the edit (:func:`plans_to_check`).

What a process keeps between searches, per agent home: the open items
(while the work ledgers' stats are the same), the open ``work-items``
folder, and where the round is.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from holon_cli.errors import CorruptStateError
from holon_cli.runtime.memory import sources as S
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.memory_index import MemoryIndex

# plan files stat'ed before a search: every open item's up to PLAN_CHECKS;
# beyond, the PLAN_HOT most recently updated items' (and the current one's)
# and a share (at least PLAN_SLICE) of a round over the others paced to end
# within PLAN_ROUND_S
PLAN_CHECKS = 300
PLAN_HOT = 100
PLAN_SLICE = 50
PLAN_ROUND_S = 5.0

# (id, source key, plan path in ``work-items``, fingerprint before and after
# the plan signature) of an open item
Item = tuple[str, str, str, str, str]

_ITEM_DIRS: dict[str, tuple[int, tuple[int, int], int]] = {}
# agent home -> (work ledgers' stats, open items): what the plan check walks
_OPEN_ITEMS: dict[str, tuple[list[Any], list[Item]]] = {}
# agent home -> (next position, time of the last search, the open items it
# walked) of the round over the plans past the hot ones
_PLAN_ROUNDS: dict[str, tuple[int, float, list[Any]]] = {}


def open_items(store: AgentStore, sigs: list[Any]) -> list[Item]:
    """Every open item (see :data:`Item`), the most recently updated first;
    kept while the work ledgers' stats are ``sigs``."""
    home = str(store.layout.home)
    kept = _OPEN_ITEMS.get(home)
    if kept is not None and kept[0] == sigs:
        return kept[1]
    from holon_cli.store import workitem_index

    try:
        wix = workitem_index.load(store)
    except CorruptStateError:
        return []  # `holon home check` reports it; search keeps what it has
    recs = sorted(
        wix.open_records(),
        key=lambda r: (str(r.get("updated_at") or ""), r["id"]),
        reverse=True,
    )
    out = []
    for rec in recs:
        wid = rec["id"]
        head, tail = S.work_item_fingerprint_parts(rec, (wix.report_of(wid) or {}).get("id"))
        out.append((wid, f"work_item:{wid}", f"{wid}/plan.md", head, tail))
    _OPEN_ITEMS[home] = (sigs, out)
    return out


def plans_to_check(home: str, items: list[Item], state: Any) -> list[Item]:
    """All of them, up to :data:`PLAN_CHECKS`; beyond, the
    :data:`PLAN_HOT` most recently updated, the current one and the next
    share of a round over the rest: the part of the round that the time
    since this process's previous search is of :data:`PLAN_ROUND_S` (at
    least :data:`PLAN_SLICE`; all of it at a process's first search and
    when the open items changed). So every plan is checked by a search
    that starts :data:`PLAN_ROUND_S` or more after the plan changed,
    and a search of a busy process stats a few hundred plans, not every
    one (a whole round at once was a spike every :data:`PLAN_ROUND_S`)."""
    if len(items) <= PLAN_CHECKS:
        return items
    hot, rest = items[:PLAN_HOT], items[PLAN_HOT:]
    now = time.monotonic()
    rnd = _PLAN_ROUNDS.get(home)
    if rnd is None or rnd[2] is not items or PLAN_ROUND_S <= 0:
        share = len(rest)  # a first search, or other items: every plan
        cursor = 0
    else:
        cursor = rnd[0] % len(rest)
        share = max(PLAN_SLICE, math.ceil(len(rest) * (now - rnd[1]) / PLAN_ROUND_S))
    share = min(share, len(rest))
    end = cursor + share
    out = hot + rest[cursor:end] + rest[: max(0, end - len(rest))]
    _PLAN_ROUNDS[home] = (end % len(rest), now, items)
    current = (state or {}).get("current_work_item_id")
    if isinstance(current, str) and not any(i[0] == current for i in out):
        out += [i for i in rest if i[0] == current]
    return out


def changed_plans(
    store: AgentStore,
    idx: MemoryIndex,
    known: dict[str, str],
    sigs: list[Any],
    work_items: str,
    state: Any,
) -> list[str]:
    """The ids of the open items indexed (``known``: their fingerprints)
    whose plan file moved since. One ``stat`` per plan checked
    (:func:`plans_to_check`), the loop kept tight: it runs before every
    search."""
    items = open_items(store, sigs)
    if not items:
        return []
    fd = _work_items_fd(work_items)
    if fd is None:
        return []
    expect: dict[str, tuple[str, Any]] = idx.cache.setdefault("plan_expect", {})
    stat = os.stat
    stale = []
    for wid, key, rel, head, tail in plans_to_check(str(store.layout.home), items, state):
        have = known.get(key)
        if have is None:
            continue
        want = expect.get(key)
        if want is None or want[0] is not have:
            want = expect[key] = (have, S.plan_part(have, head, tail))
        try:
            st = stat(rel, dir_fd=fd)
            now: Any = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            now = None
        if now != want[1]:
            stale.append(wid)
    return stale


def _work_items_fd(path: str) -> int | None:
    """An open ``work-items`` folder (``path``) of this agent (kept; opened
    again when the folder was replaced)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    kept = _ITEM_DIRS.get(path)
    if kept is not None:
        if kept[1] == (st.st_dev, st.st_ino) and kept[2] == os.getpid():
            return kept[0]
        if kept[2] == os.getpid():
            os.close(kept[0])
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    _ITEM_DIRS[path] = (fd, (st.st_dev, st.st_ino), os.getpid())
    return fd
