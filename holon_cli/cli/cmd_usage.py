"""``holon usage``: what the agents spent, by agent, model or day."""

from __future__ import annotations

from typing import Any

import click

from holon_cli.cli import output
from holon_cli.cli.params import Duration, complete_agents


def _money(v: float) -> str:
    return f"${v:.4f}" if v else "-"


def _print(data: dict[str, Any]) -> None:
    rows = data["rows"]
    if not rows:
        click.echo(
            "no provider requests recorded" + (f" since {data['since']}" if data["since"] else "")
        )
        return
    table = [
        [
            r["key"],
            r["requests"],
            r["input_tokens"],
            r["cached_input_tokens"],
            r["output_tokens"],
            _money(r["cost_usd"]),
        ]
        for r in (*rows, data["total"])
    ]
    output.print_table([data["by"], "requests", "input", "cached", "output", "cost"], table)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--agent",
    "-a",
    "agent_id",
    metavar="ID",
    default=None,
    shell_complete=complete_agents,
    help="Only this agent's own requests (a removed agent's too).",
)
@click.option(
    "--since",
    "since_s",
    type=Duration(),
    metavar="DUR",
    default=None,
    help="Only the last DUR (e.g. 24h, 7d); default: everything recorded.",
)
@click.option(
    "--by",
    type=click.Choice(["agent", "model", "day"]),
    default="agent",
    show_default=True,
    help="One row per agent, model ref or UTC day.",
)
@output.json_option
def usage(agent_id: str | None, since_s: float | None, by: str, as_json: bool) -> None:
    """Show requests, tokens and cost from the spend records.

    Input tokens include the cached ones (served from the provider's prompt
    cache). Cost is priced by `prices` in config.yaml. Removed child and
    temporary agents' requests are included.

    \b
    Examples:
      holon usage --since 7d --by day
      holon usage --agent main --by model --json
    """
    output.begin("usage", as_json)
    from holon_cli.errors import ConfigError
    from holon_cli.runtime.budgets.usage import usage as report
    from holon_cli.store.config import load_config
    from holon_cli.store.layout import home_root

    try:
        cfg = load_config()
    except ConfigError:
        cfg = {}  # the recorded costs still answer; `holon home check` names the key
    data = report(home_root(), cfg, agent_id=agent_id, since_s=since_s, by=by)
    if as_json:
        output.emit_json(data)
        return
    _print(data)
