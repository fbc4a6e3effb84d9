"""An agent's MCP servers as values: ``mcp_servers.<name>`` merged with
``agents.<id>.mcp_servers.<name>`` (the config schema checked both at load).

Light on purpose: ``holon status`` reads this (no dataclasses, no hashlib:
the config key is a SHA-256 through :mod:`holon_cli.digest`).

The *config key* of a server is a digest of what decides which tools it
lists and how it is reached (transport, command, arguments, environment,
folder, URL, headers, protocol): the tool-list cache and the live connections
are keyed by it, so editing a server's command lists it again, while
``enabled_tools``, ``required`` or the timeouts (which only change what is
offered or how long holon waits) keep the cache.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from holon_cli.errors import NotFoundError

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig, McpServerConfig

Transport = Literal["stdio", "http"]
PREFIX = "mcp__"
# what providers accept as a tool name (OpenAI: ^[a-zA-Z0-9_-]{1,64}$)
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")
MAX_TOOL_NAME = 64
DEFAULT_STARTUP_S = 10.0
DEFAULT_TOOL_S = 60.0


class ServerSpec(NamedTuple):
    name: str
    transport: Transport
    command: str | None
    args: tuple[str, ...]
    env: dict[str, str]
    cwd: str | None
    url: str | None
    headers: dict[str, str]
    bearer_token_env: str | None
    enabled: bool
    required: bool
    startup_timeout_s: float
    tool_timeout_s: float
    enabled_tools: tuple[str, ...] | None
    disabled_tools: tuple[str, ...]
    protocol: str  # auto | 2026-07-28 | 2025-11-25
    network: bool | None  # a sandboxed stdio server: None follows execution.network
    key: str

    def offers(self, tool: str) -> bool:
        """Whether ``tool`` is offered to the model (``enabled_tools``, ``disabled_tools``)."""
        if tool in self.disabled_tools:
            return False
        return self.enabled_tools is None or tool in self.enabled_tools


def _seconds(raw: Any, default: float) -> float:
    if raw is None:
        return default
    from holon_cli.clock import parse_duration

    return parse_duration(str(raw))


def config_key(server: McpServerConfig) -> str:
    from holon_cli.digest import sha256_hex

    keep = ("command", "args", "env", "cwd", "url", "headers", "bearer_token_env", "protocol")
    canon = json.dumps({k: server.get(k) for k in keep}, sort_keys=True, separators=(",", ":"))
    return sha256_hex(canon.encode("utf-8"))[:16]


def spec_of(name: str, server: McpServerConfig) -> ServerSpec:
    stdio = server.get("command") is not None
    net = server.get("network")
    enabled_tools = server.get("enabled_tools")
    return ServerSpec(
        name=name,
        transport="stdio" if stdio else "http",
        command=server.get("command"),
        args=tuple(str(a) for a in server.get("args") or ()),
        env={str(k): str(v) for k, v in (server.get("env") or {}).items()},
        cwd=server.get("cwd"),
        url=server.get("url"),
        headers={str(k): str(v) for k, v in (server.get("headers") or {}).items()},
        bearer_token_env=server.get("bearer_token_env"),
        enabled=server.get("enabled") is not False,
        required=server.get("required") is True,
        startup_timeout_s=_seconds(server.get("startup_timeout"), DEFAULT_STARTUP_S),
        tool_timeout_s=_seconds(server.get("tool_timeout"), DEFAULT_TOOL_S),
        enabled_tools=None if enabled_tools is None else tuple(enabled_tools),
        disabled_tools=tuple(server.get("disabled_tools") or ()),
        protocol=str(server.get("protocol") or "auto"),
        network=None if net is None else net in (True, "on"),
        key=config_key(server),
    )


def configured(cfg: HolonConfig, agent_id: str | None) -> bool:
    """Whether the agent has any MCP server configured (enabled or not)."""
    if cfg.get("mcp_servers"):
        return True
    if agent_id is None:
        return False
    agent = (cfg.get("agents") or {}).get(agent_id) or {}
    return bool(agent.get("mcp_servers"))


def servers_for(cfg: HolonConfig, agent_id: str | None) -> list[ServerSpec]:
    """The agent's servers, by name (``None``: the home-wide ones)."""
    if not configured(cfg, agent_id):
        return []
    from holon_cli.store.config_mcp import merged_mcp_servers

    merged = merged_mcp_servers(cfg, agent_id)
    return [spec_of(name, merged[name]) for name in sorted(merged)]


def find(cfg: HolonConfig, agent_id: str | None, name: str) -> ServerSpec:
    """One server by name; an unknown name is a :class:`NotFoundError` (exit 3)."""
    specs = servers_for(cfg, agent_id)
    for s in specs:
        if s.name == name:
            return s
    known = ", ".join(s.name for s in specs)
    who = f" for agent {agent_id!r}" if agent_id else ""
    raise NotFoundError(
        f"no MCP server named {name!r} is configured{who}",
        hint=(
            f"configured: {known}; `holon mcp list` shows them"
            if known
            else "add one under `mcp_servers:` in config.yaml (see the README's MCP section)"
        ),
        details={"server": name},
    )


def tool_name(server: str, tool: str) -> str:
    """The model-facing name ``mcp__<server>__<tool>``. Characters a provider
    refuses become ``_``; a name over 64 characters is cut and ends with a
    digest of the full one, so two long names never collide."""
    name = PREFIX + server + "__" + _NAME_OK.sub("_", tool)
    if len(name) <= MAX_TOOL_NAME:
        return name
    from holon_cli.digest import sha256_hex

    tail = sha256_hex(f"{server}\x00{tool}".encode())[:8]
    return name[: MAX_TOOL_NAME - 9] + "_" + tail
