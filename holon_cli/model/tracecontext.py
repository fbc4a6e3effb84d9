"""W3C Trace Context values (``traceparent``, ``tracestate``): parsed and
checked here, without OpenTelemetry, so that a message can carry its
caller's trace whether or not the process that admits it traces.

A trace context crosses holon's processes as a small mapping,
``{"traceparent": "00-<trace id>-<span id>-<flags>", "tracestate": "..."}``
(``tracestate`` optional): on a message envelope (``trace_context``, from an
HTTP caller's ``traceparent`` header), on a child agent's delegation, and in
the ``TRACEPARENT`` / ``TRACESTATE`` environment of commands and tasks.

Invariants: :func:`parse_traceparent` accepts exactly what the W3C
recommendation lets a receiver accept (version ``ff`` and all-zero ids are
invalid; a future version may carry more fields after the flags) and
returns the four fields lower-cased; a value that does not parse is
ignored by the callers, never an error a caller sees (a W3C receiver
restarts the trace instead).
"""

from __future__ import annotations

from typing import Any, NamedTuple, NotRequired, TypedDict

HEX = frozenset("0123456789abcdef")
MAX_TRACESTATE = 512  # the W3C limit a sender keeps to
ZERO_TRACE = "0" * 32
ZERO_SPAN = "0" * 16


class TraceContext(TypedDict):
    """``trace_context`` as stored (an envelope field, a delegation's)."""

    traceparent: str
    tracestate: NotRequired[str]


class TraceParent(NamedTuple):
    version: str
    trace_id: str
    span_id: str
    flags: str

    @property
    def sampled(self) -> bool:
        return bool(int(self.flags, 16) & 1)

    def header(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"


def _hex(text: str, size: int) -> bool:
    return len(text) == size and all(c in HEX for c in text)


def parse_traceparent(value: Any) -> TraceParent | None:
    """The fields of a ``traceparent`` value, or ``None`` when it is not one."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    parts = text.split("-")
    if len(parts) < 4:
        return None
    version, trace_id, span_id, flags = parts[:4]
    if not _hex(version, 2) or version == "ff":
        return None
    if version == "00" and len(parts) != 4:
        return None
    if not (_hex(trace_id, 32) and _hex(span_id, 16) and _hex(flags, 2)):
        return None
    if trace_id == ZERO_TRACE or span_id == ZERO_SPAN:
        return None
    return TraceParent(version, trace_id, span_id, flags)


def clean_tracestate(value: Any) -> str | None:
    """A ``tracestate`` worth keeping: printable ASCII, at most 512
    characters (a longer or odd one is dropped, as a receiver may)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > MAX_TRACESTATE:
        return None
    if not all(" " <= c <= "~" for c in text):
        return None
    return text


def trace_context(traceparent: Any, tracestate: Any = None) -> TraceContext | None:
    """A storable trace context from header or environment values, or
    ``None`` when ``traceparent`` is missing or invalid."""
    tp = parse_traceparent(traceparent)
    if tp is None:
        return None
    # a later version is read as version 00 and passed on as one (W3C)
    out: TraceContext = {"traceparent": tp.header()}
    state = clean_tracestate(tracestate)
    if state is not None:
        out["tracestate"] = state
    return out


def check_trace_context(value: Any) -> TraceContext | None:
    """A stored ``trace_context`` mapping cleaned (``None`` when unusable)."""
    if not isinstance(value, dict):
        return None
    return trace_context(value.get("traceparent"), value.get("tracestate"))


def from_headers(headers: Any) -> TraceContext | None:
    """The caller's trace context from HTTP request headers (a mapping with
    case-insensitive ``get``, such as Starlette's)."""
    return trace_context(headers.get("traceparent"), headers.get("tracestate"))


def from_env(env: Any) -> TraceContext | None:
    """The trace context a process was started in (``TRACEPARENT``)."""
    return trace_context(env.get("TRACEPARENT"), env.get("TRACESTATE"))
