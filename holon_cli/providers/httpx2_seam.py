"""The one seam onto private names of httpx2 and its transport library
httpcore2 (pinned ``httpx2>=2.16,<3``, ``httpcore2>=2.16,<3``).

httpx2 builds a client's connection pools itself (the default transport's
and one per proxy mount it reads from the environment) and offers no public
way to give them a network backend. The per-attempt deadline
(:mod:`holon_cli.providers.http_session`) needs every socket of every pool to
go through one backend, so :class:`ClientPools` reaches, and only it:

- ``Client._transport`` and ``Client._mounts``: the client's transports;
- ``HTTPTransport._pool``: each transport's httpcore2 pool (``ConnectionPool``,
  or ``HTTPProxy``/``SOCKSProxy`` for a proxy mount);
- ``ConnectionPool._network_backend``: what the pool opens sockets with
  (httpcore2's pools take one as a public constructor argument, but httpx2
  builds them without it).

Why not build the transports ourselves: ``Client(transport=..., mounts=...)``
would need the proxy mounts httpx2 derives from ``HTTP_PROXY``/``NO_PROXY``
and friends, which only its private ``_utils`` computes.

The contract test is ``tests/providers/test_httpx2_seam.py``: it fails when an
httpx2 or httpcore2 release moves one of these names, and it shows a request
through a proxy mount reaching the wrapped backend.
"""

from __future__ import annotations

from collections.abc import Callable

import httpcore2
import httpx2


class ClientPools:
    """The connection pools of one ``httpx2.Client``: its default transport's
    and each proxy mount's (a mount of ``None`` has none)."""

    def __init__(self, client: httpx2.Client) -> None:
        transports = [client._transport, *client._mounts.values()]
        self.pools = [
            pool
            for pool in (getattr(t, "_pool", None) for t in transports if t is not None)
            if pool is not None
        ]

    def backends(self) -> list[httpcore2.NetworkBackend]:
        """Each pool's network backend, in pool order."""
        return [pool._network_backend for pool in self.pools]

    def wrap_backends(
        self, wrap: Callable[[httpcore2.NetworkBackend], httpcore2.NetworkBackend]
    ) -> None:
        """Every pool opens its sockets through ``wrap(its backend)`` from now
        on (call it before the client's first request)."""
        for pool in self.pools:
            pool._network_backend = wrap(pool._network_backend)
