"""``TaskList``, ``TaskStatus``, ``TaskOutput``, ``TaskInput``, ``TaskStop``:
the model's view of its command tasks and of the supervision handles of its
children. Thin adapters onto :mod:`holon_cli.runtime.children.handle`, which
passes command tasks to :mod:`holon_cli.runtime.tasks.plane` (the same
functions as ``holon task``).

An unknown task id is a ``not_found`` tool error; a refused input is a
normal result with ``accepted_input: false``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from holon_cli.errors import NotFoundError
from holon_cli.runtime.children import handle
from holon_cli.runtime.tasks import plane
from holon_cli.tools.base import ToolContext, ToolError, ToolResult, field_doc, tool

if TYPE_CHECKING:
    from holon_cli.store.agent_store import AgentStore

MAX_BLOCK_MS = 600_000


def _result(data: Mapping[str, Any]) -> ToolResult:
    return ToolResult(True, json.dumps(data, ensure_ascii=False, default=str), data=dict(data))


def _store(ctx: ToolContext) -> AgentStore:
    if ctx.store is None:
        raise ToolError("unavailable", "tasks need an agent store")
    store: AgentStore = ctx.store
    plane.recovery_pass(store)
    return store


def _not_found(exc: NotFoundError, task_id: str) -> ToolError:
    return ToolError(
        "not_found",
        exc.message,
        details={"task_id": task_id},
        recovery_hint="call TaskList to see your tasks (include_finished: true for ended ones)",
    )


@dataclass(frozen=True)
class TaskListArgs:
    include_finished: bool | None = field_doc(
        "Also list tasks that already ended (default: running ones only).", default=None
    )


@tool(
    "TaskList",
    TaskListArgs,
    description=(
        "List your tasks with their status: commands ExecCommand promoted to the background, "
        "and the child_agent_task handles of children you spawned with SpawnAgent."
    ),
)
def task_list(ctx: ToolContext, args: TaskListArgs) -> ToolResult:
    tasks = handle.list_tasks(_store(ctx), include_all=bool(args.include_finished))
    return _result({"tasks": tasks, "count": len(tasks)})


@dataclass(frozen=True)
class TaskIdArgs:
    task_id: str = field_doc("The task id (task_…) from a task_handle or TaskList.")


@tool(
    "TaskStatus",
    TaskIdArgs,
    description=(
        "A task's lifecycle snapshot (status, exit status, command identity, output path; for a "
        "child_agent_task the child's child_observability and child_supervision). It carries no "
        "output; use TaskOutput for that."
    ),
)
def task_status(ctx: ToolContext, args: TaskIdArgs) -> ToolResult:
    try:
        return _result(handle.task_status(_store(ctx), args.task_id))
    except NotFoundError as exc:
        raise _not_found(exc, args.task_id) from None


@dataclass(frozen=True)
class TaskOutputArgs:
    task_id: str = field_doc("The task id (task_…).")
    block: bool | None = field_doc(
        "Wait (within this turn) until the task ends or timeout_ms passes.", default=None
    )
    timeout_ms: int | None = field_doc(
        "How long `block` waits, in milliseconds (default 30000).", default=None
    )


@tool(
    "TaskOutput",
    TaskOutputArgs,
    description=(
        "A task's output: {retrieval_status, task}. retrieval_status is success once the "
        "task ended and its "
        "output is stable, not_ready while it runs, timeout when block waited in vain. "
        "output_preview is "
        "bounded (head and tail); artifacts name the full log."
    ),
)
def task_output(ctx: ToolContext, args: TaskOutputArgs) -> ToolResult:
    timeout = 30_000 if args.timeout_ms is None else args.timeout_ms
    if timeout < 0:
        raise ToolError(
            "invalid_arguments", "`timeout_ms` must not be negative", field="timeout_ms"
        )
    try:
        res = handle.task_output(
            _store(ctx), args.task_id, block=bool(args.block), timeout_ms=min(timeout, MAX_BLOCK_MS)
        )
    except NotFoundError as exc:
        raise _not_found(exc, args.task_id) from None
    return _result(res)


@dataclass(frozen=True)
class TaskInputArgs:
    task_id: str = field_doc("The task id (task_…); it must have been started with accepts_input.")
    input: str = field_doc("Text to write to the task's stdin (or terminal); add \\n yourself.")


@tool(
    "TaskInput",
    TaskInputArgs,
    description=(
        "Write input to a running task started with accepts_input: true, or send a follow-up "
        "message to a running child (child_agent_task). A refusal is accepted_input: false, "
        "not an error."
    ),
)
def task_input(ctx: ToolContext, args: TaskInputArgs) -> ToolResult:
    try:
        res = handle.task_input(_store(ctx), args.task_id, args.input)
    except NotFoundError as exc:
        raise _not_found(exc, args.task_id) from None
    return _result(res)


@tool(
    "TaskStop",
    TaskIdArgs,
    description=(
        "Stop a task: SIGTERM to its whole process tree, SIGKILL after 5 s. A child_agent_task: "
        "the child and everything it runs are stopped and the child is archived. A task that "
        "already ended is left alone."
    ),
)
def task_stop(ctx: ToolContext, args: TaskIdArgs) -> ToolResult:
    try:
        res = handle.task_stop(_store(ctx), args.task_id)
    except NotFoundError as exc:
        raise _not_found(exc, args.task_id) from None
    return _result(res)
