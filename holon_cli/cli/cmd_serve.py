"""``holon serve``: the long-lived owner loop and its HTTP surface (foreground)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import click

if TYPE_CHECKING:
    from holon_cli.serve.host import ServeOptions

DEFAULT_LISTEN = "127.0.0.1:7878"


ACCESS_MODES = ("local", "token")


class ServeFlags(TypedDict, total=False):
    """The values of :func:`serve_options` as click passes them."""

    access: str | None
    host: str | None
    port: int | None
    listen: str | None
    socket_path: str | None
    advertise: str | None
    token: str | None
    token_file: str | None
    concurrency: int
    engine: str
    database_url: str | None


def serve_options(f: click.decorators.FC) -> click.decorators.FC:
    """The options shared by ``holon serve`` and ``holon daemon start|restart|status``."""
    for opt in reversed(
        [
            click.option(
                "--access",
                type=click.Choice(ACCESS_MODES),
                help="Who may use the control routes: `local` = this machine only (loopback "
                "address; a token, if configured, is still required), `token` = anyone "
                "with the bearer token (any address; a token is required). "
                "[default: token when one is configured, else local]",
            ),
            click.option(
                "--host",
                metavar="HOST",
                help="HTTP listen host (with --port; the two halves of --listen).",
            ),
            click.option(
                "--port",
                type=click.IntRange(0, 65535),
                metavar="PORT",
                help="HTTP listen port (0 picks a free one).",
            ),
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
                "--token",
                metavar="TOKEN",
                help="Bearer token for control routes (other users can read a command "
                "line: prefer --token-file or HOLON_CONTROL_TOKEN).",
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


def resolve_listen(listen: str | None, host: str | None, port: int | None) -> str:
    """The effective ``HOST:PORT``: ``--listen`` or ``--host``/``--port`` over
    ``HOLON_HTTP_ADDR`` over the default. Raises UsageError."""
    import os

    from holon_cli.errors import UsageError
    from holon_cli.serve.http.listen import format_addr, parse_listen

    if listen and (host is not None or port is not None):
        raise UsageError(
            "--listen cannot be combined with --host/--port",
            hint="pass --listen HOST:PORT, or --host HOST and/or --port PORT",
        )
    base = listen or os.environ.get("HOLON_HTTP_ADDR") or DEFAULT_LISTEN
    base_host, base_port = parse_listen(base)  # a bad value is a usage error before anything starts
    if host is not None:
        host = host.strip()
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host or any(c in host for c in " /@?#"):
            raise UsageError(f"invalid --host {host!r}", hint="use e.g. 127.0.0.1, ::1 or a name")
    return format_addr(host or base_host, base_port if port is None else port)


def resolve_access(access: str | None, listen: str, token: str | None) -> str:
    """``--access``: checked against the listen host and the token before launch."""
    from holon_cli.errors import RejectedError
    from holon_cli.serve.http.listen import is_loopback, parse_listen

    mode = access or ("token" if token else "local")
    loopback = is_loopback(parse_listen(listen)[0])
    if mode == "token" and not token:
        raise RejectedError(
            "--access token needs a control token",
            hint="pass --token-file FILE (or --token, or set HOLON_CONTROL_TOKEN)",
        )
    if mode == "local" and not loopback:
        raise RejectedError(
            f"refusing to listen on {listen} without a control token"
            if not token
            else f"--access local serves this machine only; {listen} is not a loopback address",
            hint="listen on 127.0.0.1 (the default), or use --access token with "
            "--token-file FILE (or HOLON_CONTROL_TOKEN)",
        )
    return mode


def resolve_flag_token(token: str | None, token_file: str | None) -> str | None:
    from holon_cli.errors import UsageError
    from holon_cli.serve.host import resolve_token

    if token is not None:
        if token_file:
            raise UsageError(
                "--token and --token-file both give the token; pass one",
                hint="prefer --token-file (a command line is visible to other users)",
            )
        if not token.strip():
            raise UsageError("--token is empty", hint="pass the bearer token, or drop --token")
        return token.strip()
    return resolve_token(token_file)


def build_options(flags: ServeFlags) -> tuple[ServeOptions, str]:
    """The serve options from the command's flags (``holon serve``, ``daemon``),
    validated: a bad value is an error before anything starts; and the
    effective access mode."""
    import os

    from holon_cli.serve.host import ServeOptions
    from holon_cli.store.layout import HomeLayout

    listen = resolve_listen(flags.get("listen"), flags.get("host"), flags.get("port"))
    token = resolve_flag_token(flags.get("token"), flags.get("token_file"))
    access = resolve_access(flags.get("access"), listen, token)
    engine = str(flags.get("engine") or "local")
    url, executor, sock_name = _engine(engine, flags.get("database_url"))
    sock = flags.get("socket_path") or _default_socket(HomeLayout.current().run_dir, sock_name)
    opts = ServeOptions(
        engine=engine,
        database_url=url,
        executor_id=executor,
        concurrency=int(flags.get("concurrency") or 4),
        listen=listen,
        token=token,
        advertise=flags.get("advertise"),
        socket_path=os.path.abspath(sock),
    )
    return opts, access


def _default_socket(run_dir: Any, name: str) -> str:
    """``run/<name>``; a worker's name (``holon-<executor id>.sock``, the id
    carrying host and pid) that would not fit AF_UNIX's 107 bytes becomes
    ``w-<digest of the id>.sock`` (16 bytes; the daemon records the path it
    used; ``holon.sock`` itself is what clients look for: never renamed)."""
    import os

    from holon_cli.serve.http.listen import UNIX_PATH_MAX

    path = os.path.abspath(os.path.join(run_dir, name))
    if name == "holon.sock" or len(os.fsencode(path)) <= UNIX_PATH_MAX:
        return path
    from holon_cli.digest import sha256_hex

    short = f"w-{sha256_hex(name.encode())[:10]}.sock"
    return os.path.abspath(os.path.join(run_dir, short))


def _engine(engine: str, database_url: str | None) -> tuple[str | None, str | None, str]:
    """(database URL, executor id, default socket name) of the engine:
    ``dbos`` needs a Postgres URL and the extra; ``local`` takes no URL."""
    if engine == "dbos":
        from holon_cli.serve.dbos.database import database_url as db_url
        from holon_cli.serve.dbos.database import require_dbos
        from holon_cli.serve.dbos.workers import default_executor_id

        url = db_url(database_url)
        require_dbos()
        executor = default_executor_id()
        return url, executor, f"holon-{executor}.sock"
    if database_url:
        from holon_cli.errors import UsageError

        raise UsageError("--database-url needs --engine dbos", hint="add --engine dbos")
    return None, None, "holon.sock"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@serve_options
def serve(**flags: Unpack[ServeFlags]) -> None:
    """Run every agent of the home as a service, in the foreground.

    Watches the home (inbox arrivals, task exits, config, new agents) and
    sleeps until the next sleep/recheck/timer deadline; on each change runs,
    per affected agent, what `holon tick --agent A && holon turn --agent A`
    runs, until the agent has nothing runnable. A turn held by a manual
    `holon turn` is left alone and retried. Cron lines and manual commands
    may run beside it.

    Serves the HTTP surface on --listen (or --host/--port) and on a
    token-free 0600 Unix socket (a file at --socket that is not a stale
    socket is refused, never deleted). --access local (the default without
    a token) serves loopback only; --access token (the default with one)
    requires the bearer token on every control route and may listen on any
    address. Control routes need the token whenever one is configured,
    refuse browsers' cross-site requests (Origin, Sec-Fetch-Site: 403) and
    control POSTs need Content-Type: application/json (415). Public routes
    (enqueue, POST /webhooks/SOURCE/AGENT, callbacks) are limited per client
    address (config.yaml ingress.rate_per_minute, default 60; the peer's
    address: X-Forwarded-For and the like count only from
    serve.trusted_proxies); webhook signatures are set in ingress.webhooks.
    A connection must send a whole request head within serve.header_timeout
    (default 10s); each listener holds serve.max_connections (default 512).
    See README "Running unattended safely".

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
    from holon_cli.serve.host import Host
    from holon_cli.tools.catalog import default_catalog

    opts, _access = build_options(flags)
    from holon_cli.runtime.budgets.spend import config_errors
    from holon_cli.store.config import load_config

    for err in config_errors(load_config()):  # the schema itself was checked on load
        raise err
    _seed_templates()
    catalog = default_catalog()
    catalog.warm = True  # MCP servers stay up between turns, restarted with backoff
    code = Host(opts, catalog=catalog).serve_forever()
    if code:
        raise click.exceptions.Exit(code)


def _seed_templates() -> None:
    """Seed the builtin templates, as `holon home init` does; a folder that
    cannot be written (a read-only HOME) is a warning, never a reason not to serve."""
    from holon_cli.runtime.agents.templates import seed_builtin_templates, user_templates_dir

    try:
        seed_builtin_templates()
    except OSError as exc:
        click.echo(
            f"holon serve: warning: cannot seed templates into {user_templates_dir()}: "
            f"{exc.strerror or exc}",
            err=True,
        )
