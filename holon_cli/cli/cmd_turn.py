"""``holon turn``: run one turn for an agent with queued work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from holon_cli.cli import output
from holon_cli.cli.params import MODEL

if TYPE_CHECKING:
    from holon_cli.runtime.turn.result import TurnResult


def _budget_words(res: TurnResult) -> str:
    from holon_cli.runtime.agents.holds import budget_line

    assert res.budget is not None  # only asked of a turn a budget held or stopped
    return budget_line(res.budget, res.agent_id)


def _print_turn(res: TurnResult) -> None:
    if not res.ran:
        if res.budget:
            click.echo(
                f"{res.agent_id}: no turn: {_budget_words(res)}; queued messages wait",
                err=True,
            )
            return
        click.echo(f"{res.agent_id}: nothing queued", err=True)
        return
    closure = res.closure.get("outcome", "?") if res.closure else "?"
    click.echo(
        (
            f"{res.agent_id}: turn {res.turn_id} {res.status} ({closure}; "
            f"{res.model_rounds} round(s), {res.token_usage['total_tokens']} tokens, "
            f"{res.duration_ms} ms)"
        ),
        err=True,
    )
    if res.budget:
        click.echo(
            f"{res.agent_id}: stopped before a provider request: {_budget_words(res)}",
            err=True,
        )
    if res.failure_kind == "operator_aborted":
        aid = res.agent_id
        click.echo(f"{aid}: aborted by the operator; `holon agent start {aid}` resumes", err=True)
    if res.failure_artifact:
        output.echo(f"{res.agent_id}: failure: {res.failure_artifact.get('summary')}", err=True)
    if res.final_text:
        output.echo(res.final_text)


def _stop_mcp_servers() -> None:
    """MCP servers end with the turn (the watchdog covers a killed process)."""
    import sys

    if "holon_cli.runtime.mcp.host" in sys.modules:
        from holon_cli.runtime.mcp.calls import close

        close()


def _exit_code(status: str | None, failure_kind: str | None) -> int:
    """0 for a settled turn; 130 for a turn the operator aborted (`holon agent
    abort`); 5 for a provider failure that ended it."""
    from holon_cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROVIDER

    if status != "aborted":
        return EXIT_OK
    return EXIT_INTERRUPTED if failure_kind == "operator_aborted" else EXIT_PROVIDER


def _held(res: TurnResult) -> bool:
    """No turn ran because a budget holds the agent while messages are queued."""
    return not res.ran and bool(res.budget)


def _turn_all(model: str | None, catalog: Any, as_json: bool) -> None:
    """One turn per agent with queued work; each failure names its agent; the
    exit code is the worst per-agent outcome (see ``errors.EXIT_SEVERITY``)."""
    from holon_cli.errors import worst_exit_code
    from holon_cli.runtime.turn import AgentFailure, run_turns_all

    results = run_turns_all(cli_model=model, catalog=catalog)
    codes = [
        r.exit_code if isinstance(r, AgentFailure) else _exit_code(r.status, r.failure_kind)
        for r in results
    ]
    code = worst_exit_code(codes)
    if as_json:
        failed = [r.agent_id for r, c in zip(results, codes, strict=True) if c]
        output.emit_json_per_agent({"turns": [r.to_dict() for r in results]}, code, failed)
    else:
        for r in results:
            if isinstance(r, AgentFailure):
                err = r.error
                hint = f" ({err.hint})" if err.hint else ""
                output.echo(f"{r.agent_id}: error: {err.message}{hint}", err=True)
            else:
                _print_turn(r)
    if code:
        raise click.exceptions.Exit(code)


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
    A provider failure that ends the turn: exit 5. A turn the operator
    aborted (`holon agent abort`): exit 130. A held agent with queued
    messages runs no turn, exit 4 (refused by policy): stopped or paused
    (`holon agent start` resumes it), or held by a budget a turn already
    stopped on (until it resets or is raised; `holon status` shows the
    hold). A turn that ran and stopped at a budget before its request
    settles its message (closure waiting, an action_required brief): exit 0.

    With --all, an agent that cannot run (e.g. a damaged queue) is reported
    by name and skipped; the others run. Held agents are passed by (their
    holds are not failures of the pass: a cron line stays quiet). The exit
    code is the worst outcome over all agents, least to most severe: 0, 75
    (busy), 3, 4, 5 (provider failure), 2 (configuration), 1 (damaged
    state).

    \b
    Examples:
      holon enqueue "check the build" && holon turn
      */5 * * * * holon tick --all && holon turn --all   # crontab
    """
    output.begin("turn", as_json)
    from holon_cli.errors import EXIT_REJECTED, UsageError
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    if all_agents and agent_id:
        raise UsageError("use either --agent or --all, not both")
    catalog = default_catalog()
    try:
        if all_agents:
            _turn_all(model, catalog, as_json)
            return
        turn_res = run_turn(agent_id, cli_model=model, catalog=catalog)
    finally:
        _stop_mcp_servers()
    res = turn_res.to_dict()
    held = _held(turn_res)
    code = EXIT_REJECTED if held else _exit_code(turn_res.status, turn_res.failure_kind)
    if as_json and held:
        output.emit_json_failure_with_data(
            "budget_exhausted",
            f"no turn was run: {_budget_words(turn_res)}",
            "queued messages wait; `holon status` shows the hold; raise the budget in "
            "config.yaml to lift it now",
            res,
        )
    elif as_json and res.get("failure_kind") == "operator_aborted":
        output.emit_json_failure_with_data(
            "interrupted",
            "the operator aborted the turn (`holon agent abort`)",
            f"the agent is paused: `holon agent start {res['agent_id']}` resumes it",
            res,
        )
    elif as_json and res["status"] == "aborted":
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
        _print_turn(turn_res)
    if code:
        raise click.exceptions.Exit(code)
