"""The MCP SDK's modules without its packages' ``__init__`` (a seam over how
the ``mcp`` distribution is laid out, not over its API).

``mcp/__init__.py`` and ``mcp/client/__init__.py`` re-export the whole
SDK: the client package's ``Client`` pulls in ``mcp.server`` and with it
Starlette, uvicorn and sse-starlette, none of which a client uses. Of the
~550 ms a cold ``import mcp.client.session`` costs, about 170 ms is that.
:func:`light` puts the two packages in ``sys.modules`` as module objects
made from their own specs, with no code run, so importing a submodule
(``mcp.client.session``) runs only that submodule and what it imports.

Nothing is lost: the first attribute asked of such a package that it lacks
(``from mcp import ClientSession``, ``mcp.client.Client``, whoever asks)
runs its real ``__init__`` in it then, once. A process that imported
``mcp`` before is left as it is.

Contract (``tests/runtime/mcp/test_sdk_import.py``, in a fresh interpreter
each): after ``holon_cli.runtime.mcp.sdk`` is imported, ``mcp.server`` and
``starlette`` are not; ``from mcp import ...`` and ``mcp.client.Client``
still work and give the SDK's own objects. A release that moves the client
modules fails that test, not a user's turn.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType

PACKAGES = ("mcp", "mcp.client")
_lock = threading.RLock()  # a package's init may complete the other one


def light() -> None:
    """Register :data:`PACKAGES` without running their ``__init__`` (see the
    module docstring); a no-op for any already imported."""
    with _lock:
        for name in PACKAGES:
            if name in sys.modules:
                continue
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or spec.submodule_search_locations is None:
                return  # not the layout this seam knows: a plain import does the rest
            module = importlib.util.module_from_spec(spec)
            module.__dict__["__getattr__"] = _completer(module)
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)


def _completer(module: ModuleType) -> object:
    """The package's ``__getattr__``: runs its real ``__init__`` the first
    time a name it lacks is asked for, then answers from it."""

    def complete(name: str) -> object:
        spec = module.__spec__
        with _lock:
            if module.__dict__.get("__getattr__") is complete:
                del module.__dict__["__getattr__"]  # once, even if the init fails
                assert spec is not None and spec.loader is not None
                spec.loader.exec_module(module)
        try:
            return module.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None

    return complete
