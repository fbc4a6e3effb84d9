"""MCP servers' tools as model-facing tools: an adapter, not a tool module.

:class:`McpToolbox` wraps the built-in catalog for one agent: its specs are
the built-in ones followed by each offered MCP tool as
``mcp__<server>__<tool>`` with the server's description and input schema as
given (no ``$ref`` dereferencing), and ``execute`` runs a call of one of
them through :mod:`holon_cli.runtime.mcp.calls`; anything else goes to the
built-in catalog. The turn loop sees a :class:`~holon_cli.model.tool.Toolbox`
and never learns MCP's name.

The envelope of a call: ``{"ok", "server", "tool", "is_error", "result"}``
(``result``: the content as text, fenced as evidence, bounded; the rest
saved as an artifact listed in ``artifacts``). A timeout or a dead server
is a tool error (``mcp_timeout``, ``mcp_unavailable``), never a failed
turn. An ``input_required`` answer (or a legacy elicitation request) opens
an operator request; the model is told the result will arrive as an
``mcp_result`` message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from holon_cli.model.tool import ToolEffects, ToolResult, render_error

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.provider import ToolCall, ToolSpec
    from holon_cli.model.tool import Toolbox, ToolContext
    from holon_cli.model.typed import JsonObject
    from holon_cli.runtime.mcp.calls import OfferedTool
    from holon_cli.runtime.mcp.shapes import ToolProblem
    from holon_cli.store.agent_store import AgentStore


def _input_schema(tool: JsonObject) -> JsonObject:
    """The tool's ``inputSchema`` as offered (an object that takes anything
    when the server gave none)."""
    schema = tool.get("inputSchema")
    return dict(schema) if isinstance(schema, dict) and schema else {"type": "object"}


class McpToolbox:
    """The built-in tools plus one agent's MCP tools."""

    def __init__(
        self,
        base: Toolbox,
        offered: list[OfferedTool],
        problems: list[ToolProblem],
        cfg: HolonConfig,
    ) -> None:
        from holon_cli.model.provider import ToolSpec

        self.base = base
        self.cfg = cfg
        self.problems = problems
        self._tools = {t.name: t for t in offered}
        mcp_specs = [
            ToolSpec(
                t.name,
                str(t.tool.get("description") or t.tool.get("title") or "")
                or f"Tool {t.tool.get('name')} of MCP server {t.spec.name}.",
                _input_schema(t.tool),
            )
            for t in offered
        ]
        self.specs: list[ToolSpec] = [*base.specs, *mcp_specs]
        self.guidance: dict[str, str] = dict(base.guidance)
        # the source of each MCP tool (`holon debug prompt`: source "mcp:<server>")
        self.sources = {t.name: f"mcp:{t.spec.name}" for t in offered}

    def for_agent(self, store: AgentStore, cfg: HolonConfig, *, start: bool = True) -> Toolbox:
        return bind(self.base, store, cfg, start=start, warm=getattr(self.base, "warm", False))

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        offered = self._tools.get(call.name)
        if offered is None:
            return self.base.execute(ctx, call)
        ctx.report = ToolEffects()
        try:
            return _run(ctx, call, offered, self.cfg)
        except Exception as exc:  # noqa: BLE001 - a tool failure is a result, never the turn's
            return _error(call.name, "tool_internal_error", f"{type(exc).__name__}: {exc}")


def bind(
    base: Toolbox,
    store: AgentStore,
    cfg: HolonConfig,
    *,
    start: bool = True,
    warm: bool = False,
) -> Toolbox:
    """The agent's toolbox: ``base`` plus its MCP tools (``start=False``: only
    cached tool lists, nothing started; ``warm``: this process keeps servers
    running between turns). Raises ``McpUnavailableError`` for a ``required``
    server that cannot start."""
    from holon_cli.runtime.mcp.calls import offered_tools

    offered, problems = offered_tools(store, cfg, start=start, warm=warm)
    return McpToolbox(base, offered, problems, cfg)


def _error(
    name: str, kind: str, message: str, hint: str | None = None, **details: Any
) -> ToolResult:
    env: Any = {
        "kind": kind,
        "message": message,
        "details": details or None,
        "recovery_hint": hint,
        "retryable": kind in ("mcp_timeout", "mcp_unavailable"),
    }
    return ToolResult(False, render_error(name, env), error=env)


def _declined(input_requests: Mapping[str, object] | None) -> bool:
    """Whether the server asked for something holon never gives (sampling)."""
    return any(
        isinstance(q, dict) and q.get("method") == "sampling/createMessage"
        for q in (input_requests or {}).values()
    )


def _run(ctx: ToolContext, call: ToolCall, offered: OfferedTool, cfg: HolonConfig) -> ToolResult:
    from holon_cli.runtime.mcp import calls
    from holon_cli.runtime.mcp.result import render

    spec, tool = offered.spec, str(offered.tool.get("name"))
    if call.arguments_error:
        return _error(
            call.name,
            "invalid_arguments",
            f"arguments are not valid JSON: {call.arguments_error}",
            "send the arguments as one JSON object",
        )
    out = calls.call_tool(ctx.store, cfg, spec, tool, dict(call.arguments or {}))
    if out.kind == "error":
        hints = {
            "mcp_timeout": (
                f"the server may still be working; try again later, or raise "
                f"mcp_servers.{spec.name}.tool_timeout"
            ),
            "mcp_unavailable": "the server is down; continue without it or try again later",
            "mcp_error": "check the arguments against the tool's schema",
        }
        kind = out.error_kind or "mcp_error"
        return _error(
            call.name, kind, out.error or kind, hints.get(kind), server=spec.name, tool=tool
        )
    if out.kind == "input_required" and _declined(out.input_requests):
        return _error(
            call.name,
            "mcp_error",
            f"{spec.name}/{tool} asked for sampling (a model call on its behalf), which holon "
            "declines; the call was not completed",
            "use another tool, or do the work without this one",
            server=spec.name,
            tool=tool,
        )
    if out.kind == "input_required":
        from holon_cli.runtime.mcp.requests import open_request

        req = open_request(
            ctx.store,
            spec,
            tool,
            dict(call.arguments or {}),
            out,
            turn_id=ctx.turn_id,
            call_id=call.id,
            message_id=(ctx.message or {}).get("id"),
        )
        env = {
            "ok": True,
            "server": spec.name,
            "tool": tool,
            "status": "input_required",
            "request_id": req["id"],
            "message": (
                "the server asked the operator for input before it can answer; the operator "
                f"was notified (request {req['id']}). The call's result will arrive as a "
                "separate mcp_result message once they answer: do not call the tool again "
                "for this; go on with other work or end the turn"
            ),
        }
        return ToolResult(True, json.dumps(env, ensure_ascii=False), data=env)
    assert out.result is not None
    from holon_cli.tools.exec_command.budget import CHARS_PER_TOKEN, output_budget_tokens

    budget = output_budget_tokens(cfg) * CHARS_PER_TOKEN
    r = render(ctx.store, out.result, server=spec.name, tool=tool, salt=call.id, budget=budget)
    env = {
        "ok": not r.is_error,
        "server": spec.name,
        "tool": tool,
        "is_error": r.is_error,
        "result": r.text,
        "truncated": r.truncated,
    }
    if r.artifacts:
        env["artifacts"] = r.artifacts
    content = json.dumps(env, ensure_ascii=False)
    if r.is_error:
        err: Any = {
            "kind": "mcp_error",
            "message": f"the tool {tool} of MCP server {spec.name} reported an error",
            "details": {"server": spec.name, "tool": tool},
            "recovery_hint": None,
            "retryable": False,
        }
        return ToolResult(False, content, data=env, error=err)
    return ToolResult(True, content, data=env)
