"""The tracing hook of the MCP plane: the ``_meta`` each request carries.

With tracing on, every MCP request carries the W3C ``traceparent`` of the
span it belongs to in ``_meta`` (the contract's Observability part). The
tracing plane (``runtime/telemetry/``) fills :data:`META_PROVIDER` with a
function returning that dict (``{"traceparent": "00-..."}``) or ``None``
when tracing is off; until it does, requests carry no ``_meta``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

META_PROVIDER: Callable[[], dict[str, Any] | None] | None = None


def request_meta() -> dict[str, Any] | None:
    """The ``_meta`` of the next MCP request (``None``: none)."""
    if META_PROVIDER is None:
        return None
    return META_PROVIDER()
