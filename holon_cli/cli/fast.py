"""The click-free fast path for the plain forms of the hottest commands.

``holon enqueue``, ``holon status``, ``holon workitem list`` and
``holon --version`` run from shell loops, cron lines and ``watch``;
importing click alone costs about three bare interpreter start-ups, more
than the whole work of each. So :func:`run_fast` parses these commands'
plain forms itself and calls the same bodies
(:mod:`holon_cli.cli.fast_bodies`) as the click declarations do. (``holon
run`` goes through click: its model call dwarfs click's import.)

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

# value kinds: "flag" (no value), "text", "int>=1", "workitem_filter",
# "duration" (params.Duration: 500ms, 90s, 5m, 2h, 1d -> seconds)
ValueKind = str

JSON = (("--json",), "as_json", "flag")
AGENT = (("--agent", "-a"), "agent_id", "text")


class FastSpec:
    """One fast command: its options (flags, destination, value kind), its
    positional's destination (optional unless ``required``), and the defaults
    click would give."""

    __slots__ = ("command", "options", "positional", "defaults", "body", "required")

    def __init__(
        self,
        command: str,
        options: tuple[tuple[tuple[str, ...], str, ValueKind], ...],
        positional: str | None,
        defaults: dict[str, Any],
        body: str,
        *,
        required: bool = False,
    ) -> None:
        self.command = command
        self.options = options
        self.positional = positional
        self.defaults = defaults
        self.body = body  # attribute of holon_cli.cli.fast_bodies: returns None or an exit code
        self.required = required


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
}


def parse(spec: FastSpec, words: list[str]) -> dict[str, Any] | None:
    """The keyword arguments click would pass, or ``None`` to let click decide."""
    by_flag = {flag: (dest, kind) for flags, dest, kind in spec.options for flag in flags}
    values: dict[str, Any] = {}
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
    kwargs: dict[str, Any] = {
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
    if kind == "duration":
        from holon_cli.clock import parse_duration

        try:
            return parse_duration(value)
        except ValueError:
            return None
    return value


def match(args: list[str]) -> tuple[FastSpec, list[str]] | None:
    for words, spec in SPECS.items():
        if tuple(args[: len(words)]) == words:
            return spec, args[len(words) :]
    return None


def run_fast(args: list[str], *, end: Callable[[int], None] | None = None) -> int | None:
    """Run ``holon ARGS`` without click and return the exit code, or ``None``
    when click should run it. ``end``: the console script's fast exit, given
    the code before the cycle collector is turned back on (its first pass
    would scan everything the command allocated, just before the process
    ends); it returns when the process goes on (an in-process runner)."""
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
    # a fast command lives a few dozen milliseconds: the cycle collector would
    # only re-scan the objects its imports create (refcounting still frees)
    collect = gc.isenabled()
    gc.disable()
    try:
        try:
            code = body(**kwargs) or 0
        except failures.HANDLED as exc:
            code = failures.exit_code_for(exc)
        finally:
            output.FAST_META.reset(token)
        if end is not None:
            end(code)
        return code
    finally:
        if collect:
            gc.enable()  # a library caller's process keeps its collector
