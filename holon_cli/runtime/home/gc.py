"""``holon home gc``: apply ``retention`` to the whole home now (``serve``
runs the same pass once a day).

One pass: every agent's open ``events`` and ``transcript`` segments are
closed (and compressed); closed segments older than ``events_days`` /
``transcript_days`` are dropped; finished command outputs older than
``outputs_days`` go (``runtime/tasks`` ``prune_outputs``); then, while the
home is over ``max_home_bytes``, the oldest closed segments anywhere, then
the oldest finished outputs. Each agent's work item archive is written
again, one line per item, once late changes to archived items have about
doubled it (``store/workitem_index.compact``: skipped for a busy agent).
Nothing unsettled is touched (see
``store/retention.py``); a home still over its limit after that says so.
``--dry-run`` closes nothing and removes nothing: it reports what a pass
would close (``closed``: each open segment and the segment it would become)
and drop, counting each open segment as if it were closed now.

Serve's daily pass (:func:`scheduled_gc`) is the same pass made cheap: an
open segment is closed only once its first record is half a day old (so a
day's records are closed the next day, not a tiny segment per agent per
day), the home's size is measured only when ``max_home_bytes`` needs it,
and the caller's ``pace`` spreads it out.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from holon_cli.errors import HolonError
from holon_cli.store import ledger as L
from holon_cli.store import retention as R
from holon_cli.store.agent_store import SEGMENTED, AgentStore
from holon_cli.store.config import load_config
from holon_cli.store.layout import HomeLayout


class ClosedSegment(TypedDict):
    """An open segment ``gc`` closed (a dry run: would close, named as it would
    be, with ``open_path`` and ``bytes``)."""

    agent_id: str
    ledger: str
    path: str
    open_path: NotRequired[str]
    bytes: NotRequired[int]


class HomeUsage(TypedDict):
    agents: dict[str, R.AgentUsage]
    home_bytes: int
    max_home_bytes: int | None


class GcReport(TypedDict):
    home: str
    dry_run: bool
    closed: list[ClosedSegment]
    dropped: list[R.SegmentInfo]
    outputs: dict[str, int]
    freed_bytes: int
    home_bytes: int | None  # None: not measured (serve's pass, no max_home_bytes)
    max_home_bytes: int | None
    over_max_home_bytes: bool


def _open_as_candidate(store: AgentStore, name: str, now: float) -> R.Candidate | None:
    led = store.ledger(name)
    try:
        st = led.path.stat()
    except FileNotFoundError:
        return None
    if st.st_size == 0:
        return None
    return R.Candidate(min(st.st_mtime, now), st.st_size, led, led.path, store.agent_id)


def _agent_names(home: HomeLayout) -> list[str]:
    root = str(home.agents_dir)
    try:
        names = sorted(n for n in os.listdir(root) if not n.startswith("."))
    except FileNotFoundError:
        return []
    return [n for n in names if os.path.isdir(f"{root}/{n}/.holon")]


def _nothing_to_do(agent_dir: str, before: float) -> bool:
    """Serve's pass over an agent with no closed segment to drop or finish,
    no open segment old enough to close and no command output: nothing to
    do (plain strings: it asks this of every agent)."""
    return _nothing_to_close(agent_dir, before) and _no_outputs(agent_dir)


def _nothing_to_close(agent_dir: str, before: float) -> bool:
    """No closed segment to drop or finish, and no open segment old enough to
    close."""
    ledger_dir = f"{agent_dir}/.holon/ledger"
    if os.path.isdir(f"{ledger_dir}/segments"):
        return False
    return not any(
        _started_before(Path(f"{ledger_dir}/{name}.jsonl"), before) for name in SEGMENTED
    )


def _no_outputs(agent_dir: str) -> bool:
    """No kept command output and no task folder (nothing to prune)."""
    runtime = f"{agent_dir}/.holon"
    if os.path.isdir(f"{runtime}/outputs"):
        return False
    try:
        return not any(n.startswith("task_") for n in os.listdir(f"{runtime}/tasks"))
    except (FileNotFoundError, NotADirectoryError):
        return True


_AT = re.compile(rb'"at":\s*"([^"]+)"')


def _started_before(path: Path, when: float) -> bool:
    """Whether the open segment's first record is older than ``when`` (its
    ``at``: events, transcript and turn records all carry one near the start
    of the line); a segment whose first record says nothing is."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except FileNotFoundError:
        return False
    if not head:
        return False
    m = _AT.search(head.split(b"\n", 1)[0])
    if m is None:
        return True
    from holon_cli import clock

    try:
        return clock.parse_iso(m.group(1).decode()) < when
    except (ValueError, UnicodeDecodeError):
        return True


def _info(c: R.Candidate, now: float, reason: str) -> R.SegmentInfo:
    return {
        "agent_id": c.agent_id,
        "ledger": c.ledger.path.stem,
        "path": str(c.path),
        "bytes": c.size,
        "age_days": round(max(0.0, now - c.mtime) / R.DAY_S, 3),
        "reason": reason,
    }


def _would_close(store: AgentStore, name: str) -> ClosedSegment:
    """``closed``'s entry for an open segment a dry run leaves open: the
    compressed segment ``gc`` would make of it (and the open file)."""
    from holon_cli.store.ledger_segments import next_segment_number, segment_path

    led = store.ledger(name)
    seg_dir = led.segments_dir
    num = next_segment_number(seg_dir, led.path.stem) if seg_dir.is_dir() else 1
    plain = segment_path(seg_dir, led.path.stem, num)
    return {
        "agent_id": store.agent_id,
        "ledger": name,
        "path": str(plain.with_name(plain.name + ".gz")),
        "open_path": str(led.path),
        "bytes": led.size(),
    }


def _no_pace() -> None:
    return None


def gc_home(
    *,
    dry_run: bool = False,
    now: float | None = None,
    pace: Callable[[], None] | None = None,
    measure: bool = True,
    close_after_s: float | None = None,
) -> GcReport:
    """One retention pass over the whole home (see the module docstring).
    ``pace`` is called between units of work (an agent, a folder of the
    usage walk): serve's pass sleeps there to spread itself out.
    ``measure=False`` skips the walk of the whole home that counts its bytes
    unless ``max_home_bytes`` needs it (serve's daily pass: the walk was
    most of an idle home's pass). ``close_after_s``: an open segment is
    closed only once its first record is that old (serve's daily pass: a
    segment a day's records old is closed the next day, not one segment a
    day per agent however little it holds)."""
    pace = pace or _no_pace
    home = HomeLayout.current()
    config = load_config(home)
    now = time.time() if now is None else now
    closed: list[ClosedSegment] = []
    pool: list[R.Candidate] = []
    names = _agent_names(home)
    if close_after_s is not None:  # serve's pass: agents with nothing to do are left out
        root = str(home.agents_dir)
        names = [n for n in names if not _nothing_to_do(f"{root}/{n}", now - close_after_s)]
    stores = [AgentStore(home.agent(n)) for n in names]
    for store in stores:
        pace()
        for name in SEGMENTED:
            if dry_run:
                c = _open_as_candidate(store, name, now)
                if c is not None:  # the close `gc` would make, named as it would be
                    would = _would_close(store, name)
                    closed.append(would)
                    pool.append(c._replace(path=Path(would["path"])))
            else:
                if close_after_s is not None and not _started_before(
                    store.ledger(name).path, now - close_after_s
                ):
                    seg = None
                else:
                    seg = store.ledger(name).close_segment()
                if seg is not None:
                    closed.append({"agent_id": store.agent_id, "ledger": name, "path": str(seg)})
                R.sweep_temp(store.ledger(name).segments_dir)
                for plain in store.ledger(name).closed_segments():  # a kill before its .gz
                    if plain.suffix != ".gz":
                        L.compress_segment(plain)
            pool.extend(R.candidates(store.ledger(name), store.agent_id))
        if not dry_run:
            # the work item archive written again when late changes doubled it
            from holon_cli.store.workitem_index import compact

            try:
                compact(store)
            except (HolonError, OSError):
                pass  # `home check` names a damaged archive; retention goes on
    dropped: list[R.SegmentInfo] = []
    kept: list[R.Candidate] = []
    for c in sorted(pool, key=lambda c: (c.mtime, str(c.path))):
        keep_days = R.days(config, R.DAYS_KEY[c.ledger.path.stem])
        if keep_days is not None and (keep_days == 0 or now - c.mtime > keep_days * R.DAY_S):
            dropped.append(_info(c, now, "age"))
            if not dry_run:
                R.drop_segment(c)
        else:
            kept.append(c)
    outputs = _prune_outputs(stores, config, now, dry_run, None, pace)
    freed = sum(d["bytes"] for d in dropped) + outputs["freed_bytes"]
    limit = R.max_home_bytes(config)
    if not measure and limit is None:
        return _report(home, dry_run, closed, dropped, outputs, freed, None, None)
    total = R.tree_bytes(home.root, pace) - (freed if dry_run else 0)
    if limit is not None and total > limit:
        while kept and total > limit:
            for c in list(kept):  # oldest first, whatever the ledger or agent
                if total <= limit:
                    break
                kept.remove(c)
                dropped.append(_info(c, now, "max_home_bytes"))
                if not dry_run:
                    R.drop_segment(c)
                total -= c.size
                freed += c.size
            if not dry_run:  # what the drops wrote (trimmed records) counts too
                total = R.tree_bytes(home.root, pace)
        if total > limit:
            more = _prune_outputs(stores, config, now, dry_run, total - limit, pace)
            for k in ("removed", "freed_bytes"):
                outputs[k] += more[k]
            total -= more["freed_bytes"]
            freed += more["freed_bytes"]
    return _report(home, dry_run, closed, dropped, outputs, freed, total, limit)


def _report(
    home: HomeLayout,
    dry_run: bool,
    closed: list[ClosedSegment],
    dropped: list[R.SegmentInfo],
    outputs: dict[str, int],
    freed: int,
    total: int | None,
    limit: int | None,
) -> GcReport:
    return {
        "home": str(home.root),
        "dry_run": dry_run,
        "closed": closed,
        "dropped": dropped,
        "outputs": outputs,
        "freed_bytes": freed,
        "home_bytes": total,
        "max_home_bytes": limit,
        "over_max_home_bytes": limit is not None and total is not None and total > limit,
    }


def _prune_outputs(
    stores: list[AgentStore],
    config: Any,
    now: float,
    dry_run: bool,
    excess: int | None,
    pace: Callable[[], None] = _no_pace,
) -> dict[str, int]:
    """Finished command outputs past ``outputs_days`` (``excess``: instead,
    the oldest ones until that many bytes are freed)."""
    from holon_cli.runtime.tasks.recovery import prune_outputs

    rt = dict((config or {}).get("runtime") or {})
    keep = R.days(config, "outputs_days")
    if keep is not None:
        rt["outputs_max_age_days"] = keep
    total = {"removed": 0, "freed_bytes": 0}
    for store in stores:
        if excess is not None and total["freed_bytes"] >= excess:
            break
        if _no_outputs(str(store.layout.home)):
            continue
        cfg = dict(config or {})
        if excess is not None:
            from holon_cli.runtime.tasks.recovery import outputs_usage

            left = excess - total["freed_bytes"]
            rt = {**rt, "outputs_max_bytes": max(0, outputs_usage(store) - left)}
        cfg["runtime"] = rt
        got = prune_outputs(store, cfg, now=now, dry_run=dry_run)
        total["removed"] += got["removed"]
        total["freed_bytes"] += got["freed_bytes"]
        pace()
    return total


def home_usage(home: HomeLayout | None = None) -> HomeUsage:
    """``usage``: bytes per agent and per kind of file, the whole home, and
    the ``max_home_bytes`` limit (``home check``)."""
    home = home or HomeLayout.current()
    agents: dict[str, R.AgentUsage] = {}
    try:
        names = sorted(n for n in os.listdir(home.agents_dir) if not n.startswith("."))
    except FileNotFoundError:
        names = []
    for name in names:
        path = Path(home.agents_dir / name)
        if path.is_dir() and not path.is_symlink():
            agents[name] = R.agent_usage(path)
    try:
        limit = R.max_home_bytes(load_config(home))
    except HolonError:  # a config that does not load is home check's own problem
        limit = None
    return {"agents": agents, "home_bytes": R.tree_bytes(home.root), "max_home_bytes": limit}


def over_limit_note(usage: HomeUsage) -> dict[str, object] | None:
    """The ``home check`` warning of a home over ``retention.max_home_bytes``."""
    limit, used = usage["max_home_bytes"], usage["home_bytes"]
    if limit is None or used <= limit:
        return None
    return {
        "path": str(HomeLayout.current().root),
        "kind": "over_max_home_bytes",
        "message": (
            f"warning: the home uses {used} bytes, over retention.max_home_bytes ({limit}); "
            "`holon home gc` drops the oldest closed history (serve does it daily); if it "
            "stays over, the rest is unsettled work or workspace files: raise the limit"
        ),
    }


# ------------------------------------------------------------ serve's daily pass

GC_EVERY_S = 86400.0
GC_FIRST_DELAY_S = 60.0  # after a start, once the agents had their first pass


def _stamp(home: HomeLayout) -> Path:
    return home.run_dir / "retention.json"


def next_gc_in(now: float | None = None, home: HomeLayout | None = None) -> float:
    """Seconds until serve's next retention pass: a day after the last one
    (kept in ``run/retention.json`` across restarts), at least a minute after
    start."""
    home = home or HomeLayout.current()
    now = time.time() if now is None else now
    try:
        last = float(json.loads(_stamp(home).read_bytes())["last_gc_at"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return GC_FIRST_DELAY_S
    return max(GC_FIRST_DELAY_S, last + GC_EVERY_S - now)


def scheduled_gc(now: float | None = None, *, pace: Callable[[], None] | None = None) -> GcReport:
    """One pass of serve's daily retention, stamped in ``run/retention.json``
    (``pace``: see :func:`gc_home`; a pass it stops is not stamped)."""
    from holon_cli.store.fsio import atomic_write_bytes

    home = HomeLayout.current()
    report = gc_home(now=now, pace=pace, measure=False, close_after_s=GC_EVERY_S / 2)
    home.run_dir.mkdir(parents=True, exist_ok=True)
    at = time.time() if now is None else now
    atomic_write_bytes(_stamp(home), json.dumps({"v": 1, "last_gc_at": at}).encode() + b"\n")
    return report
