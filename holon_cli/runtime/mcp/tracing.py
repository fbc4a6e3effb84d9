"""The tracing hook of the MCP plane: the ``_meta`` each request carries.

With tracing on, every MCP request carries the W3C ``traceparent`` (and
``tracestate``) of the span it belongs to in ``_meta``, unprefixed as the
MCP conventions say (the contract's Observability part): the tracing
plane's :func:`holon_cli.runtime.telemetry.trace_meta`, read on the calling
thread, where the tool call's ``execute_tool`` span is current. Off, it is
``{}`` and requests carry no ``_meta``. :data:`META_PROVIDER`, when set,
replaces it (tests).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from holon_cli.model.typed import JsonObject

META_PROVIDER: Callable[[], JsonObject | None] | None = None


def request_meta() -> JsonObject | None:
    """The ``_meta`` of the next MCP request (``None``: none)."""
    if META_PROVIDER is not None:
        return META_PROVIDER()
    from holon_cli.runtime import telemetry

    return dict(telemetry.trace_meta()) or None
