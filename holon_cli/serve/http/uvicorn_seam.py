"""The one place that touches uvicorn's private names (its h11 protocol
class and attributes, its server's main loop). ``tests/serve/
test_uvicorn_seam.py`` is the contract test: it fails when an uvicorn
release renames or reshapes anything used here, before serve does.

What is built on them:

- :func:`guarded_protocol_class`: uvicorn's h11 protocol with the guards
  uvicorn does not have (issue 35 item 6). A connection must send a whole
  request head within ``header_timeout`` of being opened (or of its last
  response): uvicorn cancels its keep-alive timer on the first byte, so one
  byte a second held a connection for ever. Each listener (the TCP address,
  the Unix socket) holds at most ``cap`` connections; at the cap a new
  connection takes the place of the connection that has waited longest for
  a request head (a dribbler, or an idle keep-alive), and when every
  connection has a request in progress the new one is refused at once
  (reset). So connections that never finish a head cannot keep a request
  that does from being served, and the open requests are never cut. A
  request whose body has not all arrived within ``BODY_FACTOR`` times the
  head timeout of its head is closed too (a dribbled body would otherwise
  hold its slot, and its handler, for ever).
- :func:`quiet_server`: uvicorn's server with a main loop that wakes once a
  second instead of ten times (a third of an idle serve's CPU).

uvicorn is imported inside the functions, not with this module.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

TICK_S = 1.0
BODY_FACTOR = 6  # a request body must arrive within 6 x serve.header_timeout


class Listener:
    """The connections of one listening socket: all of them, and those
    waiting for a request head (oldest first)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.open: set[Any] = set()
        self.waiting: OrderedDict[Any, None] = OrderedDict()


class ConnectionGate:
    """Caps and head timeouts shared by every connection of one server.
    Used from the server's event loop only (no lock)."""

    def __init__(self, cap: int, header_timeout: float) -> None:
        self.cap = cap
        self.header_timeout = header_timeout
        self.listeners: dict[str, Listener] = {}
        self.body_timeout = header_timeout * BODY_FACTOR
        self.refused = 0  # new connections reset at the cap
        self.evicted = 0  # waiting connections closed to make room
        self.timed_out = 0  # connections closed by the head timeout
        self.body_timed_out = 0  # requests closed by the body timeout

    def listener(self, transport: Any) -> Listener:
        name = transport.get_extra_info("sockname")
        key = name if isinstance(name, str) else repr(tuple(name or ())[:2])
        lst = self.listeners.get(key)
        if lst is None:
            lst = self.listeners[key] = Listener(self.cap)
        return lst

    def admit(self, lst: Listener, conn: Any) -> bool:
        """Room for ``conn`` on its listener: True, having closed the
        connection that waited longest for a head if the listener was full;
        False when every connection there has a request in progress."""
        if len(lst.open) >= lst.cap:
            if not lst.waiting:
                self.refused += 1
                return False
            victim, _ = lst.waiting.popitem(last=False)
            lst.open.discard(victim)
            self.evicted += 1
            victim.evict()
        lst.open.add(conn)
        return True

    def stats(self) -> dict[str, int]:
        return {
            "open": sum(len(lst.open) for lst in self.listeners.values()),
            "waiting_for_head": sum(len(lst.waiting) for lst in self.listeners.values()),
            "refused": self.refused,
            "evicted": self.evicted,
            "header_timeouts": self.timed_out,
            "body_timeouts": self.body_timed_out,
        }


class _HeadClock:
    """The guards' clocks, mixed into uvicorn's h11 protocol by
    :func:`guarded_protocol_class` (which sets the class attributes): the
    head clock (a request head must arrive within the gate's
    ``header_timeout``) and the body clock (its body within
    ``body_timeout``). Reads the protocol's ``conn`` (h11), ``cycle``,
    ``transport`` and ``loop``."""

    _gate: ConnectionGate
    _idle: Any  # h11.IDLE and h11.SEND_BODY (h11 is imported with uvicorn)
    _send_body: Any
    _lst: Listener | None = None
    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    conn: Any
    cycle: Any
    transport: Any
    loop: Any

    def _waiting_for_head(self) -> bool:
        cycle = self.cycle
        return self.conn.their_state is self._idle and (cycle is None or cycle.response_complete)

    def _sync_head(self) -> None:
        """Start the head clock when the connection waits for a request
        head, stop it once the head is in (or the connection is done)."""
        lst = self._lst
        if lst is None or self.transport is None:
            return
        waiting = not self.transport.is_closing() and self._waiting_for_head()
        if waiting and self._head_timer is None:
            self._head_timer = self.loop.call_later(self._gate.header_timeout, self._head_timeout)
            lst.waiting[self] = None
        elif not waiting and self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
            lst.waiting.pop(self, None)
        in_body = self.conn.their_state is self._send_body and not self.transport.is_closing()
        if in_body and self._body_timer is None:
            self._body_timer = self.loop.call_later(self._gate.body_timeout, self._body_timeout)
        elif not in_body and self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timeout(self) -> None:
        self._body_timer = None
        if self.conn.their_state is self._send_body and not self.transport.is_closing():
            self._gate.body_timed_out += 1
            self.transport.abort()

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self._lst is not None:
            self._lst.waiting.pop(self, None)
        if self._waiting_for_head() and not self.transport.is_closing():
            self._gate.timed_out += 1
            self.transport.abort()

    def evict(self) -> None:
        """Closed to make room for a new connection (the gate has
        already forgotten it)."""
        self._lst = None
        self._cancel_timers()
        self.transport.abort()

    def _cancel_timers(self) -> None:
        for name in ("_head_timer", "_body_timer"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)


def guarded_protocol_class(gate: ConnectionGate, keep_alive_s: float) -> type[Any]:
    """uvicorn's h11 protocol under ``gate`` (a class per server: the gate is
    its class attribute), its clocks in :class:`_HeadClock`."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedProtocol(_HeadClock, H11Protocol):
        _gate = gate
        _idle = h11.IDLE
        _send_body = h11.SEND_BODY

        def connection_made(self, transport: Any) -> None:
            lst = self._gate.listener(transport)
            if not self._gate.admit(lst, self):
                transport.abort()  # no descriptor held for it: the client sees a reset
                return
            self._lst = lst
            super().connection_made(transport)
            # uvicorn starts its keep-alive timer only after a response: an
            # idle new connection would hold its descriptor for ever
            self.timeout_keep_alive_task = self.loop.call_later(
                keep_alive_s, self.timeout_keep_alive_handler
            )
            self._sync_head()

        # ------------------------------------------- uvicorn's hooks

        def handle_events(self) -> None:
            super().handle_events()
            self._sync_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._sync_head()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.transport is None:
                return  # refused in connection_made: nothing was set up
            lst = self._lst
            if lst is not None:
                lst.open.discard(self)
                lst.waiting.pop(self, None)
                self._lst = None
            self._cancel_timers()
            super().connection_lost(exc)

    return GuardedProtocol


@functools.cache
def _quiet_server_class() -> type[Any]:
    import uvicorn

    class QuietServer(uvicorn.Server):
        """uvicorn's main loop wakes every 0.1 s to look at ``should_exit`` and
        refresh the Date header: 10 event-loop turns a second, about a third of
        an idle serve's CPU (measured). This one wakes once a second (the Date
        header's resolution anyway) or at once when :meth:`wake` is called."""

        _wake_event: asyncio.Event | None = None
        _loop: asyncio.AbstractEventLoop | None = None
        every_tick: Callable[[], None] | None = None

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
                if self.every_tick is not None:
                    self.every_tick()
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


def quiet_server(config: Any, every_tick: Callable[[], None] | None = None) -> Any:
    """A ``QuietServer`` calling ``every_tick`` once a second (uvicorn is
    imported here, not with this module)."""
    server = _quiet_server_class()(config)
    server.every_tick = every_tick
    return server
