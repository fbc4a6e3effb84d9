"""``holon daemon start|stop|status|restart|logs``: ``holon serve`` in the background."""

from __future__ import annotations

from typing import TYPE_CHECKING, Unpack

import click

from holon_cli.cli import output
from holon_cli.cli.cmd_serve import serve_options

if TYPE_CHECKING:
    from holon_cli.cli.cmd_serve import ServeFlags
    from holon_cli.model.typed_base import JsonObject


def _serve_args(flags: ServeFlags) -> tuple[list[str], str | None]:
    """Validate the serve options here (before launch) and turn them into the
    child's argv plus the effective token (handed to it in its environment,
    never on its command line)."""
    from holon_cli.cli.cmd_serve import build_options

    if flags.get("engine") == "dbos":
        _daemon_executor_id()
    opts, access = build_options(flags)
    assert opts.listen is not None and opts.socket_path is not None
    args = ["--listen", opts.listen, "--socket", opts.socket_path, "--access", access]
    args += ["--concurrency", str(opts.concurrency)]
    if opts.advertise:
        args += ["--advertise", opts.advertise]
    if opts.engine == "dbos":  # the URL goes by environment: argv is public (ps)
        import os

        assert opts.database_url is not None
        os.environ["HOLON_DATABASE_URL"] = opts.database_url
        args += ["--engine", "dbos"]
    return args, opts.token


def _daemon_executor_id() -> None:
    """The daemon's worker keeps one executor id across restarts (host and
    home), so its socket name and configuration stay the same and a restarted
    daemon recovers its own pending passes at launch. The child inherits it."""
    import os
    import socket

    if not os.environ.get("HOLON_EXECUTOR_ID"):
        from holon_cli.digest import sha256_hex
        from holon_cli.store.layout import HomeLayout

        home = sha256_hex(str(HomeLayout.current().root).encode())[:8]
        os.environ["HOLON_EXECUTOR_ID"] = f"{socket.gethostname()}-daemon-{home}"


def _print_status(s: JsonObject) -> None:
    rows = [
        ("state", s["state"]),
        ("pid", s["pid"] or "-"),
        ("home", s["home_dir"]),
        ("http", s["http_addr"] or "-"),
        ("socket", s["socket_path"] or "-"),
        ("healthy", "yes" if s["healthy"] else "no"),
    ]
    if s.get("config_matches") is not None:
        rows.append(("config matches", "yes" if s["config_matches"] else "no"))
    if s["state"] in ("running", "foreground"):
        rows += [
            ("activity", s["activity"] or "-"),
            (
                "agents",
                f"{s['active_agent_count']} active, {s['processing_agent_count']} processing, "
                f"{s['waiting_agent_count']} waiting; {s['active_task_count']} task(s)",
            ),
        ]
    if s.get("engine") == "dbos":
        rows.append(("engine", f"dbos, worker {s.get('executor_id') or '-'}"))
        workers = s.get("workers")
        for w in workers if isinstance(workers, list) else []:
            if not isinstance(w, dict):
                continue
            state = "alive" if w.get("alive") else "silent"
            rows.append(
                ("cluster worker", f"{w['executor_id']} (pid {w['pid']} on {w['host']}, {state})")
            )
    lf = s.get("last_failure")
    if isinstance(lf, dict) and lf:
        rows.append(
            ("last failure", f"{lf.get('occurred_at')} [{lf.get('phase')}] {lf.get('summary')}")
        )
    for k, v in rows:
        output.echo(f"{k:>15}: {v}")
    if s["state"] == "stale":
        output.echo("the recorded daemon is gone; `holon daemon start` cleans up", err=True)
    if s["state"] == "foreground":
        output.echo(
            "no daemon, but a foreground `holon serve` serves this home (stop it with Ctrl-C "
            "in its terminal, or `kill` its pid)",
            err=True,
        )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def daemon() -> None:
    """Run `holon serve` in the background (one per HOLON_HOME).

    Files: $HOLON_HOME/run/daemon.json, daemon.log, daemon-failure.json.

    \b
    Example:
      holon daemon start && holon daemon status
      holon daemon logs --tail 100
    """


@daemon.command("start", context_settings={"help_option_names": ["-h", "--help"]})
@serve_options
@click.option(
    "--start-timeout",
    default="20s",
    show_default=True,
    metavar="DURATION",
    help="How long to wait for /healthz.",
)
@output.json_option
def start(start_timeout: str, as_json: bool, **flags: Unpack[ServeFlags]) -> None:
    """Start `holon serve` detached and wait until it answers /healthz.

    Already running with the same options: exit 0, no second process.
    Running with different options: exit 4 (use `holon daemon restart`).
    A dead pid or leftover socket is cleaned up first. A socket another
    live process answers on, or a listen port in use (e.g. by the daemon of
    another HOLON_HOME, named in the message): exit 4.

    \b
    Example:
      holon daemon start --listen 127.0.0.1:7878 --concurrency 8
      holon daemon start --host 0.0.0.0 --port 7878 --access token --token-file ~/.holon-token
    """
    from holon_cli.serve import daemon as d

    args, token = _serve_args(flags)
    res = d.start(args, token, timeout_s=_duration(start_timeout))
    if as_json:
        output.emit_json(res)
        return
    click.echo("already running" if res["already_running"] else "started", err=True)
    _print_status(res)


def _duration(text: str) -> float:
    from holon_cli.errors import UsageError

    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    for u in ("ms", "s", "m", "h", "d"):
        num = text[: -len(u)]
        if text.endswith(u) and num.isdigit():
            return int(num) * units[u]
    raise UsageError(f"invalid duration {text!r}", hint="use e.g. 500ms, 20s, 5m")


@daemon.command("stop", context_settings={"help_option_names": ["-h", "--help"]})
@output.json_option
def stop(as_json: bool) -> None:
    """Stop the daemon: graceful drain through the control surface, then
    SIGTERM, then SIGKILL after 10 s. Not running: exit 0. Agents are not
    marked stopped.

    \b
    Example:
      holon daemon stop
    """
    from holon_cli.serve import daemon as d

    res = d.stop()
    if as_json:
        output.emit_json(res)
        return
    click.echo(
        f"stopped (pid {res['pid']}, {res['method']})" if res["was_running"] else "not running",
        err=True,
    )


@daemon.command("restart", context_settings={"help_option_names": ["-h", "--help"]})
@serve_options
@click.option("--start-timeout", default="20s", show_default=True, metavar="DURATION")
@output.json_option
def restart(start_timeout: str, as_json: bool, **flags: Unpack[ServeFlags]) -> None:
    """Stop (if running), then start with the given options. In-flight turns
    are interrupted and replayed later.

    \b
    Example:
      holon daemon restart --concurrency 2
    """
    from holon_cli.serve import daemon as d

    args, token = _serve_args(flags)
    timeout = _duration(start_timeout)
    d.stop()
    res = d.start(args, token, timeout_s=timeout)
    if as_json:
        output.emit_json(res)
        return
    click.echo("restarted", err=True)
    _print_status(res)


@daemon.command("status", context_settings={"help_option_names": ["-h", "--help"]})
@serve_options
@output.json_option
def status(as_json: bool, **flags: Unpack[ServeFlags]) -> None:
    """Show the daemon: state (running|stopped|stale|foreground), pid,
    addresses, health, whether its configuration matches these options,
    activity, last failure.

    `foreground`: no daemon runs, but a `holon serve` of this home started
    in a terminal (or a DBOS worker) answers on one of the home's sockets
    (run/holon.sock, the recorded --socket, run/holon-*.sock); its pid and
    socket are shown.

    Exit 0 when running and healthy or foreground, 1 when stale or
    unhealthy, 3 when stopped; --json prints the success envelope with
    `state` in every case.

    \b
    Example:
      holon daemon status >/dev/null || holon daemon start
      holon daemon status --json | jq .data.activity
    """
    from holon_cli.serve import daemon as d

    args, token = _serve_args(flags)
    res = d.status(args, token)
    if as_json:
        output.emit_json(res)
    else:
        _print_status(res)
    code = _status_exit_code(res)
    if code:
        raise click.exceptions.Exit(code)


def _status_exit_code(res: JsonObject) -> int:
    from holon_cli.errors import EXIT_NOT_FOUND, EXIT_OK, EXIT_RUNTIME

    if res["state"] == "stopped":
        return EXIT_NOT_FOUND
    if res["state"] in ("running", "foreground") and res["healthy"]:
        return EXIT_OK
    return EXIT_RUNTIME


@daemon.command("logs", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--tail", "tail_n", type=click.IntRange(0), default=50, show_default=True)
@click.option(
    "-f", "--follow", is_flag=True, help="Keep printing lines as they are logged (Ctrl-C ends)."
)
@output.json_option
def logs(tail_n: int, follow: bool, as_json: bool) -> None:
    """Show the daemon log's last lines, with the paths of daemon.json and
    the last failure file, and the most recent start-up and shutdown
    failures, each on its own line (a later successful start or stop clears
    its own).

    \b
    Example:
      holon daemon logs --tail 200
      holon daemon logs -f
    """
    from holon_cli.errors import UsageError
    from holon_cli.serve import daemon_logs as d

    if follow and as_json:
        raise UsageError("--follow prints log lines; it cannot be combined with --json")

    res, position = d.logs_with_position(tail_n)
    if as_json:
        output.emit_json(res)
        return
    output.echo(f"log: {res['log_path']}", err=True)
    output.echo(f"metadata: {res['daemon_json']}", err=True)
    output.echo(f"last failure: {res['last_failure_path']}", err=True)
    for label, lf in (
        ("startup failure", res["startup_failure"]),
        ("shutdown failure", res["shutdown_failure"]),
    ):
        output.echo(
            f"{label}: {lf['occurred_at']} {lf['summary']}" if lf else f"{label}: none", err=True
        )
    for line in res["lines"]:
        output.echo(line)
    if follow:
        for line in d.follow_log(start=position):
            output.echo(line)
