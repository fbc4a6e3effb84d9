"""The telemetry plane: OpenTelemetry GenAI traces and metrics from the
runtime's steps, and the trace context that crosses processes.

Off by default, and free when off: this module imports nothing from
OpenTelemetry, and neither does anything a turn, tick or serve calls here
while tracing is off. Tracing is on (:func:`wanted`) when
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is
set, ``OTEL_TRACES_EXPORTER`` is ``otlp`` or ``console``, or ``config.yaml``
says ``telemetry.enabled: true`` (``OTEL_SDK_DISABLED=true`` turns it off).
Then :func:`plane` sets up the official SDK once per process
(:mod:`.sdk`); without the ``holon-cli[otel]`` extra one warning line goes
to stderr (once per process) and everything stays a no-op.

What the steps call (the same functions from ``tick``, ``turn`` and
``serve``):

- :func:`turn_tracer`: the turn's spans (``invoke_agent`` per turn,
  ``chat`` per provider attempt, ``execute_tool`` per tool call) and its
  metrics, through a small :class:`TurnTracer`; :data:`NOOP` when off;
- :func:`record_queue_depth`: the ``holon.queue.depth`` gauge;
- :func:`child_env`: ``TRACEPARENT``/``TRACESTATE`` for a command or task
  started now (the current span: the ``execute_tool`` running it);
- :func:`current_trace_context` / :func:`current_traceparent` /
  :func:`trace_meta`: the current span as a storable context (a delegation
  records it), a header value, or an MCP request's ``_meta`` entries;
- :func:`status`: ``holon status --json`` ``telemetry``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.tracecontext import TraceContext
    from holon_cli.runtime.telemetry.sdk import Plane
    from holon_cli.store.agent_store import AgentStore


class TelemetryStatus(TypedDict):
    """``holon status --json``'s ``telemetry``."""

    enabled: bool
    dropped: int


ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
EXPORTERS_ON = ("otlp", "console")

# the process's plane: set up on first use when tracing is wanted
_PLANE: list[Plane | None] = []


def wanted(config: HolonConfig | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Whether this process should trace (see the module docstring)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if any(env.get(v, "").strip() for v in ENDPOINT_VARS):
        return True
    exporters = env.get("OTEL_TRACES_EXPORTER", "").lower().split(",")
    if any(e.strip() in EXPORTERS_ON for e in exporters):
        return True
    tel = (config or {}).get("telemetry") or {}
    return bool(isinstance(tel, Mapping) and tel.get("enabled") is True)


def plane(config: HolonConfig | None = None) -> Plane | None:
    """The process's telemetry plane, set up on first use; ``None`` when
    tracing is off (nothing imported) or the SDK is not installed."""
    if _PLANE:
        return _PLANE[0]
    if not wanted(config):
        return None
    try:
        from holon_cli.runtime.telemetry import sdk

        return sdk.install_once(_PLANE, config)
    except ImportError:
        _no_sdk()
        return None


def _no_sdk() -> None:
    """Tracing asked for without the extra: one line per process, then untraced."""
    if _PLANE:
        return
    _PLANE.append(None)
    warn(
        "tracing is on (OTEL_* or telemetry.enabled) but OpenTelemetry is not "
        "installed: install holon-cli[otel]; turns run untraced"
    )


def warn(text: str) -> None:
    """One warning line on stderr (the plane's only output: it has no caller
    to return it to when it is set up from inside a turn)."""
    import sys

    try:
        sys.stderr.write(f"holon: warning: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def use(p: Plane | None) -> None:
    """Make ``p`` this process's plane (tests and benchmarks: an in-memory or
    loopback exporter); ``None`` forgets the plane (the next use sets one up
    again when tracing is wanted)."""
    _PLANE[:] = [p] if p is not None else []


def active() -> Plane | None:
    """The plane if one was set up in this process (never sets one up)."""
    return _PLANE[0] if _PLANE else None


# ------------------------------------------------------------ the turn hook


class TurnTracer(Protocol):
    """What a turn tells the telemetry plane (``runtime/turn/loop.py`` and
    ``entry.py`` call it; :data:`NOOP` does nothing). Apart from the turn's
    record observer (``turn/observe.py``): this one wraps each tool call, so
    its span is current while the call runs."""

    def start(self, turn_id: str) -> None:
        """The turn begins (the ``invoke_agent`` span starts)."""
        ...

    def chat(self, timeline: Any, response: Any, request: Any) -> None:
        """One provider round ended: its attempts (``timeline``), the answer
        (``None`` when the round failed) and the request (for content)."""
        ...

    def tool(self, call: Any) -> Any:
        """A context manager around one tool call; ``.result(res)`` inside it
        records the call's outcome."""
        ...

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        """The turn ended (its result, or the exception that ended it)."""
        ...


class _NoTool:
    def result(self, res: Any) -> None:
        return None


_NO_TOOL = _NoTool()


class _Noop:
    def start(self, turn_id: str) -> None:
        return None

    def chat(self, timeline: Any, response: Any, request: Any) -> None:
        return None

    @contextmanager
    def tool(self, call: Any) -> Iterator[_NoTool]:
        yield _NO_TOOL

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        return None


NOOP: TurnTracer = _Noop()


def turn_tracer(
    store: AgentStore,
    message: Envelope,
    config: HolonConfig | None,
    *,
    inherited: Callable[[], TraceContext | None] | None = None,
) -> TurnTracer:
    """The tracer of one turn of ``store`` working ``message``. Its
    ``invoke_agent`` span continues, first found: the message's own trace
    (an HTTP caller's), ``inherited()`` (a child agent: its delegation's),
    the process's ``TRACEPARENT``; else it starts a trace."""
    p = plane(config)
    if p is None:
        return NOOP
    from holon_cli.runtime.telemetry.spans import OtelTurn

    return OtelTurn(p, store, message, inherited=inherited)


def record_queue_depth(agent_id: str, depth: int, config: HolonConfig | None = None) -> None:
    """``holon.queue.depth`` of one agent (after a tick or a turn)."""
    p = plane(config)
    if p is not None:
        p.queue_depth(agent_id, depth)


# ------------------------------------------------------- context propagation


def current_trace_context() -> TraceContext | None:
    """The current span as a storable W3C context (``None`` when off or
    outside a span)."""
    p = active()
    return p.current_context() if p is not None else None


def current_traceparent() -> str | None:
    """The current span's ``traceparent`` header value, or ``None``."""
    tc = current_trace_context()
    return tc["traceparent"] if tc else None


def trace_meta() -> dict[str, str]:
    """The entries an MCP request carries in ``params._meta`` (W3C
    ``traceparent`` and ``tracestate``, unprefixed as the MCP conventions
    say); ``{}`` when tracing is off."""
    tc = current_trace_context()
    if not tc:
        return {}
    out = {"traceparent": tc["traceparent"]}
    if tc.get("tracestate"):
        out["tracestate"] = tc["tracestate"]
    return out


def child_env() -> dict[str, str]:
    """``TRACEPARENT`` (and ``TRACESTATE``) for a process started now, so a
    command, a task or anything it runs continues the trace; ``{}`` when off
    (the environment is then passed on as it is)."""
    tc = current_trace_context()
    if not tc:
        return {}
    out = {"TRACEPARENT": tc["traceparent"]}
    if tc.get("tracestate"):
        out["TRACESTATE"] = tc["tracestate"]
    return out


def with_child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a command started now: the current trace context replaces
    any ``TRACEPARENT``/``TRACESTATE`` inherited from this process."""
    extra = child_env()
    if extra:
        env.pop("TRACESTATE", None)
        env.update(extra)
    return env


def annotate(attributes: Mapping[str, Any]) -> None:
    """Add attributes to the current span (e.g. an MCP client's
    ``mcp.session.id`` on its ``execute_tool`` span); nothing when off."""
    p = active()
    if p is not None:
        p.annotate(attributes)


# ------------------------------------------------------------------ status


def status(config: HolonConfig | None = None) -> TelemetryStatus:
    """``holon status --json`` ``telemetry``: whether tracing is on for this
    home and environment, and the spans the home's processes dropped."""
    from holon_cli.store.layout import home_root
    from holon_cli.store.telemetry import read_dropped

    return {"enabled": wanted(config), "dropped": read_dropped(home_root())}
