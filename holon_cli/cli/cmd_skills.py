"""``holon skills``: install, list and remove an agent's skills."""

from __future__ import annotations

import click

from holon_cli.cli import output
from holon_cli.cli.params import complete_skills


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def skills() -> None:
    """Install, list and remove agent skills (folders with a SKILL.md).

    \b
    Example:
      holon skills install --remote https://github.com/acme/skills/tree/main/release-notes
      holon skills list --agent reviewer
      holon skills rm release-notes
    """


@skills.command("install")
@click.argument("source", required=False, metavar="SOURCE")
@click.option(
    "--remote",
    "remote",
    metavar="URL",
    help="A GitHub repository (https://github.com/<owner>/<repo>: its default branch's "
    "root) or folder (.../tree/<ref>/<path>), fetched with git, so insteadOf mirrors "
    "and credentials apply.",
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

    SOURCE is builtin:<name> or an absolute folder; use --remote for GitHub
    (a repository's address installs the root of its default branch, named
    after the repository). An existing skill of the same name is never
    replaced (exit 4; `holon skills rm NAME` first). A bad URL, ref or path
    exits 3 (not found) or 4 (refused), prints what git said, and leaves
    nothing.

    \b
    Example:
      holon skills install --remote https://github.com/acme/skills/tree/v2/triage --agent ops
      holon skills install --remote https://github.com/acme/triage-skill
      holon skills install builtin:verify-before-done
    """
    from holon_cli.errors import UsageError
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.agents.skills import install_skill

    if (source is None) == (remote is None):
        raise UsageError(
            "give exactly one of SOURCE and --remote URL",
            hint="e.g. `holon skills install --remote https://github.com/<o>/<r>`",
        )
    d = install_skill(open_agent(agent_id), remote or source or "", name=name)
    if as_json:
        output.emit_json(d)
        return
    where = f" @ {d['ref']} ({d['commit'][:12]})" if d.get("commit") else ""
    click.echo(f"installed {d['name']} for {d['agent_id']}: {d['path']}{where}")


@skills.command("rm")
@output.agent_option
@click.argument("name", metavar="NAME", shell_complete=complete_skills)
@output.json_option
def skills_rm(name: str, agent_id: str | None, as_json: bool) -> None:
    """Remove an installed skill from an agent's skills/ folder.

    The folder goes in one step (a turn starting meanwhile sees it whole or
    not at all), with its record of where it came from. A skill the agent
    does not have: exit 3, naming the ones it has. Workspace skills (in a
    project) and builtin ones are not removed here.

    \b
    Example:
      holon skills rm triage --agent ops
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.agents.skills import remove_skill

    d = remove_skill(open_agent(agent_id), name)
    if as_json:
        output.emit_json(d)
        return
    click.echo(f"removed {d['name']} from {d['agent_id']}: {d['path']}")


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
