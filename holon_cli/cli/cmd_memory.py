"""``holon memory``: search and read an agent's memory index."""

from __future__ import annotations

import click

from holon_cli.cli import output


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def memory() -> None:
    """Search what an agent remembers (memory files, briefs, work items, episodes).

    \b
    Example:
      holon memory search "deploy window" --json | jq -r '.data.results[].source_ref'
      holon memory get mem_0123456789abcdef01234567
    """


@memory.command("search")
@click.argument("query")
@output.agent_option
@click.option("--all-workspaces", is_flag=True, help="Also search other workspaces' memory.")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(1, 50),
    default=8,
    show_default=True,
    help="At most N results.",
)
@output.json_option
def memory_search_cmd(
    query: str, agent_id: str | None, all_workspaces: bool, limit: int, as_json: bool
) -> None:
    """Ranked search: exact phrase first, then every word, then any word.

    A large index is built in the background: until it is done, results
    come from what is indexed so far and a note says so.

    \b
    Example:
      holon memory search 蓝绿 --agent ops
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.memory.search import memory_search

    d = memory_search(
        open_agent(agent_id), query, limit=limit, include_all_workspaces=all_workspaces
    )
    if as_json:
        output.emit_json(d)
        return
    if d["index"]["state"] == "building":
        click.echo(
            f"the memory index is being built in the background ({d['index']['documents']} "
            "documents so far): results may be incomplete; search again shortly",
            err=True,
        )
    if not d["results"]:
        click.echo(f"no memory matches {query!r}", err=True)
        return
    for r in d["results"]:
        output.echo(f"{r['source_ref']}  {r['kind']}  {r['title']}")
        output.echo(f"    {r['snippet']}")


@memory.command("get")
@click.argument("source_ref")
@output.agent_option
@click.option(
    "--max-chars",
    type=int,
    default=12_000,
    show_default=True,
    help="Print at most N characters (1-50000).",
)
@output.json_option
def memory_get_cmd(source_ref: str, agent_id: str | None, max_chars: int, as_json: bool) -> None:
    """Print the exact text of one source found by `holon memory search`.

    \b
    Example:
      holon memory get mem_0123456789abcdef01234567 --max-chars 2000
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.memory.search import memory_get

    d = memory_get(open_agent(agent_id), source_ref, max_chars=max_chars)
    if as_json:
        output.emit_json(d)
        return
    output.echo(d["content"])
    if d["truncated"]:
        click.echo(f"(cut at {max_chars} characters; pass --max-chars to see more)", err=True)


@memory.command("rebuild")
@output.agent_option
@output.json_option
def memory_rebuild_cmd(agent_id: str | None, as_json: bool) -> None:
    """Rebuild the agent's memory index from its sources (it is disposable).

    \b
    Example:
      holon memory rebuild --agent ops
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.memory.search import sync

    store = open_agent(agent_id)
    d = {"agent_id": store.agent_id, **sync(store, rebuild=True)}
    if as_json:
        output.emit_json(d)
        return
    click.echo(f"rebuilt the memory index of {d['agent_id']}: {d['documents']} documents")
