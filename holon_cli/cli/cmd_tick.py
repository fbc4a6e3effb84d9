"""``holon tick``: one scheduling pass."""

from __future__ import annotations

import click

from holon_cli.cli import output


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@output.agent_option
@click.option("--all", "all_agents", is_flag=True, help="Tick every agent.")
@output.json_option
def tick(agent_id: str | None, all_agents: bool, as_json: bool) -> None:
    """One scheduling pass: ingest the inbox, wake expired sleeps, deliver
    work-item recheck reminders, activate runnable work.

    \b
    Example:
      * * * * * holon tick --all && holon turn --all   # crontab
    """
    output.begin("tick", as_json)
    from holon_cli.errors import UsageError
    from holon_cli.runtime.agents import open_agent
    from holon_cli.runtime.tick import tick_agent, tick_all

    if all_agents and agent_id:
        raise UsageError("use either --agent or --all, not both")
    results = tick_all() if all_agents else [tick_agent(open_agent(agent_id))]
    if as_json:
        output.emit_json({"agents": results})
        return
    for r in results:
        if r.get("skipped"):
            click.echo(f"{r['agent_id']}: skipped ({r['skipped']})")
        elif not r["actions"]:
            click.echo(f"{r['agent_id']}: nothing to do")
        else:
            for a in r["actions"]:
                detail = " ".join(f"{k}={v}" for k, v in a.items() if k != "action")
                click.echo(f"{r['agent_id']}: {a['action']} {detail}".rstrip())
