"""``holon queue``: see an agent's queue and re-admit aborted messages."""

from __future__ import annotations

import click

from holon_cli.cli import output

STATUSES = ("unfinished", "queued", "dequeued", "aborted", "processed", "all")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def queue() -> None:
    """Inspect an agent's message queue and requeue aborted messages.

    \b
    Example:
      holon queue list --status aborted && holon queue requeue msg_01...
    """


@queue.command("list")
@output.agent_option
@click.option(
    "--status",
    "-s",
    type=click.Choice(STATUSES),
    default="unfinished",
    show_default=True,
    help="unfinished = queued, dequeued (a turn holds it) and aborted.",
)
@click.option("--limit", "-n", type=int, default=None, metavar="N", help="Show the last N.")
@output.json_option
def queue_list(agent_id: str | None, status: str, limit: int | None, as_json: bool) -> None:
    """List messages with their status, kind, origin and attempts.

    Aborted messages (a turn failed after the model was called, or a turn
    crashed MAX_ATTEMPTS times) can be re-admitted with `holon queue requeue`.

    \b
    Example:
      holon queue list --agent alpha --status aborted --json | jq '.data.messages[].message_id'
    """
    output.begin("queue list", as_json)
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(agent_id)
    msgs = q.list_messages(store, status=status, limit=limit)
    if as_json:
        output.emit_json({"agent_id": store.agent_id, "status": status, "messages": msgs})
        return
    if not msgs:
        click.echo(f"{store.agent_id}: no {status} messages", err=True)
        return
    output.print_table(
        ["message", "status", "kind", "origin", "priority", "attempts", "note"],
        [
            [
                m["message_id"],
                m["status"],
                m.get("kind") or "-",
                m.get("origin") or "-",
                m.get("priority") or "-",
                m.get("attempts", "-"),
                m.get("reason") or ("in inbox" if m.get("in_inbox") else ""),
            ]
            for m in msgs
        ],
    )


@queue.command("requeue")
@click.argument("message_id", metavar="MESSAGE_ID")
@output.agent_option
@output.json_option
def queue_requeue(message_id: str, agent_id: str | None, as_json: bool) -> None:
    """Re-admit an aborted message so the next turn runs it again.

    Unknown id: exit 3. A message that is queued, running or processed: exit 4.

    \b
    Example:
      holon queue requeue msg_01hzy2k3m40000abcd1234 --agent alpha && holon turn -a alpha
    """
    output.begin("queue requeue", as_json)
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(agent_id)
    env = q.requeue(store, message_id)
    data = {"agent_id": store.agent_id, "message_id": env["id"], "status": "queued"}
    if as_json:
        output.emit_json(data)
    else:
        click.echo(f"requeued {env['id']} for agent {store.agent_id}")
