"""Turning a finished command into the ``completed`` envelope (previews,
kept output files, warnings) and running a command to completion for batch
items (:func:`run_foreground`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from holon_cli.model import task as task_model
from holon_cli.runtime.tasks import plane as tasks
from holon_cli.runtime.tasks.output import bound_output
from holon_cli.runtime.tasks.procs import stop_tree
from holon_cli.tools.base import ToolContext, ToolError
from holon_cli.tools.exec_command.budget import CHARS_PER_TOKEN
from holon_cli.tools.exec_command.prepare import _Prepared

if TYPE_CHECKING:
    from holon_cli.model.events import ToolWarning
    from holon_cli.model.task import TaskProcess, TaskRecord


class OutputArtifact(TypedDict):
    """A stream's full output kept under ``.holon/outputs/`` (its preview was cut)."""

    kind: str
    path: str
    bytes: int


class CompletedEnvelope(TypedDict):
    """What a call that ran to its end returns (``ExecCommand``, a batch item)."""

    disposition: Literal["completed"]
    exit_status: int | None
    signal: str | None
    stdout_preview: str
    stderr_preview: str
    truncated: bool
    artifacts: list[OutputArtifact]
    stdout_artifact: int | None
    stderr_artifact: int | None
    duration_ms: int
    cwd: str
    output_bytes: int
    output_budget_tokens: int
    timed_out: NotRequired[bool]
    timeout_ms: NotRequired[int]
    warnings: NotRequired[list[ToolWarning]]  # set last: the receipt's key order


def _spawn_error(rec: TaskRecord, p: _Prepared) -> ToolError:
    return ToolError(
        "spawn_failed",
        f"could not start the command: {rec.get('error') or 'unknown error'}",
        details={"argv0": p.argv[0], "cwd": str(p.cwd), "errno": rec.get("errno")},
        recovery_hint="check that the shell and workdir exist and are accessible",
    )


def _check_finished(launched: tasks.Launched, rec: TaskRecord, p: _Prepared) -> None:
    """Raise the tool error for a call that did not run to a recorded end."""
    if rec.get("status") == "failed" and rec.get("error"):
        tasks.discard_foreground(launched)
        raise _spawn_error(rec, p)
    if not task_model.is_terminal(rec.get("status")):
        # the supervisor died without recording an end (killed from outside)
        proc: TaskProcess = rec.get("process") or {}
        stop_tree(
            proc.get("pgid"),
            proc.get("marker") or launched.task_id,
            grace_s=1.0,
            since=proc.get("start_time"),
        )
        tasks.discard_foreground(launched)
        raise ToolError(
            "supervisor_lost",
            (
                "the process supervising this command was killed before the command finished; "
                "the command was stopped"
            ),
            details={"task_id": launched.task_id},
            recovery_hint="check the command's effects before running it again",
        )


def _completed_envelope(
    ctx: ToolContext,
    launched: tasks.Launched,
    rec: TaskRecord,
    p: _Prepared,
    duration_ms: int,
    *,
    tty: bool,
) -> CompletedEnvelope:
    """The ``completed`` envelope; output files are kept under ``.holon/outputs/``
    only when a preview was cut, and the call's directory is removed."""
    budget = p.tokens * CHARS_PER_TOKEN
    names = ("output",) if tty else ("stdout", "stderr")
    sizes = {n: _size(launched.dir / f"{n}.log") for n in names}
    shares = _preview_shares(budget, sizes, tty=tty)
    previews = {n: bound_output(launched.dir / f"{n}.log", max(1, shares[n])) for n in names}
    truncated = any(b.truncated for b in previews.values())
    artifacts: list[OutputArtifact] = []
    index: dict[str, int] = {}
    if truncated:
        kept = tasks.keep_outputs(ctx.store, launched, names)
        for n in names:
            if n in kept:
                index[n] = len(artifacts)
                artifacts.append({"kind": n, "path": kept[n], "bytes": sizes[n]})
    tasks.discard_foreground(launched)
    env: CompletedEnvelope = {
        "disposition": "completed",
        "exit_status": rec.get("exit_status"),
        "signal": rec.get("signal"),
        "stdout_preview": previews["output" if tty else "stdout"].text,
        "stderr_preview": "" if tty else previews["stderr"].text,
        "truncated": truncated,
        "artifacts": artifacts,
        "stdout_artifact": index.get("output" if tty else "stdout"),
        "stderr_artifact": index.get("stderr"),
        "duration_ms": duration_ms,
        "cwd": str(p.cwd),
        "output_bytes": int(rec.get("output_bytes") or 0),
        "output_budget_tokens": p.tokens,
    }
    if rec.get("timed_out"):
        env["timed_out"] = True
    env["warnings"] = _completed_warnings(p, rec, artifacts if truncated else None)
    return env


def _preview_shares(budget: int, sizes: dict[str, int], *, tty: bool) -> dict[str, int]:
    """Characters of the preview budget per stream: all of it for a terminal's
    one stream; for stdout and stderr all of it each when both fit, else
    stderr gets at least half (less when it is smaller) and stdout the rest."""
    if tty:
        return {"output": budget}
    so, se = sizes["stdout"], sizes["stderr"]
    if so + se <= budget:
        return {"stdout": budget, "stderr": budget}
    half = budget // 2
    stderr = min(se, max(half, budget - so))
    return {"stderr": stderr, "stdout": budget - stderr}


def _completed_warnings(
    p: _Prepared, rec: TaskRecord, kept: list[OutputArtifact] | None
) -> list[ToolWarning]:
    """The preparation's warnings, then: output cut (``kept``: the files the
    full output was saved to), output cap reached, background processes killed."""
    warnings = list(p.warnings)
    if kept is not None:
        where = ", ".join(a["path"] for a in kept)
        warnings.append(
            {
                "kind": "output_truncated",
                "message": (
                    "output was cut to its head and tail; the full output was saved to "
                    f"{where} (inspect it with `sed -n 'START,ENDp'`, `rg -n` or `tail`)"
                ),
            }
        )
    if rec.get("output_capped"):
        warnings.append(
            {
                "kind": "output_limit",
                "message": (
                    f"the command was stopped after writing {rec.get('output_bytes')} bytes of "
                    "output (the output cap)"
                ),
            }
        )
    if rec.get("background_killed"):
        warnings.append(
            {
                "kind": "background_processes_killed",
                "message": (
                    "processes the command left running in the background were terminated; "
                    "ExecCommand waits for nothing after the command exits (use a "
                    "longer-running command to get a task)"
                ),
            }
        )
    return warnings


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def start_command(ctx: ToolContext, **kw: Any) -> Any:
    """``tasks.launch`` for a model call: the execution root is what a sandbox
    leaves writable; a launch refused before anything started (the configured
    sandbox unavailable, the disk below its floor) is the model's tool error."""
    from holon_cli.errors import RejectedError
    from holon_cli.tools.exec_command.prepare import _root

    try:
        return tasks.launch(ctx.store, root=_root(ctx), anchor=ctx.workspace_anchor, **kw)
    except RejectedError as err:  # sandbox_unavailable, disk_full, forbidden_workspace
        message, hint = err.said_on("tool")
        raise ToolError(err.kind, message, recovery_hint=hint, details=err.details) from None


def run_foreground(
    ctx: ToolContext,
    p: _Prepared,
    *,
    timeout_ms: int,
) -> CompletedEnvelope:
    """Run to completion, killing the command tree at ``timeout_ms`` (batch items)."""
    start = time.monotonic()
    launched = start_command(
        ctx,
        argv=p.argv,
        cmd=p.cmd,
        cwd=p.cwd,
        shell=None,
        login=False,
        config=ctx.config,
        parent_message_id=(ctx.message or {}).get("id"),
        turn_id=ctx.turn_id,
        kill_after_ms=timeout_ms,
    )
    rec = tasks.wait_foreground(launched, timeout_ms / 1000 + 30)
    if rec is None:  # the supervisor itself is stuck: should not happen
        launched.abandon(30.0)
        rec = tasks.read_record_file(launched.dir) or {}
    _check_finished(launched, rec, p)
    env = _completed_envelope(
        ctx, launched, rec, p, int((time.monotonic() - start) * 1000), tty=False
    )
    env["timeout_ms"] = timeout_ms
    env["timed_out"] = bool(rec.get("timed_out"))
    return env
