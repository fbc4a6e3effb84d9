"""The home's record of each MCP server: ``$HOLON_HOME/mcp/servers/<name>.<key>.json``.

One snapshot per server *config* (``<key>``: :func:`.config.config_key`), so
agents sharing a server share its record, and an edited server starts a new
one. It holds:

- the tool list as the server gave it (``tools``: name, description,
  ``inputSchema`` byte for byte as JSON), the era found (``protocol``) and
  when it was listed: a turn offers the cached list without starting the
  server, and the prompt prefix stays byte-stable for the provider's cache;
- the state of the last use, check or refresh (``ok`` or ``failed`` with
  ``last_error``): ``holon mcp list`` and ``holon status`` read it, so a
  server that failed is shown, never silently dropped.

Writes are snapshots (temp file, fsync, rename) under a per-server lock; a
failure keeps the tools listed before. A record read is checked into
:class:`~holon_cli.model.mcp.McpServerRecord` (one that does not fit is a
damaged cache: ``None``). Light: ``holon status`` reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli import clock

if TYPE_CHECKING:
    from holon_cli.model.mcp import McpServerRecord
    from holon_cli.model.typed import JsonObject
    from holon_cli.runtime.mcp.config import ServerSpec
    from holon_cli.store.layout import HomeLayout

VERSION = 1
MAX_ERROR_CHARS = 500


def _layout(layout: HomeLayout | None) -> HomeLayout:
    if layout is not None:
        return layout
    from holon_cli.store.layout import HomeLayout

    return HomeLayout.current()


def path_of(spec: ServerSpec, layout: HomeLayout | None = None) -> Path:
    return _layout(layout).root / "mcp" / "servers" / f"{spec.name}.{spec.key}.json"


def read(spec: ServerSpec, layout: HomeLayout | None = None) -> McpServerRecord | None:
    """The server's record, or ``None`` (never used, or unreadable: a damaged
    record is only a cache and the state it held is ``unknown``)."""
    from holon_cli.model.mcp import McpServerRecord
    from holon_cli.model.typed import CheckError, check

    try:
        rec = check(json.loads(path_of(spec, layout).read_bytes()), McpServerRecord)
    except (OSError, ValueError, CheckError):
        return None
    return rec if rec["v"] == VERSION else None


def cached_tools(spec: ServerSpec, layout: HomeLayout | None = None) -> list[JsonObject] | None:
    """The tool list last listed for this server config (``None``: never listed)."""
    rec = read(spec, layout)
    return rec["tools"] if rec else None


def update(spec: ServerSpec, layout: HomeLayout | None = None, **fields: Any) -> McpServerRecord:
    """Merge ``fields`` into the record (created on first use) and write it."""
    from holon_cli.store.fsio import write_snapshot
    from holon_cli.store.locks import locked

    lay = _layout(layout)
    path = path_of(spec, lay)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with locked(path.with_suffix(".lock"), what=f"MCP server record {spec.name!r}"):
        rec: McpServerRecord = read(spec, lay) or {
            "v": VERSION,
            "name": spec.name,
            "key": spec.key,
            "transport": spec.transport,
            "tools": None,
        }
        from holon_cli.model.mcp import McpServerRecord
        from holon_cli.model.typed import check

        # what is written is checked as what is read (a caller's wrong field
        # fails here, not as a cache that never reads back)
        rec = check({**rec, **fields, "updated_at": clock.now_iso()}, McpServerRecord)
        write_snapshot(path, rec)
    return rec


def note_listed(
    spec: ServerSpec,
    protocol: str,
    tools: list[JsonObject],
    *,
    server_info: JsonObject | None = None,
    layout: HomeLayout | None = None,
) -> McpServerRecord:
    return update(
        spec,
        layout,
        state="ok",
        protocol=protocol,
        tools=tools,
        listed_at=clock.now_iso(),
        last_error=None,
        server_info=server_info,
    )


def note_ok(spec: ServerSpec, protocol: str, layout: HomeLayout | None = None) -> None:
    rec = read(spec, layout)
    if rec and rec.get("state") == "ok" and rec.get("protocol") == protocol:
        return  # nothing to write on a warm call
    update(spec, layout, state="ok", protocol=protocol, last_error=None)


def note_failed(spec: ServerSpec, error: str, layout: HomeLayout | None = None) -> None:
    update(spec, layout, state="failed", last_error=error[:MAX_ERROR_CHARS])


def remembered_protocol(spec: ServerSpec, layout: HomeLayout | None = None) -> str | None:
    """The era this server config answered with last time (``auto`` only)."""
    rec = read(spec, layout)
    return rec.get("protocol") if rec else None


def row(spec: ServerSpec, layout: HomeLayout | None = None) -> dict[str, object]:
    """The contract's ``servers[]`` row of ``holon mcp list`` (and ``status``)."""
    rec = read(spec, layout)
    tools = rec["tools"] if rec else None
    offered = None if tools is None else sum(1 for t in tools if spec.offers(str(t.get("name"))))
    state = (
        "disabled" if not spec.enabled else str((rec.get("state") if rec else None) or "unknown")
    )
    return {
        "name": spec.name,
        "transport": spec.transport,
        "state": state,
        "protocol": rec.get("protocol") if rec else None,
        "tools": offered,
        "last_error": rec.get("last_error") if rec else None,
        "required": spec.required,
        "listed_at": rec.get("listed_at") if rec else None,
        "updated_at": rec.get("updated_at") if rec else None,
    }
