"""``holon tick``: one scheduling pass."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from holon_cli.cli import output


def _print_agent(r: Mapping[str, object], *, verbose: bool, quiet_idle: bool) -> None:
    aid = r["agent_id"]
    actions = r.get("actions")
    if r.get("ok") is False:
        err = r["error"]
        assert isinstance(err, Mapping)  # tick's error object
        hint = f" ({err['hint']})" if err.get("hint") else ""
        output.echo(f"{aid}: error: {err['message']}{hint}", err=True)
    elif r.get("skipped"):
        if verbose or not quiet_idle:
            click.echo(f"{aid}: skipped ({r['skipped']})")
    elif not actions:
        if verbose or not quiet_idle:
            why = f" ({r['idle_reason']})" if r.get("idle_reason") else ""
            click.echo(f"{aid}: nothing to do{why}")
    elif isinstance(actions, list):
        for a in actions:
            output.echo(f"{aid}: {describe_action(a)}")


def _plain(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_plain(v) for v in value) or "-"
    return "-" if value is None else str(value)


def _activated(a: Mapping[str, object]) -> str:
    sig = a.get("work_signal")
    sig = sig if isinstance(sig, Mapping) else {}
    mode = sig.get("reactivation_mode") or sig.get("action") or "work"
    if sig.get("work_item_id"):
        what = f"work item {sig['work_item_id']}"
    else:
        candidates = sig.get("candidates")
        ids = [
            c.get("work_item_id") or c.get("id")
            for c in (candidates if isinstance(candidates, list) else [])
            if isinstance(c, dict)
        ]
        what = "work items " + ", ".join(map(str, ids)) if ids else "the work queue"
    return f"activated {what} ({mode}): system tick {a.get('message_id')}"


# one line of plain text per action kind, for cron mail and terminals
_TEMPLATES: dict[str, str] = {
    "ingested": "ingested {count} message(s) from the inbox",
    "repaired_stale_run": "repaired the stale run {stale_run_id} ({from} -> {to})",
    "recheck_reminder": "recheck reminder queued for work item {work_item_id}",
    "tasks_interrupted": "task(s) {task_ids} lost their supervisor: marked interrupted",
    "timer_fired": "timer {timer_id} fired (fire {fire_count}): message {message_id}",
    "timer_coalesced": "timer {timer_id} fired (fire {fire_count}) into pending {message_id}",
    "timer_skipped": "timer {timer_id} skipped ({reason})",
    "woke": "woke up ({reason})",
    "sleep_timer_set": "sleep timer {timer_id} set for {next_fire_at}",
    "hint_converted": "wake hint ({coalesced_count} delivery(ies)) -> system tick {message_id}",
    "control_applied": "control {control} applied (message {message_id})",
}


def describe_action(a: Mapping[str, object]) -> str:
    """A tick action as one line of text: no Python reprs; nested values (the
    activation's work signal, task lists) are summarised, never dumped."""
    kind = str(a.get("action"))
    if kind == "activated":
        return _activated(a)
    if kind == "outputs_pruned":
        return (
            f"pruned {a.get('removed')} old task output(s): {a.get('freed_bytes')} bytes "
            f"freed, {a.get('kept_bytes')} bytes kept"
        )
    fields = {k: _plain(v) for k, v in a.items() if not isinstance(v, dict)}
    template = _TEMPLATES.get(kind)
    if template is not None:
        try:
            return template.format_map(fields)
        except KeyError:
            pass
    detail = " ".join(f"{k}={v}" for k, v in fields.items() if k != "action")
    return f"{kind} {detail}".rstrip()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@output.agent_option
@click.option("--all", "all_agents", is_flag=True, help="Tick every agent.")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="With --all, also list agents with nothing to do (quiet by default, for cron).",
)
@output.json_option
def tick(agent_id: str | None, all_agents: bool, verbose: bool, as_json: bool) -> None:
    """One scheduling pass: ingest the inbox, fire due timers (a timed
    Sleep's wake included), turn a pending wake hint into its system tick,
    apply a paused agent's queued `resume`, deliver work-item recheck
    reminders, activate runnable work (never for an agent resting after an
    open-ended Sleep). --json lists every action; a quiet agent gets an
    `idle_reason`.

    With --all, agents with nothing to do print nothing (-v lists them); an
    agent that cannot be ticked (e.g. a damaged queue) is reported by name and
    skipped, the others are ticked, and the exit code is the worst outcome
    over all agents (0, 75, 3, 4, 5, 2, 1: least to most severe). --all
    ticks only the agents the home's wake index (run/wake.json) names:
    something changed for them since their last tick, they have work, or a
    deadline came; the others keep their last idle reason.

    \b
    Example:
      * * * * * holon tick --all && holon turn --all   # crontab
    """
    output.begin("tick", as_json)
    from holon_cli.errors import UsageError, worst_exit_code
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.tick import tick_agent, tick_all

    if all_agents and agent_id:
        raise UsageError("use either --agent or --all, not both")
    results = tick_all() if all_agents else [tick_agent(open_agent(agent_id))]
    code = worst_exit_code([int(r.get("exit_code", 0)) for r in results])
    if as_json:
        failed = [str(r.get("agent_id")) for r in results if int(r.get("exit_code", 0))]
        output.emit_json_per_agent({"agents": results}, code, failed)
    else:
        for r in results:
            _print_agent(r, verbose=verbose, quiet_idle=all_agents)
    if code:
        raise click.exceptions.Exit(code)
