"""The light half of the ``mcp_servers`` config keys: the merge of an
agent's servers over the home's (``holon status`` reads it; the schema
checks in :mod:`holon_cli.store.config_schema` cost more than ``status``
and are not wanted there)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig, McpServerConfig

MCP_SERVER_NAME_RE = r"[a-z0-9_-]{1,32}"
MCP_PROTOCOLS = ("auto", "2026-07-28", "2025-11-25")
# the keys that say how a server is reached: an agent's entry naming a
# transport replaces all of them; the other keys merge key by key
MCP_STDIO_KEYS = ("command", "args", "env", "cwd")
MCP_HTTP_KEYS = ("url", "headers", "bearer_token_env")


def merged_mcp_servers(data: HolonConfig, agent_id: str | None) -> dict[str, McpServerConfig]:
    """The MCP servers of ``agent_id`` (``None``: the home-wide ones) as
    mappings: ``agents.<id>.mcp_servers.<name>`` over ``mcp_servers.<name>``
    key by key, except that an agent entry naming a transport (``command`` or
    ``url``) replaces every transport key of the home-wide entry."""
    base: dict[str, dict[str, object]] = {
        k: dict(v or {}) for k, v in (data.get("mcp_servers") or {}).items()
    }
    if agent_id is not None:
        agent = ((data.get("agents") or {}).get(agent_id) or {}).get("mcp_servers") or {}
        for name, over in agent.items():
            merged = dict(base.get(name) or {})
            if "command" in (over or {}) or "url" in (over or {}):
                for k in (*MCP_STDIO_KEYS, *MCP_HTTP_KEYS):
                    merged.pop(k, None)
            merged.update(over or {})
            base[name] = merged
    # entries of checked sections merged key by key: each still one server's keys
    return cast("dict[str, McpServerConfig]", base)
