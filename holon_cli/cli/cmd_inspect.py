"""``holon status``, ``holon tail`` and ``holon transcript``: read-only views."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from holon_cli.cli import output

if TYPE_CHECKING:
    from holon_cli.model.events import EventRecord


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@output.agent_option
@output.json_option
def status(agent_id: str | None, as_json: bool) -> None:
    """Show an agent's summary: status, pending messages, focus, tokens.

    \b
    Example:
      holon status --json | jq .data.pending
    """
    show_status(agent_id, as_json)


def show_status(agent_id: str | None, as_json: bool, command: str = "status") -> None:
    """Render one agent's summary (`holon status` and `holon agent status`)."""
    from holon_cli.cli import fast_bodies

    fast_bodies.status(agent_id, as_json, command)


def _event_line(e: EventRecord) -> str:
    data = e.get("data") or {}
    bits = [
        f"{k}={v}"
        for k, v in (
            ("message_id", e.get("message_id")),
            ("work_item_id", e.get("work_item_id")),
            ("task_id", e.get("task_id")),
        )
        if v
    ]
    detail = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(detail) > 160:
        detail = detail[:157] + "..."
    return (
        f"{e['event_seq']:>6}  {e['at']}  {e['kind']:<28} {' '.join(bits)} {detail if data else ''}"
    ).rstrip()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@output.agent_option
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep printing new events as they are appended (Ctrl-C to stop).",
)
@click.option("--jsonl", is_flag=True, help="One JSON object per line, flushed per line.")
@click.option(
    "--since",
    type=click.IntRange(min=0),
    metavar="SEQ",
    help="Only events with event_seq greater than SEQ.",
)
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=0),
    metavar="N",
    help="At most N events (the newest N without --since).",
)
@click.option(
    "--presented",
    is_flag=True,
    help="Show events as the operator console does (the shared presentation layer).",
)
@click.option(
    "--display",
    "display",
    metavar="MODE",
    default="info",
    show_default=True,
    help="With --presented: info|verbose|debug (or 3|4|5).",
)
@click.option(
    "--poll", type=click.FloatRange(min=0.01), default=0.2, show_default=True, hidden=True
)
def tail(
    agent_id: str | None,
    follow: bool,
    jsonl: bool,
    since: int | None,
    limit: int | None,
    presented: bool,
    display: str,
    poll: float,
) -> None:
    """Print an agent's event ledger; every event has an increasing event_seq.

    With --presented, each event goes through the presentation layer
    (visibility, category, title, summary) and only the rows the display
    mode shows are printed: info = results, verbose = + progress, debug =
    + tool and runtime detail. State changes are never conversation rows.

    \b
    Examples:
      holon tail --limit 20
      holon tail --follow --jsonl | jq --unbuffered -c 'select(.kind == "turn_terminal")'
      holon tail --since 120
      holon tail --presented --display verbose --follow
    """
    output.begin("tail", False)
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.inspect import follow_events, tail_events

    show = _presented_printer(display, jsonl, follow) if presented else _raw_printer(jsonl, follow)
    store = open_agent(agent_id)

    damaged: list[Any] = []

    def warn_damaged() -> None:
        for p in damaged:  # the view goes on; `holon home check` has the full report
            where = p.path if p.line is None else f"{p.path}:{p.line}"
            output.echo(
                f"warning: skipped damaged record at {where}: {p.message} "
                "(`holon home check` reports all damage)",
                err=True,
            )
        damaged.clear()

    if not follow:
        events = tail_events(store, since=since, limit=limit, damaged=damaged)
        warn_damaged()
        _note_trimmed(
            store, "events", reached_start=limit is None or len(events) < limit, since=since
        )
        for e in events:
            show(e)
        return
    try:
        start = since
        if start is None:
            # the last seq is read before the recent window, not after it: an
            # event appended in between is in the window or followed, never lost
            last = store.events.last()
            recent = tail_events(store, limit=limit if limit is not None else 10, damaged=damaged)
            warn_damaged()
            _note_trimmed(store, "events", reached_start=len(recent) < (limit or 10))
            for e in recent:
                show(e)
            start = max([int(last["event_seq"]) if last else 0, *(e["event_seq"] for e in recent)])
        else:
            _note_trimmed(store, "events", reached_start=True, since=start)
        for e in follow_events(store, since=start, poll=poll, stop=_stdout_closed):
            show(e)
    except KeyboardInterrupt:
        # Ctrl-C is how a follow ends: quietly, with the contract's exit 130
        from holon_cli.errors import EXIT_INTERRUPTED

        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None


def _note_trimmed(store: Any, name: str, *, reached_start: bool, since: int | None = None) -> None:
    """Say on stderr where history starts when the view reaches what
    retention dropped (stdout stays the records)."""
    from holon_cli.runtime.inspect import trimmed_note

    if since is not None:
        through = (store.ledger(name).trimmed() or {}).get("through_seq")
        reached_start = isinstance(through, int) and since < through
    if reached_start and (note := trimmed_note(store, name)):
        output.echo(note, err=True)


def _raw_printer(jsonl: bool, follow: bool) -> Callable[[EventRecord], None]:
    def show(e: EventRecord) -> None:
        line = (
            json.dumps(e, ensure_ascii=False, separators=(",", ":"), default=str)
            if jsonl
            else output.visible(_event_line(e))
        )
        click.echo(line)
        if follow:  # a live stream: every line reaches the reader now
            sys.stdout.flush()

    return show


def _presented_printer(display: str, jsonl: bool, follow: bool) -> Callable[[EventRecord], None]:
    from holon_cli.errors import UsageError
    from holon_cli.runtime.presentation import display_mode, present, shown_at

    try:
        mode = display_mode(display)
    except ValueError as exc:
        raise UsageError(str(exc), hint="e.g. --display verbose (or 4)") from None

    def show(e: EventRecord) -> None:
        row = present(e)
        if not shown_at(row, mode):
            return
        if jsonl:
            rec = {"event_seq": e.get("event_seq"), "at": e.get("at"), **row}
            click.echo(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
        else:
            click.echo(output.visible(f"{e['at'][11:19]}  {row['title']}: {row['summary']}"))
        if follow:
            sys.stdout.flush()

    return show


def _stdout_closed() -> bool:
    """True when stdout is a pipe whose reader has gone (`holon tail -f | head -1`).

    Without this an idle follower would only notice on its next write, which
    may never come.
    """
    import select

    try:
        p = select.poll()
        p.register(sys.stdout.fileno(), 0)  # POLLERR/POLLHUP are always reported
        return any(ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, ev in p.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@output.agent_option
@click.option(
    "--limit", "-n", type=click.IntRange(min=0), metavar="N", help="Only the newest N entries."
)
@output.json_option
def transcript(agent_id: str | None, limit: int | None, as_json: bool) -> None:
    """Print an agent's transcript: messages, assistant rounds, tool results.

    \b
    Example:
      holon transcript --limit 10
    """
    output.begin("transcript", as_json)
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.inspect import transcript as read

    store = open_agent(agent_id)
    entries = read(store, limit=limit)
    if as_json:
        led = store.ledger("transcript")
        output.emit_json({"entries": entries, "path": str(led.path), "trimmed": led.trimmed()})
        return
    _note_trimmed(store, "transcript", reached_start=limit is None or len(entries) < limit)
    for t in entries:
        kind = t.get("kind", "?")
        text = t.get("text") or ""
        if kind == "assistant_round":
            calls = ", ".join(c.get("name", "?") for c in t.get("tool_calls", []))
            head = f"[{t.get('at')}] assistant" + (f" -> {calls}" if calls else "")
        elif kind == "tool_result":
            head = (
                f"[{t.get('at')}] tool {t.get('tool_name')} "
                f"({'ok' if t.get('ok', True) else 'error'})"
            )
            text = t.get("output") or ""
        elif kind == "message":
            head = (
                f"[{t.get('at')}] {t.get('origin_label', 'message')} "
                f"({t.get('authority_class', '')})"
            )
        else:
            head = f"[{t.get('at')}] {kind}"
        output.echo(head)
        if text:
            for line in str(text).splitlines()[:40]:
                output.echo(f"    {line}")
