"""The OpenTelemetry SDK set up for one process: a tracer and a meter on
their own providers (never the global ones, so a library's instrumentation
and ours do not fight over them), the OTLP/HTTP exporters (or the console),
and the guarantees that keep telemetry out of the way.

Never in the way:

- spans leave through the SDK's ``BatchSpanProcessor`` (a bounded queue,
  ``OTEL_BSP_MAX_QUEUE_SIZE``, default 2048; a full queue drops the oldest
  span) and metrics through a ``PeriodicExportingMetricReader``: both
  export on their own threads, so a turn only appends to a queue;
- each export request times out after ``OTEL_EXPORTER_OTLP_TIMEOUT``
  (default here 2 s, not the SDK's 10 s);
- at process end the providers get :data:`FLUSH_BUDGET_S` together
  (``telemetry.flush_timeout_ms``, default 40 ms), shut down on helper
  threads: a slow or unreachable collector cannot hold a ``holon turn``
  process open, whatever the SDK's own shutdown waits for. The providers
  are built with ``shutdown_on_exit=False`` so the SDK's own exit hooks
  (30 s) never run;
- what never reached the collector (failed exports, the queue's drops, a
  flush cut short) is counted in the home (``store/telemetry.py``).

Only public SDK interfaces are used: the counting of drops wraps the span
exporter (:class:`CountingExporter`) and watches the processor from the
outside (:class:`CountingProcessor`).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from holon_cli import __version__
from holon_cli.model.tracecontext import TraceContext, check_trace_context

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import Span
    from opentelemetry.util.types import AttributeValue

    from holon_cli.model.config import HolonConfig

FLUSH_BUDGET_S = 0.040
DEFAULT_EXPORT_TIMEOUT_S = 2.0
DEFAULT_QUEUE = 2048
SCOPE = "holon_cli"

# the conventions' bucket advice (gen_ai.client.token.usage, .operation.duration)
TOKEN_BUCKETS = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
DURATION_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)

_PROPAGATOR = TraceContextTextMapPropagator()
_INSTALL_LOCK = threading.Lock()


class CountingExporter(SpanExporter):
    """The real exporter, counting what it delivered and what it lost."""

    def __init__(self, inner: SpanExporter, on_lost: Any) -> None:
        self.inner = inner
        self.on_lost = on_lost
        self.seen = 0
        self.exported = 0
        self.failed = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.seen += len(spans)
        try:
            res = self.inner.export(spans)
        except Exception:  # noqa: BLE001 - an exporter bug must not reach the turn
            res = SpanExportResult.FAILURE
        if res is SpanExportResult.SUCCESS:
            self.exported += len(spans)
        else:
            self.failed += len(spans)
            self.on_lost(len(spans))
        return res

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountingProcessor(SpanProcessor):
    """The SDK's batch processor, with the spans it was handed counted: what
    was handed over and never reached the exporter was dropped (a full
    queue) or cut off at exit."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.ended = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            self.ended += 1
        self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ[name])
    except (KeyError, ValueError):
        return default


def _export_timeout_s() -> float:
    # the standard variables are milliseconds (the SDK's exporter reads them
    # as seconds in some versions): read them here and pass seconds
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        if os.environ.get(name, "").strip():
            return max(_env_float(name, DEFAULT_EXPORT_TIMEOUT_S * 1000), 1.0) / 1000
    return DEFAULT_EXPORT_TIMEOUT_S


def _resource() -> Resource:
    attrs: dict[str, AttributeValue] = {"service.version": __version__}
    given = os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    if not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in given:
        attrs["service.name"] = "holon"
    return Resource.create(attrs)


def _warn(text: str) -> None:
    try:
        sys.stderr.write(f"holon: warning: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _exporter_names(var: str, default: str) -> list[str]:
    raw = os.environ.get(var, "").strip().lower() or default
    return [x.strip() for x in raw.split(",") if x.strip()]


def _span_exporter() -> SpanExporter | None:
    names = _exporter_names("OTEL_TRACES_EXPORTER", "otlp")
    if "console" in names:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)  # stdout is the command's answer
    if "otlp" not in names:
        return None
    return _otlp_spans()


def _protocol_note() -> None:
    proto = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if proto.strip().lower() != "http/protobuf":
        _warn(f"OTLP protocol {proto!r} is not supported; exporting http/protobuf")


def _otlp_spans() -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    _protocol_note()
    return OTLPSpanExporter(timeout=_export_timeout_s())


def _metric_reader() -> MetricReader | None:
    names = _exporter_names("OTEL_METRICS_EXPORTER", "otlp")
    if "none" in names:
        return None
    exporter: Any
    if "console" in names or _exporter_names("OTEL_TRACES_EXPORTER", "otlp") == ["console"]:
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        exporter = ConsoleMetricExporter(out=sys.stderr)
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter(timeout=_export_timeout_s())
    return PeriodicExportingMetricReader(exporter, export_timeout_millis=_export_timeout_s() * 1000)


def _views() -> list[View]:
    return [
        View(
            instrument_name="gen_ai.client.token.usage",
            aggregation=ExplicitBucketHistogramAggregation(TOKEN_BUCKETS),
        ),
        View(
            instrument_name="gen_ai.client.operation.duration",
            aggregation=ExplicitBucketHistogramAggregation(DURATION_BUCKETS),
        ),
    ]


class Plane:
    """One process's tracer, meter and instruments (see the module docstring)."""

    def __init__(
        self,
        span_exporter: SpanExporter | None,
        metric_reader: MetricReader | None,
        *,
        home: Any = None,
        flush_budget_s: float = FLUSH_BUDGET_S,
        batch: bool = True,
    ) -> None:
        from holon_cli.runtime.telemetry.semconv import ContentPolicy

        self.home = home
        self.flush_budget_s = flush_budget_s
        self.content = ContentPolicy.from_env()
        resource = _resource()
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.exporter: CountingExporter | None = None
        self.processor: CountingProcessor | None = None
        self._lost_lock = threading.Lock()
        self._lost_reported = 0
        if span_exporter is not None:
            self.exporter = CountingExporter(span_exporter, self._lost)
            inner: SpanProcessor
            if batch:
                inner = BatchSpanProcessor(self.exporter)
            else:  # tests: export as each span ends
                from opentelemetry.sdk.trace.export import SimpleSpanProcessor

                inner = SimpleSpanProcessor(self.exporter)
            self.processor = CountingProcessor(inner)
            self.tracer_provider.add_span_processor(self.processor)
        self.tracer = self.tracer_provider.get_tracer(SCOPE, __version__)
        readers = [metric_reader] if metric_reader is not None else []
        self.meter_provider = MeterProvider(
            metric_readers=readers, resource=resource, views=_views(), shutdown_on_exit=False
        )
        meter = self.meter_provider.get_meter(SCOPE, __version__)
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration."
        )
        self.turns = meter.create_counter(
            "holon.turns", unit="{turn}", description="Turns settled, by outcome."
        )
        self.depth = meter.create_gauge(
            "holon.queue.depth",
            unit="{message}",
            description="Messages queued for an agent (after a tick or a turn).",
        )
        self._closed = False

    # ----------------------------------------------------------- counting

    def _lost(self, n: int) -> None:
        """Spans an export lost: counted in the home at once (a serve lives long)."""
        with self._lost_lock:
            self._lost_reported += n
        self._persist(n)

    def _persist(self, n: int) -> None:
        if n <= 0 or self.home is None:
            return
        try:
            from holon_cli.store.telemetry import add_dropped

            add_dropped(self.home, n)
        except Exception:  # noqa: BLE001 - a counter never fails anything
            pass

    def unexported(self) -> int:
        """Spans handed to the processor that no export delivered and no
        failed export counted yet: a full queue dropped them, they were
        still queued, or their export was still running (abandoned at exit)."""
        if self.processor is None or self.exporter is None:
            return 0
        return max(0, self.processor.ended - self.exporter.exported - self.exporter.failed)

    # -------------------------------------------------------------- context

    def current_context(self) -> TraceContext | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        return check_trace_context(carrier)

    def extract(self, tc: TraceContext | None) -> Context | None:
        if not tc:
            return None
        return _PROPAGATOR.extract(dict(tc))

    def annotate(self, attributes: Mapping[str, Any]) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(dict(attributes))

    @staticmethod
    def attach(ctx: Context) -> object:
        return otel_context.attach(ctx)

    @staticmethod
    def detach(token: object) -> None:
        otel_context.detach(token)  # type: ignore[arg-type]

    # -------------------------------------------------------------- metrics

    def queue_depth(self, agent_id: str, depth: int) -> None:
        self.depth.set(depth, {"gen_ai.agent.id": agent_id})

    # ------------------------------------------------------------- shutdown

    def shutdown(self, budget_s: float | None = None) -> None:
        """Flush and stop within ``budget_s`` (default: the plane's): each
        provider shuts down on a daemon thread; whatever is not done by then
        is abandoned (and counted as dropped)."""
        if self._closed:
            return
        self._closed = True
        budget = self.flush_budget_s if budget_s is None else budget_s
        deadline = time.monotonic() + max(budget, 0.0)
        ms = max(int(budget * 1000), 1)
        workers = [
            threading.Thread(target=self.tracer_provider.shutdown, daemon=True),
            threading.Thread(
                target=self.meter_provider.shutdown, kwargs={"timeout_millis": ms}, daemon=True
            ),
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join(max(0.0, deadline - time.monotonic()))
        with self._lost_lock:
            lost = self.unexported()
        self._persist(lost)


def install_once(slot: list[Plane | None], config: HolonConfig | None) -> Plane | None:
    """Set up the process's plane (once, whichever thread asks first)."""
    with _INSTALL_LOCK:
        if slot:
            return slot[0]
        p = build(config)  # ImportError: an exporter of the extra is missing (caller warns)
        slot.append(p)
        if p is not None:
            atexit.register(p.shutdown)
        return p


def _quiet_sdk_logs() -> None:
    """The SDK logs each failed export (a collector down: a line per batch on
    stderr, in every cron mail). holon counts them instead (``holon status``
    ``telemetry.dropped``); ``OTEL_LOG_LEVEL`` set shows the SDK's lines again."""
    if os.environ.get("OTEL_LOG_LEVEL", "").strip():
        return
    import logging

    log = logging.getLogger("opentelemetry")
    log.addHandler(logging.NullHandler())
    log.propagate = False


def build(config: HolonConfig | None) -> Plane:
    """The plane from the standard ``OTEL_*`` variables and ``telemetry``."""
    from holon_cli.store.layout import home_root

    _quiet_sdk_logs()
    tel = (config or {}).get("telemetry") or {}
    flush_ms = tel.get("flush_timeout_ms") if isinstance(tel, Mapping) else None
    budget = FLUSH_BUDGET_S if flush_ms is None else float(flush_ms) / 1000
    return Plane(_span_exporter(), _metric_reader(), home=home_root(), flush_budget_s=budget)
