"""``ExecCommand`` and ``ExecCommandBatch``: run shell commands in the agent's
execution root and hand back bounded output.

Owns: workdir resolution inside the execution root, process spawning and
teardown, output capture, and the model-visible output budget (also used by
other tools that reinject command output, via :func:`output_budget_tokens` and
:func:`bound_output`).

Invariants:

- ``cwd`` never leaves ``ctx.execution_root`` (symlinks resolved); a workdir
  that would is an ``execution_root_violation`` error, not a silent clamp.
- Every command runs in its own process group with stdin on ``/dev/null``.
  When the command finishes or times out, the *whole group* is terminated
  (SIGTERM, then SIGKILL after a short grace), so no background child
  outlives the call. Long-running work belongs to background tasks.
- Output (stdout and stderr combined) streams into a file, never a pipe, so a
  chatty command cannot deadlock the runtime; at most ``MAX_CAPTURE_BYTES``
  are kept. What reaches the model is bounded to the token budget (head and
  tail plus a note); when it was cut, the full output stays on disk under
  ``<agent_home>/.holon/outputs/`` and the note names the file.
- A non-zero exit is a normal result; only failures to start the command are
  tool errors (``spawn_failed``).
"""

from __future__ import annotations

import codecs
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from holon_cli import clock
from holon_cli.tools.base import ToolContext, ToolError, ToolResult, field_doc, tool

CHARS_PER_TOKEN = 4
DEFAULT_OUTPUT_TOKENS = 8_000
HARD_MAX_OUTPUT_TOKENS = 64_000
DEFAULT_EXEC_TIMEOUT_MS = 120_000
MAX_EXEC_TIMEOUT_MS = 3_600_000
KILL_GRACE_S = 1.0
MAX_CAPTURE_BYTES = 256 * 1024 * 1024
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


@dataclass
class BoundedOutput:
    text: str  # what the model sees (head + note + tail when truncated)
    total_chars: int
    total_bytes: int
    truncated: bool
    omitted_chars: int


def bound_output(path: Path, budget_chars: int, *, saved_path: str | None = None) -> BoundedOutput:
    """Read ``path`` as UTF-8 (invalid bytes replaced) keeping the first and last
    ``budget_chars // 2`` characters; streams, so any file size is fine."""
    head_cap = budget_chars // 2
    tail_cap = budget_chars - head_cap
    head: list[str] = []
    head_len = 0
    tail = ""
    total = 0
    nbytes = 0
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            final = not chunk
            nbytes += len(chunk)
            text = decoder.decode(chunk, final=final)
            if text:
                total += len(text)
                if head_len < head_cap:
                    take = text[: head_cap - head_len]
                    head.append(take)
                    head_len += len(take)
                tail = (tail + text)[-tail_cap:] if tail_cap else ""
            if final:
                break
    if total <= budget_chars:
        # everything fits: head holds the start, tail the end; rebuild exactly
        full = "".join(head)
        rest = total - len(full)
        text_out = full + (tail[-rest:] if rest > 0 else "")
        return BoundedOutput(text_out, total, nbytes, False, 0)
    omitted = total - head_len - len(tail)
    where = f"; the full output ({total} chars) was saved to {saved_path}" if saved_path else ""
    hint = " (inspect it with `sed -n 'START,ENDp'`, `rg -n` or `tail`)" if saved_path else ""
    note = f"\n[... {omitted} chars omitted{where}{hint} ...]\n"
    return BoundedOutput("".join(head) + note + tail, total, nbytes, True, omitted)


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


def _group_alive(pgid: int) -> bool:
    """True while any non-zombie process is in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # fields after the parenthesised command: state ppid pgrp ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and fields[0] != "Z" and fields[2] == str(pgid):
            return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate_group(
    proc: subprocess.Popen[bytes], pgid: int, grace_s: float = KILL_GRACE_S
) -> bool:
    """SIGTERM the group, SIGKILL what is left after ``grace_s``; reap the leader.

    Returns True when anything in the group was still alive to be signalled.
    """
    if proc.poll() is not None and not _group_alive(pgid):
        return False
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()
        if proc.returncode is not None and not _group_alive(pgid):
            break
        time.sleep(0.02)
    else:
        _signal_group(pgid, signal.SIGKILL)
    # a leader that already exited cannot be waited on forever
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        _signal_group(pgid, signal.SIGKILL)
        proc.wait()
    return True


@dataclass
class RunOutcome:
    returncode: int
    timed_out: bool
    capture_limit_hit: bool
    background_killed: bool
    duration_ms: int


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
                recovery_hint="omit `shell` to use /bin/bash, or pass an absolute path such as /bin/sh",
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


def run_process(argv: list[str], cwd: Path, out_path: Path, timeout_ms: int) -> RunOutcome:
    """Run ``argv`` in a new session writing combined output to ``out_path``."""
    start = time.monotonic()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "wb") as out:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise ToolError(
                "spawn_failed",
                f"could not start the command: {exc.strerror or exc}",
                details={"argv0": argv[0], "cwd": str(cwd), "errno": exc.errno},
                recovery_hint="check that the shell and workdir exist and are accessible",
            ) from None
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    deadline = start + timeout_ms / 1000
    timed_out = capture_hit = False
    interval = 0.002
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            try:
                if out_path.stat().st_size > MAX_CAPTURE_BYTES:
                    capture_hit = True
                    break
            except FileNotFoundError:
                pass
            time.sleep(min(interval, max(0.0, deadline - now)))
            interval = min(interval * 2, 0.05)
    except BaseException:
        # interrupted (Ctrl-C, SIGTERM-as-exception): never orphan the group
        terminate_group(proc, pgid)
        raise
    killed = terminate_group(proc, pgid)
    rc = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return RunOutcome(
        returncode=rc,
        timed_out=timed_out,
        capture_limit_hit=capture_hit,
        background_killed=killed and not timed_out and not capture_hit,
        duration_ms=int((time.monotonic() - start) * 1000),
    )


# ---------------------------------------------------------------- one call


def outputs_dir(ctx: ToolContext) -> Path:
    store = ctx.store
    if store is not None and getattr(store, "layout", None) is not None:
        return Path(store.layout.runtime) / "outputs"
    return Path(tempfile.gettempdir()) / "holon-outputs"


def _output_file(ctx: ToolContext) -> Path:
    prefix = _SAFE_NAME.sub("_", ctx.turn_id or "turn")[:80]
    return outputs_dir(ctx) / f"{prefix}-{clock.new_id('exec')}.log"


def _timeout_ms(ctx: ToolContext, requested: int | None, warnings: list[dict[str, Any]]) -> int:
    if requested is not None:
        if requested <= 0:
            raise ToolError(
                "invalid_arguments",
                "`yield_time_ms` must be a positive number of milliseconds",
                field="yield_time_ms",
                recovery_hint="omit it to use the default timeout",
            )
        if requested > MAX_EXEC_TIMEOUT_MS:
            warnings.append(
                {
                    "kind": "clamped",
                    "message": f"yield_time_ms {requested} was lowered to the maximum {MAX_EXEC_TIMEOUT_MS}",
                }
            )
        return min(requested, MAX_EXEC_TIMEOUT_MS)
    rt = (ctx.config or {}).get("runtime") or {}
    return (
        _int_setting(rt.get("exec_timeout_ms"), "runtime.exec_timeout_ms", warnings)
        or DEFAULT_EXEC_TIMEOUT_MS
    )


def _exit_fields(rc: int) -> dict[str, Any]:
    if rc >= 0:
        return {"exit_code": rc, "signal": None}
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        name = f"signal {-rc}"
    return {"exit_code": 128 - rc, "signal": name}


def run_one(
    ctx: ToolContext,
    *,
    cmd: str,
    workdir: str | None,
    shell: str | None,
    login: bool,
    yield_time_ms: int | None,
    max_output_tokens: int | None,
    default_tokens: int | None = None,
) -> dict[str, Any]:
    """Run one command; returns the structured receipt or raises :class:`ToolError`."""
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
    warnings: list[dict[str, Any]] = []
    cwd = resolve_inside_root(ctx, workdir)
    if not cwd.is_dir():
        raise ToolError(
            "spawn_failed",
            f"workdir {str(cwd)!r} does not exist or is not a directory",
            details={"field": "workdir", "requested": workdir, "resolved": str(cwd)},
            recovery_hint="create it first (mkdir -p) or pass an existing directory",
        )
    timeout_ms = _timeout_ms(ctx, yield_time_ms, warnings)
    tokens = output_budget_tokens(ctx.config, max_output_tokens, warnings=warnings)
    if max_output_tokens is None and default_tokens is not None:
        tokens = min(tokens, default_tokens)
    argv = _shell_argv(shell, login, cmd)
    out_path = _output_file(ctx)
    try:
        outcome = run_process(argv, cwd, out_path, timeout_ms)
        bounded = bound_output(out_path, tokens * CHARS_PER_TOKEN, saved_path=str(out_path))
    except BaseException:
        out_path.unlink(missing_ok=True)
        raise
    if not bounded.truncated:
        out_path.unlink(missing_ok=True)
    receipt: dict[str, Any] = {
        "disposition": "completed",
        "cmd": cmd,
        "cwd": str(cwd),
        **_exit_fields(outcome.returncode),
        "timed_out": outcome.timed_out,
        "timeout_ms": timeout_ms,
        "duration_ms": outcome.duration_ms,
        "output": bounded.text,
        "output_chars": bounded.total_chars,
        "output_bytes": bounded.total_bytes,
        "truncated": bounded.truncated,
        "omitted_chars": bounded.omitted_chars,
        "full_output_path": str(out_path) if bounded.truncated else None,
        "output_budget_tokens": tokens,
    }
    receipt["exit_status"] = receipt["exit_code"]
    if outcome.capture_limit_hit:
        warnings.append(
            {
                "kind": "output_limit",
                "message": f"the command was stopped after writing more than {MAX_CAPTURE_BYTES} bytes of output",
            }
        )
    if outcome.background_killed:
        warnings.append(
            {
                "kind": "background_processes_killed",
                "message": "processes the command left running in the background were terminated; ExecCommand waits for nothing after the command exits",
            }
        )
    receipt["warnings"] = warnings
    return receipt


def _status_line(r: dict[str, Any]) -> str:
    if r["timed_out"]:
        head = f"Timed out after {r['timeout_ms']} ms; the command and its process group were killed (partial output below)."
    elif r["signal"]:
        head = f"Killed by {r['signal']} (exit code {r['exit_code']}) after {r['duration_ms']} ms."
    else:
        head = f"Exit code {r['exit_code']} after {r['duration_ms']} ms."
    return head + f" cwd: {r['cwd']}"


def render_receipt(r: dict[str, Any]) -> str:
    lines = [_status_line(r)]
    for w in r.get("warnings") or []:
        lines.append(f"Warning: {w['message']}")
    if r["output"]:
        lines.append("Output:")
        lines.append(r["output"].rstrip("\n"))
    else:
        lines.append("Output: (none)")
    return "\n".join(lines)


# ---------------------------------------------------------------- the tools


@dataclass(frozen=True)
class ExecCommandArgs:
    cmd: str = field_doc("Shell command to run (passed to `<shell> -c`).")
    workdir: str | None = field_doc(
        "Working directory, relative to the current directory; must stay inside the execution root.",
        default=None,
    )
    shell: str | None = field_doc(
        "Shell to run the command with (default /bin/bash).", default=None
    )
    login: bool | None = field_doc("Run the shell as a login shell (-l).", default=None)
    tty: bool | None = field_doc("Allocate a terminal. Not supported yet; omit it.", default=None)
    yield_time_ms: int | None = field_doc(
        "Timeout in milliseconds; the whole process group is killed when it expires (default 120000).",
        default=None,
    )
    max_output_tokens: int | None = field_doc(
        "Budget for the output returned to you, in estimated tokens (about 4 chars each); longer output keeps its head and tail and the full text is saved to a file.",
        default=None,
    )
    accepts_input: bool | None = field_doc(
        "Keep stdin open for later input. Not supported yet; omit it.", default=None
    )
    duplicate_policy: Literal["reuse_running", "start_new"] | None = field_doc(
        "What to do when the same command is already running as a task (no effect until background tasks are available).",
        default=None,
    )


_UNSUPPORTED_HINT = "omit it: commands run to completion with stdin from /dev/null; feed input with a pipe or here-doc (e.g. `printf 'y\\n' | cmd`)"


@tool(
    "ExecCommand",
    ExecCommandArgs,
    description=(
        "Run a shell command in the execution root and return its exit code and combined stdout/stderr. "
        "Prefer `rg --files`, `rg -n`, `sed -n START,ENDp`, `head` and `tail` for reading files. "
        "Long output is cut to its head and tail; the note says where the full output was saved."
    ),
)
def exec_command(ctx: ToolContext, args: ExecCommandArgs) -> ToolResult:
    for name in ("tty", "accepts_input"):
        if getattr(args, name):
            raise ToolError(
                "unsupported",
                f"`{name}=true` is not available yet: background and interactive command tasks are not implemented in this runtime",
                field=name,
                recovery_hint=_UNSUPPORTED_HINT,
            )
    ctx.report.commands.append(args.cmd)  # the turn loop activates skills from these
    receipt = run_one(
        ctx,
        cmd=args.cmd,
        workdir=args.workdir,
        shell=args.shell,
        login=bool(args.login),
        yield_time_ms=args.yield_time_ms,
        max_output_tokens=args.max_output_tokens,
    )
    return ToolResult(
        True, render_receipt(receipt), data=receipt, warnings=list(receipt["warnings"])
    )


@dataclass(frozen=True)
class ExecBatchItem:
    cmd: str = field_doc("Shell command to run.")
    workdir: str | None = field_doc("Working directory inside the execution root.", default=None)
    shell: str | None = field_doc("Shell (default /bin/bash).", default=None)
    login: bool | None = field_doc("Run as a login shell.", default=None)
    yield_time_ms: int | None = field_doc("Timeout for this item in milliseconds.", default=None)
    max_output_tokens: int | None = field_doc(
        "Output budget for this item in estimated tokens.", default=None
    )


@dataclass(frozen=True)
class ExecCommandBatchArgs:
    commands: list[ExecBatchItem] = field_doc(
        f"Commands to run one after another (1-{MAX_BATCH_ITEMS}); a failing item does not stop the batch."
    )


@tool(
    "ExecCommandBatch",
    ExecCommandBatchArgs,
    description=(
        "Run several independent shell commands sequentially and get one grouped receipt. "
        "Each item is bounded like ExecCommand; an item that fails to start or times out is reported "
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
            r = run_one(
                ctx,
                cmd=item.cmd,
                workdir=item.workdir,
                shell=item.shell,
                login=bool(item.login),
                yield_time_ms=item.yield_time_ms,
                max_output_tokens=item.max_output_tokens,
                default_tokens=share,
            )
        except ToolError as err:
            items.append({"index": i, "cmd": item.cmd, "status": "failed", "error": err.envelope()})
            hint = f"\nHint: {err.recovery_hint}" if err.recovery_hint else ""
            blocks.append(f"{label}\nFailed to run ({err.kind}): {err.message}{hint}")
            continue
        status = (
            "timed_out"
            if r["timed_out"]
            else ("succeeded" if r["exit_code"] == 0 else "exited_nonzero")
        )
        items.append({"index": i, "status": status, **r})
        blocks.append(f"{label}\n{render_receipt(r)}")
    summary = {
        s: sum(1 for it in items if it["status"] == s)
        for s in ("succeeded", "exited_nonzero", "timed_out", "failed")
    }
    data: dict[str, Any] = {"items": items, "item_count": n, "summary": summary}
    head = f"Batch of {n} command(s): " + ", ".join(f"{v} {k}" for k, v in summary.items() if v)
    warnings = [w for it in items for w in it.get("warnings", [])]
    return ToolResult(True, head + "\n\n" + "\n\n".join(blocks), data=data, warnings=warnings)
