"""``holon workspace``: list, switch and detach an agent's workspaces (the
operator side of UseWorkspace/DetachWorkspace)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from holon_cli.cli import output
from holon_cli.cli.params import complete_attached_workspaces, complete_workspace_targets


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def workspace() -> None:
    """Which project an agent works in: AgentHome or an attached workspace.

    \b
    Example:
      holon workspace use ~/src/shop --agent dev
      holon workspace use ws_0123456789ab --isolated --agent dev
      holon workspace list --agent dev
    """


@workspace.command("list")
@output.agent_option
@click.option("--all", "show_all", is_flag=True, help="Also list known, detached workspaces.")
@output.json_option
def list_cmd(agent_id: str | None, show_all: bool, as_json: bool) -> None:
    """List the attached workspaces and which one is active.

    \b
    Example:
      holon workspace list --all --json | jq '.data.workspaces[] | select(.active)'
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.workspace.plane import list_workspaces

    rows = list_workspaces(open_agent(agent_id), include_all=show_all)
    if as_json:
        output.emit_json({"workspaces": rows})
        return
    output.print_table(
        ["", "WORKSPACE", "ANCHOR", "STATE"],
        [
            ["*" if r["active"] else "", r["workspace_id"], r["workspace_anchor"] or "-", _state(r)]
            for r in rows
        ],
    )


def _state(r: Mapping[str, object]) -> str:
    words = ["attached" if r["attached"] else "detached"]
    if not r["exists"]:
        words.append("missing")
    if r.get("projection_kind") == "git_worktree_root":
        words.append(f"in {r['execution_root']}")
    return ", ".join(words)


@workspace.command("use")
@click.argument("target", metavar="PATH|WS_ID", shell_complete=complete_workspace_targets)
@output.agent_option
@click.option(
    "--isolated",
    is_flag=True,
    help="Work in a managed git worktree on a branch of its own (made, or resumed).",
)
@output.json_option
def use_cmd(target: str, agent_id: str | None, isolated: bool, as_json: bool) -> None:
    """Make a workspace active: a directory (attached on first use), a
    workspace id, or agent_home.

    \b
    Example:
      holon workspace use . --agent dev
      holon workspace use agent_home --agent dev
    """
    import os

    from holon_cli.model.workspace import looks_like_id
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.workspace.plane import use_workspace

    by_id = looks_like_id(target) and not os.path.isdir(target)
    d = use_workspace(
        open_agent(agent_id),
        path=None if by_id else target,
        workspace_id=target if by_id else None,
        mode="isolated" if isolated else "direct",
        source="cli",
    )
    if as_json:
        output.emit_json(d)
        return
    rows: list[tuple[str, Any]] = [
        ("workspace", d["workspace_id"]),
        ("anchor", d["workspace_anchor"]),
        ("execution root", f"{d['execution_root']} ({d['projection_kind']})"),
        ("cwd", d["cwd"]),
    ]
    wt = d.get("worktree_session")
    if wt:
        rows.append(("worktree branch", f"{wt['worktree_branch']} (from {wt['original_branch']})"))
    if d.get("guidance"):
        rows.append(("note", d["guidance"]))
    output.print_kv(rows)


@workspace.command("detach")
@click.argument("workspace_id", metavar="WS_ID", shell_complete=complete_attached_workspaces)
@output.agent_option
@output.json_option
def detach_cmd(workspace_id: str, agent_id: str | None, as_json: bool) -> None:
    """Forget an attached workspace (never the active one; nothing on disk
    is deleted).

    \b
    Example:
      holon workspace detach ws_0123456789ab --agent dev
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.workspace.plane import detach_workspace

    d = detach_workspace(open_agent(agent_id), workspace_id, source="cli")
    if as_json:
        output.emit_json(d)
        return
    note = " (its directory is gone)" if d["stale"] else ""
    output.echo(f"detached {d['workspace_id']}{note}; nothing on disk was changed")
