"""``ExecCommand`` and ``ExecCommandBatch``: run shell commands in the agent's
execution root and hand back the spec's structured envelope (as JSON: that
is what the model sees).

Owns: workdir resolution inside the execution root, the model-visible output
budget (also used by other tools that reinject command output, via
:func:`output_budget_tokens` and :func:`bound_output`) and the envelopes.
Process supervision lives in :mod:`holon_cli.runtime.tasks`.

Invariants:

- ``cwd`` never leaves ``ctx.execution_root`` (symlinks resolved); a workdir
  that would is an ``execution_root_violation`` error, not a silent clamp.
- Every command runs under a supervisor process, in its own session and
  process group, with stdin on ``/dev/null`` (unless ``accepts_input``) and
  without secret environment variables (``*_API_KEY``, ``*_TOKEN``,
  ``*_SECRET``, ``*PASSWORD*``, ``HOLON_CONTROL_TOKEN``; unless
  ``runtime.exec_env_passthrough`` names them).
- ``ExecCommand`` waits up to ``yield_time_ms`` (default 10 s). A finished
  command returns ``disposition: completed``; one still running is promoted
  to a ``command_task`` (``promoted_to_task``) that outlives the turn. When a
  command exits, whatever it left running in the background is stopped (its
  process group and every process carrying its marker).
- stdout and stderr stream into files, capped on the write path (default
  64 MiB combined, then the command is stopped). What reaches the model is
  bounded to the token budget (head and tail); when it was cut, the full
  output stays under ``<agent_home>/.holon/outputs/`` and ``artifacts``
  names the files.
- A non-zero exit is a normal result; only failures to start the command are
  tool errors (``spawn_failed``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from holon_cli.model import task as task_model
from holon_cli.runtime.tasks import plane as tasks
from holon_cli.runtime.tasks.output import BoundedOutput, bound_output
from holon_cli.runtime.tasks.procs import runtime_setting, stop_tree
from holon_cli.tools.base import ToolContext, ToolError, ToolResult, field_doc, tool

__all__ = ["BoundedOutput", "bound_output", "output_budget_tokens", "resolve_inside_root"]

CHARS_PER_TOKEN = 4
DEFAULT_OUTPUT_TOKENS = 8_000
HARD_MAX_OUTPUT_TOKENS = 64_000
DEFAULT_EXEC_TIMEOUT_MS = 120_000
DEFAULT_YIELD_TIME_MS = 10_000
MAX_EXEC_TIMEOUT_MS = 3_600_000
MAX_BATCH_ITEMS = 20
DEFAULT_SHELL = "/bin/bash"

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


# ------------------------------------------------------------------ budget


def _int_setting(raw: Any, source: str, warnings: list[dict[str, Any]]) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if value <= 0:
        warnings.append(
            {
                "kind": "invalid_setting",
                "message": f"{source}={raw!r} is not a positive integer; ignored",
            }
        )
        return None
    return value


def output_budget_tokens(
    config: dict[str, Any] | None,
    requested: int | None = None,
    *,
    warnings: list[dict[str, Any]] | None = None,
) -> int:
    """The model-visible output budget in estimated tokens.

    Precedence: the call's ``max_output_tokens`` (clamped to the maximum) >
    ``HOLON_DEFAULT_TOOL_OUTPUT_TOKENS`` > ``runtime.default_tool_output_tokens``
    > 8,000. The maximum is ``HOLON_MAX_TOOL_OUTPUT_TOKENS`` >
    ``runtime.max_tool_output_tokens`` > 64,000, and never above 64,000.
    """
    warns = warnings if warnings is not None else []
    rt = (config or {}).get("runtime") or {}
    maximum = (
        _int_setting(
            os.environ.get("HOLON_MAX_TOOL_OUTPUT_TOKENS"), "HOLON_MAX_TOOL_OUTPUT_TOKENS", warns
        )
        or _int_setting(rt.get("max_tool_output_tokens"), "runtime.max_tool_output_tokens", warns)
        or HARD_MAX_OUTPUT_TOKENS
    )
    maximum = min(maximum, HARD_MAX_OUTPUT_TOKENS)
    if requested is not None:
        return max(1, min(requested, maximum))
    default = (
        _int_setting(
            os.environ.get("HOLON_DEFAULT_TOOL_OUTPUT_TOKENS"),
            "HOLON_DEFAULT_TOOL_OUTPUT_TOKENS",
            warns,
        )
        or _int_setting(
            rt.get("default_tool_output_tokens"), "runtime.default_tool_output_tokens", warns
        )
        or DEFAULT_OUTPUT_TOKENS
    )
    return min(default, maximum)


# ----------------------------------------------------------------- workdir


def _root(ctx: ToolContext) -> Path:
    return Path(os.path.realpath(ctx.execution_root))


def resolve_inside_root(ctx: ToolContext, raw: str | None, *, field: str = "workdir") -> Path:
    """Resolve ``raw`` (relative to ``ctx.cwd``) and require it inside the execution root."""
    root = _root(ctx)
    base = Path(os.path.realpath(ctx.cwd)) if ctx.cwd else root
    if raw is None or raw.strip() == "":
        target = base
    else:
        target = Path(os.path.realpath(base / Path(raw).expanduser()))
    if target != root and root not in target.parents:
        raise ToolError(
            "execution_root_violation",
            f"{field} {raw!r} resolves to {target}, which is outside the execution root {root}",
            details={
                "field": field,
                "requested": raw,
                "resolved": str(target),
                "execution_root": str(root),
                "cwd": str(base),
            },
            recovery_hint=f"use a path inside {root} (relative paths are resolved from {base})",
        )
    return target


# ----------------------------------------------------------------- process


def _shell_argv(shell: str | None, login: bool, cmd: str) -> list[str]:
    parts = shlex.split(shell) if shell and shell.strip() else [DEFAULT_SHELL]
    exe = parts[0]
    if os.sep not in exe:
        found = shutil.which(exe)
        if not found:
            raise ToolError(
                "spawn_failed",
                f"shell {exe!r} was not found on PATH",
                details={"shell": shell},
                recovery_hint=(
                    "omit `shell` to use /bin/bash, or pass an absolute path such as /bin/sh"
                ),
            )
        exe = found
    elif not os.access(exe, os.X_OK):
        raise ToolError(
            "spawn_failed",
            f"shell {exe!r} does not exist or is not executable",
            details={"shell": shell},
            recovery_hint="omit `shell` to use /bin/bash, or pass an executable such as /bin/sh",
        )
    return [exe, *parts[1:], *(["-l"] if login else []), "-c", cmd]


def _ms_setting(
    ctx: ToolContext,
    requested: int | None,
    key: str,
    default: int,
    warnings: list[dict[str, Any]],
) -> int:
    if requested is not None:
        if requested <= 0:
            raise ToolError(
                "invalid_arguments",
                "`yield_time_ms` must be a positive number of milliseconds",
                field="yield_time_ms",
                recovery_hint="omit it to use the default",
            )
        if requested > MAX_EXEC_TIMEOUT_MS:
            warnings.append(
                {
                    "kind": "clamped",
                    "message": (
                        f"yield_time_ms {requested} was lowered to the maximum "
                        f"{MAX_EXEC_TIMEOUT_MS}"
                    ),
                }
            )
        return min(requested, MAX_EXEC_TIMEOUT_MS)
    raw = runtime_setting(ctx.config, key, None)
    return _int_setting(raw, f"runtime.{key}", warnings) or default


def _exit_fields(rec: dict[str, Any]) -> dict[str, Any]:
    return {"exit_status": rec.get("exit_status"), "signal": rec.get("signal")}


@dataclass
class _Prepared:
    cmd: str
    cwd: Path
    argv: list[str]
    tokens: int
    warnings: list[dict[str, Any]]


def _prepare(
    ctx: ToolContext,
    *,
    cmd: str,
    workdir: str | None,
    shell: str | None,
    login: bool,
    max_output_tokens: int | None,
    default_tokens: int | None = None,
) -> _Prepared:
    if not cmd.strip():
        raise ToolError(
            "invalid_arguments",
            "`cmd` is empty",
            field="cmd",
            recovery_hint="pass the shell command to run",
        )
    if max_output_tokens is not None and max_output_tokens <= 0:
        raise ToolError(
            "invalid_arguments",
            "`max_output_tokens` must be positive",
            field="max_output_tokens",
            recovery_hint="omit it to use the default budget",
        )
    if ctx.store is None:
        raise ToolError("unavailable", "commands need an agent store", retryable=False)
    warnings: list[dict[str, Any]] = []
    cwd = resolve_inside_root(ctx, workdir)
    if not cwd.is_dir():
        raise ToolError(
            "spawn_failed",
            f"workdir {str(cwd)!r} does not exist or is not a directory",
            details={"field": "workdir", "requested": workdir, "resolved": str(cwd)},
            recovery_hint="create it first (mkdir -p) or pass an existing directory",
        )
    tokens = output_budget_tokens(ctx.config, max_output_tokens, warnings=warnings)
    if max_output_tokens is None and default_tokens is not None:
        tokens = min(tokens, default_tokens)
    argv = _shell_argv(shell, login, cmd)
    return _Prepared(cmd, cwd, argv, tokens, warnings)


def _spawn_error(rec: dict[str, Any], p: _Prepared) -> ToolError:
    return ToolError(
        "spawn_failed",
        f"could not start the command: {rec.get('error') or 'unknown error'}",
        details={"argv0": p.argv[0], "cwd": str(p.cwd), "errno": rec.get("errno")},
        recovery_hint="check that the shell and workdir exist and are accessible",
    )


def _check_finished(launched: tasks.Launched, rec: dict[str, Any], p: _Prepared) -> None:
    """Raise the tool error for a call that did not run to a recorded end."""
    if rec.get("status") == "failed" and rec.get("error"):
        tasks.discard_foreground(launched)
        raise _spawn_error(rec, p)
    if not task_model.is_terminal(rec.get("status")):
        # the supervisor died without recording an end (killed from outside)
        proc = rec.get("process") or {}
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
    rec: dict[str, Any],
    p: _Prepared,
    duration_ms: int,
    *,
    tty: bool,
) -> dict[str, Any]:
    """The ``completed`` envelope; output files are kept under ``.holon/outputs/``
    only when a preview was cut, and the call's directory is removed."""
    budget = p.tokens * CHARS_PER_TOKEN
    names = ("output",) if tty else ("stdout", "stderr")
    sizes = {n: _size(launched.dir / f"{n}.log") for n in names}
    shares: dict[str, int] = {}
    if tty:
        shares["output"] = budget
    else:
        so, se = sizes["stdout"], sizes["stderr"]
        if so + se <= budget:
            shares = {"stdout": budget, "stderr": budget}
        else:
            half = budget // 2
            shares["stderr"] = min(se, max(half, budget - so))
            shares["stdout"] = budget - shares["stderr"]
    previews = {n: bound_output(launched.dir / f"{n}.log", max(1, shares[n])) for n in names}
    truncated = any(b.truncated for b in previews.values())
    artifacts: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    if truncated:
        kept = tasks.keep_outputs(ctx.store, launched, names)
        for n in names:
            if n in kept:
                index[n] = len(artifacts)
                artifacts.append({"kind": n, "path": kept[n], "bytes": sizes[n]})
    tasks.discard_foreground(launched)
    warnings = list(p.warnings)
    if truncated:
        where = ", ".join(a["path"] for a in artifacts)
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
    env: dict[str, Any] = {
        "disposition": "completed",
        **_exit_fields(rec),
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
    env["warnings"] = warnings
    return env


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def run_foreground(
    ctx: ToolContext,
    p: _Prepared,
    *,
    timeout_ms: int,
) -> dict[str, Any]:
    """Run to completion, killing the command tree at ``timeout_ms`` (batch items)."""
    start = time.monotonic()
    launched = tasks.launch(
        ctx.store,
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


# ---------------------------------------------------------------- the tools


def _json(env: dict[str, Any]) -> str:
    return json.dumps(env, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class ExecCommandArgs:
    cmd: str = field_doc("Shell command to run (passed to `<shell> -c`).")
    workdir: str | None = field_doc(
        (
            "Working directory, relative to the current directory; must stay inside the "
            "execution root."
        ),
        default=None,
    )
    shell: str | None = field_doc(
        "Shell to run the command with (default /bin/bash).", default=None
    )
    login: bool | None = field_doc("Run the shell as a login shell (-l).", default=None)
    tty: bool | None = field_doc(
        (
            "Run under a pseudo-terminal (one combined output stream). Only when the command "
            "needs a terminal."
        ),
        default=None,
    )
    yield_time_ms: int | None = field_doc(
        (
            "How long to wait for the command (default 10000). A command still running then "
            "keeps running as a background task (disposition promoted_to_task); its result "
            "arrives later as a task_result message."
        ),
        default=None,
    )
    max_output_tokens: int | None = field_doc(
        (
            "Budget for the output returned to you, in estimated tokens (about 4 chars each); "
            "longer output keeps its head and tail and the full text is saved to a file."
        ),
        default=None,
    )
    accepts_input: bool | None = field_doc(
        "Keep stdin open so TaskInput can feed the command once it runs as a task.",
        default=None,
    )
    duplicate_policy: Literal["reuse_running", "start_new"] | None = field_doc(
        (
            "When the same command (cmd, workdir, shell, login, tty) already runs as a task: "
            "reuse_running (default) returns that task (disposition already_running); "
            "start_new starts another."
        ),
        default=None,
    )


@tool(
    "ExecCommand",
    ExecCommandArgs,
    description=(
        "Run a shell command in the execution root. Returns JSON: disposition completed "
        "(exit_status, "
        "stdout_preview, stderr_preview, truncated, artifacts) or, when it is still running after "
        "yield_time_ms, promoted_to_task (task_handle; the result arrives later as a "
        "task_result message; "
        "inspect it with TaskStatus/TaskOutput, stop it with TaskStop). "
        "Prefer `rg --files`, `rg -n`, `sed -n START,ENDp`, `head` and `tail` for reading files."
    ),
)
def exec_command(ctx: ToolContext, args: ExecCommandArgs) -> ToolResult:
    tty = bool(args.tty)
    accepts_input = bool(args.accepts_input)
    login = bool(args.login)
    ctx.report.commands.append(args.cmd)  # the turn loop activates skills from these
    p = _prepare(
        ctx,
        cmd=args.cmd,
        workdir=args.workdir,
        shell=args.shell,
        login=login,
        max_output_tokens=args.max_output_tokens,
    )
    yield_ms = _ms_setting(
        ctx, args.yield_time_ms, "exec_yield_time_ms", DEFAULT_YIELD_TIME_MS, p.warnings
    )
    digest = task_model.cmd_digest(p.cmd, str(p.cwd), args.shell, login, tty)
    if (args.duplicate_policy or "reuse_running") == "reuse_running":
        dup = tasks.find_duplicate(ctx.store, digest)
        if dup is not None:
            snap = tasks.snapshot(dup)
            env = {
                "disposition": "already_running",
                "task_handle": task_model.handle(dup),
                "command": snap["command"],
                "summary_text": (
                    f"the same command already runs as task {dup['id']}; use "
                    "TaskStatus/TaskOutput/TaskStop with that task_id, or duplicate_policy "
                    "start_new to start another"
                ),
            }
            return ToolResult(True, _json(env), data=env)
    start = time.monotonic()
    launched = tasks.launch(
        ctx.store,
        argv=p.argv,
        cmd=p.cmd,
        cwd=p.cwd,
        shell=args.shell,
        login=login,
        tty=tty,
        accepts_input=accepts_input,
        config=ctx.config,
        parent_message_id=(ctx.message or {}).get("id"),
        turn_id=ctx.turn_id,
    )
    rec = tasks.wait_foreground(launched, yield_ms / 1000)
    if rec is None:
        promoted = tasks.promote(ctx.store, launched)
        if promoted is not None:
            out = launched.dir / "output.log"
            b = bound_output(out, min(p.tokens * CHARS_PER_TOKEN, 4000))
            env = {
                "disposition": "promoted_to_task",
                "task_handle": task_model.handle(promoted),
                "initial_output_preview": b.text,
                "initial_output_truncated": b.truncated,
                "cmd": p.cmd,
                "yield_time_ms": yield_ms,
                "output_path": str(out),
                "summary_text": (
                    f"still running after {yield_ms} ms, so it continues as task "
                    f"{promoted['id']}; its result arrives as a task_result message. "
                    "TaskStatus/TaskOutput inspect it, TaskStop stops it."
                ),
            }
            if p.warnings:
                env["warnings"] = p.warnings
            ctx.report.tasks_started.append(promoted["id"])
            return ToolResult(True, _json(env), data=env, warnings=list(p.warnings))
        rec = tasks.read_record_file(launched.dir) or {}
    _check_finished(launched, rec, p)
    env = _completed_envelope(
        ctx, launched, rec, p, int((time.monotonic() - start) * 1000), tty=tty
    )
    return ToolResult(True, _json(env), data=env, warnings=list(env["warnings"]))


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


def _render_item(r: dict[str, Any]) -> str:
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
    for name in ("stdout", "stderr"):
        text = r.get(f"{name}_preview") or ""
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
    ctx.report.commands.extend(item.cmd for item in args.commands)
    # the batch as a whole stays within one default budget unless items ask for more
    share = max(250, output_budget_tokens(ctx.config) // n)
    items: list[dict[str, Any]] = []
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
        blocks.append(f"{label}\n{_render_item(r)}")
    summary = {
        s: sum(1 for it in items if it["status"] == s)
        for s in ("succeeded", "exited_nonzero", "timed_out", "failed")
    }
    data: dict[str, Any] = {"items": items, "item_count": n, "summary": summary}
    head = f"Batch of {n} command(s): " + ", ".join(f"{v} {k}" for k, v in summary.items() if v)
    warnings = [w for it in items for w in it.get("warnings", [])]
    return ToolResult(True, head + "\n\n" + "\n\n".join(blocks), data=data, warnings=warnings)
