"""``holon workitem``: list, show, create, update, pick, complete work items
and open their plan files in ``$VISUAL``/``$EDITOR``.

Rendering only: every command is one call into
:mod:`holon_cli.runtime.workitems` (the same functions the model's tools
use, under the same locks), printed as text or as the ``--json`` envelope.
Operator actions are recorded with ``source: operator`` on their events.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import click

from holon_cli.cli import output
from holon_cli.cli.params import DURATION, complete_open_work_items, complete_work_items
from holon_cli.model.workitem import LIST_FILTERS, PLAN_STATUSES

CTX = {"help_option_names": ["-h", "--help"]}

_TODO_PREFIXES = (
    ("[x]", "completed"),
    ("[X]", "completed"),
    ("[>]", "in_progress"),
    ("[~]", "in_progress"),
    ("[ ]", "pending"),
)


def _parse_todo(text: str) -> dict[str, str]:
    s = text.strip()
    for prefix, state in _TODO_PREFIXES:
        if s.startswith(prefix):
            return {"text": s[len(prefix) :].strip(), "state": state}
    return {"text": s, "state": "pending"}


def _store(agent_id: str | None) -> Any:
    from holon_cli.runtime.agents.lifecycle import open_agent

    return open_agent(agent_id)


def _vocab(agent_id: str | None, **flags: str) -> Any:
    """Hints and errors in this command's flags, repeating the ``--agent`` given."""
    from holon_cli.runtime.workitems.hints import CliVocabulary

    return CliVocabulary(agent_id, flags)


def _warn(res: Mapping[str, object]) -> None:
    warnings = res.get("warnings")
    for w in warnings if isinstance(warnings, list) else []:
        click.echo(f"warning: {w.get('message')}", err=True)


def _read_text_arg(value: str, what: str) -> str:
    from holon_cli.errors import UsageError

    if value != "-":
        return value
    if sys.stdin.isatty():
        raise UsageError(
            f"{what} `-` reads from stdin, but stdin is a terminal",
            hint=f"pipe the {what} in, or pass it as text",
        )
    try:
        return sys.stdin.read()
    except UnicodeDecodeError:
        raise UsageError("stdin is not valid UTF-8 text") from None


def _todo_line(t: Mapping[str, object]) -> str:
    mark = {"completed": "[x]", "in_progress": "[>]"}.get(str(t.get("state")), "[ ]")
    return f"  {mark} {t.get('text')}"


@click.group(context_settings=CTX)
def workitem() -> None:
    """Inspect and manage an agent's work items (the work plane).

    A work item is a durable objective with a plan file
    (work-items/<id>/plan.md in the agent home), a todo checklist and an
    optional blocker. One open item is the agent's current focus.

    \b
    Example:
      holon workitem create "Split provider fixtures" --todo "inspect" --todo "refactor"
      holon workitem list --filter open
      holon workitem edit wi_01h...
    """


@workitem.command("list")
@output.agent_option
@click.option(
    "--filter",
    "filter_",
    type=click.Choice(LIST_FILTERS),
    default="all",
    show_default=True,
    help="Which work items to list.",
)
@click.option(
    "--limit", "-n", type=click.IntRange(min=1), metavar="N", help="At most N work items."
)
@output.json_option
def workitem_list(agent_id: str | None, filter_: str, limit: int | None, as_json: bool) -> None:
    """List work items: the current one first, then by candidate class.

    \b
    Example:
      holon workitem list --filter queued --json | jq -r '.data.work_items[].id'
    """
    from holon_cli.cli import fast_bodies

    fast_bodies.workitem_list(agent_id, filter_, limit, as_json)


@workitem.command("show")
@click.argument("work_item_id", metavar="ID", shell_complete=complete_work_items)
@output.agent_option
@output.json_option
def workitem_show(work_item_id: str, agent_id: str | None, as_json: bool) -> None:
    """Show one work item: fields, readiness, todos and a plan preview.

    \b
    Example:
      holon workitem show wi_01h... --json | jq .data.work_item.plan_artifact.path
    """
    output.begin("workitem show", as_json)
    from holon_cli.runtime.workitems import get_work_item

    res = get_work_item(_store(agent_id), work_item_id, vocab=_vocab(agent_id))
    if as_json:
        output.emit_json(res)
        return
    w = res["work_item"]
    plan = w["plan_artifact"]
    rows: list[tuple[str, Any]] = [
        ("id", w["id"]),
        ("objective", w["objective"]),
        ("state", w["state"] + ("  (current)" if w["is_current"] else "")),
        ("readiness", f"{w['readiness']} ({w['scheduling_state']})"),
        ("plan status", w["plan_status"]),
        ("plan", plan["path"] + ("" if plan.get("exists") else "  (MISSING)")),
    ]
    if plan.get("exists"):
        rows.append(
            ("plan file", f"{plan['bytes']} bytes, {plan['hash']}, updated {plan['updated_at']}")
        )
    if w.get("blocked_by"):
        rows.append(("blocked by", w["blocked_by"]))
        rows.append(("recheck at", w.get("recheck_at") or "-"))
    if w.get("current_todo"):
        rows.append(("current todo", w["current_todo"]["text"]))
    report = w.get("completion_report")
    if report:
        rows.append(("report", report["text"]))
    rows += [("created", w["created_at"]), ("updated", w["updated_at"])]
    if w.get("completed_at"):
        rows.append(("completed", w["completed_at"]))
    output.print_kv(rows)
    if w.get("todo_list"):
        click.echo("\nTodo:")
        for t in w["todo_list"]:
            output.echo(_todo_line(t))
    if plan.get("exists") and plan.get("preview"):
        click.echo(
            "\nPlan preview:"
            + ("" if plan["preview_complete"] else " (truncated; open the file for the rest)")
        )
        output.echo(plan["preview"].rstrip("\n"))


@workitem.command("path")
@click.argument("work_item_id", metavar="ID", shell_complete=complete_work_items)
@output.agent_option
@output.json_option
def workitem_path(work_item_id: str, agent_id: str | None, as_json: bool) -> None:
    """Print the absolute path of a work item's plan.md.

    \b
    Example:
      less "$(holon workitem path wi_01h...)"
    """
    output.begin("workitem path", as_json)
    from holon_cli.runtime.workitems import require_work_item

    rec = require_work_item(_store(agent_id), work_item_id, vocab=_vocab(agent_id))
    path = rec["plan_artifact"]["path"]
    if as_json:
        from pathlib import Path

        output.emit_json({"work_item_id": rec["id"], "path": path, "exists": Path(path).is_file()})
    else:
        click.echo(path)


@workitem.command("create")
@click.argument("objective")
@output.agent_option
@click.option(
    "--plan-file",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    metavar="F",
    help="Seed plan.md from this file (`-`: stdin).",
)
@click.option(
    "--plan-status", type=click.Choice(PLAN_STATUSES), help="Initial plan status (default: draft)."
)
@click.option(
    "--todo",
    "todos",
    multiple=True,
    metavar="TEXT",
    help=(
        "A todo item; repeat for several. Prefix with [x] (completed), "
        "[>] (in progress) or [ ] (pending, the default)."
    ),
)
@output.json_option
def workitem_create(
    objective: str,
    agent_id: str | None,
    plan_file: str | None,
    plan_status: str | None,
    todos: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create an open work item and its plan file. The current focus is unchanged.

    \b
    Example:
      holon workitem create "Fix flaky login test" --plan-file notes/login.md \\
        --plan-status ready --todo "reproduce" --todo "fix"
    """
    output.begin("workitem create", as_json)
    from holon_cli.errors import UsageError
    from holon_cli.runtime.workitems import create_work_item

    plan = None
    if plan_file is not None:
        if plan_file == "-":
            plan = _read_text_arg("-", "plan")
        else:
            try:
                with open(plan_file, encoding="utf-8") as f:
                    plan = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(
                    f"cannot read --plan-file {plan_file}: {exc}",
                    hint="pass a readable UTF-8 text file",
                ) from None
    store = _store(agent_id)
    vocab = _vocab(agent_id, objective="OBJECTIVE")
    res = create_work_item(
        store,
        objective,
        plan_status=plan_status,
        plan=plan,
        todo_list=[_parse_todo(t) for t in todos],
        source="operator",
        vocab=vocab,
    )
    if as_json:
        output.emit_json(res)
        return
    w = res["work_item"]
    click.echo(f"created {w['id']}: {w['objective']}")
    click.echo(f"plan: {w['plan_artifact']['path']}")
    _warn(res)
    if not res["current_work_item_id"]:
        pick = vocab.command(f"pick {w['id']}")
        click.echo(f"hint: no work item is current; {pick} makes it current", err=True)


@workitem.command("update")
@click.argument("work_item_id", metavar="ID", shell_complete=complete_open_work_items)
@output.agent_option
@click.option("--objective", metavar="T", help="Refined short objective.")
@click.option(
    "--plan-status",
    type=click.Choice(PLAN_STATUSES),
    help="needs_input releases focus if the item is current.",
)
@click.option(
    "--todo",
    "todos",
    multiple=True,
    metavar="TEXT",
    help="Replace the todo list (repeat for several; [x]/[>]/[ ] prefixes set the state).",
)
@click.option("--clear-todos", is_flag=True, help="Replace the todo list with an empty one.")
@click.option(
    "--blocked-by", metavar="TEXT", help="Set the blocker (releases focus if the item is current)."
)
@click.option(
    "--clear-blocker",
    is_flag=True,
    help="Clear the blocker and its recheck deadline (focus is not changed).",
)
@click.option(
    "--recheck-after",
    type=DURATION,
    metavar="DURATION",
    help="With --blocked-by: remind after this long, e.g. 30m, 2h (default from config, else 30m).",
)
@output.json_option
def workitem_update(
    work_item_id: str,
    agent_id: str | None,
    objective: str | None,
    plan_status: str | None,
    todos: tuple[str, ...],
    clear_todos: bool,
    blocked_by: str | None,
    clear_blocker: bool,
    recheck_after: float | None,
    as_json: bool,
) -> None:
    """Update a work item's objective, plan status, todos or blocker.

    \b
    Example:
      holon workitem update wi_01h... --blocked-by "waiting for CI on PR 42" --recheck-after 2h
      holon workitem update wi_01h... --clear-blocker
    """
    output.begin("workitem update", as_json)
    from holon_cli.errors import UsageError
    from holon_cli.model.workitem import UNSET, Unset
    from holon_cli.runtime.workitems import update_work_item

    if blocked_by is not None and clear_blocker:
        raise UsageError(
            "--blocked-by and --clear-blocker contradict each other", hint="pass one of them"
        )
    if todos and clear_todos:
        raise UsageError("--todo and --clear-todos contradict each other", hint="pass one of them")
    recheck_ms = None if recheck_after is None else max(1, round(recheck_after * 1000))
    blocker: str | None | Unset = UNSET
    if clear_blocker:
        blocker = None
    elif blocked_by is not None:
        blocker = blocked_by
    todo_list = [] if clear_todos else ([_parse_todo(t) for t in todos] if todos else None)
    res = update_work_item(
        _store(agent_id),
        work_item_id,
        objective=objective,
        plan_status=plan_status,
        todo_list=todo_list,
        blocked_by=blocker,
        recheck_after_ms=recheck_ms,
        source="operator",
        vocab=_vocab(agent_id),
    )
    if as_json:
        output.emit_json(res)
        return
    w = res["work_item"]
    click.echo(f"updated {w['id']} ({', '.join(res['changed'])}); readiness: {w['readiness']}")
    if w.get("recheck_at") and "blocked_by" in res["changed"]:
        click.echo(f"recheck at {w['recheck_at']}")
    if res["note"]:
        click.echo(res["note"], err=True)
    _warn(res)


@workitem.command("pick")
@click.argument("work_item_id", metavar="ID", shell_complete=complete_open_work_items)
@output.agent_option
@click.option(
    "--reason",
    metavar="TEXT",
    help="Why focus changes (expected when the current item is still runnable).",
)
@output.json_option
def workitem_pick(
    work_item_id: str, agent_id: str | None, reason: str | None, as_json: bool
) -> None:
    """Make an open work item the agent's current focus.

    \b
    Example:
      holon workitem pick wi_01h... --reason "operator asked for this first"
    """
    output.begin("workitem pick", as_json)
    from holon_cli.runtime.workitems import pick_work_item

    res = pick_work_item(
        _store(agent_id), work_item_id, reason=reason, source="operator", vocab=_vocab(agent_id)
    )
    if as_json:
        output.emit_json(res)
        return
    w = res["work_item"]
    prev = res.get("previous_work_item")
    if res["switch_kind"] == "reaffirm":
        click.echo(f"{w['id']} is already current")
    else:
        click.echo(f"current work item: {w['id']}" + (f" (was {prev['id']})" if prev else ""))
    _warn(res)


@workitem.command("complete")
@click.argument("work_item_id", metavar="ID", shell_complete=complete_open_work_items)
@output.agent_option
@click.option(
    "--report",
    metavar="TEXT",
    help="Completion report recorded as the item's result summary (`-`: stdin).",
)
@output.json_option
def workitem_complete(
    work_item_id: str, agent_id: str | None, report: str | None, as_json: bool
) -> None:
    """Mark a work item completed (operator completion). Releases focus if it was current.

    \b
    Example:
      holon workitem complete wi_01h... --report "Merged in #42; docs updated."
    """
    output.begin("workitem complete", as_json)
    from holon_cli.runtime.waiting.intents import cancel_for_work_item
    from holon_cli.runtime.workitems import complete_work_item

    text = _read_text_arg(report, "report") if report is not None else None
    res = complete_work_item(
        _store(agent_id),
        work_item_id,
        report=text,
        source="operator",
        vocab=_vocab(agent_id),
        cancel_waits=cancel_for_work_item,
    )
    if as_json:
        output.emit_json(res)
        return
    click.echo(
        f"completed {res['work_item']['id']}"
        + ("; focus released" if res["focus_released"] else "")
    )
    _warn(res)


@workitem.command("edit")
@click.argument("work_item_id", metavar="ID", shell_complete=complete_work_items)
@output.agent_option
@output.json_option
def workitem_edit(work_item_id: str, agent_id: str | None, as_json: bool) -> None:
    """Open a work item's plan.md in $VISUAL (or $EDITOR), then refresh its descriptor.

    \b
    Example:
      EDITOR=vim holon workitem edit wi_01h...
    """
    output.begin("workitem edit", as_json)
    import os
    import shlex
    import subprocess
    from pathlib import Path

    from holon_cli.errors import HolonError, UsageError
    from holon_cli.model.workitem import describe_plan
    from holon_cli.runtime.workitems import refresh_plan_descriptor, require_work_item

    store = _store(agent_id)
    rec = require_work_item(store, work_item_id, vocab=_vocab(agent_id))
    editor = (os.environ.get("VISUAL") or "").strip() or (os.environ.get("EDITOR") or "").strip()
    if not editor:
        raise UsageError(
            "no editor configured: $VISUAL and $EDITOR are unset",
            hint="set one (e.g. `export EDITOR=vim`), or edit the file directly: "
            + rec["plan_artifact"]["path"],
        )
    path = Path(rec["plan_artifact"]["path"])

    def file_hash() -> str | None:
        try:
            return str(describe_plan(str(path), path.read_bytes(), None)["hash"])
        except FileNotFoundError:
            return None

    before = file_hash()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        argv = shlex.split(editor) + [str(path)]
    except ValueError as exc:
        raise UsageError(
            f"cannot parse the editor command {editor!r}: {exc}", hint="fix $VISUAL/$EDITOR"
        ) from None
    try:
        # the editor gets the real terminal: stdin/stdout/stderr are inherited
        code = subprocess.call(argv)
    except OSError as exc:
        raise UsageError(
            f"cannot run editor {argv[0]!r}: {exc}",
            hint="set $VISUAL or $EDITOR to an installed editor",
        ) from None
    res = refresh_plan_descriptor(store, rec["id"])
    after = file_hash()
    data = {
        "work_item_id": rec["id"],
        "path": str(path),
        "editor": editor,
        "editor_exit_code": code,
        "changed": before != after,
        "plan_artifact": res["plan_artifact"],
    }
    if code != 0:
        raise HolonError(
            f"editor exited with status {code}; the plan descriptor was refreshed "
            f"({'changed' if data['changed'] else 'unchanged'})",
            hint=f"check the file: {path}",
            kind="editor_failed",
            details=data,
        )
    if as_json:
        output.emit_json(data)
    elif data["changed"]:
        click.echo(f"plan changed: {path} ({res['plan_artifact']['bytes']} bytes)")
    else:
        click.echo(f"plan unchanged: {path}")
