"""The MCP plane's steps, as the tools, the CLI and the turn call them.

- :func:`offered_tools`: what a turn offers from an agent's servers. The
  cached list of each enabled server; a server never listed is started to
  list it (a cron ``holon turn`` starts nothing else); a ``required`` server
  must start, or the turn fails before its provider request
  (:class:`~holon_cli.errors.McpUnavailableError`, exit 5, nothing dequeued).
- :func:`call_tool`: one call, every failure an error outcome.
- :func:`check` / :func:`refresh`: start, discover or initialize, list.
- :func:`server_rows`: ``holon mcp list`` and ``holon status``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from holon_cli.runtime.mcp import records
from holon_cli.runtime.mcp.config import ServerSpec, servers_for, tool_name

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.typed import JsonObject
    from holon_cli.runtime.mcp.sdk import CallOutcome
    from holon_cli.runtime.mcp.shapes import SentAnswer, ToolProblem
    from holon_cli.store.agent_store import AgentStore


class OfferedTool(NamedTuple):
    name: str  # mcp__<server>__<tool>
    spec: ServerSpec
    tool: JsonObject  # as the server listed it (name, description, inputSchema, ...)


def server_rows(cfg: HolonConfig, agent_id: str | None) -> list[dict[str, object]]:
    return [records.row(s) for s in servers_for(cfg, agent_id)]


def _host(warm: bool | None = None) -> Any:
    from holon_cli.runtime.mcp import host

    return host.current(keep_warm=warm)


def offered_tools(
    store: AgentStore, cfg: HolonConfig, *, start: bool = True, warm: bool = False
) -> tuple[list[OfferedTool], list[ToolProblem]]:
    """The agent's MCP tools in a stable order (server name, then the
    server's own order) and the problems met (``{server, error}``), each also
    recorded as the server's state. ``start=False``: cached lists only."""
    from holon_cli.errors import McpUnavailableError

    out: list[OfferedTool] = []
    problems: list[ToolProblem] = []
    specs = [s for s in servers_for(cfg, store.agent_id) if s.enabled]
    if start:
        import sys

        host_mod = sys.modules.get("holon_cli.runtime.mcp.host")  # started in this process?
        h = host_mod.existing() if host_mod is not None else None
        if h is not None:  # serve: stop what left the agent's config
            h.prune(store.agent_id, {(s.name, s.key) for s in specs})
    for spec in specs:
        tools = records.cached_tools(spec)
        if start and (tools is None or spec.required):
            from holon_cli.runtime.mcp.host import McpStartError

            try:
                tools = _host(warm).session(store, cfg, spec).tools
            except McpStartError as exc:
                if spec.required:
                    raise McpUnavailableError(
                        f"required MCP server {spec.name!r} could not start: {exc.message}",
                        hint=(
                            f"`holon mcp check {spec.name}` shows why; fix mcp_servers."
                            f"{spec.name} in config.yaml or set `required: false`. The "
                            "message stays queued: the next `holon turn` runs it"
                        ),
                        details={"server": spec.name, "reason": exc.kind},
                    ) from None
                problems.append({"server": spec.name, "error": exc.message})
        if tools is None:
            if not start:
                rec = records.read(spec)
                problems.append(
                    {
                        "server": spec.name,
                        "error": (rec.get("last_error") if rec else None)
                        or "never listed (`holon mcp refresh` lists it; a turn would start it)",
                    }
                )
            continue
        for t in tools:
            name = str(t.get("name") or "")
            if name and spec.offers(name):
                out.append(OfferedTool(tool_name(spec.name, name), spec, t))
    return out, problems


def call_tool(
    store: AgentStore,
    cfg: HolonConfig,
    spec: ServerSpec,
    tool: str,
    arguments: Mapping[str, object],
    *,
    answers: dict[str, SentAnswer] | None = None,
    request_state: str | None = None,
    legacy_answers: list[SentAnswer] | None = None,
) -> CallOutcome:
    """One ``tools/call`` (``answers``, ``request_state``, ``legacy_answers``:
    a call sent again with the operator's answers, see ``requests.py``)."""
    from holon_cli.runtime.mcp.tracing import request_meta

    out: CallOutcome = _host().call(
        store,
        cfg,
        spec,
        tool,
        arguments,
        meta=request_meta(),
        answers=answers,
        request_state=request_state,
        legacy_answers=legacy_answers,
    )
    return out


def check(
    store: AgentStore, cfg: HolonConfig, names: list[str] | None = None, *, relist: bool = False
) -> list[dict[str, object]]:
    """Start each enabled server (named ones: enabled or not) afresh: discover
    or initialize, list. Rows as :func:`server_rows`, with ``error`` set
    for a server that did not answer. ``relist``: write the listing even
    when it did not change (``holon mcp refresh``)."""
    from holon_cli.runtime.mcp.host import McpStartError

    rows: list[dict[str, object]] = []
    for spec in servers_for(cfg, store.agent_id):
        if names is not None and spec.name not in names:
            continue
        if names is None and not spec.enabled:
            rows.append({**records.row(spec), "checked": False, "error": None})
            continue
        error = None
        try:
            sess = _host().session(store, cfg, spec, fresh=True)
            if relist:
                assert sess.protocol is not None
                records.note_listed(spec, sess.protocol, sess.tools, server_info=sess.server_info)
        except McpStartError as exc:
            error = exc.message
        rows.append({**records.row(spec), "checked": True, "error": error})
    return rows


def close(agent_id: str | None = None) -> None:
    """Stop this process's servers (of one agent, or all of them)."""
    from holon_cli.runtime.mcp import host

    h = host.existing()
    if h is None:
        return
    if agent_id is None:
        h.close_all()
    else:
        h.close_agent(agent_id)
