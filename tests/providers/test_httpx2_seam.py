"""Contract test of ``providers/httpx2_seam.py``, the one module touching
httpx2's and httpcore2's private names: each name it reaches still exists
with the shape it relies on, and a socket of the direct pool and of a proxy
mount's pool opens through the backend it installs. An httpx2 release that
moves one fails here, naming it, not as a request without its deadline."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2
import pytest
from loopback import LoopbackServer, Reply

from holon_cli.providers.httpx2_seam import ClientPools


class CountingBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self.inner = inner
        self.connects: list[tuple[str, int]] = []

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        self.connects.append((host, port))
        return self.inner.connect_tcp(host, port, timeout, local_address, socket_options)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        return self.inner.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)
    monkeypatch.setenv("no_proxy", "")
    monkeypatch.setenv("NO_PROXY", "")


def test_the_private_names_it_reaches_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_proxy_env(monkeypatch)
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    with httpx2.Client(trust_env=True) as c:
        assert isinstance(c._transport, httpx2.HTTPTransport)
        assert isinstance(c._mounts, dict) and len(c._mounts) == 2
        for transport in [c._transport, *c._mounts.values()]:
            assert isinstance(transport, httpx2.HTTPTransport)
            assert isinstance(transport._pool, httpcore2.ConnectionPool)  # HTTPProxy is one
            assert isinstance(transport._pool._network_backend, httpcore2.NetworkBackend)
    # the pools take a backend, and keep it under that name
    assert "network_backend" in inspect.signature(httpcore2.ConnectionPool).parameters
    backend = httpcore2.SyncBackend()
    assert httpcore2.ConnectionPool(network_backend=backend)._network_backend is backend


def test_every_pool_is_found_and_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_proxy_env(monkeypatch)
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    with httpx2.Client(trust_env=True) as c:
        pools = ClientPools(c)
        assert len(pools.pools) == 3  # direct, http://, https://
        before = pools.backends()
        pools.wrap_backends(CountingBackend)
        after = pools.backends()
        assert all(isinstance(b, CountingBackend) for b in after)
        assert [b.inner for b in after if isinstance(b, CountingBackend)] == before


def test_a_direct_request_opens_its_socket_through_the_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_proxy_env(monkeypatch)
    with LoopbackServer() as srv, httpx2.Client(trust_env=True) as c:
        srv.queue(Reply.json_body({"ok": True}))
        pools = ClientPools(c)
        assert len(pools.pools) == 1
        pools.wrap_backends(CountingBackend)
        (backend,) = pools.backends()
        assert c.get(srv.url + "/x").json() == {"ok": True}
        assert isinstance(backend, CountingBackend)
        assert backend.connects == [("127.0.0.1", srv.port)]


def test_a_proxied_request_opens_its_socket_through_the_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proxy mount's pool (httpcore2's ``HTTPProxy``) connects to the
    proxy through the wrapped backend too."""
    _no_proxy_env(monkeypatch)
    with LoopbackServer() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        with httpx2.Client(trust_env=True) as c:
            proxy.queue(Reply.json_body({"via": "proxy"}))
            pools = ClientPools(c)
            pools.wrap_backends(CountingBackend)
            assert c.get("http://model.invalid/v1").json() == {"via": "proxy"}
            connects = [b.connects for b in pools.backends() if isinstance(b, CountingBackend)]
            assert [("127.0.0.1", proxy.port)] in connects
            assert proxy.requests[0].path == "http://model.invalid/v1"
