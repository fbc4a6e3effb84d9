"""The work plane: work items, their plan files, focus, and what the
scheduler and the prompt learn from them.

Where each part lives
  :mod:`holon_cli.store.workitem_index`   the ledgers' fold (index snapshot + cache),
                                          plan-file paths and descriptors
  :mod:`.access`       the mutation lock, focus pointer, lookups with clear errors
  :mod:`.plans`        plan descriptor refresh (``plan_artifact_*`` events)
  :mod:`.views`        ``GetWorkItem``/``ListWorkItems`` views, readiness counts
  :mod:`.mutations`    create, pick, update (focus changes happen here and in
                       :mod:`.completion`: complete, its report's promotion)
  :mod:`.signals`      tick/turn signals: activation, closure reason, rechecks,
                       the turn-end commit
  :mod:`.projection`   the ``## Work queue`` prompt block
  :mod:`.reminders`    the stale-progress reminder
  :mod:`.hints`        tool names and caller-facing hint prose (the caller's vocabulary)

Durable truth is in the agent's ledgers (``work_items``,
``delivery_summaries``, ``waiting_intents``) and ``work-items/<id>/plan.md``;
everything else is derived (see the store module). Focus
(``AgentState.current_work_item_id``) changes only by explicit action: pick,
or the release inside the mutation that makes the current item non-runnable.

Nothing here prints; functions return plain dicts and raise
:class:`~holon_cli.errors.HolonError` subclasses (the tools turn those into
error envelopes, the CLI into exit codes).

Every name other code uses is importable from this package
(``from holon_cli.runtime import workitems; workitems.NAME``); the submodule
that defines it is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from holon_cli.runtime.workitems.access import require_work_item
    from holon_cli.runtime.workitems.completion import complete_work_item
    from holon_cli.runtime.workitems.hints import (
        COMPLETE_TOOL,
        MUTATION_TOOLS,
        is_work_item_mutation,
        round_completion_targets,
    )
    from holon_cli.runtime.workitems.mutations import (
        DEFAULT_RECHECK_AFTER_MS,
        create_work_item,
        default_recheck_after_ms,
        pick_work_item,
        update_work_item,
    )
    from holon_cli.runtime.workitems.plans import refresh_all, refresh_plan_descriptor
    from holon_cli.runtime.workitems.projection import (
        DEFAULT_PROJECTION_CHARS,
        DEFAULT_TRACE_ENTRIES,
        TRACE_SCAN_RECORDS,
        project_work_queue,
    )
    from holon_cli.runtime.workitems.reminders import (
        STALE_REMINDER_DEFAULTS,
        stale_reminder,
        stale_reminder_settings,
    )
    from holon_cli.runtime.workitems.signals import (
        activation_signal,
        closure_waiting_reason,
        newest_completion_report_since,
        recheck_due,
        turn_end_commit,
    )
    from holon_cli.runtime.workitems.views import get_work_item, list_work_items, readiness_counts
    from holon_cli.store.workitem_index import (
        _LOADED,
        DELIVERY_LEDGER,
        INDEX_VERSION,
        SNAPSHOT_EVERY_BYTES,
        WAITS_LEDGER,
        WORK_ITEMS_LEDGER,
        WorkItemIndex,
        index_path,
        load,
        plan_path,
    )

# name -> module: submodules load on first use, so a command that only reads
# (``holon status``, ``holon workitem list``) does not import the mutations,
# signals and projection it never calls
_LAZY = {
    "require_work_item": "holon_cli.runtime.workitems.access",
    "DEFAULT_RECHECK_AFTER_MS": "holon_cli.runtime.workitems.mutations",
    "complete_work_item": "holon_cli.runtime.workitems.completion",
    "create_work_item": "holon_cli.runtime.workitems.mutations",
    "default_recheck_after_ms": "holon_cli.runtime.workitems.mutations",
    "pick_work_item": "holon_cli.runtime.workitems.mutations",
    "update_work_item": "holon_cli.runtime.workitems.mutations",
    "refresh_all": "holon_cli.runtime.workitems.plans",
    "refresh_plan_descriptor": "holon_cli.runtime.workitems.plans",
    "DEFAULT_PROJECTION_CHARS": "holon_cli.runtime.workitems.projection",
    "DEFAULT_TRACE_ENTRIES": "holon_cli.runtime.workitems.projection",
    "TRACE_SCAN_RECORDS": "holon_cli.runtime.workitems.projection",
    "project_work_queue": "holon_cli.runtime.workitems.projection",
    "STALE_REMINDER_DEFAULTS": "holon_cli.runtime.workitems.reminders",
    "stale_reminder": "holon_cli.runtime.workitems.reminders",
    "stale_reminder_settings": "holon_cli.runtime.workitems.reminders",
    "activation_signal": "holon_cli.runtime.workitems.signals",
    "closure_waiting_reason": "holon_cli.runtime.workitems.signals",
    "newest_completion_report_since": "holon_cli.runtime.workitems.signals",
    "recheck_due": "holon_cli.runtime.workitems.signals",
    "turn_end_commit": "holon_cli.runtime.workitems.signals",
    "get_work_item": "holon_cli.runtime.workitems.views",
    "list_work_items": "holon_cli.runtime.workitems.views",
    "readiness_counts": "holon_cli.runtime.workitems.views",
    "_LOADED": "holon_cli.store.workitem_index",
    "DELIVERY_LEDGER": "holon_cli.store.workitem_index",
    "INDEX_VERSION": "holon_cli.store.workitem_index",
    "SNAPSHOT_EVERY_BYTES": "holon_cli.store.workitem_index",
    "WAITS_LEDGER": "holon_cli.store.workitem_index",
    "WORK_ITEMS_LEDGER": "holon_cli.store.workitem_index",
    "WorkItemIndex": "holon_cli.store.workitem_index",
    "index_path": "holon_cli.store.workitem_index",
    "load": "holon_cli.store.workitem_index",
    "plan_path": "holon_cli.store.workitem_index",
    "COMPLETE_TOOL": "holon_cli.runtime.workitems.hints",
    "MUTATION_TOOLS": "holon_cli.runtime.workitems.hints",
    "is_work_item_mutation": "holon_cli.runtime.workitems.hints",
    "round_completion_targets": "holon_cli.runtime.workitems.hints",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "COMPLETE_TOOL",
    "DEFAULT_PROJECTION_CHARS",
    "DEFAULT_RECHECK_AFTER_MS",
    "DEFAULT_TRACE_ENTRIES",
    "DELIVERY_LEDGER",
    "INDEX_VERSION",
    "MUTATION_TOOLS",
    "SNAPSHOT_EVERY_BYTES",
    "STALE_REMINDER_DEFAULTS",
    "TRACE_SCAN_RECORDS",
    "WAITS_LEDGER",
    "WORK_ITEMS_LEDGER",
    "WorkItemIndex",
    "_LOADED",
    "activation_signal",
    "closure_waiting_reason",
    "complete_work_item",
    "create_work_item",
    "default_recheck_after_ms",
    "get_work_item",
    "index_path",
    "is_work_item_mutation",
    "list_work_items",
    "load",
    "newest_completion_report_since",
    "pick_work_item",
    "plan_path",
    "project_work_queue",
    "readiness_counts",
    "recheck_due",
    "refresh_all",
    "refresh_plan_descriptor",
    "require_work_item",
    "round_completion_targets",
    "stale_reminder",
    "stale_reminder_settings",
    "turn_end_commit",
    "update_work_item",
]
