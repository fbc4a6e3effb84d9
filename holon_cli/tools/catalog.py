"""The built-in tool catalog: imports every tool module so their ``@tool``
registrations run, and hands the turn loop one :class:`ToolCatalog` value.

The turn loop takes the catalog as an argument and never imports the tool
modules itself (tools call runtime planes; the runtime does not call tools
by name). Each tool family lives in its own module; add new modules to
``MODULES``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from holon_cli.providers.base import ToolSpec
    from holon_cli.tools.base import ToolDef

MODULES = (
    "holon_cli.tools.exec_command",
    "holon_cli.tools.apply_patch",
    "holon_cli.tools.agent_tools",
    "holon_cli.tools.workitem_tools",
    "holon_cli.tools.task_tools",
    "holon_cli.tools.wait_tools",
)

_loaded = False


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    for mod in MODULES:
        importlib.import_module(mod)
    _loaded = True


@dataclass(frozen=True)
class ToolCatalog:
    """The tools one turn offers: definitions by name, their provider specs
    (in registration order) and per-tool prompt guidance."""

    defs: dict[str, ToolDef]
    specs: list[ToolSpec]
    guidance: dict[str, str]

    def get(self, name: str) -> ToolDef | None:
        return self.defs.get(name)


_default: ToolCatalog | None = None


def default_catalog() -> ToolCatalog:
    """Every built-in tool (built once per process)."""
    global _default
    if _default is None:
        from holon_cli.tools.base import registry

        defs = registry()
        _default = ToolCatalog(
            defs=defs,
            specs=[d.spec() for d in defs.values()],
            guidance={d.name: d.guidance for d in defs.values() if d.guidance},
        )
    return _default
