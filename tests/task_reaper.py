"""Kill what a test's tasks started, by what their records name.

A test of the task plane that fails half-way (an assertion before its
``task_stop``, a stop that did not take) must not leave a supervisor or a
command tree running on the machine. :func:`reap_tasks` walks every task
record of a test's ``HOLON_HOME`` and SIGKILLs, whatever the record's
status says (a record that says ``cancelled`` while its tree runs is exactly
the kind of bug it must survive):

- every process carrying the task's marker (``HOLON_EXEC_MARKER=<task id>``
  in its environment: the command, whatever it forked, ``setsid`` escapes
  and the processes inside a sandbox included);
- the members of the recorded process group that started at or after the
  command's leader (not a later group that reuses the number);
- the recorded supervisor, when that pid is still the same process (pid and
  start time).

Nothing else: only processes a task of this home started. A module of its
own, not ``conftest`` (see ``child_signals``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from holon_cli.runtime.tasks import procs


def _records(home: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(home.glob("agents/*/.holon/tasks/task_*/task.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and isinstance(rec.get("id"), str):
            out.append(rec)
    return out


def _group_since(pgid: int, since: int | None) -> set[int]:
    found = set()
    for pid in procs.live_members(pgid, None):
        start = procs.proc_start_time(pid)
        if since is None or (start is not None and start >= since):
            found.add(pid)
    return found


def leftovers(rec: dict[str, Any]) -> set[int]:
    """The live processes task ``rec`` started (its supervisor excluded)."""
    p = rec.get("process") or {}
    pids = procs.live_members(None, rec["id"], p.get("start_time"))
    pgid = p.get("pgid")
    if isinstance(pgid, int) and pgid > 0:
        pids |= _group_since(pgid, p.get("start_time"))
    pids.discard(os.getpid())
    return pids


TERMINAL = ("completed", "failed", "cancelled", "interrupted")


def _live_supervisors(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        r
        for r in records
        if (sup := r.get("supervisor"))
        and sup.get("start_time") is not None
        and procs.identity_alive(sup)
    ]


def reap_tasks(home: Path, within_s: float = 5.0, exit_grace_s: float = 3.0) -> list[int]:
    """SIGKILL whatever the tasks of ``home`` left running; the pids killed.
    The supervisor of a closed record gets ``exit_grace_s`` to finish (it
    reports the result after closing the record, then exits)."""
    from holon_cli.runtime.tasks import forked

    forked.retire_idle(wait_s=2.0)  # a supervisor waiting for its next call
    killed: list[int] = []
    records = _records(home)
    end = time.monotonic() + exit_grace_s
    while time.monotonic() < end:
        if not any(r.get("status") in TERMINAL for r in _live_supervisors(records)):
            break
        time.sleep(0.05)
    for rec in _live_supervisors(records):
        _kill(int(rec["supervisor"]["pid"]), killed)
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        left = {pid for rec in records for pid in leftovers(rec)}
        if not left:
            break
        for pid in left:
            _kill(pid, killed)
        time.sleep(0.05)
    _reap_children()
    return killed


def _kill(pid: int, killed: list[int]) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    killed.append(pid)


def _reap_children() -> None:
    """Collect forked supervisors of this process that were killed."""
    from holon_cli.runtime.tasks import forked

    forked.reap()
