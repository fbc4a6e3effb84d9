"""``holon mcp``: the MCP servers agents reach, and the operator requests
(elicitation) they raise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from holon_cli.cli import output

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.store.agent_store import AgentStore


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def mcp() -> None:
    """MCP servers: their state, their tools, and the questions they ask.

    Servers are configured in config.yaml under `mcp_servers:` (and per agent
    under `agents.<id>.mcp_servers:`); their tools reach the model as
    `mcp__<server>__<tool>`.

    \b
    Example:
      holon mcp check && holon mcp list --json | jq '.data.servers[]'
      holon mcp requests && holon mcp answer mcpreq_... '{"color": "teal"}'
    """


def _context(agent_id: str | None) -> tuple[AgentStore, HolonConfig]:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.store.config import load_config

    return open_agent(agent_id), load_config()


def _server_line(r: Mapping[str, object]) -> str:
    proto = f", {r['protocol']}" if r.get("protocol") else ""
    tools = f": {r['tools']} tool(s)" if r.get("tools") is not None else ""
    req = " (required)" if r.get("required") else ""
    line = f"{r['state']:<9} {r['name']} ({r['transport']}{proto}){req}{tools}"
    err = r.get("error") or (r.get("last_error") if r["state"] == "failed" else None)
    return line + (f"\n          {err}" if err else "")


@mcp.command("list")
@output.agent_option
@output.json_option
def mcp_list_cmd(agent_id: str | None, as_json: bool) -> None:
    """The agent's MCP servers with the state of their last use, check or refresh.

    States: ok, failed (last_error says why), disabled (`enabled: false`),
    unknown (never started). `tools` counts the tools offered to the model.

    \b
    Example:
      holon mcp list --agent reviewer --json | jq '.data.servers[] | select(.state=="failed")'
    """
    from holon_cli.runtime.mcp.calls import server_rows

    store, cfg = _context(agent_id)
    rows = server_rows(cfg, store.agent_id)
    if as_json:
        output.emit_json({"agent_id": store.agent_id, "servers": rows})
        return
    if not rows:
        output.echo("no MCP servers configured (add `mcp_servers:` to config.yaml)", err=True)
        return
    for r in rows:
        output.echo(_server_line(r))


def _checked(rows: Sequence[Mapping[str, object]], as_json: bool, agent_id: str, what: str) -> None:
    failed = [str(r["name"]) for r in rows if r.get("checked") and r.get("error")]
    data = {"agent_id": agent_id, "servers": rows}
    if as_json:
        if failed:
            output.emit_json_failure_with_data(
                "mcp_unavailable",
                f"{len(failed)} server(s) did not answer: {', '.join(failed)}",
                "see each server's error; `holon mcp list` keeps it as last_error",
                data,
            )
        else:
            output.emit_json(data)
    else:
        for r in rows:
            output.echo(_server_line(r))
        if not rows:
            output.echo(f"no MCP servers to {what}", err=True)
    if failed:
        raise click.exceptions.Exit(1)


def _check_servers(server: str | None, agent_id: str | None, as_json: bool, what: str) -> None:
    """``check`` or ``refresh`` (which writes the listing even when it did
    not change) of one server or all: their servers end before it prints."""
    from holon_cli.runtime.mcp.calls import check, close
    from holon_cli.runtime.mcp.config import find

    store, cfg = _context(agent_id)
    names = None
    if server is not None:
        find(cfg, store.agent_id, server)  # unknown: exit 3
        names = [server]
    try:
        rows = check(store, cfg, names, relist=what == "refresh")
    finally:
        close()
    _checked(rows, as_json, store.agent_id, what)


@mcp.command("check")
@click.argument("server", required=False)
@output.agent_option
@output.json_option
def mcp_check_cmd(server: str | None, agent_id: str | None, as_json: bool) -> None:
    """Start each enabled server afresh: discover or initialize, list its tools.

    Exit 0 when every server checked answers, 1 otherwise (each failure is
    named and kept as the server's last_error). A named server is checked
    even when disabled.

    \b
    Example:
      holon mcp check git || holon mcp list
    """
    _check_servers(server, agent_id, as_json, "check")


@mcp.command("refresh")
@click.argument("server", required=False)
@output.agent_option
@output.json_option
def mcp_refresh_cmd(server: str | None, agent_id: str | None, as_json: bool) -> None:
    """List the tools again and keep the new list for the next turns.

    Turns offer the list kept in the home (so a cron turn starts no server
    just to list it); run this after a server's tools changed.

    \b
    Example:
      holon mcp refresh time
    """
    _check_servers(server, agent_id, as_json, "refresh")


def _json_arg(raw: str | None, what: str) -> Any:
    import json

    from holon_cli.errors import UsageError

    if raw is None:
        return None
    if raw == "-":
        import sys

        raw = sys.stdin.read()
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise UsageError(
            f"{what} is not valid JSON ({exc})",
            hint='quote it for the shell, e.g. \'{"path": "README.md"}\'',
        ) from None


@mcp.command("call")
@click.argument("server")
@click.argument("tool")
@click.argument("args_json", required=False, metavar="[ARGS_JSON]")
@output.agent_option
@output.json_option
def mcp_call_cmd(
    server: str, tool: str, args_json: str | None, agent_id: str | None, as_json: bool
) -> None:
    """Call one tool as the operator: the result's text on stdout.

    ARGS_JSON is the arguments object (`-` reads it from stdin). Nothing is
    admitted to the agent. Exit 1 when the tool reports an error or the
    server fails (`mcp_timeout`, `mcp_unavailable`), 3 for an unknown server.

    \b
    Example:
      holon mcp call time get_current_time '{"timezone": "Europe/Paris"}'
    """
    from holon_cli.errors import HolonError, UsageError
    from holon_cli.runtime.mcp import calls
    from holon_cli.runtime.mcp.config import find
    from holon_cli.runtime.mcp.result import content_text

    store, cfg = _context(agent_id)
    spec = find(cfg, store.agent_id, server)
    args = _json_arg(args_json, "ARGS_JSON") or {}
    if not isinstance(args, dict):
        raise UsageError("ARGS_JSON must be a JSON object", hint='e.g. \'{"message": "hi"}\'')
    try:
        out = calls.call_tool(store, cfg, spec, tool, args)
    finally:
        calls.close()  # all of them: the host's loop thread ends with the last
    if out.kind == "error":
        raise HolonError(
            f"{server}/{tool}: {out.error}",
            hint=f"`holon mcp check {server}` shows the server's state",
            kind=out.error_kind or "mcp_error",
        )
    if out.kind == "input_required":
        raise HolonError(
            f"{server}/{tool} asks for input, which an operator call cannot give",
            hint="call it through an agent: its request then waits in `holon mcp requests`",
            kind="mcp_error",
            details={"input_requests": out.input_requests},
        )
    result = out.result or {}
    is_error = bool(result.get("isError"))
    data = {
        "server": server,
        "tool": tool,
        "content": result.get("content") or [],
        "structured_content": result.get("structuredContent"),
        "is_error": is_error,
    }
    if as_json:
        if is_error:
            output.emit_json_failure_with_data(
                "mcp_error", f"{server}/{tool} reported an error", "see data.content", data
            )
        else:
            output.emit_json(data)
    else:
        artifacts: list[dict[str, object]] = []
        text = content_text(store, f"mcp-call-{tool}", result, artifacts)
        click.echo(text, err=is_error)
    if is_error:
        raise click.exceptions.Exit(1)


def _stores(agent_id: str | None) -> list[AgentStore]:
    from holon_cli.runtime.agents.lifecycle import agent_ids, open_agent

    if agent_id is not None:
        return [open_agent(agent_id, create_default=False)]
    out = []
    for aid in agent_ids():
        try:
            out.append(open_agent(aid, create_default=False))
        except Exception:  # noqa: BLE001 - a damaged agent does not hide the others
            continue
    return out


@mcp.command("requests")
@click.option("--agent", "-a", "agent_id", metavar="ID", help="Only this agent's (default: all).")
@click.option("--all", "include_resolved", is_flag=True, help="Also those already answered.")
@output.json_option
def mcp_requests_cmd(agent_id: str | None, include_resolved: bool, as_json: bool) -> None:
    """Questions MCP servers asked an operator during agents' tool calls.

    Each waits until answered with `holon mcp answer`; the call is then sent
    again and its result reaches the agent as an `mcp_result` message.

    \b
    Example:
      holon mcp requests --json | jq -r '.data.requests[] | "\\(.id) \\(.message)"'
    """
    from holon_cli.runtime.mcp.requests import list_requests

    rows = list_requests(_stores(agent_id), include_resolved=include_resolved)
    if as_json:
        output.emit_json({"requests": rows})
        return
    if not rows:
        output.echo("no open MCP requests", err=True)
        return
    for r in rows:
        fields = ", ".join(sorted((r.get("requested_schema") or {}).get("properties") or {}))
        output.echo(
            f"{r['id']}  {r['state']:<8} {r['agent_id']}  {r['server']}/{r['tool']}: "
            f"{r['message'] or '(no message)'}"
            + (f"  [fields: {fields}]" if fields else "")
            + (f"  [open {r['url']}]" if r.get("url") else "")
        )


@mcp.command("answer")
@click.argument("request_id", metavar="ID")
@click.argument("content_json", required=False, metavar="[CONTENT_JSON]")
@click.option("--decline", is_flag=True, help="Refuse the request instead of answering it.")
@output.json_option
def mcp_answer_cmd(request_id: str, content_json: str | None, decline: bool, as_json: bool) -> None:
    """Answer a server's question: the call is sent again at once.

    CONTENT_JSON is the form's content (`-` reads it from stdin); a request
    that only asks to open a URL takes `'{}'` once done. The result reaches
    the agent as an `mcp_result` message. Exit 4 when the request was
    already answered, 1 when the server cannot be reached (the answer is
    kept: answering again sends it).

    \b
    Example:
      holon mcp answer mcpreq_01JX... '{"color": "teal"}'
      holon mcp answer mcpreq_01JX... --decline
    """
    from holon_cli.errors import UsageError
    from holon_cli.runtime.mcp.requests import answer

    if decline and content_json is not None:
        raise UsageError("pass CONTENT_JSON or --decline, not both")
    if not decline and content_json is None:
        raise UsageError(
            "pass the answer as CONTENT_JSON, or --decline",
            hint=f'e.g. holon mcp answer {request_id} \'{{"field": "value"}}\'',
        )
    from holon_cli.runtime.mcp.calls import close

    content = None if decline else _json_arg(content_json, "CONTENT_JSON")
    try:
        row = answer(_stores(None), request_id, content=content, decline=decline)
    finally:
        close()
    if as_json:
        output.emit_json(row)
        return
    if row.get("outcome") == "input_required":
        output.echo(f"{request_id}: the server asks again: {row.get('next_id')}")
    else:
        output.echo(
            f"{request_id}: {row.get('outcome')}; sent to agent {row['agent_id']} as message "
            f"{row.get('result_message_id')}"
        )
