"""The uvicorn server of ``holon serve``: run on pre-bound sockets in a thread
of the serve process, with a main loop that idles at one wake-up a second.

uvicorn is imported inside the functions that need it, not with this module.
"""

from __future__ import annotations

import functools
import socket
import threading
from typing import TYPE_CHECKING, Any

from holon_cli.errors import RejectedError

if TYPE_CHECKING:
    from starlette.applications import Starlette

TICK_S = 1.0


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

        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=3,
            server_header=False,
        )
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
