"""Retention of segmented ledgers, disk usage, the free-disk floor.

``config.yaml`` ``retention``: ``events_days``, ``transcript_days``,
``outputs_days`` (absent or null: keep forever; ``0``: keep nothing but the
open segment), ``max_home_bytes`` (the whole home; history goes oldest
first to get under it), ``min_free_bytes`` (default 1 GiB: below it output
capture stops and new tasks are refused).

Invariants:
- only *closed* segments of the segmented ledgers (``events``,
  ``transcript``: ``agent_store.SEGMENTED``) are ever dropped here; the open
  file and every ledger holding unsettled state (queue, work items, timers,
  tasks, the turn journal) are never touched;
- a segment's age is its mtime (the time of its last record: compression
  keeps it);
- before a segment is removed, ``segments/<stem>.trimmed`` records what is
  gone (the highest sequence number and the time of the newest record), so
  a kill between the two only leaves a segment readers still read and the
  next pass removes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypedDict

from holon_cli.errors import RejectedError
from holon_cli.kinds import ErrorKind
from holon_cli.store import ledger as L
from holon_cli.store.fsio import fsync_dir

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.config_sections import RetentionConfig

DaysKey = Literal["events_days", "transcript_days", "outputs_days"]

DEFAULT_MIN_FREE_BYTES = 1 << 30
DAY_S = 86400.0
# retention key of each segmented ledger
DAYS_KEY: dict[str, DaysKey] = {
    "events": "events_days",
    "transcript": "transcript_days",
    # settled turns' records (runtime/replay) go with the events
    "turn_records": "events_days",
}


class DiskFull(RejectedError):
    kind: ErrorKind = "disk_full"


class AgentUsage(TypedDict):
    """The bytes of one agent's folder, in all and per kind of file."""

    bytes: int
    by_kind: dict[str, int]


class SegmentInfo(TypedDict):
    """One closed segment (``holon home gc`` lists what it dropped)."""

    agent_id: str
    ledger: str
    path: str
    bytes: int
    age_days: float
    reason: str  # "age" | "max_home_bytes"


class Candidate(NamedTuple):
    mtime: float
    size: int
    ledger: L.Ledger[Any]
    path: Path
    agent_id: str


def section(config: HolonConfig | None) -> RetentionConfig:
    """The config's ``retention`` section (checked when the config loaded)."""
    return (config or {}).get("retention") or {}


def days(config: HolonConfig | None, key: DaysKey) -> float | None:
    v = section(config).get(key)
    return None if v is None else float(v)


def max_home_bytes(config: HolonConfig | None) -> int | None:
    v = section(config).get("max_home_bytes")
    return None if v is None else int(v)


def min_free_bytes(config: HolonConfig | None) -> int:
    v = section(config).get("min_free_bytes")
    return DEFAULT_MIN_FREE_BYTES if v is None else int(v)


def free_bytes(path: Path) -> int | None:
    """Bytes free to an unprivileged writer on ``path``'s filesystem (the
    nearest existing folder up; ``None`` when it cannot be told)."""
    p = path
    while True:
        try:
            st = os.statvfs(p)
            return st.f_bavail * st.f_frsize
        except FileNotFoundError:
            if p.parent == p:
                return None
            p = p.parent
        except OSError:
            return None


def candidates(led: L.Ledger[Any], agent_id: str) -> list[Candidate]:
    out = []
    for seg in led.closed_segments():
        try:
            st = seg.stat()
        except FileNotFoundError:
            continue
        out.append(Candidate(st.st_mtime, st.st_size, led, seg, agent_id))
    return out


def drop_segment(c: Candidate) -> None:
    """Record what goes in ``<stem>.trimmed``, then remove the segment (and a
    plain copy a killed compression left behind)."""
    led, seg = c.ledger, c.path
    stem = led.path.stem
    prev = L.read_trimmed(led.segments_dir, stem) or {}
    info: L.Trimmed = {
        "segments": int(prev.get("segments") or 0) + 1,
        "bytes": int(prev.get("bytes") or 0) + c.size,
        "through_seq": prev.get("through_seq"),
        "before": prev.get("before"),
        "last_segment": max(int(prev.get("last_segment") or 0), _number(seg, stem)),
    }
    last = _last_record(led, seg)
    if last is not None:
        seq = last.get(led.seq_key) if led.seq_key else None
        if isinstance(seq, int) and seq > int(info["through_seq"] or 0):
            info["through_seq"] = seq
        at = last.get("at")
        if isinstance(at, str) and at > str(info["before"] or ""):
            info["before"] = at
    L.write_trimmed(led.segments_dir, stem, info)
    seg.unlink(missing_ok=True)
    if seg.suffix == ".gz":
        seg.with_suffix("").unlink(missing_ok=True)
    L.tail_path(led.segments_dir, stem, _number(seg, stem)).unlink(missing_ok=True)
    fsync_dir(led.segments_dir)


def _number(seg: Path, stem: str) -> int:
    n = L.segment_number(seg.name, stem)
    return n or 0


def _last_record(led: L.Ledger[Any], seg: Path) -> Mapping[str, object] | None:
    last: Mapping[str, object] | None = None
    try:
        for _, rec in L.iter_segment(seg, led.max_version):
            last = rec
    except Exception:  # noqa: BLE001 - a damaged segment is still dropped by age
        return last
    return last


def tree_bytes(path: Path, pace: Callable[[], None] | None = None) -> int:
    """Bytes of every file under ``path`` (``pace`` is called every 64
    folders: a caller spreading the walk out sleeps there)."""
    total = 0
    for n, (dirpath, _dirs, files) in enumerate(os.walk(path)):
        if pace is not None and n % 64 == 63:
            pace()
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                continue
    return total


def kind_of(rel: tuple[str, ...]) -> str:
    """The kind of file an agent-relative path is (``home check`` usage)."""
    if not rel or rel[0] != ".holon":
        return "workspace"
    sub = rel[1] if len(rel) > 1 else ""
    if sub == "ledger":  # events.jsonl, segments/events.00000003.jsonl.gz, events.mark
        stem = rel[-1].split(".", 1)[0]
        return stem if stem in DAYS_KEY else "ledgers"
    return {
        "outputs": "outputs",
        "tasks": "outputs",
        "indexes": "indexes",
        "inbox": "inbox",
        "state": "state",
    }.get(sub, "other")


def agent_usage(agent_home: Path) -> AgentUsage:
    """``{bytes, by_kind}`` of one agent's folder (symlinks not followed)."""
    by_kind: dict[str, int] = {}
    total = 0
    for dirpath, _dirs, files in os.walk(agent_home):
        rel_dir = Path(dirpath).relative_to(agent_home).parts
        for f in files:
            try:
                size = os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                continue
            kind = kind_of((*rel_dir, f))
            by_kind[kind] = by_kind.get(kind, 0) + size
            total += size
    return {"bytes": total, "by_kind": dict(sorted(by_kind.items()))}


def sweep_temp(seg_dir: Path) -> int:
    """Remove the temp files of compressions whose process is gone (a kill
    mid-compression leaves ``.<segment>.<pid>.tmp``; the plain segment is
    still there and is compressed again)."""
    from holon_cli.store.locks import pid_alive

    removed = 0
    for p in seg_dir.glob(".*.tmp"):
        pid = p.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not pid_alive(int(pid)):
            p.unlink(missing_ok=True)
            removed += 1
    return removed
