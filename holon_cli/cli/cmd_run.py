"""``holon run``: one-shot agent run."""

from __future__ import annotations

import click

from holon_cli.cli import output
from holon_cli.cli.params import MODEL


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("text", metavar="TEXT|-")
@output.agent_option_with(
    "Run on this existing agent (--create-agent makes it). Default: a new temporary "
    "private agent, removed after a completed run; $HOLON_AGENT_ID is not used."
)
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
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    metavar="N",
    help=(
        "Bound the run's spend: input + output tokens of the run and every child it "
        "starts. Exceeded: the run ends waiting (budget_exhausted), exit 4."
    ),
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0, min_open=True),
    metavar="USD",
    help=(
        "Bound the run's spend in US dollars, priced by config.yaml `prices` "
        "(children included). Exceeded: the run ends waiting, exit 4."
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
    max_tokens: int | None,
    max_cost: float | None,
    as_json: bool,
) -> None:
    """Run TEXT to completion on a temporary private agent and print the answer.

    TEXT `-` reads the text from stdin (UTF-8; anything else is refused with
    exit 2). Loops turns until the closure settles (completed, waiting,
    failed) or --max-turns. Exit 5 when a provider failure ended the run;
    exit 4 when a budget stopped it (--max-tokens, --max-cost, or one of
    config.yaml's budgets): the run ends waiting, reason budget_exhausted.

    With --agent A the run reports the outcome of its own message: messages
    A had queued before it are turned first (they do not count against
    --max-turns; `--json` data `older_turns` counts them).

    \b
    Examples:
      holon run --model scripted:examples/hello.yaml "list the files here"
      holon run --json --model openai/gpt-4.1 "why does CI fail?" | jq .data.final_text
      git diff | holon run --model openai/gpt-4.1 -
      holon run --agent main "what is left on the release checklist?"
    """
    code = run_and_print(
        text,
        agent_id,
        create_agent,
        model,
        max_turns,
        no_wait_for_tasks,
        workspace_root,
        cwd,
        keep_agent,
        as_json,
        max_tokens=max_tokens,
        max_cost=max_cost,
    )
    if code:
        raise click.exceptions.Exit(code)


def run_and_print(
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
    max_tokens: int | None = None,
    max_cost: float | None = None,
) -> int:
    """``holon run``'s body: one run to completion; returns the exit code (5
    when a provider failure ended it, 4 when a budget stopped it, after
    printing what happened)."""
    output.begin("run", as_json)
    from holon_cli.errors import EXIT_PROVIDER, EXIT_REJECTED, UsageError
    from holon_cli.runtime.run import run_once
    from holon_cli.tools.catalog import default_catalog

    if model is None:
        from holon_cli.cli.refs import check_env_model

        check_env_model("HOLON_MODEL")  # unknown provider: exit 2 now, not after agent setup
    if text == "-":
        from holon_cli.cli.fast_bodies import read_stdin

        text = read_stdin("stdin")
        if "\x00" in text:
            raise UsageError(
                "stdin holds binary data (NUL bytes), not text",
                hint="pipe UTF-8 text to `holon run -`; for a binary file, pass its path in TEXT",
                kind="invalid_utf8",
            )
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
        catalog=default_catalog(),
        max_tokens=max_tokens,
        max_cost_usd=max_cost,
    )
    failed = data["final_status"] == "failed"
    budget = data.get("budget") if data.get("waiting_reason") == "budget_exhausted" else None
    if as_json:
        if budget:
            output.emit_json_failure_with_data(
                "budget_exhausted",
                data.get("budget_reason") or "a budget stopped the run",
                "raise the budget (see data.budget) or wait for it to reset; "
                + _inspect_hint(data["agent_id"]),
                data,
            )
        elif failed:
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
            output.echo(f"[{data['final_status']}]", err=True)
        if data.get("failure_artifact"):
            output.echo(f"failure: {data['failure_artifact'].get('summary')}", err=True)
        if budget:
            output.echo(f"budget: {data.get('budget_reason')}", err=True)
        if data["final_status"] != "completed" and data.get("agent_kept"):
            output.echo(f"agent {data['agent_id']} kept at {data['agent_home']}", err=True)
            output.echo(_inspect_hint(data["agent_id"]), err=True)
    return EXIT_PROVIDER if failed else EXIT_REJECTED if budget else 0


def _inspect_hint(agent_id: str) -> str:
    return (
        f"inspect it: `holon status --agent {agent_id}`, "
        f"`holon transcript --agent {agent_id}`, `holon tail --agent {agent_id}`; "
        f"remove it: `holon agent rm {agent_id}` (or `holon agent prune`)"
    )
