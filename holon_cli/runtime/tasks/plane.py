"""The task plane: launch supervised commands, promote them, inspect, feed,
stop and recover them.

Files (per agent): ``.holon/tasks/<task_id>/`` holds ``task.json`` (the
record, rewritten atomically under ``lock``), ``spec.json`` (the launch
spec), ``output.log`` (combined output), ``stdout.log``/``stderr.log``
(non-tty), ``stdin.fifo`` (``accepts_input``), ``supervisor.log`` and,
for a moment at promotion, ``handoff.json``.
Terminal records of promoted tasks are appended to
``.holon/ledger/tasks.jsonl``.

Invariants:

- A terminal status is never replaced (``model.task.merge_status``).
- A promoted task reports ONE ``task_result`` (``report_terminal`` checks
  and sets ``result_message_id`` under the task lock).
- Foreground calls (not promoted) never report; their directory is removed
  when the call returns (kept outputs move to ``.holon/outputs/``).
- Liveness is pid *and* process start time, never pid alone.

Modules: ``records`` (files, ``task.json``, the task ledger, the ONE
result report), ``launch`` (supervisor launch, foreground wait / promote,
``holon task run``), ``control`` (list, snapshot, output readiness, input,
stop), ``recovery`` (reaping, pruning, the tick pass, waiting for results).
This module re-exports them all: callers keep using
``from holon_cli.runtime.tasks import plane``.
"""

from holon_cli.runtime.tasks.control import (
    OUTPUT_PREVIEW_CHARS,
    STOP_GRACE_S,
    active_tasks,
    find_duplicate,
    follow_output,
    list_tasks,
    require_active_input,
    snapshot,
    stop_unsettled,
    task_input,
    task_output,
    task_stop,
)
from holon_cli.runtime.tasks.launch import (
    DEFAULT_OUTPUT_CAP_BYTES,
    Launched,
    discard_foreground,
    keep_outputs,
    launch,
    output_cap_bytes,
    promote,
    run_task,
    wait_foreground,
)
from holon_cli.runtime.tasks.records import (
    RESULT_PREVIEW_CHARS,
    iter_records,
    outputs_root,
    read_record_file,
    read_task,
    report_terminal,
    result_text,
    task_dir,
    tasks_root,
    update_task,
)
from holon_cli.runtime.tasks.records import _ledger as _ledger
from holon_cli.runtime.tasks.records import _ledger_record as _ledger_record
from holon_cli.runtime.tasks.records import _read as _read
from holon_cli.runtime.tasks.records import _store_for as _store_for
from holon_cli.runtime.tasks.recovery import (
    DEFAULT_OUTPUTS_MAX_AGE_S,
    DEFAULT_OUTPUTS_MAX_BYTES,
    STARTING_GRACE_S,
    outputs_usage,
    prune_outputs,
    reap_orphans,
    recovery_pass,
    tick_tasks,
    unsettled_tasks,
    wait_for_task_result,
)

__all__ = [
    "DEFAULT_OUTPUTS_MAX_AGE_S",
    "DEFAULT_OUTPUTS_MAX_BYTES",
    "DEFAULT_OUTPUT_CAP_BYTES",
    "OUTPUT_PREVIEW_CHARS",
    "RESULT_PREVIEW_CHARS",
    "STARTING_GRACE_S",
    "STOP_GRACE_S",
    "Launched",
    "active_tasks",
    "discard_foreground",
    "find_duplicate",
    "follow_output",
    "iter_records",
    "keep_outputs",
    "launch",
    "list_tasks",
    "output_cap_bytes",
    "outputs_root",
    "outputs_usage",
    "promote",
    "prune_outputs",
    "read_record_file",
    "read_task",
    "reap_orphans",
    "recovery_pass",
    "report_terminal",
    "require_active_input",
    "result_text",
    "run_task",
    "snapshot",
    "stop_unsettled",
    "task_dir",
    "task_input",
    "task_output",
    "task_stop",
    "tasks_root",
    "tick_tasks",
    "unsettled_tasks",
    "update_task",
    "wait_for_task_result",
    "wait_foreground",
]
