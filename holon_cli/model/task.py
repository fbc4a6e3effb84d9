"""Command-task values: statuses, the record shape and pure projections.

A task record is a JSON snapshot (``.holon/tasks/<id>/task.json``); terminal
copies are appended to ``.holon/ledger/tasks.jsonl``. A terminal status is
never replaced by a non-terminal one (:func:`merge_status`).
"""

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Required, TypedDict, cast

from holon_cli.model.tracecontext import TraceContext

TASK_RECORD_VERSION = 1
TASK_KIND = "command_task"
# a parent's supervision handle of a private child (runtime/children): no
# process of its own; the command-task recovery and reaping leave it alone
CHILD_TASK_KIND = "child_agent_task"
# legacy persisted child-agent kinds (read, never written)
LEGACY_CHILD_KINDS = ("subagent_task", "worktree_subagent_task")
# ``starting``: the supervisor is launched, the command not yet spawned
TaskStatus = Literal["starting", "running", "completed", "failed", "cancelled", "interrupted"]
# what the contract shows (``starting`` reads as ``running``: :func:`public_status`)
PublicTaskStatus = Literal["running", "completed", "failed", "cancelled", "interrupted"]
# ``TaskOutputResult.retrieval_status`` (readiness rules of the spec)
RetrievalStatus = Literal["success", "not_ready", "timeout"]
STATUSES: tuple[TaskStatus, ...] = (
    "starting",
    "running",
    "completed",
    "failed",
    "cancelled",
    "interrupted",
)
TERMINAL: frozenset[TaskStatus] = frozenset({"completed", "failed", "cancelled", "interrupted"})
ACTIVE: frozenset[TaskStatus] = frozenset({"starting", "running"})


class CommandSpec(TypedDict, total=False):
    """What was run, as the record and the snapshot carry it (``command``)."""

    cmd: str
    cmd_digest: str
    workdir: str
    shell: str | None
    login: bool
    tty: bool
    accepts_input: bool
    output_path: str
    terminal_reentry: bool


class ProcessIdentity(TypedDict):
    """A process as liveness checks see it: pid *and* start time (clock ticks
    since boot, ``None`` without ``/proc``), never pid alone."""

    pid: int
    start_time: int | None


class TaskProcess(TypedDict, total=False):
    """The supervised command: its identity, process group and env marker."""

    pid: int
    start_time: int | None
    pgid: int | None
    marker: str


class TaskLaunchSpec(TypedDict):
    """``.holon/tasks/<id>/spec.json``: what the supervisor starts, written
    once before it starts."""

    v: int
    argv: list[str]
    cwd: str
    tty: bool
    accepts_input: bool
    mode: str  # "detached" | "foreground"
    kill_after_ms: int | None
    output_cap_bytes: int
    marker: str
    # free disk below which output capture stops (retention.min_free_bytes; 0: off)
    min_free_bytes: NotRequired[int]
    # the sandbox's seccomp program (hex), handed to bwrap on a pipe whose fd
    # replaces argv[seccomp_arg] (runtime/tasks/sandbox.py)
    seccomp: NotRequired[str]
    seccomp_arg: NotRequired[int]
    # the umask the command runs with (the user's; holon's own is 077)
    umask: NotRequired[int]
    # HOLON_HOME of the launching process: the supervisor reports there even
    # when the command's environment does not name it (execution.env)
    holon_home: NotRequired[str]


class TaskRecovery(TypedDict, total=False):
    """What a recovery pass needs to describe a lost task (``spec`` for a
    command task; ``prompt`` and ``workspace_mode`` for a child handle)."""

    kind: str
    summary: str
    spec: CommandSpec
    trust: str
    prompt: str
    workspace_mode: str


class WorktreeInfo(TypedDict):
    """A worktree child's task-owned worktree (the task detail's ``worktree``)."""

    path: str
    branch: str
    repo: str
    base_commit: str | None
    changed_files: list[str]
    cleanup_status: str  # pending | removed | retained


class ChildTaskDetail(TypedDict, total=False):
    """``task.json`` ``child``: what the parent's handle knows of its child."""

    child_agent_id: str
    delegation_id: str
    work_item_id: str | None
    workspace_mode: str  # inherit | worktree | explicit_root
    worktree: WorktreeInfo | None
    initial_message_id: str | None
    child_archived: bool
    context: str  # fork | fresh (absent in handles of earlier builds: fresh)
    profile: str | None  # the profile file's name
    workspace_root: str | None  # explicit_root's directory
    # the parent's trace at the spawn (its execute_tool SpawnAgent span):
    # every turn of the child continues it, in whatever process it runs
    trace_context: TraceContext


class RecoveryNotice(TypedDict):
    """One ``task_status`` a recovery admitted: ``lost`` (its supervisor or
    child is gone) or ``recovered`` (still running after a restart)."""

    key: str
    recovery: str  # lost | recovered
    message_id: str | None
    at: str
    error: NotRequired[str]


class TaskRecord(TypedDict, total=False):
    """``.holon/tasks/<id>/task.json``: the task's record, rewritten under its
    directory's lock. Foreground calls (``promoted: false``) have one too."""

    v: int
    id: str
    agent_id: str
    kind: str
    status: TaskStatus
    promoted: bool
    promoted_at: str
    created_at: str
    updated_at: str
    started_at: str
    finished_at: str | None
    parent_message_id: str | None
    turn_id: str | None
    summary: str
    command: CommandSpec
    recovery: TaskRecovery
    owner: ProcessIdentity | None  # a foreground call's caller (None once promoted)
    launcher: ProcessIdentity  # who launched it: "starting" is not lost while it lives
    supervisor: ProcessIdentity | None
    process: TaskProcess
    exit_status: int | None
    signal: str | None
    stop_reason: str | None
    timed_out: bool
    background_killed: bool
    output_bytes: int
    output_capped: bool
    output_summary: str
    error: str | None
    errno: int | None
    status_before_restart: TaskStatus | None
    result_message_id: str | None
    result_deferred: str  # the agent was stopped: a recovery pass delivers it later
    result_undeliverable: str
    child: ChildTaskDetail  # only a child_agent_task
    result_summary: str | None  # a child_agent_task: the child's final text
    # the serve process watching it now (runtime/tasks/recovery.py): a serve
    # that finds it owned by a process that is gone recovered it
    runtime_owner: ProcessIdentity | None
    # the task_status messages its recoveries admitted (runtime spec:
    # Background Task Recovery): one per recovery key
    recovery_notices: list[RecoveryNotice]


class TaskLedgerRecord(TypedDict, total=False):
    """One line of ``.holon/ledger/tasks.jsonl``: a copy of the record's public
    fields when the task is promoted and when it ends."""

    v: int
    at: str
    id: Required[str]
    agent_id: str
    kind: str
    status: Required[TaskStatus]
    created_at: str
    updated_at: str
    finished_at: str | None
    parent_message_id: str | None
    summary: str
    command: CommandSpec
    recovery: TaskRecovery
    exit_status: int | None
    signal: str | None
    stop_reason: str | None
    error: str | None
    output_bytes: int
    status_before_restart: TaskStatus | None


class TaskHandle(TypedDict):
    """The ``TaskHandle`` receipt of a promoted (or reused) command."""

    task_id: str
    task_kind: str
    status: PublicTaskStatus


class TaskCommandView(TypedDict):
    """The snapshot's ``command``: every field present, ``None`` when unknown."""

    cmd: str | None
    cmd_digest: str | None
    workdir: str | None
    shell: str | None
    login: bool | None
    tty: bool | None
    output_path: str | None
    terminal_reentry: bool | None


class TaskSnapshot(TypedDict):
    """The compact ``TaskStatus.task`` lifecycle snapshot (no output bytes):
    ``TaskStatus``, ``TaskList``, ``holon task status|list --json``."""

    task_id: str
    kind: str
    status: PublicTaskStatus
    summary: str
    cmd_preview: str
    agent_id: str | None
    created_at: str | None
    updated_at: str | None
    finished_at: str | None
    exit_status: int | None
    signal: str | None
    stop_reason: str | None
    error: str | None
    status_before_restart: TaskStatus | None
    parent_message_id: str | None
    accepts_input: bool
    input_target: str | None
    command: TaskCommandView


class TaskFailure(TypedDict):
    """The ``failure_artifact`` of a task that failed, was cancelled or
    interrupted: the spec's ``FailureArtifact`` (``summary`` required; fields
    the spec does not name go under ``metadata``, strings only)."""

    summary: str
    category: str  # "task"
    task_id: str
    exit_status: NotRequired[int]
    metadata: dict[str, str]


FAILED_TASK_STATUSES = ("failed", "cancelled", "interrupted")


def failure_artifact(rec: Mapping[str, Any]) -> TaskFailure | None:
    """The failure artifact of a task record, or ``None`` when it did not fail."""
    status = rec.get("status")
    if status not in FAILED_TASK_STATUSES:
        return None
    summary = f"task {rec.get('id')} {status}"
    exit_status = rec.get("exit_status")
    if isinstance(exit_status, int):
        summary += f" with exit status {exit_status}"
    reason = rec.get("stop_reason") or rec.get("error")
    if reason:
        summary += f" ({reason})"
    meta: dict[str, str] = {"task_status": str(status)}
    for key in ("stop_reason", "error", "signal", "status_before_restart"):
        if rec.get(key):
            meta[key] = str(rec[key])[:500]
    if rec.get("summary"):
        meta["command"] = str(rec["summary"])[:500]
    art: TaskFailure = {
        "summary": summary,
        "category": "task",
        "task_id": str(rec.get("id")),
        "metadata": meta,
    }
    if isinstance(exit_status, int):
        art["exit_status"] = exit_status
    return art


class TaskOutputView(TypedDict):
    """``TaskOutputResult.task``: the snapshot's identity plus bounded output."""

    task_id: str
    kind: str
    status: PublicTaskStatus
    summary: str
    output_preview: str
    output_truncated: bool
    output_bytes: int
    artifacts: list[dict[str, str]]
    output_artifact: int | None
    result_summary: str | None
    exit_status: int | None
    failure_artifact: TaskFailure | None
    child_supervision: None


class TaskOutputResult(TypedDict):
    """``TaskOutput`` / ``holon task output --json``."""

    retrieval_status: RetrievalStatus
    task: TaskOutputView


class TaskInputResult(TypedDict):
    """``TaskInput`` / ``holon task input``; a refusal is ``accepted_input: false``."""

    task: TaskSnapshot
    accepted_input: bool
    input_target: str
    bytes_written: int
    summary_text: str


class TaskStopResult(TypedDict):
    """``TaskStop`` / ``holon task stop``."""

    task: TaskSnapshot
    stop_requested: bool
    force_stop_requested: bool
    summary_text: str


class ActiveTask(TypedDict):
    """A running task as the agent's status lists it."""

    task_id: str
    task_kind: str
    status: PublicTaskStatus
    summary: str


class TaskResultMetadata(TypedDict):
    """The ``metadata`` of the ONE ``task_result`` message a promoted task admits."""

    task_id: str
    task_status: TaskStatus | None
    exit_status: int | None
    output_path: str
    stop_reason: str | None
    status_before_restart: TaskStatus | None
    # where the command's output sits in the body text (characters): the
    # prompt fences exactly that span as evidence
    output_offset: NotRequired[int]
    output_length: NotRequired[int]


def is_child_task(rec: Mapping[str, Any]) -> bool:
    """A supervision handle of a child agent (legacy kinds included)."""
    return rec.get("kind") in (CHILD_TASK_KIND, *LEGACY_CHILD_KINDS)


def is_terminal(status: str | None) -> bool:
    return status in TERMINAL


def never_started(snap: TaskSnapshot | TaskRecord) -> bool:
    """A task that failed before its command ran (no exit status, no signal):
    not one that ran and exited non-zero, which is also ``failed``."""
    return (
        snap.get("status") == "failed"
        and snap.get("exit_status") is None
        and snap.get("signal") is None
        and bool(snap.get("error"))
    )


def merge_status(current: TaskStatus | None, new: TaskStatus) -> TaskStatus:
    """A terminal status wins over anything later that is not terminal."""
    if current is not None and is_terminal(current) and not is_terminal(new):
        return current
    return new


def cmd_digest(cmd: str, workdir: str, shell: str | None, login: bool, tty: bool) -> str:
    """The machine identity of a command: equal digests are "the same command"."""
    from holon_cli.digest import sha256_hex

    key = "\0".join([cmd, workdir, shell or "", "1" if login else "0", "1" if tty else "0"])
    return "sha256:" + sha256_hex(key.encode("utf-8"))[:32]


def summary_of(cmd: str, limit: int = 120) -> str:
    one = " ".join(cmd.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def public_status(status: str | None) -> PublicTaskStatus:
    """The contract's status: ``starting`` (supervisor launched, command not
    yet spawned) is reported as ``running``. A status read from disk is passed
    through as it is (the record is not validated here)."""
    return "running" if status in (None, "starting") else cast("PublicTaskStatus", str(status))


def handle(rec: TaskRecord) -> TaskHandle:
    """The ``TaskHandle`` receipt."""
    return {
        "task_id": rec["id"],
        "task_kind": rec.get("kind", TASK_KIND),
        "status": public_status(rec.get("status")),
    }
