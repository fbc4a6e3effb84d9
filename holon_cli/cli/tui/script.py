"""``holon tui --script``: the console for scripts and tests, on the base
install (no Textual).

Each stdin line is a prompt (admitted like ``POST /control/agents/{id}/
prompt``, surface ``http_control_prompt``) or one of ``/display MODE``,
``/agent ID``, ``/quit``. After a prompt it waits until that message is
settled (``turn_terminal`` or ``message_settled_without_turn`` naming it)
and prints the conversation rows that arrived meanwhile, the reply included.
A bad line (unknown command, unknown or private agent) is reported on
stderr and skipped; the exit code is the worst of them. A serve that stops
answering is waited for until the prompt's deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from holon_cli.cli.tui.session import (
    HISTORY_EVENTS,
    SCRIPT_COMMANDS,
    Conversation,
    format_line,
)
from holon_cli.errors import EXIT_OK, HolonError, worst_exit_code
from holon_cli.serve.client import ServeClient, ServeUnavailable

POLL_S = 0.1
Echo = Callable[[str], None]


def agent_cursor(client: ServeClient, agent_id: str) -> int:
    """The agent's newest ``event_seq`` (also: the agent exists and is public)."""
    return int(client.get(f"/agents/{agent_id}/status").get("last_event_seq") or 0)


def _drain(client: ServeClient, agent_id: str, conv: Conversation, out: Echo) -> None:
    while True:
        page = client.get(f"/agents/{agent_id}/events", after=conv.cursor, limit=HISTORY_EVENTS)
        for ev in page.get("events") or []:
            line = conv.feed(ev)
            if line is not None:
                out(format_line(line))
        if len(page.get("events") or []) < HISTORY_EVENTS:
            return


def wait_settled(
    client: ServeClient,
    agent_id: str,
    conv: Conversation,
    message_id: str,
    out: Echo,
    timeout_s: float,
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _drain(client, agent_id, conv, out)
        except ServeUnavailable:
            if time.monotonic() >= deadline:
                raise
        if message_id in conv.settled:
            return
        if time.monotonic() >= deadline:
            raise HolonError(
                f"message {message_id} was not settled within {timeout_s:g} s",
                hint=f"it stays queued; follow it with `holon tail --presented -f -a {agent_id}`",
            )
        time.sleep(POLL_S)


def run_script(
    client: ServeClient,
    agent_id: str,
    conv: Conversation,
    lines: Iterable[str],
    out: Echo,
    err: Echo,
    timeout_s: float,
) -> int:
    """Run the lines; the exit code (the worst of the lines' failures)."""
    from holon_cli.cli.tui.session import parse_input

    conv.cursor = agent_cursor(client, agent_id)
    code = EXIT_OK
    for raw in lines:
        if not raw.strip():
            continue
        try:
            cmd = parse_input(raw.rstrip("\r\n"), SCRIPT_COMMANDS)
            if cmd.name == "quit":
                break
            if cmd.name == "display":
                conv.set_mode(cmd.arg)
            elif cmd.name == "agent":
                cursor = agent_cursor(client, cmd.arg)
                agent_id, conv = cmd.arg, Conversation(conv.mode)
                conv.cursor = cursor
            else:
                mid = client.prompt(agent_id, cmd.arg)
                wait_settled(client, agent_id, conv, mid, out, timeout_s)
        except ServeUnavailable:
            raise
        except HolonError as exc:
            err(f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""))
            code = worst_exit_code([code, exc.exit_code])
    return code
