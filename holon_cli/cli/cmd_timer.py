"""``holon timer``: add, list and cancel timers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from holon_cli.cli import output
from holon_cli.cli.params import complete_open_work_items, complete_timers

if TYPE_CHECKING:
    from holon_cli.model.timer import TimerRecord

CTX = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CTX)
def timer() -> None:
    """Timers: scheduled wakes that `holon tick` delivers as timer_tick messages.

    Creating a timer queues nothing; each due fire admits one message on the
    next `holon tick` (or `holon serve`) pass.

    \b
    Example:
      holon timer add --after 10m --message "check the deploy"
      holon timer add --after 1h --every 1h --message "hourly triage"
      holon timer list
    """


def _row(t: TimerRecord) -> list[Any]:
    every_ms = t.get("every_ms")
    every = f"{every_ms // 1000}s" if every_ms else "-"
    return [
        t["id"],
        t["status"],
        t.get("next_fire_at") or "-",
        every,
        t["fire_count"],
        (t.get("message") or "")[:40],
    ]


@timer.command("add")
@output.agent_option
@click.option(
    "--after",
    "after",
    metavar="DURATION",
    required=True,
    help="First fire after this delay: 500ms, 90s, 5m, 2h or 1d.",
)
@click.option(
    "--every",
    "every",
    metavar="DURATION",
    help="Repeat at this interval (missed fires coalesce into one).",
)
@click.option(
    "--message",
    "message",
    metavar="TEXT",
    help="Text of the timer_tick message (default names the timer).",
)
@click.option(
    "--work-item",
    "work_item_id",
    metavar="ID",
    shell_complete=complete_open_work_items,
    help="Bind the fired messages to this work item.",
)
@output.json_option
def timer_add(
    agent_id: str | None,
    after: str,
    every: str | None,
    message: str | None,
    work_item_id: str | None,
    as_json: bool,
) -> None:
    """Create a timer and print its id (tmr_...).

    \b
    Example:
      holon timer add --after 30m --message "re-run the flaky test" --work-item wi_...
    """
    output.begin("timer add", as_json)
    from holon_cli.model.timer import parse_duration_ms
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.waiting.timers import add_timer

    after_ms = parse_duration_ms(after, flag="--after")
    every_ms = parse_duration_ms(every, flag="--every") if every is not None else None
    store = open_agent(agent_id)
    rec = add_timer(
        store, after_ms=after_ms, every_ms=every_ms, message=message, work_item_id=work_item_id
    )
    if as_json:
        output.emit_json(rec)
    else:
        click.echo(rec["id"])


@timer.command("list")
@output.agent_option
@click.option("--all", "include_all", is_flag=True, help="Include fired and cancelled timers.")
@output.json_option
def timer_list(agent_id: str | None, include_all: bool, as_json: bool) -> None:
    """List an agent's timers (active only unless --all).

    \b
    Example:
      holon timer list --all --json | jq '.data.timers[] | {id, status, fire_count}'
    """
    output.begin("timer list", as_json)
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.waiting.timers import LEDGER, list_timers

    store = open_agent(agent_id)
    timers = list_timers(store, include_all=include_all)
    ledger = str(store.layout.ledger_path(LEDGER))
    if as_json:
        output.emit_json({"agent_id": store.agent_id, "timers": timers, "ledger": ledger})
        return
    if not timers:
        click.echo(f"no {'' if include_all else 'active '}timers ({ledger})")
        return
    output.print_table(
        ["id", "status", "next fire", "every", "fires", "message"],
        [_row(t) for t in timers],
    )


@timer.command("cancel")
@click.argument("timer_id", metavar="TIMER_ID", shell_complete=complete_timers)
@output.agent_option
@output.json_option
def timer_cancel(timer_id: str, agent_id: str | None, as_json: bool) -> None:
    """Cancel an active timer. Unknown id: exit 3; already cancelled or fired: exit 0.

    \b
    Example:
      holon timer cancel tmr_0123456789abcdefghjk
    """
    output.begin("timer cancel", as_json)
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.waiting.timers import cancel_timer

    out = cancel_timer(open_agent(agent_id), timer_id)
    if as_json:
        output.emit_json(out)
    elif out["changed"]:
        click.echo(f"cancelled {timer_id}")
    else:
        click.echo(f"{timer_id} was already {out['previous_status']}; nothing changed")
