"""The contract of ``serve/http/uvicorn_seam.py``: every private name of uvicorn
it relies on is still there and still behaves as the seam expects. An
uvicorn release that changes one fails here, naming it, before serve
misbehaves."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import h11
import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from holon_cli.serve.http.uvicorn_seam import (
    ConnectionGate,
    guarded_protocol_class,
    quiet_server,
)


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


class FakeTransport(asyncio.Transport):
    def __init__(self, sockname: Any = ("127.0.0.1", 1)) -> None:
        super().__init__()
        self.sockname = sockname
        self.closing = False
        self.aborted = False
        self.written = b""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": self.sockname, "peername": ("127.0.0.1", 2)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = self.aborted = True

    def close(self) -> None:
        self.closing = True

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def set_protocol(self, protocol: Any) -> None: ...


def test_the_private_names_the_seam_uses_exist() -> None:
    for name in (
        "connection_made",
        "connection_lost",
        "handle_events",
        "data_received",
        "on_response_complete",
        "timeout_keep_alive_handler",
        "_unset_keepalive_if_required",
    ):
        assert callable(getattr(H11Protocol, name, None)), f"H11Protocol.{name} is gone"
    params = inspect.signature(H11Protocol.__init__).parameters
    assert list(params)[1:4] == ["config", "server_state", "app_state"], params
    # the main loop the QuiteServer replaces, and what it calls
    assert inspect.iscoroutinefunction(uvicorn.Server.main_loop)
    assert inspect.iscoroutinefunction(uvicorn.Server.on_tick)
    assert list(inspect.signature(uvicorn.Server.on_tick).parameters) == ["self", "counter"]
    cfg_params = inspect.signature(uvicorn.Config.__init__).parameters
    for name in ("http", "limit_concurrency", "proxy_headers", "backlog", "timeout_keep_alive"):
        assert name in cfg_params, f"uvicorn.Config({name}=) is gone"


def _protocol(gate: ConnectionGate, loop: asyncio.AbstractEventLoop) -> Any:
    cls = guarded_protocol_class(gate, 5)
    config = uvicorn.Config(_app, http=cls, lifespan="off", proxy_headers=False)
    config.load()
    proto = cls(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    # the attributes the seam reads and sets on an instance
    for name in ("conn", "cycle", "transport", "loop", "connections", "timeout_keep_alive_task"):
        assert hasattr(proto, name), f"H11Protocol().{name} is gone"
    assert isinstance(proto.conn, h11.Connection)
    return proto


def test_the_head_clock_follows_h11_states() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        gate = ConnectionGate(cap=2, header_timeout=30)
        p = _protocol(gate, loop)
        t = FakeTransport()
        p.connection_made(t)
        lst = gate.listener(t)
        assert p in lst.open and p in lst.waiting  # waiting for a head
        p.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n")
        assert p in lst.waiting  # half a head: still waiting
        p.data_received(b"\r\n")
        assert p not in lst.waiting  # the head is in: the request is in progress
        for _ in range(20):
            await asyncio.sleep(0)
        assert t.written.startswith(b"HTTP/1.1 200")
        assert p in lst.waiting  # answered: waiting for the next head (keep-alive)
        p.connection_lost(None)
        assert p not in lst.open and p not in lst.waiting

    asyncio.run(go())


def test_the_gate_evicts_the_longest_waiting_then_refuses() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        gate = ConnectionGate(cap=2, header_timeout=30)
        a, b, c, d = (_protocol(gate, loop) for _ in range(4))
        ta, tb, tc, td = (FakeTransport() for _ in range(4))
        a.connection_made(ta)
        b.connection_made(tb)
        b.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # b is busy
        c.connection_made(tc)  # full: a waited longest for a head
        assert ta.aborted and not tb.aborted and not tc.aborted and gate.evicted == 1
        c.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        d.connection_made(td)  # full and everyone busy: refused at once
        assert td.aborted and gate.refused == 1
        d.connection_lost(None)  # a refused connection has nothing to undo
        a.connection_lost(None)
        for _ in range(20):
            await asyncio.sleep(0)
        assert gate.stats()["open"] == 2

    asyncio.run(go())


def test_the_head_timeout_aborts_a_waiting_connection() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        gate = ConnectionGate(cap=4, header_timeout=0.05)
        p = _protocol(gate, loop)
        t = FakeTransport()
        p.connection_made(t)
        p.data_received(b"GET / HT")
        await asyncio.sleep(0.2)
        assert t.aborted and gate.timed_out == 1
        p.connection_lost(None)

    asyncio.run(go())


@pytest.mark.parametrize("sockname", ["/run/holon.sock", ("127.0.0.1", 80), ("::1", 80, 0, 0)])
def test_each_listener_has_its_own_cap(sockname: Any) -> None:
    gate = ConnectionGate(cap=1, header_timeout=1)
    assert gate.listener(FakeTransport(sockname)) is gate.listener(FakeTransport(sockname))
    other = "/elsewhere.sock" if not isinstance(sockname, str) else ("127.0.0.1", 81)
    assert gate.listener(FakeTransport(other)) is not gate.listener(FakeTransport(sockname))


def test_quiet_server_is_an_uvicorn_server() -> None:
    ticks: list[int] = []
    srv = quiet_server(uvicorn.Config(_app, lifespan="off"), lambda: ticks.append(1))
    assert isinstance(srv, uvicorn.Server) and getattr(srv, "every_tick", None) is not None
    assert hasattr(srv, "started") and hasattr(srv, "should_exit")
