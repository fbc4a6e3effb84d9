"""``holon task``: run, list, inspect, feed and stop command tasks.

Rendering only: each command is one call into
:mod:`holon_cli.runtime.children.handle` (command tasks pass on to
:mod:`holon_cli.runtime.tasks.plane`; child agents' handles get the child
plane's shapes): the same functions the model's Task* tools use, under the
same per-task locks.
"""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING, Any, cast

import click

from holon_cli.cli import output
from holon_cli.cli.params import complete_running_tasks, complete_tasks

if TYPE_CHECKING:
    from holon_cli.model.task import TaskInputResult, TaskSnapshot
    from holon_cli.store.agent_store import AgentStore

CTX = {"help_option_names": ["-h", "--help"]}


def _store(agent_id: str | None) -> AgentStore:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.tasks.plane import recovery_pass

    store = open_agent(agent_id)
    recovery_pass(store)
    return store


def _rows(snap: TaskSnapshot) -> list[tuple[str, Any]]:
    cmd = snap.get("command") or {}
    rows: list[tuple[str, Any]] = [
        ("task", snap["task_id"]),
        ("status", snap["status"]),
        ("command", cmd.get("cmd")),
        ("workdir", cmd.get("workdir")),
        ("created", snap.get("created_at")),
    ]
    if snap.get("finished_at"):
        rows.append(("finished", snap["finished_at"]))
    if snap.get("exit_status") is not None:
        rows.append(("exit status", snap["exit_status"]))
    for key in ("signal", "stop_reason", "error", "status_before_restart"):
        if snap.get(key):
            rows.append((key.replace("_", " "), snap[key]))
    rows.append(("accepts input", "yes" if snap.get("accepts_input") else "no"))
    child: Any = snap
    if snap.get("kind") == "child_agent_task":
        rows[2:4] = [("child", child.get("child_agent_id")), ("summary", snap.get("summary"))]
        obs = child.get("child_observability") or {}
        rows.append(("child phase", obs.get("phase")))
        rows.append(("workspace mode", child.get("workspace_mode")))
        wt = child.get("worktree")
        if wt:
            rows.append(("worktree", f"{wt['path']} ({wt['branch']}, {wt['cleanup_status']})"))
            rows.append(("changed files", ", ".join(wt["changed_files"]) or "none"))
        if child.get("result_summary"):
            rows.append(("result", child["result_summary"]))
        return rows
    rows.append(("output", cmd.get("output_path")))
    return rows


def _label(t: Any) -> str:
    if t.get("kind") == "child_agent_task":
        return f"[child {t.get('child_agent_id')}] {t['summary']}"
    return str(t["summary"])


def _byte_writer() -> Any:
    """Raw bytes to stdout (text, decoded as UTF-8, when stdout has no buffer)."""
    buf = getattr(sys.stdout, "buffer", None)
    if buf is not None:

        def write_bytes(chunk: bytes) -> None:
            buf.write(chunk)
            buf.flush()

        return write_bytes
    import codecs

    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write_text(chunk: bytes) -> None:
        sys.stdout.write(dec.decode(chunk))
        sys.stdout.flush()

    return write_text


@click.group(context_settings=CTX)
def task() -> None:
    """Run and manage command tasks: commands that outlive a turn.

    A task runs under its own small supervisor process (no daemon needed),
    streams its output to .holon/tasks/<id>/output.log in the agent home and,
    when it ends, rejoins the agent as one task_result message.

    \b
    Example:
      holon task run -- make test
      holon task list --all
      holon task output task_01h... --follow
      holon task stop task_01h...
    """


@task.command("run", context_settings=CTX)
@click.argument("command", nargs=-1, required=True, metavar="-- CMD...")
@output.agent_option
@click.option(
    "--workdir", "-C", metavar="DIR", default=".", help="Directory to run in (default: here)."
)
@click.option("--accepts-input", is_flag=True, help="Keep stdin open for `holon task input`.")
@click.option(
    "--tty", is_flag=True, help="Run under a pseudo-terminal (one combined output stream)."
)
@output.json_option
def task_run(
    command: tuple[str, ...],
    agent_id: str | None,
    workdir: str,
    accepts_input: bool,
    tty: bool,
    as_json: bool,
) -> None:
    """Start CMD as a background task of an agent and print the task id.

    One argument is a shell command line (run with /bin/bash -c); several
    are quoted and joined. Its environment is built from execution.env in
    config.yaml (default: only PATH HOME USER LOGNAME SHELL LANG LC_* TERM
    TZ TMPDIR; `pass: [NAME]` adds yours; a provider's api_key_env never),
    and it runs in the command sandbox (execution.sandbox, default auto).
    The workdir may not be the holon home or a folder holding it.

    \b
    Examples:
      holon task run -- make test
      holon task run --agent builder --workdir ~/src/app -- 'npm run build && npm test'
      holon task run --accepts-input -- python3 -i
    """
    output.begin("task run", as_json)
    from pathlib import Path

    from holon_cli.runtime.tasks.plane import run_task

    cmd = command[0] if len(command) == 1 else shlex.join(command)
    snap = run_task(
        _store(agent_id), cmd, workdir=Path(workdir), accepts_input=accepts_input, tty=tty
    )
    if as_json:
        output.emit_json(snap)
        return
    click.echo(snap["task_id"])
    from holon_cli.model.task import never_started

    # a command that ran and already exited non-zero is "failed" too: that
    # is its result, not a failure to start (the two raced here before)
    if never_started(snap):
        click.echo(f"the task could not start: {snap['error']}", err=True)


@task.command("list", context_settings=CTX)
@output.agent_option
@click.option("--all", "include_all", is_flag=True, help="Include finished tasks.")
@output.json_option
def task_list(agent_id: str | None, include_all: bool, as_json: bool) -> None:
    """List an agent's running tasks (--all: finished ones too).

    \b
    Example:
      holon task list --all --agent builder
    """
    output.begin("task list", as_json)
    from holon_cli.runtime.children.handle import list_tasks

    tasks = list_tasks(_store(agent_id), include_all=include_all)
    if as_json:
        output.emit_json({"tasks": tasks})
        return
    if not tasks:
        click.echo(
            "no tasks" + ("" if include_all else " running (--all lists finished ones)"), err=True
        )
        return
    output.print_table(
        ["task", "status", "exit", "created", "command"],
        [
            [
                t["task_id"],
                t["status"],
                "" if t["exit_status"] is None else t["exit_status"],
                t["created_at"],
                _label(t),
            ]
            for t in tasks
        ],
    )


@task.command("status", context_settings=CTX)
@click.argument("task_id", metavar="ID", shell_complete=complete_tasks)
@output.agent_option
@output.json_option
def task_status(task_id: str, agent_id: str | None, as_json: bool) -> None:
    """Show a task's lifecycle record (no output; see `holon task output`).

    \b
    Example:
      holon task status task_01h...
    """
    output.begin("task status", as_json)
    from holon_cli.runtime.children.handle import task_status as status_of

    snap = status_of(_store(agent_id), task_id)["task"]
    if as_json:
        output.emit_json({"task": snap})
    else:
        output.print_kv(_rows(snap))


@task.command("output", context_settings=CTX)
@click.argument("task_id", metavar="ID", shell_complete=complete_tasks)
@output.agent_option
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the task ends.")
@output.json_option
def task_output(task_id: str, agent_id: str | None, follow: bool, as_json: bool) -> None:
    """Print a task's output log (combined stdout and stderr).

    With --json: the TaskOutput envelope (retrieval_status, bounded preview).

    \b
    Examples:
      holon task output task_01h...
      holon task output task_01h... --follow
    """
    output.begin("task output", as_json)
    from holon_cli.runtime.children import handle
    from holon_cli.runtime.tasks import plane

    store = _store(agent_id)
    if as_json:
        output.emit_json(handle.task_output(store, task_id, block=follow))
        return
    if plane.read_task(store, task_id).get("kind") == "child_agent_task":
        res = handle.task_output(store, task_id, block=follow, timeout_ms=86_400_000)
        click.echo(res["task"]["output_preview"] or "(no result yet)")
        return
    write = _byte_writer()

    if follow:
        rec = plane.follow_output(store, task_id, write)
        click.echo(f"task {task_id} {rec.get('status')}", err=True)
        return
    plane.read_task(store, task_id)
    path = plane.task_dir(store, task_id) / "output.log"
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 16):
                write(chunk)
    except FileNotFoundError:
        click.echo("(no output yet)", err=True)


@task.command("input", context_settings=CTX)
@click.argument("task_id", metavar="ID", shell_complete=complete_running_tasks)
@click.argument("text", metavar="TEXT|-")
@output.agent_option
@output.json_option
def task_input(task_id: str, text: str, agent_id: str | None, as_json: bool) -> None:
    """Write TEXT (or stdin with `-`) to a running task's stdin.

    Only tasks started with --accepts-input take input; anything else is
    refused with exit 4. No newline is added. A child agent's handle
    (child_agent_task) takes TEXT as a follow-up message to the child.

    \b
    Example:
      holon task input task_01h... $'yes\\n'
      printf 'print(1)\\n' | holon task input task_01h... -
    """
    output.begin("task input", as_json)
    from holon_cli.errors import UsageError
    from holon_cli.runtime.children.handle import task_input as feed
    from holon_cli.runtime.tasks.plane import require_active_input

    if text == "-":
        try:
            text = sys.stdin.read()
        except UnicodeDecodeError:
            raise UsageError("stdin is not valid UTF-8 text") from None
    res: Any = require_active_input(cast("TaskInputResult", feed(_store(agent_id), task_id, text)))
    if as_json:
        output.emit_json(res)
    else:
        click.echo(res["summary_text"])


@task.command("stop", context_settings=CTX)
@click.argument("task_id", metavar="ID", shell_complete=complete_running_tasks)
@output.agent_option
@output.json_option
def task_stop(task_id: str, agent_id: str | None, as_json: bool) -> None:
    """Stop a task: SIGTERM to its whole process tree, SIGKILL after 5 s.

    A task that already ended is left as it is (exit 0, and it says so). A
    child agent's handle: the child (and what it runs) is stopped and archived.

    \b
    Example:
      holon task stop task_01h...
    """
    output.begin("task stop", as_json)
    from holon_cli.runtime.children.handle import task_stop as stop

    res = stop(_store(agent_id), task_id)
    if as_json:
        output.emit_json(res)
    else:
        click.echo(res["summary_text"])
