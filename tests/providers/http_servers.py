"""Raw-socket servers on 127.0.0.1 for the HTTP tests (hostile answers, proxies, TLS).

- :class:`ScriptedServer` hands every accepted connection to a test's
  handler, so a test controls every byte of the answer and can count the TCP
  connections the client opened (keep-alive, retries);
- :class:`ForwardProxy` is a forward proxy: an ``http`` request in absolute
  form is rewritten to origin form and relayed, ``CONNECT`` opens a tunnel
  that relays bytes both ways; it records what the client asked for;
- :func:`make_cert` makes a self-signed certificate with the ``openssl`` CLI.

Everything listens on 127.0.0.1 only, runs in daemon threads, and is shut
down by ``close()`` (the classes are context managers).
"""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]  # lower-cased names
    body: bytes = b""
    raw_head: bytes = b""


@dataclass
class Peer:
    """One accepted connection as a handler sees it."""

    sock: socket.socket
    index: int  # 0 for the server's first connection
    server: ScriptedServer
    reader: Any = field(init=False)

    def __post_init__(self) -> None:
        self.reader = self.sock.makefile("rb")

    def read_request(self) -> Request | None:
        """The next request on this connection (recorded on the server), or
        ``None`` when the client closed it."""
        req = read_request(self.reader)
        if req is not None:
            with self.server.lock:
                self.server.requests.append(req)
        return req

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        for closer in (self.reader.close, self.sock.close):
            try:
                closer()
            except OSError:
                pass

    def reset(self) -> None:
        """Close with a TCP reset (RST), as a crashed or impatient server does."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()


def read_request(reader: Any) -> Request | None:
    line = reader.readline()
    if not line:
        return None
    raw = line
    method, target, _ = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        h = reader.readline()
        raw += h
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    body = reader.read(length) if length else b""
    return Request(method, target, headers, body, raw)


def response(
    body: bytes = b"", status: str = "200 OK", headers: dict[str, str] | None = None
) -> bytes:
    """A whole HTTP/1.1 response with a ``content-length``."""
    h = {"content-length": str(len(body))}
    h.update(headers or {})
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return head.encode("latin-1") + b"\r\n" + body


class ScriptedServer:
    """Accepts connections on 127.0.0.1 and runs ``handler(peer)`` for each in
    its own daemon thread; with ``tls`` the connection is TLS (server side)."""

    def __init__(
        self, handler: Callable[[Peer], None], *, tls: ssl.SSLContext | None = None
    ) -> None:
        self.handler = handler
        self.tls = tls
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.accepted = 0
        self.errors: list[BaseException] = []
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._accept_thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept_loop(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self.lock:
                if self._closed:
                    sock.close()
                    return
                index = self.accepted
                self.accepted += 1
                self._socks.append(sock)
                t = threading.Thread(target=self._serve, args=(sock, index), daemon=True)
                self._threads.append(t)
            t.start()

    def _serve(self, sock: socket.socket, index: int) -> None:
        try:
            if self.tls is not None:
                sock.settimeout(5)
                sock = self.tls.wrap_socket(sock, server_side=True)
                with self.lock:
                    self._socks.append(sock)
            peer = Peer(sock, index, self)
            try:
                self.handler(peer)
            finally:
                peer.close()  # a handler that returns is done with the connection
        except (OSError, ValueError):
            pass  # the client went away (or rejected our certificate)
        except BaseException as exc:  # pragma: no cover - a broken test handler
            self.errors.append(exc)

    def close(self) -> None:
        with self.lock:
            self._closed = True
            socks = list(self._socks)
            threads = list(self._threads)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._listener.close()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except (OSError, ValueError):
                pass
            s.close()
        self._accept_thread.join(timeout=2)
        for t in threads:
            t.join(timeout=2)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pipe(src: Any, dst: socket.socket) -> None:
    """Copy bytes until EOF, then pass the EOF on."""
    read = src.read1 if hasattr(src, "read1") else src.recv
    try:
        while data := read(65536):
            dst.sendall(data)
    except (OSError, ValueError):
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _relay(peer: Peer, up: socket.socket) -> None:
    """Copy both ways between a TLS client connection and a plain upstream in
    this one thread (OpenSSL does not allow a concurrent read and write on
    one connection), until either side ends."""
    import select

    tls = peer.sock
    assert isinstance(tls, ssl.SSLSocket)
    tls.setblocking(False)  # whatever the head's reader buffered goes first
    try:
        leftover = peer.reader.read1(65536) or b""
    except (BlockingIOError, ssl.SSLWantReadError):
        leftover = b""
    tls.setblocking(True)
    try:
        if leftover:
            up.sendall(leftover)
        while True:
            ready = [tls] if tls.pending() else select.select([tls, up], [], [], 10)[0]
            if not ready:
                return
            if tls in ready:
                data = tls.recv(65536)
                if not data:
                    return
                up.sendall(data)
            if up in ready:
                data = up.recv(65536)
                if not data:
                    return
                tls.sendall(data)
    except (OSError, ValueError):
        pass


class ForwardProxy:
    """A forward HTTP proxy on 127.0.0.1 (absolute-form requests and
    ``CONNECT`` tunnels). ``refuse`` makes it answer every request with that
    status line instead. ``requests`` holds what clients asked the proxy."""

    def __init__(self, refuse: str | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.refuse = refuse
        self.tls = tls  # an https proxy: clients speak TLS to it first
        self._upstreams: list[socket.socket] = []
        self.server = ScriptedServer(self._handle, tls=tls)

    @property
    def requests(self) -> list[Request]:
        return self.server.requests

    @property
    def port(self) -> int:
        return self.server.port

    def url(self, userinfo: str = "") -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}"

    def _handle(self, peer: Peer) -> None:
        req = peer.read_request()
        if req is None:
            return
        if self.refuse:
            peer.send(response(b"no", self.refuse, {"proxy-authenticate": 'Basic realm="t"'}))
            return
        if req.method == "CONNECT":
            host, _, port = req.target.rpartition(":")
            up = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
            self._upstreams.append(up)
            peer.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            parts = urlsplit(req.target)
            up = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=5)
            self._upstreams.append(up)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            head = f"{req.method} {path} HTTP/1.1\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in req.headers.items() if k != "proxy-authorization"
            )
            up.sendall(head.encode("latin-1") + b"\r\n" + req.body)
        if self.tls is not None:  # one SSL object must not be read and written by two threads
            _relay(peer, up)
            return
        back = threading.Thread(target=_pipe, args=(up, peer.sock), daemon=True)
        back.start()
        _pipe(peer.reader, up)
        back.join(timeout=5)

    def close(self) -> None:
        for up in list(self._upstreams):
            try:
                up.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            up.close()
        self.server.close()

    def __enter__(self) -> ForwardProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_cert(directory: Path, name: str, san: str) -> tuple[Path, Path]:
    """A self-signed certificate and its key (EC P-256: fast to make) for ``san``
    (e.g. ``DNS:localhost,IP:127.0.0.1``), made with the ``openssl`` CLI."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec",
            "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", f"/CN={name}", "-addext", f"subjectAltName={san}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx
