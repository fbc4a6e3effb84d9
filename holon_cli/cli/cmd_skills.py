"""``holon skills``: install and list an agent's skills."""

from __future__ import annotations

import click

from holon_cli.cli import output


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def skills() -> None:
    """Install and list agent skills (folders with a SKILL.md).

    \b
    Example:
      holon skills install --remote https://github.com/acme/skills/tree/main/release-notes
      holon skills list --agent reviewer
    """


@skills.command("install")
@click.argument("source", required=False, metavar="SOURCE")
@click.option(
    "--remote",
    "remote",
    metavar="URL",
    help="A GitHub folder: https://github.com/<owner>/<repo>/tree/<ref>/<path> "
    "(fetched with git, so insteadOf mirrors and credentials apply).",
)
@click.option(
    "--name", metavar="NAME", help="Install under this folder name (default: the last path part)."
)
@output.agent_option
@output.json_option
def skills_install(
    source: str | None, remote: str | None, name: str | None, agent_id: str | None, as_json: bool
) -> None:
    """Install a skill into an agent's skills/ folder.

    SOURCE is builtin:<name> or an absolute folder; use --remote for GitHub.
    An existing skill of the same name is never replaced (exit 4). A bad
    URL, ref or path exits 3 (not found) or 4 (refused) and leaves nothing.

    \b
    Example:
      holon skills install --remote https://github.com/acme/skills/tree/v2/triage --agent ops
      holon skills install builtin:verify-before-done
    """
    from holon_cli.errors import UsageError
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.agents.skills import install_skill

    if (source is None) == (remote is None):
        raise UsageError(
            "give exactly one of SOURCE and --remote URL",
            hint="e.g. `holon skills install --remote https://github.com/<o>/<r>/tree/<ref>/<path>`",
        )
    d = install_skill(open_agent(agent_id), remote or source or "", name=name)
    if as_json:
        output.emit_json(d)
        return
    where = f" @ {d['ref']} ({d['commit'][:12]})" if d.get("commit") else ""
    click.echo(f"installed {d['name']} for {d['agent_id']}: {d['path']}{where}")


@skills.command("list")
@output.agent_option
@output.json_option
def skills_list(agent_id: str | None, as_json: bool) -> None:
    """List the skills an agent discovers, in prompt order, and the builtin refs.

    \b
    Example:
      holon skills list --json | jq -r '.data.skills[].name'
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.agents.skills import list_skills

    d = list_skills(open_agent(agent_id))
    if as_json:
        output.emit_json(d)
        return
    if d["skills"]:
        rows = [
            [s["name"], s["scope"], s["description"], s["source"] or s["path"]] for s in d["skills"]
        ]
        output.print_table(["name", "scope", "description", "source"], rows)
    else:
        click.echo(f"no skills found for {d['agent_id']}", err=True)
    click.echo("builtin: " + (", ".join(d["builtin"]) or "(none)"))
