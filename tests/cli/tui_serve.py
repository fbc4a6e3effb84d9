"""serve's real HTTP surface (``serve/http.build_app`` under uvicorn) on the
home's ``run/holon.sock``, in this process, for the console's tests; and a
turner thread standing in for serve's scheduler: it runs the same
``run_turn`` step with the scripted model whenever a message is queued.

Stopping the surface and starting it again on the same socket is what a
serve restart looks like to a client.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from holon_cli.serve.client import socket_path
from holon_cli.serve.http.app import HttpSettings, build_app
from holon_cli.serve.http.server import HttpServer


class Surface:
    """The HTTP surface on ``run/holon.sock`` (or ``path``: a DBOS worker's
    socket); ``stop()``/``start()`` again. ``runtime_status``: what
    ``/control/runtime/status`` answers (a real ``Host``'s, for daemon status)."""

    def __init__(
        self, path: Path | None = None, runtime_status: Callable[[], dict[str, Any]] | None = None
    ) -> None:
        self.path: Path = path or socket_path()
        self.runtime_status = runtime_status or (lambda: {"ok": True})
        self.server: HttpServer | None = None
        self.stopping = threading.Event()

    def start(self) -> Surface:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            os.unlink(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(self.path))
        sock.listen(16)
        self.stopping = threading.Event()
        app = build_app(
            HttpSettings(host="127.0.0.1", port=0, socket_path=str(self.path)),
            runtime_status=self.runtime_status,
            request_shutdown=lambda: None,
            stopping=self.stopping,
        )
        self.server = HttpServer(app, [sock])
        self.server.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # ends open event streams, as serve's drain does
        if self.server is not None:
            self.server.stop()
            for s in self.server.sockets:
                s.close()
            self.server = None
        if self.path.exists():
            os.unlink(self.path)


class Turner:
    """Runs a turn for ``agents`` whenever one has queued work."""

    def __init__(self, model: str, agents: tuple[str, ...] = ("main",)) -> None:
        self.model, self.agents = model, agents
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.errors: list[BaseException] = []

    def _loop(self) -> None:
        from holon_cli.errors import BusyError
        from holon_cli.runtime.turn import run_turn
        from holon_cli.tools.catalog import default_catalog

        catalog = default_catalog()
        while not self.done.is_set():
            for aid in self.agents:
                try:
                    run_turn(aid, cli_model=self.model, catalog=catalog)
                except BusyError:
                    pass
                except Exception as exc:  # noqa: BLE001 - reported by the test
                    self.errors.append(exc)
            time.sleep(0.05)

    def __enter__(self) -> Turner:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.done.set()
        self.thread.join(10)
