"""The home's wake index: which agents a scheduling pass must look at.

``holon tick --all`` (and serve's start-up and sweep) used to load every
agent to find the few with due work. The index lets a pass skip an agent
whose files have not changed since a pass last looked at it and whose next
deadline has not come: a lookup, not a load.

Files (``$HOLON_HOME/run/``):

- ``wake/<agent>``: a *marker*: "something of this agent changed since a
  pass last looked". Writers (``store/agent_store.py``: the agent record,
  every ledger but the history ones, the inbox) make it *before* their write
  and hold a shared ``flock`` on it until the write is done.
- ``wake/<agent>~<pid>~<n>``: a marker *claimed* by a pass that is looking
  at the agent; removed once that pass's result is in ``wake.json``.
- ``wake.json``: what the last pass that looked at each agent found
  (``agents.<id>``: ``at``, the claim time on CLOCK_MONOTONIC in ns;
  ``due``, the earliest wall-clock time at which a tick could find
  something, or null; ``run``, true when the agent has work now or in
  flight; ``why``, the idle reason a tick gave), plus what it is valid for:
  the boot (``/proc/sys/kernel/random/boot_id``), ``config.yaml``'s
  identity (inode, size, mtime, ctime) and the holon version.

Invariants (the index may be stale-early, never stale-late):

- an agent is skipped only when it has an entry, no marker or claim exists
  for it, the entry is not ``run`` and its ``due`` has not come;
- a writer's marker exists from before its write until after it (the
  shared lock), so a pass that claims the marker (exclusive lock, taken
  without waiting: a writer in flight leaves the marker where it is and the
  agent is looked at anyway) reads the agent after every write the marker
  stood for; a writer killed half-way leaves its marker;
- a claim is only removed after the entry it led to is in ``wake.json``; a
  pass killed before that leaves the claim, which counts as a marker;
- two passes merging entries for one agent: the later claim wins;
- anything in doubt means "look at every agent": a missing, damaged or
  newer ``wake.json``, another boot (markers are not fsync'd: a power loss
  may lose one, never a message), a changed ``config.yaml`` or another
  holon version. ``home check`` compares the entries with the agents'
  files; ``home check --repair`` rebuilds it (``runtime/wake.py``).

A pass may suppress marking for the agents it holds claimed (its own
writes are what it reads next; :func:`holding`), in its own thread only and
never in a forked child.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject

WAKE_VERSION = 1
SEP = "~"  # never in an agent id (store/layout.AGENT_ID_RE)
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW

# suppression (see holding()): None until a pass first asks for it, so the
# writers of `holon enqueue` pay one global read
_local: Any = None
_seq = 0


def wake_dir(root: Path | str) -> str:
    return f"{root}/run/wake"


def snapshot_path(root: Path | str) -> Path:
    return Path(root) / "run" / "wake.json"


def lock_path(root: Path | str) -> Path:
    return Path(root) / "run" / "locks" / "wake.lock"


def split_agent_dir(agent_dir: Path | str) -> tuple[str, str] | None:
    """``(home root, agent id)`` of an agent folder under ``<root>/agents/``;
    None for a folder elsewhere (nothing to mark)."""
    parent, aid = os.path.split(os.fspath(agent_dir))
    root, agents = os.path.split(parent)
    if agents != "agents" or not aid:
        return None
    return root, aid


# ------------------------------------------------------------------ writers


def mark(agent_dir: Path | str) -> int:
    """Make the agent's marker and hold it shared; returns the fd to close
    once the write is done (-1: nothing to hold). Call it *before* the write."""
    where = split_agent_dir(agent_dir)
    if where is None:
        return -1
    if _local is not None and os.fspath(agent_dir) in getattr(_local, "held", ()):
        return -1
    import fcntl

    d = wake_dir(where[0])
    path = f"{d}/{where[1]}"
    while True:
        try:
            fd = os.open(path, _FLAGS, 0o600)
        except FileNotFoundError:
            os.makedirs(d, mode=0o700, exist_ok=True)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            st = os.fstat(fd)
            now = os.stat(path)
        except FileNotFoundError:  # claimed while we waited: make a new one
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if (st.st_ino, st.st_dev) == (now.st_ino, now.st_dev):
            return fd
        os.close(fd)  # claimed (renamed) and a new marker made: take that one


def unmark(fd: int) -> None:
    if fd >= 0:
        os.close(fd)


@contextmanager
def marking(agent_dir: Path | str | None) -> Iterator[None]:
    """The marker of ``agent_dir`` held around a write (no-op for None)."""
    fd = -1 if agent_dir is None else mark(agent_dir)
    try:
        yield
    finally:
        unmark(fd)


def _forget_in_child() -> None:
    global _local
    _local = None


@contextmanager
def holding(agent_dirs: Iterable[Path | str]) -> Iterator[None]:
    """This thread's writes to these agents make no marker while the block
    runs: the caller claimed them and reads them again before its result is
    merged (a forked child marks again: ``os.register_at_fork``)."""
    global _local
    if _local is None:
        import threading

        _local = threading.local()
        os.register_at_fork(after_in_child=_forget_in_child)
    local = _local
    prev: frozenset[str] = getattr(local, "held", frozenset())
    local.held = prev | {os.fspath(d) for d in agent_dirs}
    try:
        yield
    finally:
        local.held = prev


# ------------------------------------------------------------------ readers


class Claim(NamedTuple):
    agent_id: str
    path: str | None  # the claimed marker, removed by release(); None: none to claim
    busy: bool  # a writer is in flight: the marker stays (look at the agent anyway)


def claim(root: Path | str, agent_id: str) -> Claim:
    """Take the agent's marker before reading the agent: renamed aside once no
    writer holds it. Never waits."""
    import fcntl

    global _seq
    path = f"{wake_dir(root)}/{agent_id}"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return Claim(agent_id, None, False)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return Claim(agent_id, None, True)
        _seq += 1
        claimed = f"{path}{SEP}{os.getpid()}{SEP}{_seq}"
        try:
            os.rename(path, claimed)
        except FileNotFoundError:  # another pass claimed it first
            return Claim(agent_id, None, False)
        return Claim(agent_id, claimed, False)
    finally:
        os.close(fd)


def marked(root: Path | str) -> dict[str, list[str]]:
    """Agents with a marker or a claim: id -> the files' names."""
    out: dict[str, list[str]] = {}
    try:
        names = os.listdir(wake_dir(root))
    except FileNotFoundError:
        return out
    for name in names:
        if name.startswith("."):
            continue
        out.setdefault(name.split(SEP, 1)[0], []).append(name)
    return out


def release(root: Path | str, names: Iterable[str]) -> None:
    """Remove claimed markers (and stale claims of dead passes) by name;
    never an unclaimed marker (a writer's)."""
    d = wake_dir(root)
    for name in names:
        if SEP not in name:
            continue
        try:
            os.unlink(f"{d}/{name}")
        except FileNotFoundError:
            pass


def forget(agent_dir: Path | str) -> None:
    """A removed agent's marker and claims (its entry goes with the next
    pass that lists the agents)."""
    where = split_agent_dir(agent_dir)
    if where is None:
        return
    root, aid = where
    for name in marked(root).get(aid, ()):
        try:
            os.unlink(f"{wake_dir(root)}/{name}")
        except FileNotFoundError:
            pass


# ------------------------------------------------------------------ snapshot


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            return f.read().strip().decode()
    except OSError:
        return "unknown"  # no /proc: a reboot goes unnoticed; markers are written anyway


def config_identity(root: Path | str) -> list[int] | None:
    try:
        st = os.stat(Path(root) / "config.yaml")
    except FileNotFoundError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _version() -> str:
    from holon_cli import __version__

    return __version__


class Validity(NamedTuple):
    """What a snapshot is valid for (taken before a pass reads anything)."""

    boot: str
    config: list[int] | None
    version: str

    @classmethod
    def now(cls, root: Path | str) -> Validity:
        return cls(boot_id(), config_identity(root), _version())


class Entry(NamedTuple):
    at: int  # the claim time, time.monotonic_ns() (system-wide; boot checked)
    due: float | None
    run: bool
    why: str

    def to_json(self) -> JsonObject:
        return {"at": self.at, "due": self.due, "run": self.run, "why": self.why}


def _entry(raw: Any) -> Entry | None:
    if not isinstance(raw, dict):
        return None
    at, due, run, why = raw.get("at"), raw.get("due"), raw.get("run"), raw.get("why", "")
    if not isinstance(at, int) or not isinstance(run, bool) or not isinstance(why, str):
        return None
    if due is not None and not isinstance(due, (int, float)):
        return None
    return Entry(at, None if due is None else float(due), run, why)


def read_raw(root: Path | str) -> JsonObject | None:
    """``wake.json`` as stored; None when missing; raises ValueError when damaged."""
    try:
        data = snapshot_path(root).read_bytes()
    except FileNotFoundError:
        return None
    obj = json.loads(data)
    if not isinstance(obj, dict) or not isinstance(obj.get("agents"), dict):
        raise ValueError("not a wake index")
    return obj


def load(root: Path | str, valid: Validity) -> JsonObject | None:
    """The entries as stored (checked one by one when used: :func:`quiet`,
    :func:`entry`), or None when the snapshot is in doubt (see the module)."""
    try:
        obj = read_raw(root)
    except (OSError, ValueError):
        return None
    if obj is None or obj.get("v") != WAKE_VERSION:
        return None
    if (obj.get("boot"), obj.get("config"), obj.get("version")) != tuple(valid):
        return None
    agents = obj["agents"]
    return agents if isinstance(agents, dict) else None


def entry(raw: Any) -> Entry | None:
    """One stored entry, checked; None when it is not one."""
    return _entry(raw)


def quiet(raw: object, now: float) -> TypeGuard[JsonObject]:
    """Whether an unmarked agent with this stored entry can be skipped at ``now``
    (only an entry that is a JSON object can be)."""
    if type(raw) is not dict or raw.get("run") is not False:
        return False
    due = raw.get("due")
    if due is None:
        return type(raw.get("at")) is int
    return type(due) in (int, float) and due > now and type(raw.get("at")) is int


def merge(
    root: Path | str,
    updates: Mapping[str, Entry],
    valid: Validity,
    *,
    agents: Iterable[str] | None = None,
    full: bool = False,
) -> bool:
    """Fold entries into ``wake.json`` under its lock (the later claim wins
    per agent; ``agents``: the ids that exist, others are dropped). ``valid``
    is what the caller's reads were valid for: when the home moved on since
    (config changed), nothing is written. A snapshot in doubt is replaced
    only by a ``full`` pass (one that looked at every agent). Returns whether
    it was written. Not fsync'd: another boot doubts it anyway."""
    from holon_cli.store.fsio import dumps
    from holon_cli.store.locks import locked

    path = snapshot_path(root)
    lock = lock_path(root)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with locked(lock, what="the wake index"):
        if Validity.now(root) != valid:
            return False  # config.yaml changed while we read: our entries may be stale
        stored = load(root, valid)
        if stored is None:
            if not full:
                return False
            stored = {}
        cur = {a: e for a, raw in stored.items() if (e := _entry(raw)) is not None}
        for aid, e in updates.items():
            old = cur.get(aid)
            if old is None or old.at <= e.at:
                cur[aid] = e
        if agents is not None:
            keep = set(agents)
            cur = {a: e for a, e in cur.items() if a in keep}
        doc = {
            "v": WAKE_VERSION,
            "boot": valid.boot,
            "config": valid.config,
            "version": valid.version,
            "agents": {a: cur[a].to_json() for a in sorted(cur)},
        }
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(dumps(doc) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return True


def drop(root: Path | str) -> bool:
    """Remove the snapshot: the next pass looks at every agent."""
    try:
        snapshot_path(root).unlink()
    except FileNotFoundError:
        return False
    return True
