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
    """Add ``n`` dropped spans to the home's count; the new total."""
    if n <= 0:
        return read_dropped(home)
    from holon_cli.store.fsio import write_snapshot
    from holon_cli.store.locks import locked

    layout = HomeLayout(home)
    layout.locks_dir.mkdir(parents=True, exist_ok=True)
    with locked(layout.locks_dir / "telemetry.lock", timeout=1.0, what="telemetry counter"):
        total = read_dropped(home) + n
        write_snapshot(counter_path(home), {"v": VERSION, "dropped": total})
    return total
