"""The home's telemetry counter: spans that never reached the collector
(``$HOLON_HOME/run/telemetry.json``, ``{"v": 1, "dropped": N}``).

Every process that traces adds what it lost (a full export queue, a failed
export, a flush cut short at exit) under one ``flock``, so ``holon status
--json`` (``telemetry.dropped``) shows the home's total across processes:
``holon turn`` runs, serve workers, tasks. Written only when something was
dropped; reading it costs one small file.
"""

from __future__ import annotations

import json
from pathlib import Path

from holon_cli.store.layout import HomeLayout

VERSION = 1
FILE = "telemetry.json"


def counter_path(home: Path) -> Path:
    return HomeLayout(home).run_dir / FILE


def read_dropped(home: Path) -> int:
    """The home's dropped-span count (0 when nothing was ever dropped, or the
    file is unreadable: it is a counter, never a reason to fail)."""
    try:
        data = json.loads(counter_path(home).read_bytes())
    except (OSError, ValueError):
        return 0
    n = data.get("dropped") if isinstance(data, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0


def add_dropped(home: Path, n: int) -> int:
    """Add ``n`` dropped spans to the home's count; the new total.

    Replaced atomically (a reader sees the old or the new count) but not
    fsync'd: this runs in a process's last milliseconds, and a counter lost
    to a power cut is not worth an fsync on a slow disk there."""
    if n <= 0:
        return read_dropped(home)
    import os

    from holon_cli.store.locks import locked

    layout = HomeLayout(home)
    layout.locks_dir.mkdir(parents=True, exist_ok=True)
    path = counter_path(home)
    with locked(layout.locks_dir / "telemetry.lock", timeout=0.2, what="telemetry counter"):
        total = read_dropped(home) + n
        tmp = path.with_name(f".{FILE}.{os.getpid()}.tmp")
        data = json.dumps({"v": VERSION, "dropped": total}).encode() + b"\n"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    return total
