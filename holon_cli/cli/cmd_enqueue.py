"""``holon enqueue``: admit one message into an agent's queue."""

from __future__ import annotations

from typing import Any

import click

from holon_cli.cli import output
from holon_cli.cli.params import DURATION, complete_open_work_items, complete_words
from holon_cli.model.envelope import MESSAGE_KINDS, PRIORITIES


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("text", required=False, metavar="[TEXT|-]")
@output.agent_option
@click.option(
    "--kind",
    "-k",
    metavar="KIND",
    shell_complete=complete_words(MESSAGE_KINDS),
    help=f"Message kind: {', '.join(MESSAGE_KINDS)} (default from the origin).",
)
@click.option(
    "--origin",
    "-o",
    metavar="ORIGIN",
    help=(
        "operator[:ACTOR], channel:ID, webhook:SOURCE or callback:DESCRIPTOR (default: "
        "operator). The kind must belong to the origin; system, task and timer origins are "
        "admitted only by the runtime."
    ),
)
@click.option(
    "--priority",
    "-p",
    metavar="PRIORITY",
    default="normal",
    show_default=True,
    shell_complete=complete_words(PRIORITIES),
    help=f"One of: {', '.join(PRIORITIES)}.",
)
@click.option(
    "--json-body",
    is_flag=True,
    help="TEXT is a JSON document; the body becomes {type: json, value}.",
)
@click.option(
    "--work-item",
    "work_item_id",
    metavar="ID",
    shell_complete=complete_open_work_items,
    help="Bind the message to this work item.",
)
@click.option(
    "--correlation-id", metavar="ID", help="Ties related messages together across a workflow."
)
@click.option("--causation-id", metavar="ID", help="The message or task that caused this one.")
@click.option(
    "--idempotency-key",
    metavar="KEY",
    help=(
        "Admit the message once per KEY: the same KEY within 24 h prints the first "
        "message's id and admits nothing (safe to retry after a kill or a timeout)."
    ),
)
@click.option(
    "--wait",
    is_flag=True,
    help=(
        "Wait until this message is settled (by `holon serve`, cron or another `holon turn`) "
        "and print its outcome instead of its id."
    ),
)
@click.option(
    "--timeout",
    type=DURATION,
    metavar="DURATION",
    help="With --wait: give up after DURATION (500ms, 90s, 5m, 2h): exit 75, id on stdout.",
)
@output.json_option
def enqueue(**params: Any) -> None:
    """Admit a message into an agent's queue and print its id.

    TEXT is the message; `-` (or no TEXT with piped input) reads it from
    stdin. The message is durable when the id is printed. Trust and authority
    are derived from the origin, never taken from the caller.

    \b
    Examples:
      holon enqueue "review the open PRs"
      echo '{"ref": "main"}' | holon enqueue - --json-body --origin webhook:github
      holon enqueue "stop what you are doing" --priority interject
      holon enqueue "summarize today's errors" --wait --timeout 10m
      holon enqueue "nightly report" --idempotency-key "report-$(date +%F)"

    With --wait the outcome is the turn's final text (`--json`: data
    message_id, status, final_text, brief); exit 75 with the message id on
    stdout when --timeout passes first (the message stays queued), 5 when the
    turn failed on a provider error, 1 when the message was aborted.
    """
    from holon_cli.cli import fast_bodies

    code = fast_bodies.enqueue(**params)  # the fast path calls the same body with the same names
    if code:
        raise click.exceptions.Exit(code)
