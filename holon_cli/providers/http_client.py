"""A small HTTP/1.1 client on the standard library's sockets, for the model
transports.

Why not httpx here: importing httpx and building its client costs a process
~55 ms, more than half of a one-round ``holon run``. The transports need a
narrow slice of HTTP, and this module is that slice (``socket`` is already
loaded; ``ssl`` is imported only for a TLS connection):

- one request at a time per connection, the body sent whole (no ``Expect``);
- responses framed by ``Content-Length``, by the chunked transfer coding, or
  by the connection closing; ``1xx`` interim responses skipped; ``gzip`` and
  ``deflate`` content codings decoded; redirects are *not* followed (the
  caller reports them);
- keep-alive: one process-wide pool of idle connections per (scheme, host,
  port, proxy). An idle connection the server has closed is noticed before
  reuse (it reads as readable) and dropped;
- timeouts: ``connect_timeout`` for the TCP connect, a proxy's ``CONNECT``
  and the TLS handshake (not the name lookup: ``getaddrinfo`` takes no
  timeout); ``timeout`` for each read and write after that (as httpx's
  read/write timeouts);
- TLS only for ``https`` targets or ``https`` proxies, with the verifying
  context the caller supplies (built on first use, once per process);
- proxies from the environment as curl, urllib and httpx read them:
  ``http_proxy`` / ``https_proxy`` / ``all_proxy`` (lower case first) chosen
  by the target's scheme, ``no_proxy`` (``*``, host names with their
  subdomains, ``.suffix``, IP addresses and networks, ``host:port``; under
  CGI, where ``HTTP_PROXY`` is a request header, only ``http_proxy``). An
  ``http`` target goes through the proxy in absolute form; an ``https``
  target is tunnelled with ``CONNECT``. Credentials in the proxy URL become
  ``Basic`` ``Proxy-Authorization``, those in the target URL ``Basic``
  ``Authorization`` (unless the caller sends its own). An ``https`` proxy in
  front of an ``https`` target means TLS inside TLS
  (:mod:`holon_cli.providers.http_tls`). SOCKS proxies are not supported
  (refused with :class:`InvalidURL`).

Reading a response (its framing, codings and lines) is
:mod:`holon_cli.providers.http_response`. Every failure is one of the
:class:`HttpError` classes (here and there);
:mod:`holon_cli.providers.http_common` classifies them.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import weakref
from collections.abc import Callable
from io import BufferedReader
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from holon_cli.providers.http_response import (
    MAX_HEADERS,
    NO_ANSWER,
    READ_SIZE,
    HttpError,
    ReadTimeout,
    RemoteProtocolError,
    Response,
    read_head,
)

if TYPE_CHECKING:
    import ssl

    from holon_cli.providers.http_tls import TLSInTLS

    TLSContext = Callable[[], ssl.SSLContext]

__all__ = [
    "MAX_HEADERS",
    "POOL",
    "ConnectError",
    "ConnectTimeout",
    "HttpError",
    "InvalidRequest",
    "InvalidURL",
    "Pool",
    "ReadTimeout",
    "RemoteProtocolError",
    "Response",
    "WriteTimeout",
    "proxy_for",
]


# ------------------------------------------------------------------ errors
# (HttpError, ReadTimeout and RemoteProtocolError live in http_response, where
# reading a response raises them)


class InvalidRequest(HttpError):
    """The request cannot be sent as configured: a setting has to change
    (the URL, a header, the proxy, the CA bundle), so retrying cannot help."""


class InvalidURL(InvalidRequest):
    """The URL (or a header value) cannot be sent: bad scheme, host or port."""


class ConnectError(HttpError):
    """No connection: name lookup, TCP connect, proxy tunnel or TLS handshake failed."""


class ConnectTimeout(ConnectError):
    """Connecting took longer than the connect timeout."""


class WriteTimeout(HttpError):
    """The request could not be sent within the timeout."""


# ------------------------------------------------------------------- URLs


class _Url:
    """A parsed request URL: scheme, host, port, and the request target."""

    __slots__ = ("scheme", "host", "port", "target", "userinfo")

    def __init__(self, url: str) -> None:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise InvalidURL(f"invalid URL: {exc}") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise InvalidURL(f"unsupported URL scheme {scheme or '(none)'!r}; use http or https")
        if port == 0:  # ``port or default`` below would quietly connect to 80/443
            raise InvalidURL("invalid URL: port 0")
        host = parts.hostname or ""
        if not host:
            raise InvalidURL("the URL has no host")
        if any(c in host for c in " \t\r\n/\\"):
            raise InvalidURL(f"invalid host {host!r}")
        self.scheme = scheme
        self.host = host
        self.port = port or (443 if scheme == "https" else 80)
        path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
        query = quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
        self.target = path + (f"?{query}" if parts.query else "")
        self.userinfo = (
            (unquote(parts.username or ""), unquote(parts.password or ""))
            if parts.username is not None
            else None
        )

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.authority}"


# ---------------------------------------------------------------- proxies


def _env(name: str, environ: Any) -> str:
    """``name`` or, unset, its upper-case form; not ``HTTP_PROXY`` under CGI,
    where it is the request's ``Proxy:`` header ("httpoxy")."""
    upper = "" if name == "http_proxy" and "REQUEST_METHOD" in environ else name.upper()
    return str(environ.get(name) or (upper and environ.get(upper)) or "").strip()


def proxy_for(url: str, environ: Any = None) -> str | None:
    """The proxy URL the environment sets for ``url``, or ``None`` for a direct connection."""
    return _proxy_url(_Url(url), environ)


def _proxy_url(u: _Url, environ: Any) -> str | None:
    environ = os.environ if environ is None else environ
    proxy = _env(f"{u.scheme}_proxy", environ) or _env("all_proxy", environ)
    if not proxy or _bypassed(u, _env("no_proxy", environ)):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _bypassed(u: _Url, no_proxy: str) -> bool:
    host = u.host.lower().rstrip(".")
    for entry in no_proxy.replace(" ", ",").split(","):
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "://" in entry:
            entry = entry.split("://", 1)[1]
        name, port = entry, ""
        if entry.startswith("["):  # [::1]:8080
            name, _, rest = entry[1:].partition("]")
            port = rest.lstrip(":")
        elif entry.count(":") == 1:  # host:port (a bare IPv6 address has several colons)
            name, port = entry.split(":")
        if port and port != str(u.port):
            continue
        name = name.rstrip(".")
        by_ip = _ip_match(host, name)
        if by_ip is not None:
            if by_ip:
                return True
            continue
        if name.startswith("*."):
            name = name[1:]
        if name.startswith("."):
            if host.endswith(name) or host == name[1:]:
                return True
        elif host == name or host.endswith("." + name):
            return True
    return False


def _ip_match(host: str, entry: str) -> bool | None:
    """For an IP address ``host``: whether ``entry`` is that address or a
    network holding it (``10.0.0.0/8``). ``None`` when ``host`` is a name,
    which is matched by suffix instead (for an address that would make
    ``0.1`` cover ``10.0.0.1``)."""
    import ipaddress

    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return None
    try:
        return addr in ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False


def _proxy_hop(proxy_url: str, u: _Url) -> _Url:
    """The parsed proxy for ``u``; a proxy this client cannot use is a
    configuration error (:class:`InvalidURL`), not a connection failure."""
    scheme = proxy_url.split("://", 1)[0].lower()
    if scheme not in ("http", "https"):
        raise InvalidURL(
            f"unsupported proxy scheme {scheme!r} in the environment's {u.scheme}_proxy "
            "or all_proxy; give an http:// proxy"
        )
    try:
        proxy = _Url(proxy_url)
    except InvalidURL as exc:
        raise InvalidURL(f"invalid proxy URL in the environment: {exc}") from None
    return proxy


# ------------------------------------------------------------ connections


class _Conn:
    """One socket (plain, TLS, or tunnelled TLS) and its buffered reader."""

    def __init__(self, sock: socket.socket | TLSInTLS, key: tuple[str, ...]) -> None:
        self.sock = sock
        self.key = key
        # a BufferedReader (typeshed types makefile's result loosely)
        self.reader: BufferedReader = sock.makefile("rb", buffering=READ_SIZE)  # type: ignore[assignment]
        # False once a request could not be sent whole: never pooled
        self.reusable = True

    def close(self) -> None:
        for closer in (self.reader.close, self.sock.close):
            try:
                closer()
            except OSError:
                pass

    def stale(self) -> bool:
        """An idle connection that is readable has been closed by the server
        (or sent something unasked): not reusable. Bytes the server sent past
        the last response may already sit in the reader's buffer, where
        ``select`` cannot see them; they would be read as the next answer."""
        import select

        try:  # poll, not select: a busy process (serve) may hold fds past FD_SETSIZE
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            ready = poller.poll(0)
        except (OSError, ValueError):
            return True
        return bool(ready) or self._buffered()

    def _buffered(self) -> bool:
        """Whether the reader holds unread bytes. ``peek`` reads the socket
        only when the buffer is empty, so it is made non-blocking for the call
        (a TLS socket then raises ``SSLWantReadError``: nothing there)."""
        timeout = self.sock.gettimeout()
        self.sock.setblocking(False)
        try:
            return bool(self.reader.peek(1))
        except OSError:
            return False
        finally:
            self.sock.settimeout(timeout)


def _connect(
    u: _Url,
    proxy: _Url | None,
    connect_timeout: float,
    timeout: float,
    tls: TLSContext,
    key: tuple[str, ...],
) -> _Conn:
    hop = proxy or u
    # an ASCII name as bytes: a str is IDNA-encoded, which imports that codec
    host: str | bytes = hop.host.encode("ascii") if hop.host.isascii() else hop.host
    try:
        raw = socket.create_connection((host, hop.port), timeout=connect_timeout)  # type: ignore[arg-type]
    except TimeoutError as exc:
        raise ConnectTimeout(f"timed out connecting to {hop.authority}") from exc
    except OSError as exc:
        raise ConnectError(f"{exc.strerror or exc} ({hop.authority})") from exc
    sock: socket.socket | TLSInTLS = raw
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if proxy is not None and proxy.scheme == "https":
            to_proxy = _wrap_tls(raw, proxy.host, tls)
            assert isinstance(to_proxy, socket.socket)  # TLS over a plain socket: an SSLSocket
            raw = sock = to_proxy
        if proxy is not None and u.scheme == "https":
            _tunnel(raw, u, proxy)
        if u.scheme == "https":
            sock = _wrap_tls(raw, u.host, tls)
        sock.settimeout(timeout)
    except BaseException:
        sock.close()
        raise
    return _Conn(sock, key)


def _wrap_tls(sock: socket.socket, host: str, tls: TLSContext) -> socket.socket | TLSInTLS:
    """TLS to ``host`` over ``sock``; over an ``https`` proxy's socket, TLS
    inside TLS (:mod:`holon_cli.providers.http_tls`)."""
    import ssl

    context = tls()  # may raise InvalidRequest (a CA bundle that cannot be loaded)
    try:
        if isinstance(sock, ssl.SSLSocket):
            from holon_cli.providers.http_tls import TLSInTLS

            return TLSInTLS(sock, context, host)
        return context.wrap_socket(sock, server_hostname=host)
    except TimeoutError as exc:
        raise ConnectTimeout(f"timed out in the TLS handshake with {host}") from exc
    except (ssl.SSLError, OSError) as exc:
        why = f"TLS handshake with {host} failed: {exc}"
        if "WRONG_VERSION_NUMBER" in str(exc):  # what a plain HTTP server's answer reads as
            why += "; the server does not speak TLS there (a plain http:// endpoint?)"
        raise ConnectError(why) from exc


def _basic(userinfo: tuple[str, str]) -> str:
    import base64

    return "Basic " + base64.b64encode(":".join(userinfo).encode("utf-8")).decode("ascii")


def _proxy_auth(proxy: _Url) -> dict[str, str]:
    return {} if proxy.userinfo is None else {"proxy-authorization": _basic(proxy.userinfo)}


def _tunnel(sock: socket.socket, u: _Url, proxy: _Url) -> None:
    """Ask the proxy for a ``CONNECT`` tunnel to ``u`` (still in the connect timeout)."""
    hostport = f"[{u.host}]:{u.port}" if ":" in u.host else f"{u.host}:{u.port}"
    head = f"CONNECT {hostport} HTTP/1.1\r\nhost: {hostport}\r\n"
    for k, v in _proxy_auth(proxy).items():
        head += f"{k}: {v}\r\n"
    try:
        sock.sendall((head + "\r\n").encode("latin-1"))
        # unbuffered: the proxy's answer is read byte by byte, so nothing
        # past it (the start of the TLS handshake) is taken off the socket
        reader = sock.makefile("rb", buffering=0)
        try:
            _, status, reason, _ = read_head(reader)
        finally:
            reader.close()
    except TimeoutError as exc:
        raise ConnectTimeout(f"timed out waiting for the proxy {proxy.authority}") from exc
    except (OSError, RemoteProtocolError) as exc:
        raise ConnectError(f"proxy {proxy.authority} failed: {exc}") from exc
    if not 200 <= status < 300:
        raise ConnectError(f"proxy {proxy.authority} refused the tunnel: {status} {reason}".strip())


# ------------------------------------------------------------------ pool


class Pool:
    """Idle keep-alive connections, shared by the threads of one process."""

    def __init__(self, max_idle_per_key: int = 4) -> None:
        self._idle: dict[tuple[str, ...], list[_Conn]] = {}
        self._lock = threading.Lock()
        self.max_idle_per_key = max_idle_per_key
        os.register_at_fork(after_in_child=functools.partial(_reset_after_fork, weakref.ref(self)))

    def get(self, key: tuple[str, ...]) -> _Conn | None:
        with self._lock:
            idle = self._idle.get(key) or []
            while idle:
                conn = idle.pop()
                if not conn.stale():
                    return conn
                conn.close()
        return None

    def put(self, conn: _Conn) -> None:
        with self._lock:
            idle = self._idle.setdefault(conn.key, [])
            if conn.reusable and len(idle) < self.max_idle_per_key:
                idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            conns = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for c in conns:
            c.close()

    def _after_fork(self) -> None:
        """In a forked child: a fresh lock (another thread may have held this
        one at the fork) and no idle connections (they are the parent's)."""
        self._lock = threading.Lock()
        self._idle = {}

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        timeout: float,
        connect_timeout: float | None = None,
        tls: TLSContext,
        environ: Any = None,
    ) -> Response:
        """Send one request and return the response with its head read. The
        caller reads the body and closes the response (it is a context manager)."""
        u = _Url(url)
        proxy_url = _proxy_url(u, environ)
        proxy = _proxy_hop(proxy_url, u) if proxy_url else None
        head = _request_head(method, u, proxy, headers or {}, len(body))
        key = (u.scheme, u.host, str(u.port), proxy_url or "")
        # a reused connection the server closed meanwhile fails before any
        # answer: such a request is sent once more, on a new connection
        conn = self.get(key)
        reused = conn is not None
        if conn is not None:  # this request's timeout, not that of the one that opened it
            conn.sock.settimeout(timeout)
        while True:
            if conn is None:
                conn = _connect(
                    u,
                    proxy,
                    timeout if connect_timeout is None else connect_timeout,
                    timeout,
                    tls,
                    key,
                )
            try:
                return Response(conn, _exchange(conn, head + body), self, method)
            except BaseException as exc:
                conn.close()
                if reused and _unanswered(exc):
                    conn, reused = None, False
                    continue
                raise


def _exchange(conn: _Conn, data: bytes) -> tuple[str, int, str, dict[str, str]]:
    """Send a whole request and read the head of its answer. A server may
    answer before it has read the whole body (``413``, ``401``) and close: the
    send then fails, but the answer is there to read (as httpcore does)."""
    try:
        conn.sock.sendall(data)
    except TimeoutError as exc:
        raise WriteTimeout("timed out sending the request") from exc
    except OSError as exc:
        conn.reusable = False
        try:
            return read_head(conn.reader)
        except (HttpError, OSError):
            pass
        raise RemoteProtocolError(f"sending the request failed: {exc}") from exc
    try:
        return read_head(conn.reader)
    except TimeoutError as exc:
        raise ReadTimeout("timed out waiting for the response") from exc
    except OSError as exc:
        raise RemoteProtocolError(f"reading the response failed: {exc}") from exc


def _unanswered(exc: BaseException) -> bool:
    """The failure a server's idle-timeout close looks like: nothing came back."""
    if not isinstance(exc, RemoteProtocolError):
        return False
    cause = exc.__cause__
    if isinstance(cause, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
        return True
    return cause is None and str(exc) == NO_ANSWER


def _request_head(
    method: str, u: _Url, proxy: _Url | None, headers: dict[str, str], length: int
) -> bytes:
    target = u.origin + u.target if proxy is not None and u.scheme == "http" else u.target
    fields: dict[str, str] = {"host": u.authority}
    fields.update({k.lower(): v for k, v in headers.items()})
    fields.setdefault("accept-encoding", "gzip, deflate")
    if length or method in ("POST", "PUT", "PATCH"):
        fields["content-length"] = str(length)
    if u.userinfo is not None and "authorization" not in fields:
        fields["authorization"] = _basic(u.userinfo)
    if proxy is not None and u.scheme == "http":
        fields.update(_proxy_auth(proxy))
    lines = [f"{method} {target} HTTP/1.1"]
    for k, v in fields.items():
        v = str(v)
        if any(c in k for c in " :\r\n\t") or "\r" in v or "\n" in v:
            raise InvalidURL(f"header {k!r} has a line break or a bad name")
        lines.append(f"{k}: {v}")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError as exc:
        raise InvalidURL(f"a header holds a character that is not Latin-1: {exc}") from None


def _reset_after_fork(ref: weakref.ref[Pool]) -> None:
    """The fork hook of a pool (held weakly: the hook must not keep it alive)."""
    pool = ref()
    if pool is not None:
        pool._after_fork()


POOL = Pool()
