"""``holon run``: one-shot agent run."""

from __future__ import annotations

import sys

import click

from holon_cli.cli import output
from holon_cli.cli.params import MODEL, check_env_model


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("text", metavar="TEXT")
@output.agent_option
@click.option("--create-agent", is_flag=True, help="Create the --agent on first use.")
@click.option(
    "--model",
    "-m",
    type=MODEL,
    metavar="MODEL",
    help="Model ref, e.g. openai/gpt-4.1 or scripted:examples/hello.yaml.",
)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Stop after this many turns.",
)
@click.option(
    "--no-wait-for-tasks",
    is_flag=True,
    help=(
        "Do not wait for the run's background tasks: stop unfinished ones before "
        "returning (default: wait for them and turn their results)."
    ),
)
@click.option(
    "--workspace-root",
    type=click.Path(file_okay=False),
    help="Workspace (execution root); default: the current directory.",
)
@click.option(
    "--cwd", type=click.Path(file_okay=False), help="Working directory inside the workspace."
)
@click.option(
    "--keep-agent",
    is_flag=True,
    help=(
        "Keep the temporary agent's home after a completed run "
        "(failed and waiting runs always keep it)."
    ),
)
@output.json_option
def run(
    text: str,
    agent_id: str | None,
    create_agent: bool,
    model: str | None,
    max_turns: int,
    no_wait_for_tasks: bool,
    workspace_root: str | None,
    cwd: str | None,
    keep_agent: bool,
    as_json: bool,
) -> None:
    """Run TEXT to completion on a temporary private agent and print the answer.

    Loops turns until the closure settles (completed, waiting, failed) or
    --max-turns. Exit 5 when a provider failure ended the run.

    \b
    Examples:
      holon run --model scripted:examples/hello.yaml "list the files here"
      holon run --json --model openai/gpt-4.1 "why does CI fail?" | jq .data.final_text
    """
    from holon_cli.errors import EXIT_PROVIDER
    from holon_cli.runtime.run import run_once

    if model is None:
        check_env_model("HOLON_MODEL")  # unknown provider: exit 2 now, not after agent setup
    if text == "-":
        try:
            text = sys.stdin.read()
        except UnicodeDecodeError:
            from holon_cli.errors import UsageError

            raise UsageError("stdin is not valid UTF-8 text") from None
    data = run_once(
        text,
        agent_id=agent_id,
        create=create_agent,
        model=model,
        max_turns=max_turns,
        workspace_root=workspace_root,
        cwd=cwd,
        keep_agent=keep_agent,
        wait_for_tasks=not no_wait_for_tasks,
    )
    if as_json:
        if data["final_status"] == "failed":
            fa = data.get("failure_artifact") or {}
            output.emit_json_failure_with_data(
                "provider_failure",
                fa.get("summary", "the run failed"),
                "see data.failure_artifact and data.provider_attempt_timeline; "
                + _inspect_hint(data["agent_id"]),
                data,
            )
        else:
            output.emit_json(data)
    else:
        if data["final_text"]:
            output.echo(data["final_text"])
        if data["final_status"] != "completed":
            click.echo(f"[{data['final_status']}]", err=True)
        if data.get("failure_artifact"):
            output.echo(f"failure: {data['failure_artifact'].get('summary')}", err=True)
        if data["final_status"] != "completed" and data.get("agent_kept"):
            click.echo(f"agent {data['agent_id']} kept at {data['agent_home']}", err=True)
            click.echo(_inspect_hint(data["agent_id"]), err=True)
    if data["final_status"] == "failed":
        raise click.exceptions.Exit(EXIT_PROVIDER)


def _inspect_hint(agent_id: str) -> str:
    return (
        f"inspect it: `holon status --agent {agent_id}`, "
        f"`holon transcript --agent {agent_id}`, `holon tail --agent {agent_id}`; "
        f"remove it: `holon agent rm {agent_id}` (or `holon agent prune`)"
    )
