"""``holon replay``: run a recorded turn again offline and compare each
request with the recorded one; ``--export`` its model steps as a script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from holon_cli.cli import output
from holon_cli.cli.params import complete_turns


@click.command("replay")
@click.argument("turn_id", metavar="TURN_ID", shell_complete=complete_turns)
@output.agent_option_with(
    "Agent the turn belongs to (default: whichever agent of the home recorded it)."
)
@click.option(
    "--export",
    "export_path",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the turn's model steps as a scripted: model script to FILE instead "
    "(holon run --model scripted:FILE re-plays them against real tools).",
)
@output.json_option
def replay(turn_id: str, agent_id: str | None, export_path: Path | None, as_json: bool) -> None:
    """Rebuild each request of a recorded turn with today's code, config,
    AGENTS.md and skills, and compare it with what was sent.

    The turn's state before it ran is rebuilt in a temporary home; the
    recorded answers and tool results are served back: no network, no
    command runs, nothing in the home changes. Exit 0 when every request
    matches; exit 1 at the first difference, with its round and a unified
    diff of the request (--json: data match, rounds, divergence {round,
    path, recorded, replayed, diff}). Paths of the home and the workspace,
    timestamps, the trigger token and the frame's derived hashes are
    normalised first. Unknown turn: exit 3; a record retention dropped:
    exit 4.

    \b
    Examples:
      holon replay turn_01m8jxkn6d0000yhcrz3
      holon replay turn_01m8jxkn6d0000yhcrz3 --json | jq .data.divergence
      holon replay turn_01m8jxkn6d0000yhcrz3 --export bug.yaml
      holon run --max-turns 1 --model scripted:bug.yaml "the message the turn answered"
    """
    if export_path is not None:
        _export(turn_id, agent_id, export_path, as_json)
        return
    from holon_cli.runtime.replay.replay import replay_turn
    from holon_cli.tools.catalog import default_catalog

    res = replay_turn(turn_id, agent_id=agent_id, catalog=default_catalog())
    if as_json:
        output.emit_json(res)
    else:
        _print(res)
    if not res["match"]:
        raise click.exceptions.Exit(1)


def _print(res: dict[str, Any]) -> None:
    head = f"turn {res['turn_id']} (agent {res['agent_id']})"
    d = res["divergence"]
    if d is None:
        click.echo(f"{head}: {res['rounds']} request(s) rebuilt; all match the record", err=True)
        return
    if d["replayed"] is None and not d["path"]:
        why = "today's turn ends before it (it makes fewer requests)"
    elif d["recorded"] is None and not d["path"]:
        why = "the recorded turn had no such request (today's makes more)"
    else:
        why = f"first difference at {d['path']}"
    click.echo(
        f"{head}: request {d['request']} (round {d['round']}) differs; {why}; "
        f"{res['rounds']} request(s) matched before it",
        err=True,
    )
    output.echo(d["diff"])


def _export(turn_id: str, agent_id: str | None, path: Path, as_json: bool) -> None:
    from holon_cli.runtime.replay import records
    from holon_cli.runtime.replay.export import write

    store = records.locate(turn_id, agent_id)
    res = write(records.load(store, turn_id), path)
    res = {"turn_id": turn_id, "agent_id": store.agent_id, **res}
    if as_json:
        output.emit_json(res)
        return
    click.echo(f"wrote {res['steps']} model step(s) of turn {turn_id} to {res['path']}", err=True)
    cmd = f"holon run --max-turns 1 --model scripted:{res['path']}"
    click.echo(f"re-play them: {cmd} \"$(sed -n 's/^#> //p' {res['path']})\"", err=True)
