"""The click-free fast path for the plain forms of the hottest commands.

``holon enqueue``, ``holon status``, ``holon workitem list`` and
``holon --version`` run from shell loops, cron lines and ``watch``, and
``holon run`` from scripts that call a model once per item; importing click
alone costs about three bare interpreter start-ups, more than the whole
work of the first four. So :func:`run_fast` parses these commands' plain
forms itself and calls the same bodies (:mod:`holon_cli.cli.fast_bodies`) as the
click declarations do.

It never decides anything click would decide differently: whatever it does
not plainly understand (``--help``, an unknown, repeated or clustered option,
a missing or dash-leading value, a bad choice or number, ``--``, a second
positional, shell completion) returns ``None`` and the click group runs the
command with its standard messages and exit codes. Each spec below is checked
against its click declaration (tests/cli/test_fast_path.py), so they cannot
drift apart. ``HOLON_NO_FAST_PATH=1`` turns the fast path off.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from typing import Any

# value kinds: "flag" (no value), "text", "int>=1", "float>0", "workitem_filter",
# "model" (a model ref with a known provider), "dir" (click.Path(file_okay=False)),
# "duration" (params.Duration: 500ms, 90s, 5m, 2h, 1d -> seconds)
ValueKind = str

JSON = (("--json",), "as_json", "flag")
AGENT = (("--agent", "-a"), "agent_id", "text")


class FastSpec:
    """One fast command: its options (flags, destination, value kind), its
    positional's destination (optional unless ``required``), and the defaults
    click would give. ``short`` commands run with the cycle collector off
    (a ``run`` can last hours: it gets it back after start-up)."""

    __slots__ = ("command", "options", "positional", "defaults", "body", "required", "short")

    def __init__(
        self,
        command: str,
        options: tuple[tuple[tuple[str, ...], str, ValueKind], ...],
        positional: str | None,
        defaults: dict[str, object],
        body: str,
        *,
        required: bool = False,
        short: bool = True,
    ) -> None:
        self.command = command
        self.options = options
        self.positional = positional
        self.defaults = defaults
        self.body = body  # attribute of holon_cli.cli.fast_bodies: returns None or an exit code
        self.required = required
        self.short = short


SPECS: dict[tuple[str, ...], FastSpec] = {
    ("enqueue",): FastSpec(
        "enqueue",
        (
            AGENT,
            (("--kind", "-k"), "kind", "text"),
            (("--origin", "-o"), "origin", "text"),
            (("--priority", "-p"), "priority", "text"),
            (("--json-body",), "json_body", "flag"),
            (("--work-item",), "work_item_id", "text"),
            (("--correlation-id",), "correlation_id", "text"),
            (("--causation-id",), "causation_id", "text"),
            (("--idempotency-key",), "idempotency_key", "text"),
            (("--wait",), "wait", "flag"),
            (("--timeout",), "timeout", "duration"),
            JSON,
        ),
        "text",
        {"priority": "normal"},
        "enqueue",
    ),
    ("status",): FastSpec("status", (AGENT, JSON), None, {}, "status"),
    ("workitem", "list"): FastSpec(
        "workitem list",
        (
            AGENT,
            (("--filter",), "filter_", "workitem_filter"),
            (("--limit", "-n"), "limit", "int>=1"),
            JSON,
        ),
        None,
        {"filter_": "all"},
        "workitem_list",
    ),
    ("run",): FastSpec(
        "run",
        (
            AGENT,
            (("--create-agent",), "create_agent", "flag"),
            (("--model", "-m"), "model", "model"),
            (("--max-turns",), "max_turns", "int>=1"),
            (("--no-wait-for-tasks",), "no_wait_for_tasks", "flag"),
            (("--workspace-root",), "workspace_root", "dir"),
            (("--cwd",), "cwd", "dir"),
            (("--keep-agent",), "keep_agent", "flag"),
            (("--max-tokens",), "max_tokens", "int>=1"),
            (("--max-cost",), "max_cost", "float>0"),
            JSON,
        ),
        "text",
        {"max_turns": 8},
        "run",
        required=True,
        short=False,
    ),
}


def parse(spec: FastSpec, words: list[str]) -> dict[str, object] | None:
    """The keyword arguments click would pass, or ``None`` to let click decide."""
    by_flag = {flag: (dest, kind) for flags, dest, kind in spec.options for flag in flags}
    values: dict[str, object] = {}
    positional: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "-" or not word.startswith("-"):
            positional.append(word)
            continue
        flag, eq, attached = word.partition("=")
        if flag not in by_flag or (eq and not flag.startswith("--")):
            return None  # --help, --, -abc, -kVALUE, a typo: click's job
        dest, kind = by_flag[flag]
        if dest in values:
            return None  # repeated: click's rule (last wins) stays click's
        if kind == "flag":
            if eq:
                return None
            values[dest] = True
            continue
        if eq:
            value = attached
        elif i < len(words):
            value = words[i]
            i += 1
        else:
            return None  # missing value
        if value.startswith("-") and not eq:
            return None
        converted = _convert(value, kind)
        if converted is None:
            return None
        values[dest] = converted
    if len(positional) > (1 if spec.positional else 0):
        return None
    if spec.required and not positional:
        return None  # click's "Missing argument" message
    kwargs: dict[str, object] = {
        dest: False if kind == "flag" else None for _, dest, kind in spec.options
    }
    kwargs.update(spec.defaults)
    kwargs.update(values)
    if spec.positional:
        kwargs[spec.positional] = positional[0] if positional else None
    return kwargs


def _convert(value: str, kind: ValueKind) -> Any:
    if kind == "workitem_filter":
        from holon_cli.model.workitem import LIST_FILTERS

        return value if value in LIST_FILTERS else None
    if kind == "int>=1":
        return int(value) if value.isascii() and value.isdigit() and int(value) >= 1 else None
    if kind == "float>0":
        try:
            f = float(value)
        except ValueError:
            return None
        return f if f > 0 and f != float("inf") else None
    if kind == "model":
        from holon_cli.cli.refs import check_model_text
        from holon_cli.errors import UsageError

        try:
            return check_model_text(value)
        except UsageError:
            return None
    if kind == "duration":
        from holon_cli.clock import parse_duration

        try:
            return parse_duration(value)
        except ValueError:
            return None
    if kind == "dir":
        # click.Path(file_okay=False): a path that does not exist yet is fine;
        # one that exists must be a readable folder
        if not value or (os.path.lexists(value) and not _readable_dir(value)):
            return None
        return value
    return value


def _readable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.R_OK)


def match(args: list[str]) -> tuple[FastSpec, list[str]] | None:
    for words, spec in SPECS.items():
        if tuple(args[: len(words)]) == words:
            return spec, args[len(words) :]
    return None


def run_fast(args: list[str], *, end: Callable[[int], None] | None = None) -> int | None:
    """Run ``holon ARGS`` without click and return the exit code, or ``None``
    when click should run it. ``end``: the console script's fast exit, given
    the code before the cycle collector is turned back on (its first pass
    would scan everything the command allocated, ~13 ms after a one-round
    run, just before the process ends); it returns when the process goes on
    (an in-process runner)."""
    if os.environ.get("HOLON_NO_FAST_PATH") or os.environ.get("_HOLON_COMPLETE"):
        return None
    if args in (["--version"], ["-V"]):
        from holon_cli import __version__
        from holon_cli.cli import output

        output.write_line(f"holon {__version__}")
        return 0
    found = match(args)
    if found is None:
        return None
    spec, words = found
    kwargs = parse(spec, words)
    if kwargs is None:
        return None
    from holon_cli.cli import failures, fast_bodies, output

    body: Callable[..., int | None] = getattr(fast_bodies, spec.body)
    token = output.FAST_META.set(
        {"holon.command": spec.command, "holon.json": bool(kwargs.get("as_json"))}
    )
    # a short command lives a few dozen milliseconds: the cycle collector would
    # only re-scan the objects its imports create (refcounting still frees);
    # a run can last hours, so its collector comes back after start-up
    collect = gc.isenabled()
    gc.disable()
    later = _CollectorLater() if collect and not spec.short else None
    try:
        try:
            code = body(**kwargs) or 0
        except failures.HANDLED as exc:
            code = failures.exit_code_for(exc)
        finally:
            output.FAST_META.reset(token)
            if later is not None:
                later.stop()  # its thread gone: the fast exit skips a process with threads
        if end is not None:
            end(code)
        return code
    finally:
        if later is not None:
            later.thaw()
        if collect:
            gc.enable()  # a library caller's process keeps its collector


COLLECTOR_BACK_AFTER_S = 1.0


class _CollectorLater:
    """The cycle collector back on after :data:`COLLECTOR_BACK_AFTER_S` of a
    long command (``holon run``). Its start-up imports some 300 modules, and
    nearly every object that creates lives as long as the process: collecting
    meanwhile only re-scans them (about 70 collections in a one-round run).
    What exists when the collector comes back is frozen first (``gc.freeze``),
    so later collections never re-scan it either (freezing also resets the
    count that would trigger the first one); :meth:`thaw` (the command
    returned in a library caller's process) unfreezes it again."""

    def __init__(self) -> None:
        import threading  # a run's turn loads it anyway; enqueue/status never come here

        self._lock = threading.Lock()
        self._done = False
        self._fired = False
        self._timer = threading.Timer(COLLECTOR_BACK_AFTER_S, self._back)
        self._timer.daemon = True
        self._timer.start()

    def _back(self) -> None:
        with self._lock:
            if self._done:
                return
            gc.freeze()
            gc.enable()
            self._fired = True

    def stop(self) -> None:
        self._timer.cancel()
        self._timer.join()
        with self._lock:
            self._done = True

    def thaw(self) -> None:
        """What start-up froze is collectable again (a library caller's process)."""
        if self._fired:
            gc.unfreeze()
