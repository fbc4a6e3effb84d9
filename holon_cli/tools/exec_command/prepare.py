"""Checking and preparing one command before it starts: the workdir inside
the execution root, the shell's argv, millisecond settings, the budget."""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli.runtime.tasks.procs import runtime_setting
from holon_cli.tools.base import ToolContext, ToolError
from holon_cli.tools.exec_command.budget import _int_setting, output_budget_tokens

if TYPE_CHECKING:
    from holon_cli.model.events import ToolWarning

MAX_EXEC_TIMEOUT_MS = 3_600_000
DEFAULT_SHELL = "/bin/bash"


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
    warnings: list[ToolWarning],
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


@dataclass
class _Prepared:
    cmd: str
    cwd: Path
    argv: list[str]
    tokens: int
    warnings: list[ToolWarning]


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
    warnings: list[ToolWarning] = []
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
