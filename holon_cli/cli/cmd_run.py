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
    from holon_cli.cli import fast_bodies

    code = fast_bodies.run(
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
