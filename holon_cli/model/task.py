"""Command-task values: statuses, the record shape and pure projections.

A task record is a JSON snapshot (``.holon/tasks/<id>/task.json``); terminal
copies are appended to ``.holon/ledger/tasks.jsonl``. A terminal status is
never replaced by a non-terminal one (:func:`merge_status`).
"""

from typing import Any, TypedDict

TASK_RECORD_VERSION = 1
TASK_KIND = "command_task"
STATUSES = ("starting", "running", "completed", "failed", "cancelled", "interrupted")
TERMINAL = frozenset({"completed", "failed", "cancelled", "interrupted"})
ACTIVE = frozenset({"starting", "running"})


class CommandSpec(TypedDict, total=False):
    cmd: str
    cmd_digest: str
    workdir: str
    shell: str | None
    login: bool
    tty: bool
    accepts_input: bool
    output_path: str
    terminal_reentry: bool


class TaskRecord(TypedDict, total=False):
    v: int
    id: str
    agent_id: str
    kind: str
    status: str
    promoted: bool
    created_at: str
    updated_at: str
    finished_at: str | None
    parent_message_id: str | None
    turn_id: str | None
    summary: str
    command: CommandSpec
    exit_status: int | None
    signal: str | None
    stop_reason: str | None
    error: str | None
    output_bytes: int
    status_before_restart: str | None
    result_message_id: str | None


def is_terminal(status: str | None) -> bool:
    return status in TERMINAL


def merge_status(current: str | None, new: str) -> str:
    """A terminal status wins over anything later that is not terminal."""
    if is_terminal(current) and not is_terminal(new):
        return str(current)
    return new


def cmd_digest(cmd: str, workdir: str, shell: str | None, login: bool, tty: bool) -> str:
    """The machine identity of a command: equal digests are "the same command"."""
    import hashlib  # lazily: the task supervisor imports this module at start-up

    key = "\0".join([cmd, workdir, shell or "", "1" if login else "0", "1" if tty else "0"])
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def summary_of(cmd: str, limit: int = 120) -> str:
    one = " ".join(cmd.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def public_status(status: str | None) -> str:
    """The contract's status: ``starting`` (supervisor launched, command not
    yet spawned) is reported as ``running``."""
    return "running" if status in (None, "starting") else str(status)


def handle(rec: dict[str, Any]) -> dict[str, Any]:
    """The ``TaskHandle`` receipt."""
    return {
        "task_id": rec["id"],
        "task_kind": rec.get("kind", TASK_KIND),
        "status": public_status(rec.get("status")),
    }
