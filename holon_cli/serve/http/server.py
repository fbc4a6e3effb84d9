"""The uvicorn server of ``holon serve``: run on pre-bound sockets in a thread
of the serve process, with a main loop that idles at one wake-up a second.

Open connections cannot starve the turns of file descriptors: serve raises
its soft ``RLIMIT_NOFILE`` to the hard limit at start, answers requests 503
beyond :func:`connection_cap` open connections (uvicorn's
``limit_concurrency``), closes at once a connection beyond that plus a small
margin, and closes one that sends no request within the keep-alive timeout.
A message the server logs again and again (``accept()`` out of descriptors,
a failing client) is written once, then once more with its count.

uvicorn is imported inside the functions that need it, not with this module.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from holon_cli.errors import RejectedError

if TYPE_CHECKING:
    from starlette.applications import Starlette

TICK_S = 1.0
KEEP_ALIVE_S = 5  # idle connection (before a request or between two) is closed
MAX_CONNECTIONS = 1000
CAP_MARGIN = 16  # connections past the cap kept just long enough to answer 503
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


def connection_cap(fd_limit: int) -> int:
    """Open HTTP connections served at once: at most half the descriptors
    left after a reserve and two accept batches in flight, so the turns
    always have the other half."""
    spare = fd_limit - FD_RESERVE - 2 * ACCEPT_BACKLOG
    return max(8, min(MAX_CONNECTIONS, spare // 2 - CAP_MARGIN))


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


@functools.cache
def _capped_protocol_class(cap: int) -> type[Any]:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class CappedProtocol(H11Protocol):
        """h11 with a hard connection cap and a first-request timeout."""

        def connection_made(self, transport: Any) -> None:
            if len(self.connections) >= cap + CAP_MARGIN:
                transport.abort()  # no fd held for it; the client sees a reset
                return
            super().connection_made(transport)
            # uvicorn starts its keep-alive timer only after a response: an
            # idle new connection would hold its descriptor for ever
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

        def connection_lost(self, exc: Exception | None) -> None:
            if self.transport is None:
                return  # refused in connection_made: nothing was set up
            super().connection_lost(exc)

    return CappedProtocol


@functools.cache
def _quiet_server_class() -> type[Any]:
    import asyncio

    import uvicorn

    class QuietServer(uvicorn.Server):
        """uvicorn's main loop wakes every 0.1 s to look at ``should_exit`` and
        refresh the Date header: 10 event-loop turns a second, about a third of
        an idle serve's CPU (measured). This one wakes once a second (the Date
        header's resolution anyway) or at once when :meth:`wake` is called."""

        _wake_event: asyncio.Event | None = None
        _loop: asyncio.AbstractEventLoop | None = None

        async def main_loop(self) -> None:
            self._loop = asyncio.get_running_loop()
            self._wake_event = asyncio.Event()
            counter = 0
            should_exit = await self.on_tick(counter)
            while not should_exit:
                try:
                    await asyncio.wait_for(self._wake_event.wait(), TICK_S)
                except TimeoutError:
                    pass
                # on_tick refreshes the Date header when counter % 10 == 0:
                # every tick here is a second
                counter = (counter + 10) % 864000
                flush_repeats()
                should_exit = await self.on_tick(counter)

        def wake(self) -> None:
            """Thread-safe: make the main loop look at ``should_exit`` now."""
            loop, ev = self._loop, self._wake_event
            if loop is not None and ev is not None:
                try:
                    loop.call_soon_threadsafe(ev.set)
                except RuntimeError:  # the loop is closed: it has stopped already
                    pass

    return QuietServer


def quiet_server(config: Any) -> Any:
    """A ``QuietServer`` (uvicorn is imported here, not with this module)."""
    return _quiet_server_class()(config)


class HttpServer:
    """uvicorn on pre-bound sockets, in a thread of the serve process."""

    def __init__(self, app: Starlette, sockets: list[socket.socket]) -> None:
        import uvicorn

        self.fd_limit = raise_fd_limit()
        self.cap = connection_cap(self.fd_limit)
        config = uvicorn.Config(
            app,
            http=_capped_protocol_class(self.cap),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=3,
            server_header=False,
            limit_concurrency=self.cap,
            backlog=ACCEPT_BACKLOG,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        install_repeat_filter()
        self.server = quiet_server(config)
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
