"""Who is the client: the peer address of the connection, unless
``config.yaml`` ``serve.trusted_proxies`` names that peer, in which case the
address the proxy forwarded (``X-Forwarded-For``, else ``Forwarded``, else
``X-Real-IP``).

uvicorn's own proxy handling is off (``proxy_headers=False``): by default it
believes ``X-Forwarded-For`` from every loopback peer, so any local client
(or anything a local reverse proxy passes through unchanged) could pick the
address its requests are rate-limited under. Here a forwarding header from a
peer that is not a trusted proxy is ignored; from a trusted one, the
``X-Forwarded-For`` chain is read from the right (the entries proxies
appended) and the first address that is not itself a trusted proxy is the
client. A header that does not parse leaves the peer as the client.

Pure functions over strings: no starlette, no uvicorn.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@functools.lru_cache(maxsize=8)
def parse_trusted(entries: tuple[str, ...]) -> tuple[Network, ...]:
    """``serve.trusted_proxies`` as networks (an address is a /32 or /128);
    an entry that does not parse is dropped (the schema refuses it on load)."""
    out: list[Network] = []
    for e in entries:
        try:
            out.append(ipaddress.ip_network(str(e).strip(), strict=False))
        except ValueError:
            continue
    return tuple(out)


def _addr(text: str) -> Address | None:
    t = text.strip().strip('"')
    if t.startswith("[") and "]" in t:  # [v6] or [v6]:port
        t = t[1 : t.index("]")]
    elif t.count(":") == 1:  # v4:port
        t = t.split(":", 1)[0]
    try:
        a = ipaddress.ip_address(t)
    except ValueError:
        return None
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        return a.ipv4_mapped
    return a


def is_trusted(host: str, trusted: tuple[Network, ...]) -> bool:
    a = _addr(host)
    return a is not None and any(a in net for net in trusted)


def _forwarded_for(values: Iterable[str]) -> list[str]:
    """The ``for=`` parameters of RFC 7239 ``Forwarded`` headers, in order."""
    out: list[str] = []
    for value in values:
        for element in value.split(","):
            for pair in element.split(";"):
                name, sep, v = pair.partition("=")
                if sep and name.strip().lower() == "for":
                    out.append(v.strip())
    return out


def client_host(
    peer: str,
    header: Callable[[str], list[str]],
    trusted: tuple[Network, ...],
) -> str:
    """The client address of a request whose connection's peer is ``peer``;
    ``header(name)`` returns every value of a request header (lower-case name)."""
    if not trusted or not is_trusted(peer, trusted):
        return peer
    chain: list[str] = []
    xff = header("x-forwarded-for")
    if xff:
        chain = [p for v in xff for p in v.split(",")]
    else:
        fwd = header("forwarded")
        if fwd:
            chain = _forwarded_for(fwd)
        else:
            real = header("x-real-ip")
            chain = real[-1:] if real else []
    if not chain:
        return peer
    for entry in reversed(chain):
        a = _addr(entry)
        if a is None:
            return peer  # a garbled hop: believe nothing of the chain
        if not any(a in net for net in trusted):
            return str(a)
    a = _addr(chain[0])
    return str(a) if a is not None else peer
