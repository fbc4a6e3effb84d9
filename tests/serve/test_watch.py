"""serve's watcher (serve/watch.py): inotify that blocks, and watchfiles'
public ``watch`` as the fallback where inotify is missing."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from holon_cli.serve.watch import Change, InotifyWatcher, PollingWatcher, Watcher, open_watcher


def _next(w: Watcher, timeout: float = 5.0) -> list[Change] | None:
    got: list[list[Change] | None] = []
    t = threading.Thread(target=lambda: got.append(w.wait()), daemon=True)
    t.start()
    t.join(timeout)
    assert got, "the watcher did not return"
    return got[0]


def test_open_watcher_is_inotify_on_linux() -> None:
    w = open_watcher()
    try:
        assert isinstance(w, InotifyWatcher) == os.path.isdir("/proc/self")
    finally:
        w.close()


def test_inotify_reports_what_happened_in_each_folder(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    w = InotifyWatcher()
    try:
        assert w.add(str(a)) and w.add(str(b))
        assert not w.add(str(tmp_path / "missing"))
        fd = os.open(a / "m", os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        got = _next(w)
        assert got is not None
        assert Change(str(a), "m", "created") in got and Change(str(a), "m", "closed") in got
        (tmp_path / "x").write_text("x")
        os.rename(tmp_path / "x", b / "x")
        assert Change(str(b), "x", "moved_in") in (_next(w) or [])
        (b / "x").unlink()
        assert Change(str(b), "x", "deleted") in (_next(w) or [])
        (a / "m").unlink()
        _next(w)
        os.rmdir(a)
        got = _next(w)
        assert got is not None and Change(str(a), "", "gone") in got
    finally:
        w.close()


def test_inotify_blocks_until_stopped(tmp_path: Path) -> None:
    w = InotifyWatcher()
    w.add(str(tmp_path))
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(w.wait()), daemon=True)
    t.start()
    time.sleep(0.3)
    assert not got  # nothing changed: still waiting, no timeout
    t0 = time.monotonic()
    w.stop()
    t.join(5)
    assert got == [None] and time.monotonic() - t0 < 1.0
    w.close()


@pytest.mark.slow
def test_the_polling_fallback_sees_new_files_and_stops(tmp_path: Path) -> None:
    w = PollingWatcher()
    assert w.add(str(tmp_path)) and not w.add(str(tmp_path / "missing"))
    got: list[list[Change] | None] = []
    t = threading.Thread(target=lambda: got.append(w.wait()), daemon=True)
    t.start()
    time.sleep(0.3)  # watchfiles' thread is up
    (tmp_path / "m").write_text("x")
    t.join(5)
    assert got and got[0] is not None
    assert any(c.folder == str(tmp_path) and c.name == "m" for c in got[0])
    t = threading.Thread(target=lambda: got.append(w.wait()), daemon=True)
    t.start()
    w.stop()
    t.join(5)
    assert got[-1] is None
    w.close()


def test_classify_sorts_what_serve_cares_about(tmp_path: Path) -> None:
    from holon_cli.serve.watch import classify

    root = str(tmp_path)
    wake_d, agents_d = f"{root}/run/wake", f"{root}/agents"
    seen = classify(
        [
            Change(wake_d, "a", "closed"),  # a writer's marker closed
            Change(wake_d, "b~123~1", "closed"),  # a pass's claim: no news
            Change(wake_d, "c", "created"),  # inotify reports the close, not this
            Change(agents_d, "new", "created"),  # a new agent
            Change(agents_d, ".tmp-x", "created"),  # hidden: being made
            Change(root, "other.txt", "closed"),
        ],
        root,
        closes=True,
    )
    assert seen == ({"a", "new"}, False, False, False)
    polled = classify([Change(wake_d, "c", "created")], root, closes=False)
    assert polled.ids == {"c"}  # the polling fallback sees a new marker only
    cfg = classify([Change(root, "config.yaml", "closed")], root, closes=True)
    assert cfg.everyone and cfg.reconfigured
    assert classify([Change(root, "", "overflow")], root, closes=True).everyone
    assert classify([Change(agents_d, "", "gone")], root, closes=True).again
    assert classify([Change(root, "run", "created")], root, closes=True).again
