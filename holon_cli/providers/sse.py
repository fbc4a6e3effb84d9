"""Server-sent events: reading ``text/event-stream`` lines into events, and
the JSON payloads of those events for the streaming parsers.

Pure parsing (no I/O): :mod:`holon_cli.providers.http_common`
feeds it the response lines. Invariant: an event half-written when the
stream ends is dropped, never dispatched, so a parser notices that its
terminal event never arrived.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from holon_cli.providers.base import ProviderFailure


class SSEEvent(NamedTuple):
    """One server-sent event: ``event`` name (may be absent) and joined ``data``."""

    event: str | None
    data: str
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def iter_sse(lines: Iterable[str]) -> Iterator[SSEEvent]:
    """Parse event-stream lines (without line terminators) into events.

    Comments (``:``-lines, used as keep-alive pings) and unknown fields are
    ignored. An event still pending at end of input is dispatched only if its
    data is complete JSON or ``[DONE]`` (a server that omits the final blank
    line); a half-written event is dropped, so the caller sees that its
    terminal event never arrived.
    """
    event: str | None = None
    data: list[str] = []
    ev_id: str | None = None
    for line in lines:
        line = line.rstrip("\r\n")
        if not line:
            if data:
                yield SSEEvent(event, "\n".join(data), ev_id)
            event, data, ev_id = None, [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id":
            ev_id = value
    if data:
        joined = "\n".join(data)
        if joined.strip() == "[DONE]":
            yield SSEEvent(event, joined, ev_id)
            return
        try:
            json.loads(joined)
        except json.JSONDecodeError:
            return
        yield SSEEvent(event, joined, ev_id)


class JsonEventStream:
    """The JSON payloads of an event stream, for the streaming parsers.

    Skips events with empty data, ends at ``[DONE]`` (then ``done`` is true),
    and rejects a payload that is not JSON as ``invalid_response``; ``count``
    is how many payloads were parsed, for "stream ended after N" messages.
    """

    def __init__(self, events: Iterable[SSEEvent], label: str = "event") -> None:
        self._events = events
        self.label = label
        self.count = 0
        self.done = False

    def __iter__(self) -> Iterator[tuple[SSEEvent, Any]]:
        for ev in self._events:
            data = ev.data.strip()
            if not data:
                continue
            if data == "[DONE]":
                self.done = True
                return
            try:
                obj = json.loads(data)
            except json.JSONDecodeError as exc:
                name = f" ({ev.event or 'unnamed'})" if self.label == "event" else ""
                raise ProviderFailure(
                    "invalid_response",
                    f"{self.label} {self.count + 1}{name} is not JSON: {exc.msg}; "
                    f"data starts: {data[:120]!r}",
                    stage="stream",
                ) from None
            self.count += 1
            yield ev, obj
