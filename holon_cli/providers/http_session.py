"""The process's one ``httpx2.Client`` for model requests, and the limits
httpx2 itself does not enforce.

Imported only by :mod:`holon_cli.providers.http_common` when it sends a
request (``httpx2`` costs a process ~80 ms to import and its client ~45 ms to
build, mostly the CA store): ``holon status``, ``enqueue`` and ``workitem
list`` never load it.

Owns:

- the client: built on first use, one per process (keep-alive pool; proxies
  and ``no_proxy`` from the environment; ``SSL_CERT_FILE``/``SSL_CERT_DIR``
  or the OS trust store, as httpx2 chooses; HTTP/1.1; redirects not
  followed). It is rebuilt when those environment variables change, and a
  forked child drops its parent's (``os.register_at_fork``): the pooled
  sockets and the pool's lock belong to the parent;
- trust on first use (:class:`_TrustOnFirstUse`): the CA store (~20 ms to
  load) is httpx2's own choice, built on the first TLS connection; a plain
  ``http://`` endpoint (a local model server) never loads it;
- one retry of a request that got no answer on a *reused* idle connection
  (the server closed it while it sat in the pool): nothing was answered, so
  sending it again cannot do anything twice that the server acknowledged;
- an overall deadline per attempt (:func:`deadline`): every socket read,
  write, connect and TLS handshake of the attempt waits at most until then,
  so a server that drips a byte at a time, or floods ``1xx`` interim answers,
  cannot hold the attempt past it (httpx2's timeouts are per operation); the
  pools get it through :mod:`holon_cli.providers.httpx2_seam`, the one module
  touching httpx2's private names;
- capped reads: a whole body (:func:`read_body`, counted after decompression
  as well as on the wire; httpx2 inflates in bounded pieces) and event-stream
  lines (:func:`iter_lines`: bytes split on CR, LF or CRLF only, never on
  U+2028 or other Unicode line breaks, which JSON strings may hold; one line
  or one event over ``MAX_EVENT_BYTES`` stops the read, memory stays bounded).

Failures are exceptions of httpx2 or the classes here;
:mod:`holon_cli.providers.http_common` classifies them.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from holon_cli.providers import httpx2_import

httpx2_import.load()  # before the two imports below: see that seam

import httpcore2  # noqa: E402
import httpx2  # noqa: E402

MAX_EVENT_BYTES = 8 * 1024 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024
# a whole event stream (a long answer is tens of MiB of events at most): the
# parsers keep what the events say, so endless small events would fill memory
MAX_STREAM_BYTES = 256 * 1024 * 1024
# an error answer is read this far, for its message; the rest is not needed
MAX_ERROR_BODY_BYTES = 64 * 1024
CONNECT_TIMEOUT_CAP_S = 30.0

# what the client is built from: a change means a new client
_ENV_KEYS = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "REQUEST_METHOD",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)


class SetupError(Exception):
    """The client cannot be built as configured (a proxy URL, the CA
    certificates): a setting has to change, so a retry cannot help."""


class TooLarge(Exception):
    """A body, line or event went past its cap."""


# ------------------------------------------------------------------ client

_lock = threading.Lock()
_client: httpx2.Client | None = None
_client_env: tuple[str | None, ...] = ()
_trust: _TrustOnFirstUse | None = None  # the client's, to warm it


def client() -> httpx2.Client:
    """The process's client, built on first use (and again when the proxy or
    CA environment changed)."""
    global _client, _client_env
    env = tuple(os.environ.get(k) for k in _ENV_KEYS)
    with _lock:
        if _client is None or env != _client_env:
            old, _client = _client, _build()
            _client_env = env
            if old is not None:
                old.close()
        return _client


def _build() -> httpx2.Client:
    global _trust
    trust = _TrustOnFirstUse()
    try:
        c = httpx2.Client(
            verify=trust,
            http1=True,
            http2=False,
            follow_redirects=False,
            trust_env=True,
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=8),
        )
    except ImportError as exc:  # socks5:// without socksio
        raise SetupError(
            f"unsupported proxy in the environment ({exc}); give an http:// proxy"
        ) from None
    except (OSError, ValueError, httpx2.InvalidURL) as exc:
        raise SetupError(_setup_message(exc)) from None
    from holon_cli.providers.httpx2_seam import ClientPools

    # every connection's socket, direct or through a proxy, goes through the deadline
    ClientPools(c).wrap_backends(_DeadlineBackend)
    _trust = trust
    return c


class _TrustOnFirstUse(ssl.SSLContext):
    """The client's ``verify``: a context that hands every TLS connection to
    the one httpx2 would have built (``httpcore2.default_ssl_context()``:
    ``SSL_CERT_FILE``, ``SSL_CERT_DIR``, else the OS trust store), built on
    the first TLS connection instead of with the client. httpcore2 calls
    ``set_alpn_protocols``, ``wrap_socket`` and ``wrap_bio`` on it; a CA
    store that cannot be loaded is a :class:`SetupError` (not retried)."""

    def __new__(cls) -> _TrustOnFirstUse:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self) -> None:
        self._real: ssl.SSLContext | None = None
        self._alpn: list[str] | None = None
        self._guard = threading.Lock()

    def real(self) -> ssl.SSLContext:
        with self._guard:
            if self._real is None:
                try:
                    ctx = httpcore2.default_ssl_context()
                except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                    raise SetupError(_setup_message(exc)) from None
                if self._alpn:
                    ctx.set_alpn_protocols(self._alpn)
                self._real = ctx
            return self._real

    @property
    def loaded(self) -> bool:
        return self._real is not None

    def set_alpn_protocols(self, alpn_protocols: Iterable[str]) -> None:
        with self._guard:
            self._alpn = list(alpn_protocols)
            if self._real is not None:
                self._real.set_alpn_protocols(self._alpn)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        return self.real().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        return self.real().wrap_bio(*args, **kwargs)


def warm_trust() -> None:
    """Build the client and load its CA store now (serve's warm-up, for an
    ``https`` model: the first request then does not wait for it)."""
    client()
    if _trust is not None:
        _trust.real()


def _setup_message(exc: BaseException) -> str:
    for var in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        if (where := os.environ.get(var)) and isinstance(exc, OSError):
            return f"cannot load the CA certificates from {var}={where}: {exc}"
    return f"cannot use the proxy settings in the environment: {exc}"


# a forked child's copies of its parent's clients: kept, never used
_parents: list[object] = []


def _forget_after_fork() -> None:
    """In a forked child: the parent's client (its sockets, its pool's lock)
    is not ours; the next request builds a fresh one. The old one is kept,
    not freed: freeing its objects would write to every page they are on,
    which a fork shares with the parent until written (a forked command
    supervisor paid ~0.5 ms of copied pages for it at every command)."""
    global _client, _lock
    _lock = threading.Lock()
    if _client is not None:
        _parents.append(_client)
    _client = None


os.register_at_fork(after_in_child=_forget_after_fork)


def reset() -> None:
    """Close and forget the client (tests; a process about to exit)."""
    global _client
    with _lock:
        old, _client = _client, None
    if old is not None:
        old.close()


# ----------------------------------------------------------------- sending


def send(url: str, headers: dict[str, str], content: bytes, timeout_s: float) -> httpx2.Response:
    """POST ``content`` and return the response with its head read (the
    caller reads the body and closes it). A request that gets no answer on a
    reused idle connection is sent once more, on a new one."""
    c = client()
    timeout = httpx2.Timeout(timeout_s, connect=min(timeout_s, CONNECT_TIMEOUT_CAP_S), pool=None)
    for last in (False, True):
        opened: list[str] = []

        def trace(name: str, info: Any, opened: list[str] = opened) -> None:
            if name.endswith(("connect_tcp.started", "connect_unix_socket.started")):
                opened.append(name)

        request = c.build_request(
            "POST", url, headers=headers, content=content, timeout=timeout,
            extensions={"trace": trace},
        )  # fmt: skip
        try:
            return c.send(request, stream=True)
        except (httpx2.ReadError, httpx2.WriteError, httpx2.RemoteProtocolError) as exc:
            if last or opened or not _unanswered(exc):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _unanswered(exc: BaseException) -> bool:
    """What a server's idle-timeout close looks like: no answer at all (a
    garbled answer is an answer, and is not sent again)."""
    if isinstance(exc, httpx2.RemoteProtocolError):
        return str(exc).startswith("Server disconnected without sending a response")
    return True


# ---------------------------------------------------------------- deadline

_DEADLINE: ContextVar[float | None] = ContextVar("holon_http_deadline", default=None)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every socket operation inside waits at most until ``seconds`` from now."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def deadline_passed() -> bool:
    end = _DEADLINE.get()
    return end is not None and time.monotonic() >= end - 0.01


def _cap(timeout: float | None, exc: type[Exception]) -> float | None:
    end = _DEADLINE.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise exc("the attempt's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    """A connection's socket, each operation capped by the attempt's deadline."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _cap(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _cap(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, _cap(timeout, httpcore2.ConnectTimeout)
        )
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        t = _cap(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(
            self._inner.connect_tcp(host, port, t, local_address, socket_options)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        t = _cap(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, t, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


# ----------------------------------------------------------------- reading


def read_body(resp: httpx2.Response, limit: int = MAX_BODY_BYTES, *, cut: bool = False) -> bytes:
    """The decoded body, at most ``limit`` bytes on the wire and after
    decompression: past it, :class:`TooLarge` (or, with ``cut``, the first
    ``limit`` bytes and the response closed)."""
    chunks: list[bytes] = []
    size = 0
    for data in resp.iter_bytes():
        size += len(data)
        if size > limit or resp.num_bytes_downloaded > limit:
            if cut:
                chunks.append(data[: max(limit - size + len(data), 0)])
                resp.close()
                break
            resp.close()
            encoded = resp.headers.get("content-encoding")
            what = "decompressed body" if encoded and size > limit else "body"
            raise TooLarge(f"the response's {what} exceeded {limit // (1024 * 1024) or 1} MiB")
        chunks.append(data)
    return b"".join(chunks)


def iter_lines(
    chunks: Iterable[bytes], limit: int = MAX_EVENT_BYTES, total: int = MAX_STREAM_BYTES
) -> Iterator[str]:
    """Event-stream lines (UTF-8, replacement for bad bytes) without their
    terminators: CRLF, LF or CR, and nothing else. One line, or one event
    (the lines up to a blank one), longer than ``limit`` bytes, or a stream
    longer than ``total``, raises :class:`TooLarge` before more is read; an
    unterminated last line is yielded too."""
    buf = bytearray()
    event = 0  # bytes of the event so far
    seen = 0
    for data in chunks:
        seen += len(data)
        if seen > total:
            raise TooLarge(f"the event stream exceeded {total // (1024 * 1024) or 1} MiB")
        buf += data
        pos = 0
        while True:
            end, after = _eol(buf, pos)
            if end < 0:
                break
            line = bytes(buf[pos:end])
            pos = after
            event = 0 if not line else event + len(line)
            if event > limit:
                raise TooLarge(f"an event of the stream exceeded {limit // (1024 * 1024)} MiB")
            yield line.decode("utf-8", "replace")
        del buf[:pos]
        if event + len(buf) > limit:
            raise TooLarge(f"an event of the stream exceeded {limit // (1024 * 1024)} MiB")
    if buf:
        yield bytes(buf.rstrip(b"\r")).decode("utf-8", "replace")


def _eol(buf: bytearray, pos: int) -> tuple[int, int]:
    """Where the first line ending at or after ``pos`` starts and ends; (-1, -1)
    when none is complete (a CR at the very end may be half a CRLF)."""
    lf = buf.find(b"\n", pos)
    cr = buf.find(b"\r", pos, lf if lf >= 0 else len(buf))
    if cr < 0:
        return (lf, lf + 1) if lf >= 0 else (-1, -1)
    if cr + 1 == len(buf):
        return -1, -1
    return cr, cr + 2 if buf[cr + 1] == 0x0A else cr + 1
