"""``holon agent``: create, fork, list, inspect, stop, pause, start and abort agents."""

from __future__ import annotations

from typing import Any

import click

from holon_cli.cli import output
from holon_cli.cli.params import MODEL, complete_agents


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def agent() -> None:
    """Create, fork, list, inspect, stop, pause, start and abort agents.

    \b
    Example:
      holon agent create reviewer --template /path/to/template
      holon agent list
    """


@agent.command("create")
@click.argument("agent_id", metavar="ID")
@click.option(
    "--template",
    "-t",
    metavar="T",
    help="Template: an id (~/.agents/templates/<id>/; builtin: holon-default, holon-developer), "
    "an absolute directory, or https://github.com/<owner>/<repo>[/tree/<ref>/<path>].",
)
@click.option(
    "--model",
    "-m",
    type=MODEL,
    metavar="MODEL",
    help="Agent model override, e.g. openai/gpt-4.1 or scripted:demo.yaml.",
)
@output.json_option
def agent_create(agent_id: str, template: str | None, model: str | None, as_json: bool) -> None:
    """Create a public named agent and materialize its agent home.

    Fails closed: a bad template leaves nothing behind.

    \b
    Example:
      holon agent create reviewer --model anthropic/claude-sonnet-4-5
      holon agent create dev --template holon-developer
    """
    from holon_cli.runtime.agents.lifecycle import create_agent

    store = create_agent(agent_id, template=template, model=model)
    rec = store.read_record()
    data = {
        "agent_id": store.agent_id,
        "agent_home": str(store.layout.home),
        "identity": rec["identity"],
        "model_override": rec["state"]["model_override"],
    }
    if as_json:
        output.emit_json(data)
    else:
        click.echo(f"created agent {store.agent_id} at {store.layout.home}")


@agent.command("fork")
@click.argument("source", metavar="A", shell_complete=complete_agents)
@click.option("--as", "new_id", metavar="B", required=True, help="Id of the new agent.")
@click.option(
    "--at",
    "turn_id",
    metavar="TURN_ID",
    default=None,
    help="Fork A as it was once this recorded turn settled (default: as it is now).",
)
@output.json_option
def agent_fork(source: str, new_id: str, turn_id: str | None, as_json: bool) -> None:
    """Create agent B with A's work items, memory, transcript and workspace binding.

    B is independent of A: its queue is empty and it has no tasks, timers,
    waits, triggers or children. With --at, the ledgers and the agent
    record are as they were after that turn settled; what cannot be rewound
    (files of the agent home and the workspace, which B shares with A) is
    listed (--json data not_rewound). A is only read.

    \b
    Examples:
      holon agent fork main --as main-try
      holon agent fork main --as before-refactor --at turn_01m8jxkn6d0000yhcrz3
    """
    from holon_cli.runtime.replay.fork import fork_agent

    res = fork_agent(source, new_id, at=turn_id)
    if as_json:
        output.emit_json(res)
        return
    at = f" as of turn {res['at']}" if res["at"] else ""
    click.echo(f"forked {res['forked_from']}{at} as {res['agent_id']} at {res['agent_home']}")
    for note in res["not_rewound"]:
        click.echo(f"note: {note}", err=True)


@agent.command("list")
@click.option(
    "--all",
    "include_private",
    is_flag=True,
    help="Include private child agents (with their parent and whether they are archived).",
)
@output.json_option
def agent_list(include_private: bool, as_json: bool) -> None:
    """List agents.

    \b
    Example:
      holon agent list --json | jq -r '.data.agents[].agent_id'
    """
    from holon_cli.runtime.agents.lifecycle import list_agents

    agents = list_agents(include_private=include_private)
    if as_json:
        output.emit_json({"agents": [a.to_dict() for a in agents]})
        return
    if not agents:
        click.echo("no agents yet (the default agent is created on first use)", err=True)
        return
    output.print_table(
        ["agent", "kind", "visibility", "status", "home"],
        [[a.agent_id, a.kind, a.visibility, _status(a), a.agent_home] for a in agents],
    )
    for a in agents:
        if a.problem:
            click.echo(
                f"warning: agent {a.agent_id!r} is damaged: {a.problem}; "
                "`holon home check --repair` rebuilds its record (nothing is lost)",
                err=True,
            )


def _status(a: Any) -> str:
    if a.kind != "child" or not a.lineage_parent_agent_id:
        return str(a.status)
    return f"{a.status}{' (archived)' if a.archived else ''} <- {a.lineage_parent_agent_id}"


@agent.command("status")
@click.argument("agent_id", metavar="[ID]", required=False, shell_complete=complete_agents)
@output.json_option
def agent_status(agent_id: str | None, as_json: bool) -> None:
    """Show one agent's summary (same as `holon status --agent ID`).

    \b
    Example:
      holon agent status reviewer
    """
    from holon_cli.cli.cmd_inspect import show_status

    show_status(agent_id, as_json, "agent status")


def _lifecycle(action: str, agent_id: str, as_json: bool) -> None:
    from holon_cli.runtime.agents.lifecycle import set_lifecycle

    res = set_lifecycle(agent_id, action)
    if as_json:
        output.emit_json(res)
    elif res["changed"]:
        click.echo(f"{res['agent_id']}: {res['previous']} -> {res['status']}")
    else:
        click.echo(f"{res['agent_id']}: already {res['status']}")


@agent.command("stop")
@click.argument("agent_id", metavar="ID", shell_complete=complete_agents)
@output.json_option
def agent_stop(agent_id: str, as_json: bool) -> None:
    """Stop an agent: new messages are rejected (exit 4) until it is started.

    \b
    Example:
      holon agent stop reviewer
    """
    _lifecycle("stop", agent_id, as_json)


@agent.command("start")
@click.argument("agent_id", metavar="ID", shell_complete=complete_agents)
@output.json_option
def agent_start(agent_id: str, as_json: bool) -> None:
    """Start (resume) a stopped or paused agent.

    \b
    Example:
      holon agent start reviewer
    """
    _lifecycle("start", agent_id, as_json)


@agent.command("pause")
@click.argument("agent_id", metavar="ID")
@output.json_option
def agent_pause(agent_id: str, as_json: bool) -> None:
    """Pause an agent: no new turn starts until `holon agent start`.

    A paused agent still accepts messages; they wait in its queue. A turn
    already running finishes (to stop it now: `holon agent abort`).

    \b
    Example:
      holon agent pause reviewer && holon enqueue --agent reviewer "later"
    """
    _lifecycle("pause", agent_id, as_json)


@agent.command("abort")
@click.argument("agent_id", metavar="ID")
@click.option(
    "--run-id",
    metavar="R",
    help="Abort only if R is the running turn (its current_run_id); else exit 4.",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="Return once the abort is requested (default: wait up to 10 s for the turn to end).",
)
@output.json_option
def agent_abort(agent_id: str, run_id: str | None, no_wait: bool, as_json: bool) -> None:
    """Abort the running turn: cancel its provider or tool call, settle its
    message `aborted` (reason operator_aborted) and leave the agent paused.

    Nothing running: exit 0 and says so. A --run-id that is not the running
    turn: exit 4. Background tasks of earlier calls keep running.

    \b
    Example:
      holon agent abort main
      run=$(holon agent status main --json | jq -r .data.current_run_id)
      holon agent abort main --run-id "$run"   # only if that turn still runs
      holon agent start main                   # resume afterwards
    """
    from holon_cli.runtime.turn.abort import ABORT_WAIT_S, abort_agent

    res = abort_agent(agent_id, run_id, wait_s=0.0 if no_wait else ABORT_WAIT_S)
    if as_json:
        output.emit_json(res)
        return
    aid = res["agent_id"]
    if not res["running"]:
        click.echo(f"{aid}: no turn is running; nothing to abort")
        return
    outcome = res.get("outcome", "requested")
    line = f"{aid}: turn {res['run_id']} {outcome}"
    if res.get("message_id"):
        line += f" (message {res['message_id']})"
    click.echo(line)
    click.echo(f"{aid} is {res['status']}: `holon agent start {aid}` resumes", err=True)


@agent.command("path")
@click.argument("agent_id", metavar="[ID]", required=False, shell_complete=complete_agents)
@output.json_option
def agent_path(agent_id: str | None, as_json: bool) -> None:
    """Print an agent's home directory.

    \b
    Example:
      $EDITOR "$(holon agent path)/AGENTS.md"
    """
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(agent_id, create_default=True)
    if as_json:
        output.emit_json({"agent_id": store.agent_id, "agent_home": str(store.layout.home)})
    else:
        click.echo(str(store.layout.home))


@agent.command("model")
@click.argument("agent_id", metavar="[ID]", required=False, shell_complete=complete_agents)
@click.argument("model", metavar="[MODEL]", required=False, type=MODEL)
@click.option(
    "--clear", is_flag=True, help="Remove the override: back to the runtime default and fallbacks."
)
@output.json_option
def agent_model(agent_id: str | None, model: str | None, clear: bool, as_json: bool) -> None:
    """Show, set or clear an agent's model override (future turns only).

    \b
    Examples:
      holon agent model reviewer                       # show
      holon agent model reviewer anthropic/claude-sonnet-4-5
      holon agent model reviewer --clear
    """
    from holon_cli.errors import UsageError
    from holon_cli.runtime.agents.lifecycle import open_agent, set_model_override
    from holon_cli.runtime.agents.models import model_state

    if clear and model:
        raise UsageError("pass either MODEL or --clear, not both")
    data: dict[str, Any]
    if model is None and not clear:
        store = open_agent(agent_id)
        data = {"agent_id": store.agent_id, "model": model_state(store.read_record()["state"])}
    else:
        data = set_model_override(agent_id, None if clear else model)
    if as_json:
        output.emit_json(data)
        return
    m = data["model"]
    effective = m.get("effective_model") or "(no model configured)"
    click.echo(f"{data['agent_id']}: {effective} ({m.get('source')})")
    if m.get("effective_fallback_models"):
        click.echo(f"fallbacks: {', '.join(m['effective_fallback_models'])}")
    if m.get("error"):
        click.echo(f"config error: {m['error']}", err=True)


@agent.command("profiles")
@output.agent_option_with(
    "Whose workspace's .agents/profiles/ to read (default: $HOLON_AGENT_ID or 'main')."
)
@output.json_option
def agent_profiles(agent_id: str | None, as_json: bool) -> None:
    """List the child profiles SpawnAgent's preset can name, and check them.

    A profile is a Markdown file <name>.md: YAML frontmatter (model, tools,
    budgets, workspace_mode, workspace_root, context, description; all
    optional), then the child's instructions. Looked for in the agent's
    active workspace (.agents/profiles/) first, then in the holon home
    (profiles/). Exits 1 when a profile file is broken (each error names
    the file and the key).

    \b
    Examples:
      holon agent profiles
      holon agent profiles --agent builder --json | jq -r '.data.profiles[].name'
    """
    output.begin("agent profiles", as_json)
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.agents.profiles import home_dir, list_profiles
    from holon_cli.runtime.workspace import workspace_for
    from holon_cli.tools.catalog import default_catalog

    store = open_agent(agent_id)
    anchor = workspace_for(store.layout.home, store.read_record()["state"]).workspace_anchor
    known = {t.name for t in default_catalog().specs}
    rows = list_profiles(anchor, known_tools=known)
    data = {
        "agent_id": store.agent_id,
        "dirs": [str(anchor / ".agents" / "profiles"), str(home_dir())],
        "profiles": rows,
    }
    broken = [r for r in rows if not r["valid"]]
    if as_json:
        if broken:
            output.emit_json_failure_with_data(
                "invalid_profile",
                f"{len(broken)} profile file(s) cannot be used",
                "see data.profiles[].error: each names the file and the key",
                data,
            )
            raise click.exceptions.Exit(1)
        output.emit_json(data)
        return
    if not rows:
        click.echo(
            f"no profiles: put <name>.md in {data['dirs'][0]} or {data['dirs'][1]}", err=True
        )
        return
    table = []
    for r in rows:
        if not r["valid"]:
            what = "BROKEN: " + str(r["error"])
        else:
            tools = ", ".join(r["tools"]) if r["tools"] is not None else "all tools"
            what = f"model {r['model']}; {tools}"
            if r["description"]:
                what = f"{r['description']} ({what})"
        if r["shadowed_by"]:
            what += f" [hidden by {r['shadowed_by']}]"
        table.append([r["name"], r["source"], what])
    output.print_table(["name", "from", "profile"], table)
    if broken:
        click.echo(f"{len(broken)} profile file(s) cannot be used", err=True)
        raise click.exceptions.Exit(1)


@agent.command("rm")
@click.argument("agent_id", metavar="ID", shell_complete=complete_agents)
@click.option("--force", is_flag=True, help="Remove a stopped named agent (its home is deleted).")
@output.json_option
def agent_rm(agent_id: str, force: bool, as_json: bool) -> None:
    """Remove an agent and its home.

    A temporary `holon run` agent that has finished goes without --force. A
    named agent must be stopped first and needs --force; its running tasks
    are stopped with it. A parent with running child agents is refused
    without --force; with it, the children are stopped and archived first.
    An agent with a turn in progress is never removed (exit 75).

    \b
    Examples:
      holon agent rm run-01jx...
      holon agent stop reviewer && holon agent rm reviewer --force
    """
    from holon_cli.runtime.agents.removal import remove_agent

    res = remove_agent(agent_id, force=force)
    if as_json:
        output.emit_json(res)
    else:
        for child_task in res.get("stopped_children", []):
            click.echo(f"stopped child handle {child_task} (child archived)", err=True)
        for task_id in res["stopped_tasks"]:
            click.echo(f"stopped task {task_id}", err=True)
        click.echo(f"removed agent {res['agent_id']} ({res['agent_home']})")


@agent.command("prune")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@output.json_option
def agent_prune(dry_run: bool, as_json: bool) -> None:
    """Remove finished temporary agents left by `holon run`.

    `holon run` keeps its temporary agent after a failed or waiting run so it
    can be inspected; this removes those with no queued or in-flight message
    and no running turn. Named agents are never touched.

    \b
    Example:
      holon agent prune --dry-run
    """
    from holon_cli.runtime.agents.removal import prune_run_agents

    res = prune_run_agents(dry_run=dry_run)
    if as_json:
        output.emit_json(res)
        return
    verb = "would remove" if dry_run else "removed"
    for a in res["removed"]:
        click.echo(f"{verb} {a['agent_id']}")
    for a in res["kept"]:
        output.echo(f"kept {a['agent_id']}: {a['reason']}", err=True)
    if not res["removed"]:
        click.echo("no finished temporary agents", err=True)
