"""The home's record of one MCP server (``$HOLON_HOME/mcp/servers/<name>.<key>.json``,
:mod:`holon_cli.runtime.mcp.records`): pure types."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class McpServerRecord(TypedDict):
    """One server config's snapshot: the tool list as the server gave it
    (``tools``: ``None`` until listed) and the state of its last use."""

    v: int
    name: str
    key: str
    transport: str
    tools: list[dict[str, Any]] | None
    updated_at: NotRequired[str]
    state: NotRequired[Literal["ok", "failed"]]
    protocol: NotRequired[str]
    listed_at: NotRequired[str]
    last_error: NotRequired[str | None]
    server_info: NotRequired[dict[str, Any] | None]
