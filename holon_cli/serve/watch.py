"""The watcher under ``holon serve``: block until a watched folder changes.

On Linux it is inotify through ``inotify_simple`` (public API only:
``INotify``, ``add_watch``, ``read(timeout=0)``, ``fileno``, ``flags``):
the thread sleeps in ``poll`` on the inotify descriptor and a stop pipe,
so an idle serve does not wake at all, and a change is seen as soon as
the kernel queues it. watchfiles cannot do that: its Rust loop sleeps a
``step`` between looks whatever happens (measured with watchfiles 1.3:
with a 2 s step a change is seen 3.5 s late, with 15 ms the idle loop
costs ~0.13 s CPU a minute), so it is only the fallback where inotify is
missing (another OS), through its public ``watchfiles.watch`` with
keywords, polling every ``FALLBACK_STEP_MS``.

A :class:`Watcher` watches folders, each non-recursively, and returns
:class:`Change` values: the folder, the entry's name and what happened
(``"closed"`` a file opened for writing was closed, ``"created"``,
``"moved_in"``, ``"deleted"``, ``"gone"`` the folder itself went,
``"overflow"`` the kernel dropped events: look at everything). The
fallback reports ``"created"`` and ``"closed"`` (for a modification) only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any, NamedTuple

from holon_cli.store import wake as W

# fallback only: watchfiles groups changes for up to DEBOUNCE_MS, looking
# every STEP_MS (its default 1.6 s debounce is far too slow for serve)
FALLBACK_DEBOUNCE_MS = 30
FALLBACK_STEP_MS = 15


class Change(NamedTuple):
    folder: str
    name: str
    kind: str  # closed | created | moved_in | deleted | gone | overflow


class Watcher:
    """Folders watched non-recursively; :meth:`wait` blocks until something
    changed or :meth:`stop` was called (from any thread or a signal handler)."""

    def add(self, folder: str) -> bool:
        """Watch one more folder; False when it does not exist."""
        raise NotImplementedError

    def wait(self) -> list[Change] | None:
        """The next changes (at least one), or None once stopped."""
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class InotifyWatcher(Watcher):
    def __init__(self) -> None:
        import select

        from inotify_simple import INotify, flags

        self._flags = flags
        self._ino = INotify()
        self._mask = (
            flags.CLOSE_WRITE
            | flags.CREATE
            | flags.MOVED_TO
            | flags.DELETE
            | flags.DELETE_SELF
            | flags.MOVE_SELF
            | flags.ONLYDIR
        )
        self._folders: dict[int, str] = {}
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._stopped = False
        self._poll = select.poll()
        self._poll.register(self._ino.fileno(), select.POLLIN)
        self._poll.register(self._stop_r, select.POLLIN)

    def add(self, folder: str) -> bool:
        try:
            wd = self._ino.add_watch(folder, self._mask)
        except (FileNotFoundError, NotADirectoryError):
            return False
        self._folders[wd] = folder
        return True

    def wait(self) -> list[Change] | None:
        f = self._flags
        while not self._stopped:
            self._poll.poll()  # no timeout: only a change or stop() wakes us
            if self._stopped:
                break
            out: list[Change] = []
            for ev in self._ino.read(timeout=0):
                mask = ev.mask
                if mask & f.Q_OVERFLOW:
                    out.append(Change("", "", "overflow"))
                    continue
                folder = self._folders.get(ev.wd)
                if folder is None:
                    continue
                if mask & f.IGNORED or mask & (f.DELETE_SELF | f.MOVE_SELF):
                    self._folders.pop(ev.wd, None)
                    out.append(Change(folder, "", "gone"))
                elif mask & f.CLOSE_WRITE:
                    out.append(Change(folder, ev.name, "closed"))
                elif mask & f.CREATE:
                    out.append(Change(folder, ev.name, "created"))
                elif mask & f.MOVED_TO:
                    out.append(Change(folder, ev.name, "moved_in"))
                elif mask & f.DELETE:
                    out.append(Change(folder, ev.name, "deleted"))
            if out:
                return out
        return None

    def stop(self) -> None:
        self._stopped = True
        try:
            os.write(self._stop_w, b"x")
        except OSError:  # full (already woken) or closed
            pass

    def close(self) -> None:
        self.stop()
        self._ino.close()
        for fd in (self._stop_r, self._stop_w):
            try:
                os.close(fd)
            except OSError:
                pass


class PollingWatcher(Watcher):
    """watchfiles' public ``watch`` (polling every FALLBACK_STEP_MS): where
    inotify is missing. A new folder restarts its watch."""

    def __init__(self) -> None:
        self._folders: list[str] = []
        self._stop = threading.Event()
        self._gen: Any = None

    def add(self, folder: str) -> bool:
        if not os.path.isdir(folder):
            return False
        if folder not in self._folders:
            self._folders.append(folder)
            self._gen = None
        return True

    def wait(self) -> list[Change] | None:
        import watchfiles

        while not self._stop.is_set():
            if self._gen is None:
                self._gen = watchfiles.watch(
                    *self._folders,
                    watch_filter=None,
                    debounce=FALLBACK_DEBOUNCE_MS,
                    step=FALLBACK_STEP_MS,
                    stop_event=self._stop,
                    rust_timeout=0,
                    recursive=False,
                    raise_interrupt=False,
                    ignore_permission_denied=True,
                )
            try:
                changes = next(self._gen)
            except StopIteration:
                self._gen = None
                continue
            out = []
            for change, path in changes:
                folder, name = os.path.split(path)
                if change == watchfiles.Change.deleted:
                    out.append(Change(folder, name, "deleted"))
                elif change == watchfiles.Change.added:
                    out.append(Change(folder, name, "created"))
                else:
                    out.append(Change(folder, name, "closed"))
            if out:
                return out
        return None

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.stop()
        self._gen = None


def open_watcher() -> Watcher:
    """inotify where the kernel has it, else the polling fallback."""
    try:
        return InotifyWatcher()
    except (ImportError, OSError, AttributeError):
        return PollingWatcher()


class Seen(NamedTuple):
    """What a batch of changes means to serve."""

    ids: set[str]  # agents whose marker a writer closed, or new agents
    everyone: bool  # look at every agent (the kernel dropped events)
    reconfigured: bool  # config.yaml changed (every agent, and the dbos engine's pass)
    again: bool  # a watched folder went or came: build the watcher again


def classify(changes: Iterable[Change], root: str, *, closes: bool) -> Seen:
    """Sort a batch of changes of the three watched folders: the home
    (``config.yaml``; ``agents/`` or ``run/`` made again), ``agents/`` (a new
    agent, made in place or renamed in) and the wake index's markers
    (``run/wake/``: a marker closed after its write; the polling fallback,
    ``closes`` False, reports a new marker as created). Claims (names
    holding ``~``) and hidden names are no news."""
    wake_d = W.wake_dir(root)
    agents_d = f"{root}/agents"
    ids: set[str] = set()
    everyone = reconfigured = again = False
    for c in changes:
        if c.kind == "overflow":
            everyone = True
        elif c.kind == "gone":
            again = True  # a watched folder went (rebuilt with the rest)
        elif c.folder == wake_d:
            if (c.kind == "closed" or (c.kind == "created" and not closes)) and (
                c.name[:1] not in ("", ".") and W.SEP not in c.name
            ):
                ids.add(c.name)
        elif c.folder == agents_d:
            if c.kind in ("created", "moved_in") and c.name[:1] not in ("", "."):
                ids.add(c.name)
        elif c.folder == root:
            if c.name == "config.yaml" and c.kind != "created":
                everyone = reconfigured = True
            elif c.name in ("agents", "run") and c.kind in ("created", "moved_in"):
                again = True
    return Seen(ids, everyone, reconfigured, again)
