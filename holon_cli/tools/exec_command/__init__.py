"""``ExecCommand`` and ``ExecCommandBatch``: run shell commands in the agent's
execution root and hand back the spec's structured envelope (as JSON: that
is what the model sees).

Owns: workdir resolution inside the execution root, the model-visible output
budget (also used by other tools that reinject command output, via
:func:`output_budget_tokens` and :func:`bound_output`) and the envelopes.
Process supervision lives in :mod:`holon_cli.runtime.tasks`.

Layout: this module owns ``ExecCommand`` (arguments, promotion, the
``promoted_to_task`` / ``already_running`` envelopes) and re-exports the
helpers other tools import; ``budget`` holds the output budget, ``prepare``
the workdir / shell / settings checks, ``finish`` the ``completed`` envelope
and ``run_foreground``, ``batch`` the ``ExecCommandBatch`` tool.

Invariants:

- ``cwd`` never leaves ``ctx.execution_root`` (symlinks resolved); a workdir
  that would is an ``execution_root_violation`` error, not a silent clamp.
- Every command runs under a supervisor process (forked from the caller:
  no interpreter start; see :mod:`holon_cli.runtime.tasks.forked`), in its
  own session and process group, with stdin on ``/dev/null`` (unless
  ``accepts_input``), with the environment ``execution.env`` allows
  (:func:`holon_cli.runtime.tasks.environment.command_env`: the core
  variables by default, never a provider key) and inside the command
  sandbox (``execution.sandbox``, default ``auto``:
  :mod:`holon_cli.runtime.tasks.sandbox`).
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
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from holon_cli.model import task as task_model
from holon_cli.runtime.tasks import plane as tasks
from holon_cli.runtime.tasks.output import BoundedOutput, bound_output
from holon_cli.tools.base import ToolContext, ToolResult, field_doc, tool
from holon_cli.tools.exec_command.budget import (
    CHARS_PER_TOKEN,
    DEFAULT_OUTPUT_TOKENS,
    HARD_MAX_OUTPUT_TOKENS,
    output_budget_tokens,
)
from holon_cli.tools.exec_command.finish import _check_finished, _completed_envelope, start_command
from holon_cli.tools.exec_command.prepare import (
    DEFAULT_SHELL,
    MAX_EXEC_TIMEOUT_MS,
    _ms_setting,
    _prepare,
    resolve_inside_root,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_OUTPUT_TOKENS",
    "DEFAULT_SHELL",
    "HARD_MAX_OUTPUT_TOKENS",
    "MAX_EXEC_TIMEOUT_MS",
    "BoundedOutput",
    "bound_output",
    "output_budget_tokens",
    "resolve_inside_root",
]

DEFAULT_YIELD_TIME_MS = 10_000


def _json(env: Mapping[str, object]) -> str:
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
            env: dict[str, object] = {
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
    launched = start_command(
        ctx,
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
    done = _completed_envelope(
        ctx, launched, rec, p, int((time.monotonic() - start) * 1000), tty=tty
    )
    ctx.report.command_runs.append({"cmd": args.cmd, "exit_status": done.get("exit_status")})
    if done.get("exit_status") == 0:
        # only a successful command activates skills (the turn loop reads these)
        ctx.report.commands.append(args.cmd)
    return ToolResult(True, _json(done), data=dict(done), warnings=list(done["warnings"]))


# registered after ExecCommand, so the catalog keeps its order
from holon_cli.tools.exec_command import batch as _batch  # noqa: E402, F401
