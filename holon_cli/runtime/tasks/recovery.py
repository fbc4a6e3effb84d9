"""Recovery and housekeeping of the task plane: reaping what dead
supervisors or callers left, pruning kept outputs, the ``tick`` pass, and
waiting for unsettled tasks (``holon run``).

Invariants:
- an active task whose supervisor is gone has its tree stopped and becomes
  ``interrupted`` (``status_before_restart`` kept); a promoted one reports
  ONE ``task_result``; a record still ``starting`` whose launcher lives is
  left alone for ``STARTING_GRACE_S``;
- a foreground call whose caller is gone is stopped and its directory removed;
- a terminal status is never replaced (``model.task.merge_status``);
- :func:`recovery_pass` never raises (a broken record must not stop a turn);
- pruning only removes outputs of tasks that have reported;
- recovery notices (runtime spec: Background Task Recovery): a lost task
  (its supervisor gone) admits ONE ``task_status`` saying so before its
  ``task_result``; under ``holon serve`` (:func:`runtime_owner_of_process`),
  each running task (command or child handle) is watched by one live serve
  (``runtime_owner``), and one found owned by a serve that is gone was
  recovered by a restart: ONE ``task_status`` per recovery says it is still
  running. Both are checked and written under the task's lock, with an
  idempotency key on the message: concurrent ticks, turns and serve passes
  admit each notice once, whoever gets there first.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.errors import HolonError
from holon_cli.model import task as tm
from holon_cli.runtime.tasks import procs
from holon_cli.runtime.tasks.records import (
    claim_runtime,
    iter_records,
    lost_key,
    outputs_root,
    report_lost,
    report_terminal,
    tasks_root,
    update_task,
)
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.events import TaskRecoveryFailedData, TasksRecoveredData
    from holon_cli.model.task import ProcessIdentity, TaskProcess, TaskRecord, TaskStatus

DEFAULT_OUTPUTS_MAX_AGE_S = 7 * 86400
DEFAULT_OUTPUTS_MAX_BYTES = 1024 * 1024 * 1024
STARTING_GRACE_S = 30.0

# the serve process this process is (set for the life of `holon serve`):
# running tasks are watched by it, and recovered by it after a restart
_runtime_owner: list[ProcessIdentity] = []


def runtime_owner_of_process(on: bool = True) -> None:
    """Make this process (``holon serve``) the runtime that watches running
    tasks, or stop being it (``on=False``)."""
    _runtime_owner.clear()
    if on:
        _runtime_owner.append(procs.process_identity(os.getpid()))


def _me() -> ProcessIdentity | None:
    if not _runtime_owner or _runtime_owner[0]["pid"] != os.getpid():
        return None  # a forked child is not the serve process
    return _runtime_owner[0]


def reap_orphans(store: AgentStore) -> dict[str, list[str]]:
    """Stop and settle what dead supervisors or dead callers left behind.

    - an active task whose supervisor is gone: its tree is stopped, it becomes
      ``interrupted`` with ``status_before_restart``; a promoted one reports
      ONE ``task_result``;
    - a terminal promoted task that never reported (killed between the two
      steps) reports now;
    - a foreground call whose caller is gone: its tree is stopped and its
      directory removed (the turn's journal tells the model "interrupted").
    Called from turn start (before the model hears "interrupted"), ``tick``
    and ``task`` commands; cheap when there is nothing to do.
    """
    interrupted: list[str] = []
    reported: list[str] = []
    reaped: list[str] = []
    recovered: list[str] = []
    now = time.time()
    me = _me()
    for d, rec in iter_records(store):
        if tm.is_child_task(rec):
            # a child's handle has no process: runtime/children supervises it;
            # a serve still takes over watching it (and says so after a restart)
            if me is not None and rec.get("status") == "running":
                _claim(d, rec, me, recovered)
            continue
        status = rec.get("status")
        sup = rec.get("supervisor")
        sup_alive = procs.identity_alive(sup)
        owner = rec.get("owner")
        if not tm.is_terminal(status):
            if sup_alive:
                if me is not None:
                    _claim(d, rec, me, recovered)
                continue
            if not sup:
                try:
                    age = now - clock.parse_iso(rec.get("created_at") or "")
                except ValueError:
                    age = STARTING_GRACE_S
                launcher = rec.get("launcher") or owner
                if age < STARTING_GRACE_S and procs.identity_alive(launcher):
                    continue  # being launched right now
            p: TaskProcess = rec.get("process") or {}
            procs.stop_tree(
                p.get("pgid"), p.get("marker") or rec["id"], grace_s=1.0, since=p.get("start_time")
            )
            if rec.get("promoted"):

                def lost(r: TaskRecord, prev: TaskStatus | None = status) -> None:
                    if tm.is_terminal(r.get("status")):
                        return
                    r["status"] = "interrupted"
                    r["status_before_restart"] = prev
                    r["stop_reason"] = "supervisor_gone"
                    r["finished_at"] = clock.now_iso()

                rec = update_task(d, lost)
                interrupted.append(rec["id"])
                _lost_notice(d, rec)
                if report_terminal(d):
                    reported.append(rec["id"])
            else:
                _rmtree(d)
                reaped.append(rec["id"])
        elif rec.get("promoted"):
            _lost_notice(d, rec)  # a kill between the two steps above
            if not rec.get("result_message_id") and not rec.get("result_undeliverable"):
                if not sup_alive and report_terminal(d):
                    reported.append(rec["id"])
        elif not procs.identity_alive(owner):
            _rmtree(d)  # a finished foreground call nobody collected
            reaped.append(rec["id"])
    if interrupted or reaped or recovered:
        data: TasksRecoveredData = {
            "interrupted": interrupted,
            "reported": reported,
            "reaped_foreground": reaped,
            "recovered": recovered,
        }
        store.emit(
            "tasks_recovered",
            data,
        )
    return {
        "interrupted": interrupted,
        "reported": reported,
        "reaped_foreground": reaped,
        "recovered": recovered,
    }


def _lost_notice(d: Path, rec: TaskRecord) -> None:
    """The ``task_status`` of a task whose supervisor is gone (once)."""
    if rec.get("stop_reason") != "supervisor_gone":
        return
    if any(n.get("key") == lost_key(rec["id"]) for n in rec.get("recovery_notices") or []):
        return
    prev = rec.get("status_before_restart") or "running"
    why = (
        f"its supervisor disappeared while it was {prev} (a runtime restart, a reboot or a "
        "kill), and the command was stopped with it"
    )
    report_lost(d, why)


def _claim(d: Path, rec: TaskRecord, me: ProcessIdentity, recovered: list[str]) -> None:
    """Serve ``me`` takes over watching a running task (see :func:`claim_runtime`)."""
    if not rec.get("promoted") or rec.get("runtime_owner") == me:
        return
    if claim_runtime(d, me):
        recovered.append(rec["id"])


# ------------------------------------------------------------------ pruning


def _output_limits(config: Any) -> tuple[float, int]:
    keep = (
        ((config or {}).get("retention") or {}).get("outputs_days")
        if isinstance(config, dict)
        else None
    )
    if keep is None:  # retention.outputs_days wins over the older runtime key
        keep = procs.runtime_setting(config, "outputs_max_age_days", 7)
    max_age = float(keep) * 86400
    max_bytes = int(procs.runtime_setting(config, "outputs_max_bytes", DEFAULT_OUTPUTS_MAX_BYTES))
    return max_age, max_bytes


def _output_items(store: AgentStore) -> list[tuple[float, int, Path]]:
    """Kept command outputs and finished task directories: (mtime, bytes, path)."""
    items: list[tuple[float, int, Path]] = []
    root = outputs_root(store)
    try:
        for e in os.scandir(root):
            if e.is_file(follow_symlinks=False):
                st = e.stat(follow_symlinks=False)
                items.append((st.st_mtime, st.st_size, Path(e.path)))
    except FileNotFoundError:
        pass
    for d, rec in iter_records(store):
        if (
            rec.get("promoted")
            and tm.is_terminal(rec.get("status"))
            and (rec.get("result_message_id") or rec.get("result_undeliverable"))
        ):
            size = 0
            try:
                for e in os.scandir(d):
                    if e.is_file(follow_symlinks=False):
                        size += e.stat(follow_symlinks=False).st_size
                mtime = (d / "task.json").stat().st_mtime
            except OSError:
                continue
            items.append((mtime, size, d))
    items.sort()
    return items


def prune_outputs(
    store: AgentStore, config: Any = None, *, now: float | None = None, dry_run: bool = False
) -> dict[str, int]:
    """Drop kept command outputs older than ``runtime.outputs_max_age_days``
    (default 7) and, oldest first, beyond ``runtime.outputs_max_bytes`` (default
    1 GiB) per agent. Finished task directories count and age the same way
    (their record stays in ``tasks.jsonl``). ``dry_run``: count, remove nothing."""
    now = time.time() if now is None else now
    max_age, max_bytes = _output_limits(config)
    items = _output_items(store)
    total = sum(s for _, s, _ in items)
    removed = freed = 0
    for mtime, size, path in items:
        if now - mtime > max_age or total > max_bytes:
            if dry_run:
                pass
            elif path.is_dir():
                _rmtree(path)
            else:
                path.unlink(missing_ok=True)
            total -= size
            removed += 1
            freed += size
    return {"removed": removed, "freed_bytes": freed, "kept_bytes": total}


def prune_due(store: AgentStore, config: Any = None) -> float | None:
    """When :func:`prune_outputs` would next remove something (wall clock;
    now when over the byte limit), or None with nothing kept (the wake
    index's deadline: ``runtime/wake.py``)."""
    items = _output_items(store)
    if not items:
        return None
    max_age, max_bytes = _output_limits(config)
    if sum(s for _, s, _ in items) > max_bytes:
        return time.time()
    return items[0][0] + max_age


def outputs_usage(store: AgentStore) -> int:
    total = 0
    for root in (outputs_root(store), tasks_root(store)):
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                try:
                    total += os.lstat(os.path.join(dirpath, f)).st_size
                except OSError:
                    pass
    return total


def recovery_pass(store: AgentStore) -> dict[str, list[str]]:
    """:func:`reap_orphans`, never raising: a broken task record must not stop a turn."""
    try:
        return reap_orphans(store)
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        failed: TaskRecoveryFailedData = {"error": f"{type(exc).__name__}: {exc}"}
        store.emit("task_recovery_failed", failed)
        return {"interrupted": [], "reported": [], "reaped_foreground": [], "recovered": []}


def tick_tasks(store: AgentStore, config: Any = None) -> list[dict[str, object]]:
    """The task plane's part of a ``tick``: recover lost tasks, prune old outputs."""
    actions: list[dict[str, object]] = []
    rec = recovery_pass(store)
    if rec["interrupted"]:
        actions.append({"action": "tasks_interrupted", "task_ids": rec["interrupted"]})
    if rec["recovered"]:
        actions.append({"action": "tasks_recovered", "task_ids": rec["recovered"]})
    if config is None:
        from holon_cli.store.config import load_config

        try:
            config = load_config()
        except HolonError:
            config = {}
    pruned = prune_outputs(store, config)
    if pruned["removed"]:
        actions.append({"action": "outputs_pruned", **pruned})
    return actions


def unsettled_tasks(store: AgentStore) -> list[TaskRecord]:
    """Promoted tasks whose result has not been admitted yet (running, or
    ended a moment ago and still reporting)."""
    out = []
    for _d, rec in iter_records(store):
        if not rec.get("promoted"):
            continue
        if not tm.is_terminal(rec.get("status")) or not (
            rec.get("result_message_id") or rec.get("result_undeliverable")
        ):
            out.append(rec)
    return out


def wait_for_task_result(
    store: AgentStore, *, timeout_s: float | None = None, poll_s: float = 0.1
) -> bool:
    """Block until something is in the agent's inbox or no task is left
    unsettled. True when there is a message to turn (in the inbox, or already
    ingested into the queue by a concurrent tick). Recovers lost supervisors
    while waiting, so a dead task cannot hang the caller."""
    from holon_cli.runtime import queue as q

    end = None if timeout_s is None else time.monotonic() + timeout_s
    last_reap = 0.0
    while True:
        if store.inbox.pending_count() > 0:
            return True
        if store.read_record()["state"].get("status") in ("stopped", "paused"):
            return False  # nothing will be turned; do not wait for results
        if not [t for t in unsettled_tasks(store) if not tm.is_child_task(t)]:
            # child handles settle through their child's turns, not a process
            return q.pending_count(store) > 0
        if end is not None and time.monotonic() >= end:
            return False
        if time.monotonic() - last_reap > 2.0:
            reap_orphans(store)
            last_reap = time.monotonic()
        time.sleep(poll_s)


def _rmtree(path: Path) -> None:
    import shutil  # loaded on use: `holon status` lists tasks, never removes one

    shutil.rmtree(path, ignore_errors=True)
