"""``holon turn``: run one turn for an agent with queued work."""

from __future__ import annotations

from typing import Any

import click

from holon_cli.cli import output
from holon_cli.cli.params import MODEL


def _print_turn(res: dict[str, Any]) -> None:
    if not res["ran"]:
        click.echo(f"{res['agent_id']}: nothing queued", err=True)
        return
    closure = (res.get("closure") or {}).get("outcome", "?")
    click.echo(
        f"{res['agent_id']}: turn {res['turn_id']} {res['status']} ({closure}; {res['model_rounds']} round(s), {res['token_usage']['total_tokens']} tokens, {res['duration_ms']} ms)",
        err=True,
    )
    if res.get("failure_artifact"):
        output.echo(f"failure: {res['failure_artifact'].get('summary')}", err=True)
    if res.get("final_text"):
        output.echo(res["final_text"])


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@output.agent_option
@click.option(
    "--all", "all_agents", is_flag=True, help="One turn for every agent with queued work."
)
@click.option(
    "--model",
    "-m",
    type=MODEL,
    metavar="MODEL",
    help="Model ref for this turn (overrides agent and defaults).",
)
@output.json_option
def turn(agent_id: str | None, all_agents: bool, model: str | None, as_json: bool) -> None:
    """Run one turn: take the next queued message and work it to the end.

    Nothing queued: exit 0. Another turn running on the agent: exit 75.
    A provider failure that ends the turn: exit 5.

    \b
    Examples:
      holon enqueue "check the build" && holon turn
      */5 * * * * holon tick --all && holon turn --all   # crontab
    """
    output.begin("turn", as_json)
    from holon_cli.errors import EXIT_PROVIDER, HolonError, UsageError
    from holon_cli.runtime.turn import run_turn, run_turns_all
    from holon_cli.tools.catalog import default_catalog

    if all_agents and agent_id:
        raise UsageError("use either --agent or --all, not both")
    catalog = default_catalog()
    if all_agents:
        results = run_turns_all(cli_model=model, catalog=catalog)
        data: list[dict[str, Any]] = [
            r.to_dict() if not isinstance(r, HolonError) else {"ok": False, "error": r.to_dict()}
            for r in results
        ]
        if as_json:
            output.emit_json({"turns": data})
        else:
            for d in data:
                if "error" in d:
                    click.echo(f"error: {d['error']['message']}", err=True)
                else:
                    _print_turn(d)
        if any(not isinstance(r, HolonError) and r.status == "aborted" for r in results):
            raise click.exceptions.Exit(EXIT_PROVIDER)
        return
    res = run_turn(agent_id, cli_model=model, catalog=catalog).to_dict()
    if as_json and res["status"] == "aborted":
        fa = res.get("failure_artifact") or {}
        output.emit_json_failure_with_data(
            "provider_failure",
            fa.get("summary", "the turn failed"),
            "see data.failure_artifact and data.provider_attempt_timeline",
            res,
        )
    elif as_json:
        output.emit_json(res)
    else:
        _print_turn(res)
    if res["status"] == "aborted":
        raise click.exceptions.Exit(EXIT_PROVIDER)
