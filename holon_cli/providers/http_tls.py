"""TLS inside TLS, for an ``https`` endpoint reached through an ``https``
proxy: after the ``CONNECT``, the endpoint's TLS session runs over the
proxy's. The standard library cannot wrap a TLS socket in another, so the
inner session is an :class:`ssl.SSLObject` over memory buffers whose
records travel through the outer socket (what httpcore does too).

:class:`TLSInTLS` offers what :mod:`holon_cli.providers.http_client` uses of
a socket: ``sendall``, ``recv_into``, ``makefile("rb")``, the timeout
methods, ``fileno`` (the outer socket's: readable when records arrive) and
``close``. A clean or ragged end of the inner session reads as end of file,
as ``ssl.SSLSocket`` does by default. Imported only for such a connection.
"""

from __future__ import annotations

import io
import ssl
from collections.abc import Callable
from typing import TypeVar, cast

T = TypeVar("T")

_RECORD = 65536


class TLSInTLS:
    """The endpoint's TLS session over ``outer`` (the proxy's TLS socket,
    tunnel open); the handshake runs here, under ``outer``'s timeout."""

    def __init__(self, outer: ssl.SSLSocket, context: ssl.SSLContext, host: str) -> None:
        self._outer = outer
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=host)
        self._eof = False
        self._run(self._tls.do_handshake)

    def _run(self, op: Callable[[], T]) -> T:
        """Run one TLS operation to completion: send what it produced, feed
        it what the proxy connection brings, until it needs nothing more."""
        while True:
            try:
                result = op()
            except ssl.SSLWantReadError:
                if self._eof:  # it wants more, and the proxy connection has ended
                    raise ssl.SSLEOFError("the proxy connection closed mid-record") from None
                self._flush()
                data = self._outer.recv(_RECORD)
                if data:
                    self._incoming.write(data)
                else:
                    self._incoming.write_eof()
                    self._eof = True
                continue
            self._flush()
            return result

    def _flush(self) -> None:
        pending = self._outgoing.read()
        if pending:
            self._outer.sendall(pending)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # a write to memory buffers takes it all; the loop is for safety
            written = self._run(lambda chunk=view: self._tls.write(chunk))  # type: ignore[misc]
            view = view[written:]

    def recv_into(self, buffer: memoryview | bytearray, nbytes: int = 0) -> int:
        size = nbytes or len(buffer)
        try:
            # with a buffer, read() returns the count (typeshed says bytes)
            return cast(int, self._run(lambda: self._tls.read(size, buffer)))
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return 0  # the session ended (cleanly, or the connection just closed)

    def makefile(self, mode: str = "rb", buffering: int = io.DEFAULT_BUFFER_SIZE) -> io.IOBase:
        if mode != "rb":
            raise ValueError("only binary reading is supported")
        raw = _Reader(self)
        return raw if buffering == 0 else io.BufferedReader(raw, buffering or _RECORD)

    # what a connection asks of its socket, passed to the proxy connection

    def fileno(self) -> int:
        return self._outer.fileno()

    def gettimeout(self) -> float | None:
        return self._outer.gettimeout()

    def settimeout(self, timeout: float | None) -> None:
        self._outer.settimeout(timeout)

    def setblocking(self, flag: bool) -> None:
        self._outer.setblocking(flag)

    def close(self) -> None:
        self._outer.close()


class _Reader(io.RawIOBase):
    def __init__(self, conn: TLSInTLS) -> None:
        self._conn = conn

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        return self._conn.recv_into(buffer)
