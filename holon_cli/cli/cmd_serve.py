"""``holon serve``: the long-lived owner loop and its HTTP surface (foreground)."""

from __future__ import annotations

import click

DEFAULT_LISTEN = "127.0.0.1:7878"


def serve_options(f: click.decorators.FC) -> click.decorators.FC:
    """The options shared by ``holon serve`` and ``holon daemon start|restart``."""
    for opt in reversed(
        [
            click.option(
                "--listen",
                metavar="HOST:PORT",
                help=f"HTTP listen address [env HOLON_HTTP_ADDR; default {DEFAULT_LISTEN}]. "
                "Port 0 picks a free port. Non-loopback needs a control token.",
            ),
            click.option(
                "--socket",
                "socket_path",
                metavar="PATH",
                help="Unix socket (mode 0600, no token) [default $HOLON_HOME/run/holon.sock].",
            ),
            click.option(
                "--advertise",
                metavar="URL",
                help="The public URL this server is reached at (its host is accepted in Host).",
            ),
            click.option(
                "--token-file",
                metavar="FILE",
                type=click.Path(dir_okay=False),
                help="File holding the bearer token for control routes "
                "[else env HOLON_CONTROL_TOKEN].",
            ),
            click.option(
                "--concurrency",
                type=click.IntRange(1, 256),
                default=4,
                show_default=True,
                help="How many agents may run a turn at the same time (one turn per agent).",
            ),
            click.option(
                "--engine",
                type=click.Choice(["local", "dbos"]),
                default="local",
                show_default=True,
                help="local: this process runs every agent. dbos: one of many workers "
                "sharing the home through DBOS on Postgres (needs holon-cli[dbos]).",
            ),
            click.option(
                "--database-url",
                metavar="URL",
                help="Postgres URL for --engine dbos [else env HOLON_DATABASE_URL].",
            ),
        ]
    ):
        f = opt(f)
    return f


def build_options(
    listen: str | None,
    socket_path: str | None,
    advertise: str | None,
    token_file: str | None,
    concurrency: int,
    engine: str = "local",
    database_url: str | None = None,
) -> object:
    import os

    from holon_cli.serve.host import ServeOptions, resolve_token
    from holon_cli.serve.listen import parse_listen
    from holon_cli.store.layout import HomeLayout

    listen = listen or os.environ.get("HOLON_HTTP_ADDR") or DEFAULT_LISTEN
    parse_listen(listen)  # a bad value is a usage error before anything starts
    url = executor = None
    sock_name = "holon.sock"
    if engine == "dbos":
        from holon_cli.serve.engine_dbos import database_url as db_url
        from holon_cli.serve.engine_dbos import default_executor_id, require_dbos

        url = db_url(database_url)
        require_dbos()
        executor = default_executor_id()
        sock_name = f"holon-{executor}.sock"
    elif database_url:
        from holon_cli.errors import UsageError

        raise UsageError("--database-url needs --engine dbos", hint="add --engine dbos")
    sock = socket_path or str(HomeLayout.current().run_dir / sock_name)
    return ServeOptions(
        engine=engine,
        database_url=url,
        executor_id=executor,
        concurrency=concurrency,
        listen=listen,
        token=resolve_token(token_file),
        advertise=advertise,
        socket_path=os.path.abspath(sock),
    )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@serve_options
def serve(
    listen: str | None,
    socket_path: str | None,
    advertise: str | None,
    token_file: str | None,
    concurrency: int,
    engine: str,
    database_url: str | None,
) -> None:
    """Run every agent of the home as a service, in the foreground.

    Watches the home (inbox arrivals, task exits, config, new agents) and
    sleeps until the next sleep/recheck/timer deadline; on each change runs,
    per affected agent, what `holon tick --agent A && holon turn --agent A`
    runs, until the agent has nothing runnable. A turn held by a manual
    `holon turn` is left alone and retried. Cron lines and manual commands
    may run beside it.

    Serves the HTTP surface on --listen (control routes need the bearer
    token when one is configured; without one, loopback only) and on a
    token-free 0600 Unix socket (a file at --socket that is not a stale
    socket is refused, never deleted). Control routes refuse browsers'
    cross-site requests (Origin, Sec-Fetch-Site: 403) and control POSTs
    need Content-Type: application/json (415). Public routes (enqueue,
    POST /webhooks/SOURCE/AGENT, callbacks) are limited per client address
    (config.yaml ingress.rate_per_minute, default 60); webhook signatures
    are set in ingress.webhooks (see README "Running unattended safely").

    At start it seeds the builtin templates into ~/.agents/templates/, as
    `holon home init` does (an edited copy is never overwritten).

    --engine dbos (needs `pip install 'holon-cli[dbos]'` and a Postgres URL
    in --database-url or HOLON_DATABASE_URL): this process is one of many
    workers sharing HOLON_HOME; an agent's pass is a DBOS workflow on a queue
    partitioned by agent id (one turn per agent cluster-wide), timers fire
    once cluster-wide, and a live worker recovers the turns of a killed one.
    Its default socket is run/holon-<executor_id>.sock.

    SIGTERM or Ctrl-C: no new work; running turns get 10 s to finish, then
    are interrupted (the next turn replays them). Agents are never marked
    stopped.

    \b
    Example:
      HOLON_MODEL=openai/gpt-4.1-mini holon serve --concurrency 8
      curl -s localhost:7878/healthz
    """
    from holon_cli.serve.host import Host, ServeOptions
    from holon_cli.tools.catalog import default_catalog

    opts = build_options(
        listen, socket_path, advertise, token_file, concurrency, engine, database_url
    )
    assert isinstance(opts, ServeOptions)
    from holon_cli.runtime.budgets import config_errors
    from holon_cli.store.config import load_config

    for err in config_errors(load_config()):  # the schema itself was checked on load
        raise err
    _seed_templates()
    code = Host(opts, catalog=default_catalog()).serve_forever()
    if code:
        raise click.exceptions.Exit(code)


def _seed_templates() -> None:
    """Seed the builtin templates, as `holon home init` does; a folder that
    cannot be written (a read-only HOME) is a warning, never a reason not to serve."""
    from holon_cli.runtime.templates import seed_builtin_templates, user_templates_dir

    try:
        seed_builtin_templates()
    except OSError as exc:
        click.echo(
            f"holon serve: warning: cannot seed templates into {user_templates_dir()}: "
            f"{exc.strerror or exc}",
            err=True,
        )
