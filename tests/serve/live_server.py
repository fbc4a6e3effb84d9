"""serve's real HTTP surface (``build_app`` under the uvicorn ``HttpServer``
with its connection gate) on a loopback TCP port of this process: for tests
of what only a real server does (proxy headers, head timeouts, caps)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from holon_cli.serve.http.app import HttpSettings, build_app
from holon_cli.serve.http.listen import bind_tcp
from holon_cli.serve.http.server import HttpServer


@contextmanager
def live_server(
    token: str | None = None, unix_path: str | None = None
) -> Iterator[tuple[HttpServer, str, int]]:
    """(server, host, port) of a running surface (and on ``unix_path`` when
    given, as ``serve --socket``); config.yaml's ``serve`` section is read as
    the server starts, as ``holon serve`` does."""
    from holon_cli.serve.http.listen import bind_unix

    sock = bind_tcp("127.0.0.1", 0)
    port = sock.getsockname()[1]
    socks = [sock] + ([bind_unix(unix_path)] if unix_path else [])
    app = build_app(
        HttpSettings(host="127.0.0.1", port=port, token=token, socket_path=unix_path),
        runtime_status=lambda: {"ok": True},
        request_shutdown=lambda: None,
        stopping=threading.Event(),
    )
    server = HttpServer(app, socks)
    server.start()
    try:
        yield server, "127.0.0.1", port
    finally:
        server.stop()
        for s in socks:
            s.close()


def raw_request(host: str, port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send ``data`` on a new connection and read the whole answer (the
    server closes: ``Connection: close`` is the caller's to send)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(data)
        chunks: list[bytes] = []
        while True:
            try:
                got = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not got:
                break
            chunks.append(got)
        return b"".join(chunks)


def get(host: str, port: int, path: str, timeout: float = 5.0) -> tuple[int, float]:
    """``GET path`` on a new connection: (status, seconds); status 0 when the
    connection was refused, reset or timed out."""
    t0 = time.monotonic()
    try:
        raw = raw_request(
            host,
            port,
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode(),
            timeout,
        )
    except OSError:
        return 0, time.monotonic() - t0
    line = raw.split(b"\r\n", 1)[0].split()
    status = int(line[1]) if len(line) > 1 and line[1].isdigit() else 0
    return status, time.monotonic() - t0


def post_json(
    host: str, port: int, path: str, body: bytes, headers: dict[str, str] | None = None
) -> int:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    raw = raw_request(
        host,
        port,
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
        ).encode()
        + body,
    )
    line = raw.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) > 1 and line[1].isdigit() else 0


class Dribblers:
    """``n`` connections that send a request head one byte at a time and
    never finish it; each one the server closes is opened again (as an
    attacker would), until :meth:`close`."""

    HEAD = b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000

    def __init__(self, host: str, port: int, n: int) -> None:
        import selectors

        self.host, self.port = host, port
        self.sel = selectors.DefaultSelector()
        self.pos: dict[socket.socket, int] = {}
        self.opened = 0
        self.closed_by_server = 0
        for _ in range(n):
            self._open()

    def _open(self) -> None:
        import selectors

        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((self.host, self.port))
        self.sel.register(s, selectors.EVENT_READ)
        self.pos[s] = 0
        self.opened += 1

    def step(self) -> None:
        """One byte on every connection; reopen the ones the server closed."""
        for key, _ev in self.sel.select(timeout=0):
            s: Any = key.fileobj
            self._drop(s)
            self.closed_by_server += 1
            self._open()
        for s, i in list(self.pos.items()):
            try:
                s.send(self.HEAD[i : i + 1])
                self.pos[s] = (i + 1) % len(self.HEAD)
            except (BlockingIOError, InterruptedError):
                pass  # still connecting
            except OSError:
                self._drop(s)
                self.closed_by_server += 1
                self._open()

    def _drop(self, s: socket.socket) -> None:
        self.sel.unregister(s)
        self.pos.pop(s, None)
        s.close()

    def close(self) -> None:
        for s in list(self.pos):
            self._drop(s)
        self.sel.close()
