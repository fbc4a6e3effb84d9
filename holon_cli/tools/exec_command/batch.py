"""``ExecCommandBatch``: several independent commands, one after another,
one grouped receipt. Items never become tasks: one still running at its
timeout is killed with its process tree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from holon_cli.tools.base import ToolContext, ToolError, ToolResult, field_doc, tool
from holon_cli.tools.exec_command.budget import output_budget_tokens
from holon_cli.tools.exec_command.finish import CompletedEnvelope, run_foreground
from holon_cli.tools.exec_command.prepare import _ms_setting, _prepare

if TYPE_CHECKING:
    from holon_cli.model.events import ToolWarning

DEFAULT_EXEC_TIMEOUT_MS = 120_000
MAX_BATCH_ITEMS = 20


@dataclass(frozen=True)
class ExecBatchItem:
    cmd: str = field_doc("Shell command to run.")
    workdir: str | None = field_doc("Working directory inside the execution root.", default=None)
    shell: str | None = field_doc("Shell (default /bin/bash).", default=None)
    login: bool | None = field_doc("Run as a login shell.", default=None)
    yield_time_ms: int | None = field_doc(
        (
            "Timeout for this item in milliseconds (default 120000); the item's process tree "
            "is killed then."
        ),
        default=None,
    )
    max_output_tokens: int | None = field_doc(
        "Output budget for this item in estimated tokens.", default=None
    )


@dataclass(frozen=True)
class ExecCommandBatchArgs:
    commands: list[ExecBatchItem] = field_doc(
        f"Commands to run one after another (1-{MAX_BATCH_ITEMS}); a failing item does not "
        "stop the batch."
    )


def _render_item(r: CompletedEnvelope) -> str:
    if r.get("timed_out"):
        head = (
            f"Timed out after {r['timeout_ms']} ms; the command and its process tree were "
            "killed (partial output below)."
        )
    elif r.get("signal"):
        head = (
            f"Killed by {r['signal']} (exit status {r['exit_status']}) after {r['duration_ms']} ms."
        )
    else:
        head = f"Exit status {r['exit_status']} after {r['duration_ms']} ms."
    lines = [head + f" cwd: {r['cwd']}"]
    for w in r.get("warnings") or []:
        lines.append(f"Warning: {w['message']}")
    for name, text in (("stdout", r["stdout_preview"]), ("stderr", r["stderr_preview"])):
        if text:
            lines.append(f"{name}:")
            lines.append(text.rstrip("\n"))
    if not (r.get("stdout_preview") or r.get("stderr_preview")):
        lines.append("Output: (none)")
    return "\n".join(lines)


@tool(
    "ExecCommandBatch",
    ExecCommandBatchArgs,
    description=(
        "Run several independent shell commands sequentially and get one grouped receipt. "
        "Each item is bounded like ExecCommand but never becomes a task: an item still "
        "running at its "
        "yield_time_ms is killed. An item that fails to start or times out is reported "
        "in its slot and the batch continues. Items do not support tty or accepts_input."
    ),
)
def exec_command_batch(ctx: ToolContext, args: ExecCommandBatchArgs) -> ToolResult:
    n = len(args.commands)
    if not 1 <= n <= MAX_BATCH_ITEMS:
        raise ToolError(
            "invalid_arguments",
            f"`commands` must hold 1 to {MAX_BATCH_ITEMS} items (got {n})",
            field="commands",
            recovery_hint="split the work into several batches",
        )
    # the batch as a whole stays within one default budget unless items ask for more
    share = max(250, output_budget_tokens(ctx.config) // n)
    items: list[dict[str, object]] = []
    warnings: list[ToolWarning] = []
    blocks: list[str] = []
    for i, item in enumerate(args.commands, 1):
        label = f"[{i}/{n}] $ {item.cmd}"
        try:
            p = _prepare(
                ctx,
                cmd=item.cmd,
                workdir=item.workdir,
                shell=item.shell,
                login=bool(item.login),
                max_output_tokens=item.max_output_tokens,
                default_tokens=share,
            )
            timeout_ms = _ms_setting(
                ctx, item.yield_time_ms, "exec_timeout_ms", DEFAULT_EXEC_TIMEOUT_MS, p.warnings
            )
            r = run_foreground(ctx, p, timeout_ms=timeout_ms)
        except ToolError as err:
            items.append({"index": i, "cmd": item.cmd, "status": "failed", "error": err.envelope()})
            hint = f"\nHint: {err.recovery_hint}" if err.recovery_hint else ""
            blocks.append(f"{label}\nFailed to run ({err.kind}): {err.message}{hint}")
            continue
        status = (
            "timed_out"
            if r["timed_out"]
            else ("succeeded" if r["exit_status"] == 0 else "exited_nonzero")
        )
        items.append({"index": i, "cmd": item.cmd, "status": status, **r})
        warnings.extend(r.get("warnings", []))
        ctx.report.command_runs.append({"cmd": item.cmd, "exit_status": r["exit_status"]})
        if status == "succeeded":  # only a successful command activates skills
            ctx.report.commands.append(item.cmd)
        blocks.append(f"{label}\n{_render_item(r)}")
    summary = {
        s: sum(1 for it in items if it["status"] == s)
        for s in ("succeeded", "exited_nonzero", "timed_out", "failed")
    }
    data: dict[str, object] = {"items": items, "item_count": n, "summary": summary}
    head = f"Batch of {n} command(s): " + ", ".join(f"{v} {k}" for k, v in summary.items() if v)
    return ToolResult(True, head + "\n\n" + "\n\n".join(blocks), data=data, warnings=warnings)
