"""``holon trigger``: the agent's external trigger capability and its ingress."""

from __future__ import annotations

import sys
from collections.abc import Mapping

import click

from holon_cli.cli import output

CTX = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CTX)
def trigger() -> None:
    """The agent's external trigger: a secret URL that wakes it.

    An external system (CI, a webhook relay, a cron job elsewhere) calls the
    URL when something changed; the agent gets at most one wake per turn.

    \b
    Example:
      holon trigger show
      holon trigger deliver "$(holon trigger show --json | jq -r .data.trigger_url)" '{"ci": \
"green"}' --content-type application/json
    """


def _print_descriptor(d: Mapping[str, object]) -> None:
    output.print_kv(
        [
            ("external_trigger_id", d["external_trigger_id"]),
            ("trigger_url", d.get("trigger_url") or "(revoked: run `holon trigger rotate`)"),
            ("target_agent_id", d["target_agent_id"]),
            ("delivery_mode", d["delivery_mode"]),
            ("status", d["status"]),
            ("trigger_count", d["trigger_count"]),
            ("last_triggered_at", d.get("last_triggered_at") or "-"),
        ]
    )


@trigger.command("show")
@output.agent_option
@output.json_option
def trigger_show(agent_id: str | None, as_json: bool) -> None:
    """Show the trigger descriptor, provisioning it on first use.

    The URL is a capability secret: whoever has it can wake the agent.

    \b
    Example:
      holon trigger show --json | jq -r .data.trigger_url
    """
    output.begin("trigger show", as_json)
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.waiting.triggers import show

    d = show(open_agent(agent_id))
    if as_json:
        output.emit_json(d)
    else:
        _print_descriptor(dict(d))


@trigger.command("rotate")
@output.agent_option
@output.json_option
def trigger_rotate(agent_id: str | None, as_json: bool) -> None:
    """Mint a new token; the old URL fails from now on (also re-enables a revoked trigger).

    \b
    Example:
      holon trigger rotate --agent reviewer
    """
    output.begin("trigger rotate", as_json)
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.waiting.triggers import rotate

    d = rotate(open_agent(agent_id))
    if as_json:
        output.emit_json(d)
    else:
        _print_descriptor(dict(d))


@trigger.command("revoke")
@output.agent_option
@output.json_option
def trigger_revoke(agent_id: str | None, as_json: bool) -> None:
    """Make every token fail until the next `holon trigger rotate`.

    \b
    Example:
      holon trigger revoke --agent reviewer
    """
    output.begin("trigger revoke", as_json)
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.waiting.triggers import revoke

    d, changed = revoke(open_agent(agent_id))
    if as_json:
        output.emit_json({**d, "changed": changed})
    else:
        click.echo("revoked" if changed else "already revoked; nothing changed")


@trigger.command("deliver")
@click.argument("token", metavar="TOKEN|URL")
@click.argument("body", required=False, metavar="[BODY|-]")
@click.option(
    "--content-type",
    "content_type",
    metavar="T",
    help="Content type of BODY, e.g. application/json (parsed and validated) or text/plain.",
)
@click.option(
    "--source", metavar="S", help="Who is calling, recorded as provenance (e.g. github-actions)."
)
@output.json_option
def trigger_deliver(
    token: str, body: str | None, content_type: str | None, source: str | None, as_json: bool
) -> None:
    """Deliver a callback exactly as `POST /callbacks/wake/{token}` would.

    BODY is optional; `-` reads it from stdin. Unknown or revoked token, or a
    stopped agent: exit 4 and nothing is recorded.

    \b
    Example:
      holon trigger deliver cb_0123... '{"pr": 42, "state": "approved"}' --content-type \
application/json --source github
    """
    output.begin("trigger deliver", as_json)
    from holon_cli.runtime.waiting.triggers import deliver

    data = b""
    if body == "-":
        raw = getattr(sys.stdin, "buffer", None)
        data = raw.read() if raw is not None else sys.stdin.read().encode("utf-8")
    elif body is not None:
        data = body.encode("utf-8")
    res = deliver(token, data, content_type, source)
    if as_json:
        output.emit_json(res.to_dict())
    elif res.disposition == "system_tick_admitted":
        click.echo(f"{res.agent_id}: system_tick_admitted {res.message_id}")
    else:
        click.echo(f"{res.agent_id}: coalesced ({res.coalesced_count} pending deliveries)")
