"""A real OTLP/HTTP receiver on loopback for the tracing tests: it accepts
``POST /v1/traces`` and ``/v1/metrics`` (protobuf, optionally gzip) and
decodes them with ``opentelemetry-proto``, as a collector would. It can
answer slowly (``delay_s``) to play a collector that hangs."""

from __future__ import annotations

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


class Receiver:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.spans: list[dict[str, Any]] = []
        self.metrics: dict[str, list[dict[str, Any]]] = {}
        self.resources: list[dict[str, Any]] = []
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n)
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                receiver.take(self.path, body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def take(self, path: str, body: bytes) -> None:
        with self.lock:
            self.requests += 1
            if path.endswith("/v1/traces"):
                req = trace_service_pb2.ExportTraceServiceRequest()
                req.ParseFromString(body)
                for rs in req.resource_spans:
                    self.resources.append(_attrs(rs.resource.attributes))
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            self.spans.append(
                                {
                                    "name": s.name,
                                    "trace_id": s.trace_id.hex(),
                                    "span_id": s.span_id.hex(),
                                    "parent_span_id": s.parent_span_id.hex(),
                                    "kind": s.kind,
                                    "attributes": _attrs(s.attributes),
                                    "status": s.status.code,
                                    "start": s.start_time_unix_nano,
                                    "end": s.end_time_unix_nano,
                                    "scope": ss.scope.name,
                                }
                            )
            elif path.endswith("/v1/metrics"):
                req = metrics_service_pb2.ExportMetricsServiceRequest()
                req.ParseFromString(body)
                for rm in req.resource_metrics:
                    for sm in rm.scope_metrics:
                        for m in sm.metrics:
                            kind = m.WhichOneof("data")
                            points = getattr(m, kind).data_points
                            self.metrics.setdefault(m.name, []).extend(
                                {"attributes": _attrs(p.attributes), "unit": m.unit, "point": p}
                                for p in points
                            )

    def named(self, prefix: str) -> list[dict[str, Any]]:
        with self.lock:
            return [s for s in self.spans if s["name"].startswith(prefix)]

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
