"""A real HTTP server on 127.0.0.1 that replays queued responses and records
every request, for transport tests (no network, real sockets).

    with LoopbackServer() as srv:
        srv.queue(Reply.json_body({"ok": True}), Reply.sse(text), Reply(status=500))
        ... point a transport at srv.url ...
        srv.requests[0].json()   # what the client sent

``Reply`` can carry a JSON body, raw body text, or an event stream (sent with
chunked encoding), and can cut the connection after ``cut_after`` bytes of
the body, or wait ``delay_s`` before answering (to provoke timeouts). When
the queue is empty the server answers 418 with an explanatory JSON error.
``check`` lets a test act as a validating server: a function of the request
that returns an error ``Reply`` (sent instead of the queued one) or ``None``.

Like real API servers it sets ``TCP_NODELAY`` and sends headers and a plain
body in one write, so Nagle's algorithm and delayed ACKs cannot stall a
request by 40 ms (which made round timings noisy).

Importable from any test folder: ``tests/`` is on ``sys.path`` under pytest's
default import mode (``from loopback import LoopbackServer, Reply``).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    # send the body as an event stream with chunked transfer encoding
    stream: bool = False
    # drop the connection after this many body bytes (declared length stays full)
    cut_after: int | None = None
    delay_s: float = 0.0

    @classmethod
    def json_body(cls, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        h = {"content-type": "application/json"}
        h.update(headers or {})
        return cls(status=status, headers=h, body=json.dumps(obj).encode())

    @classmethod
    def text(cls, text: str, status: int = 200, content_type: str = "text/plain") -> Reply:
        return cls(status=status, headers={"content-type": content_type}, body=text.encode())

    @classmethod
    def sse(cls, text: str, *, cut_after: int | None = None) -> Reply:
        return cls(
            status=200,
            headers={"content-type": "text/event-stream; charset=utf-8"},
            body=text.encode(),
            stream=True,
            cut_after=cut_after,
        )

    @classmethod
    def from_fixture(cls, path: Path) -> Reply:
        """A recorded ``<case>.json`` (status, headers, body | body_text) or ``<case>.sse``."""
        if path.suffix == ".sse":
            return cls.sse(path.read_text(encoding="utf-8"))
        rec = json.loads(path.read_text(encoding="utf-8"))["response"]
        headers = {k.lower(): str(v) for k, v in (rec.get("headers") or {}).items()}
        headers.pop("content-length", None)
        if "body_text" in rec:
            body = rec["body_text"].encode()
        else:
            body = json.dumps(rec.get("body")).encode()
        return cls(status=int(rec["status"]), headers=headers, body=body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    # Real API servers set TCP_NODELAY; without it, Nagle's algorithm holds a
    # small write back until the client's delayed ACK (up to 40 ms a request).
    disable_nagle_algorithm = True
    # a buffered writer: the status line, headers and a plain body leave in
    # one send at the explicit ``flush`` (an event stream flushes per event)
    wbufsize = 64 * 1024

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._serve()

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        owner = self.server.owner
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        owner._record(request)
        # a validating server (as real compatible servers are) answers its own
        # error instead of the next queued reply, which stays queued
        rejection = owner.check(request) if owner.check is not None else None
        reply = rejection if rejection is not None else owner._next_reply()
        if reply.delay_s:
            time.sleep(reply.delay_s)
        try:
            if reply.stream:
                self._send_stream(reply)
            else:
                self._send_plain(reply)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send_plain(self, reply: Reply) -> None:
        self.send_response(reply.status)
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(reply.body)))
        if reply.cut_after is not None:
            self.send_header("connection", "close")
        self.end_headers()
        if reply.cut_after is not None:
            self.wfile.write(reply.body[: reply.cut_after])
            self.wfile.flush()
            self._abort()
            return
        self.wfile.write(reply.body)
        self.wfile.flush()

    def _send_stream(self, reply: Reply) -> None:
        self.send_response(reply.status)
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        data = reply.body if reply.cut_after is None else reply.body[: reply.cut_after]
        # one chunk per event, as a real server flushes them
        pieces = data.split(b"\n\n")
        for i, piece in enumerate(pieces):
            chunk = piece + (b"\n\n" if i < len(pieces) - 1 else b"")
            if not chunk:
                continue
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        if reply.cut_after is not None:
            self._abort()
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _abort(self) -> None:
        """Drop the connection without finishing the body."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: LoopbackServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # clients that give up on a connection (timeouts, errors) reset it: not a test failure
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class LoopbackServer:
    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        # called with each request before it is answered; a Reply it returns
        # is sent instead of the next queued one (see ``_serve``)
        self.check: Callable[[RecordedRequest], Reply | None] | None = None
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            # stop() waits for the next poll (half of it on average, per test)
            kwargs={"poll_interval": 0.005},
            name="loopback-http",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def _next_reply(self) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return Reply.json_body(
            {
                "error": {
                    "message": "loopback: no reply queued for this request",
                    "type": "test_setup",
                }
            },
            status=418,
        )

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def closed_port() -> int:
    """A local port with nothing listening (connection refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port
