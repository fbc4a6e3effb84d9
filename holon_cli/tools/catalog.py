"""Imports every built-in tool module so their ``@tool`` registrations run.

Each tool family lives in its own module; add new modules to ``MODULES``.
"""

from __future__ import annotations

import importlib

MODULES = (
    "holon_cli.tools.exec_command",
    "holon_cli.tools.apply_patch",
    "holon_cli.tools.agent_tools",
    "holon_cli.tools.workitem_tools",
)

_loaded = False


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    for mod in MODULES:
        importlib.import_module(mod)
    _loaded = True
