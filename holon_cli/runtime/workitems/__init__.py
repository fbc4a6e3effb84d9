"""The work plane: work items, their plan files, focus, and what the
scheduler and the prompt learn from them.

Where each part lives
  :mod:`holon_cli.store.workitem_index`   the ledgers' fold (index snapshot + cache),
                                          plan-file paths and descriptors
  :mod:`.access`       the mutation lock, focus pointer, lookups with clear errors
  :mod:`.plans`        plan descriptor refresh (``plan_artifact_*`` events)
  :mod:`.views`        ``GetWorkItem``/``ListWorkItems`` views, readiness counts
  :mod:`.mutations`    create, pick, update, complete (focus changes happen here)
  :mod:`.signals`      tick/turn signals: activation, closure reason, rechecks,
                       the turn-end commit
  :mod:`.projection`   the ``## Work queue`` prompt block
  :mod:`.reminders`    the stale-progress reminder
  :mod:`holon_cli.tools.workitem_hints`   tool names and caller-facing hint prose

Durable truth is in the agent's ledgers (``work_items``,
``delivery_summaries``, ``waiting_intents``) and ``work-items/<id>/plan.md``;
everything else is derived (see the store module). Focus
(``AgentState.current_work_item_id``) changes only by explicit action: pick,
or the release inside the mutation that makes the current item non-runnable.

Nothing here prints; functions return plain dicts and raise
:class:`~holon_cli.errors.HolonError` subclasses (the tools turn those into
error envelopes, the CLI into exit codes).

Every name other code uses is importable from this package
(``from holon_cli.runtime import workitems; workitems.NAME``).
"""

from __future__ import annotations

from holon_cli.runtime.workitems.access import require_work_item
from holon_cli.runtime.workitems.mutations import (
    DEFAULT_RECHECK_AFTER_MS,
    complete_work_item,
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
from holon_cli.tools.workitem_hints import (
    COMPLETE_TOOL,
    MUTATION_TOOLS,
    is_work_item_mutation,
    round_completion_targets,
)

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
