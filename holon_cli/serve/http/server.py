"""The uvicorn server of ``holon serve``: run on pre-bound sockets in a thread
of the serve process, with a main loop that idles at one wake-up a second
(``serve/http/uvicorn_seam.py``, the one module that touches uvicorn's private
names).

Open connections cannot starve the surface or the turns:

- serve raises its soft ``RLIMIT_NOFILE`` to the hard limit at start;
- each listener holds at most ``serve.max_connections`` (default 512, and
  never more than :func:`connection_cap` allows for the descriptors);
  beyond it a new connection replaces the one that has waited longest for a
  request head, or is refused at once when every open one has a request in
  progress;
- a connection that has not sent a whole request head within
  ``serve.header_timeout`` (default 10 s) is closed, and one that sends
  nothing at all within the keep-alive timeout;
- forwarding headers are not believed (``proxy_headers=False``; see
  ``serve/http/proxies.py`` for ``serve.trusted_proxies``).

A message the server logs again and again (``accept()`` out of descriptors,
a failing client) is written once, then once more with its count.

uvicorn is imported inside the functions that need it, not with this module.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TYPE_CHECKING

from holon_cli.errors import RejectedError

if TYPE_CHECKING:
    from starlette.applications import Starlette

KEEP_ALIVE_S = 5  # idle connection (before a request or between two) is closed
MAX_CONNECTIONS = 512  # serve.max_connections' default, per listener
HEADER_TIMEOUT_S = 10.0  # serve.header_timeout's default
MAX_CONNECTIONS_CEILING = 1000  # whatever the descriptors would allow
CAP_MARGIN = 16  # descriptors of connections being refused or replaced
FD_RESERVE = 128  # descriptors left for turns, tasks, ledgers whatever the cap
# listen backlog, and how many connections asyncio accepts per wake-up (each
# holds a descriptor before the protocol can refuse it; uvicorn's default
# 2048 let one burst take every descriptor of the process)
ACCEPT_BACKLOG = 128  # as bind_tcp listens
REPEAT_WINDOW_S = 60.0


def raise_fd_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; return the soft limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return int(soft) if soft != resource.RLIM_INFINITY else 1 << 20


def connection_cap(fd_limit: int, listeners: int = 1) -> int:
    """Open HTTP connections per listener: together at most half the
    descriptors left after a reserve and two accept batches in flight, so
    the turns always have the other half."""
    spare = fd_limit - FD_RESERVE - 2 * ACCEPT_BACKLOG
    return max(8, min(MAX_CONNECTIONS_CEILING, (spare // 2 - CAP_MARGIN) // max(1, listeners)))


def serve_limits() -> tuple[int, float]:
    """``serve.max_connections`` and ``serve.header_timeout`` (seconds) from
    config.yaml, or their defaults (config.yaml was checked at start)."""
    from holon_cli.clock import parse_duration
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        section = load_config().get("serve") or {}
    except ConfigError:
        section = {}
    cap = section.get("max_connections") or MAX_CONNECTIONS
    raw = section.get("header_timeout")
    timeout = HEADER_TIMEOUT_S
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw > 0:
        timeout = float(raw)
    elif isinstance(raw, str):
        try:
            timeout = parse_duration(raw)
        except ValueError:
            pass
    return int(cap), timeout


class RepeatFilter(logging.Filter):
    """Let a message through once; count its repeats (same logger, level and
    first line) and report the count with the next different message, or
    from :meth:`flush` once it has stopped (a log must not grow by a
    traceback per refused connection)."""

    def __init__(self, window_s: float = REPEAT_WINDOW_S) -> None:
        super().__init__()
        self.window_s = window_s
        self.key: tuple[str, int, str] | None = None
        self.first = 0.0
        self.last = 0.0
        self.repeats = 0
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, record.getMessage().split("\n", 1)[0])
        now = time.monotonic()
        with self.lock:
            if key == self.key and now - self.first < self.window_s:
                self.repeats += 1
                self.last = now
                return False
            note = self._summary()
            self.key, self.first, self.last, self.repeats = key, now, now, 0
        if note:
            record.msg = f"{note}\n{record.msg}"
        return True

    def _summary(self) -> str:
        if self.key is None or not self.repeats:
            return ""
        return f"(the message before was repeated {self.repeats} more times: {self.key[2]})"

    def flush(self, logger: logging.Logger, quiet_s: float = 5.0) -> None:
        """Report a pending count once the repeats have stopped for ``quiet_s``."""
        with self.lock:
            if not self.repeats or time.monotonic() - self.last < quiet_s:
                return
            note, self.key, self.repeats = self._summary(), None, 0
        logger.handle(logger.makeRecord(logger.name, logging.WARNING, __file__, 0, note, (), None))


REPEATS = RepeatFilter()
_REPEAT_LOGGERS = ("asyncio", "uvicorn.error")


def install_repeat_filter() -> None:
    for name in _REPEAT_LOGGERS:
        logger = logging.getLogger(name)
        if REPEATS not in logger.filters:
            logger.addFilter(REPEATS)


def flush_repeats() -> None:
    # after flush() has cleared the key, the summary record passes the filter
    REPEATS.flush(logging.getLogger("uvicorn.error"))


class HttpServer:
    """uvicorn on pre-bound sockets, in a thread of the serve process."""

    def __init__(self, app: Starlette, sockets: list[socket.socket]) -> None:
        import uvicorn

        from holon_cli.serve.http.uvicorn_seam import (
            ConnectionGate,
            guarded_protocol_class,
            quiet_server,
        )

        self.fd_limit = raise_fd_limit()
        max_connections, header_timeout = serve_limits()
        self.cap = min(max_connections, connection_cap(self.fd_limit, len(sockets)))
        self.gate = ConnectionGate(self.cap, header_timeout)
        config = uvicorn.Config(
            app,
            http=guarded_protocol_class(self.gate, KEEP_ALIVE_S),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=3,
            server_header=False,
            # the gate caps connections; uvicorn's own limit would answer 503
            # to every request while dribblers fill the cap
            limit_concurrency=None,
            # X-Forwarded-For is believed only from serve.trusted_proxies
            # (serve/http/proxies.py), never by uvicorn from any loopback peer
            proxy_headers=False,
            backlog=ACCEPT_BACKLOG,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        install_repeat_filter()
        self.server = quiet_server(config, flush_repeats)
        self.sockets = sockets
        self.thread = threading.Thread(target=self._run, name="holon-http", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self.server.run(sockets=self.sockets)
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self.error = exc

    def start(self, timeout: float = 10.0) -> None:
        self.thread.start()
        import time

        end = time.monotonic() + timeout
        while not self.server.started and self.thread.is_alive() and time.monotonic() < end:
            time.sleep(0.01)
        if not self.server.started:
            raise RejectedError(
                f"the HTTP server did not start ({self.error or 'timeout'})",
                hint="see `holon daemon logs`",
            )

    def stop(self, timeout: float = 5.0) -> None:
        self.server.should_exit = True
        self.server.wake()
        self.thread.join(timeout)
