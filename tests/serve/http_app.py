"""An in-process ``holon serve`` HTTP app for route tests (starlette's
TestClient: no socket, no uvicorn), as a loopback client on 127.0.0.1:7878."""

from __future__ import annotations

import threading
import warnings
from typing import Any

from starlette.applications import Starlette

with warnings.catch_warnings():  # starlette asks for httpx2 here; httpx is what is installed
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from holon_cli.serve.http.app import HttpSettings, build_app

PORT = 7878
BASE = f"http://127.0.0.1:{PORT}"


def make_app(
    *, token: str | None = None, advertise: str | None = None, shutdowns: list[int] | None = None
) -> Starlette:
    settings = HttpSettings(host="127.0.0.1", port=PORT, token=token, advertise=advertise)

    def status() -> dict[str, Any]:
        return {"pid": 1}

    def shutdown() -> None:
        if shutdowns is not None:
            shutdowns.append(1)

    return build_app(
        settings, runtime_status=status, request_shutdown=shutdown, stopping=threading.Event()
    )


def client_for(app: Starlette, client_addr: str = "127.0.0.1") -> TestClient:
    return TestClient(
        app, base_url=BASE, client=(client_addr, 50000), raise_server_exceptions=False
    )


def make_client(
    *,
    token: str | None = None,
    advertise: str | None = None,
    client_addr: str = "127.0.0.1",
    shutdowns: list[int] | None = None,
) -> TestClient:
    app = make_app(token=token, advertise=advertise, shutdowns=shutdowns)
    return client_for(app, client_addr)
