"""The command map and what an argv says about it, read by the entry point
(:mod:`holon_cli.cli`), the click group and the fast path alike.

``COMMANDS`` maps each command name to the ``module:attribute`` of its click
command, so the group imports one command module per invocation. Imports
nothing.
"""

from __future__ import annotations

# name -> "module:attribute"; order is the order of `holon --help`
COMMANDS: dict[str, str] = {
    "enqueue": "holon_cli.cli.cmd_enqueue:enqueue",
    "turn": "holon_cli.cli.cmd_turn:turn",
    "tick": "holon_cli.cli.cmd_tick:tick",
    "run": "holon_cli.cli.cmd_run:run",
    "status": "holon_cli.cli.cmd_inspect:status",
    "usage": "holon_cli.cli.cmd_usage:usage",
    "tail": "holon_cli.cli.cmd_inspect:tail",
    "transcript": "holon_cli.cli.cmd_inspect:transcript",
    "replay": "holon_cli.cli.cmd_replay:replay",
    "queue": "holon_cli.cli.cmd_queue:queue",
    "agent": "holon_cli.cli.cmd_agent:agent",
    "workitem": "holon_cli.cli.cmd_workitem:workitem",
    "task": "holon_cli.cli.cmd_task:task",
    "timer": "holon_cli.cli.cmd_timer:timer",
    "trigger": "holon_cli.cli.cmd_trigger:trigger",
    "serve": "holon_cli.cli.cmd_serve:serve",
    "daemon": "holon_cli.cli.cmd_daemon:daemon",
    "tui": "holon_cli.cli.cmd_tui:tui",
    "home": "holon_cli.cli.cmd_home:home",
    "memory": "holon_cli.cli.cmd_memory:memory",
    "workspace": "holon_cli.cli.cmd_workspace:workspace",
    "skills": "holon_cli.cli.cmd_skills:skills",
    "mcp": "holon_cli.cli.cmd_mcp:mcp",
    "debug": "holon_cli.cli.cmd_debug:debug",
    "completion": "holon_cli.cli.cmd_completion:completion",
}


def json_requested(argv: list[str]) -> bool:
    # a usage error can come before --json is parsed: look at the words
    return "--json" in argv


def command_words(args: list[str]) -> str:
    words = [a for a in args if not a.startswith("-")][:2]
    if not words or words[0] not in COMMANDS:
        return "holon"
    return " ".join(words) if len(words) > 1 and words[0] in _GROUPS else words[0]


_GROUPS = frozenset(
    {
        "agent",
        "workitem",
        "task",
        "home",
        "debug",
        "timer",
        "trigger",
        "queue",
        "daemon",
        "skills",
        "memory",
        "workspace",
        "mcp",
    }
)
