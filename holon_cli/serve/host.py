"""The serve process: the scheduler, the HTTP surface, signals and shutdown.

``serve_forever`` returns an exit code; it never marks an agent stopped.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from holon_cli import clock
from holon_cli.serve.loop import Scheduler

if TYPE_CHECKING:
    from holon_cli.model.tool import Toolbox
    from holon_cli.serve.dbos.workers import WorkerRow


_last_line: list[Any] = [None, 0]  # the last message and how often it repeated since
_log_lock = threading.Lock()


def log_line(msg: str) -> None:
    """One timestamped line on stderr (the daemon points stderr at its log).
    The same message again and again (an agent failing the same way on every
    pass) is written once; the count follows with the next other message."""
    with _log_lock:
        if msg == _last_line[0]:
            _last_line[1] += 1
            return
        repeats, _last_line[:] = _last_line[1], [msg, 0]
    now = clock.now_iso()
    lines = f"{now} serve: (the line before was repeated {repeats} more times)\n" if repeats else ""
    try:
        sys.stderr.write(f"{lines}{now} serve: {msg}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class EngineStatus(TypedDict):
    """The engine part of :class:`ServeStatus` (``--engine dbos``: this
    worker's executor id and the cluster's workers)."""

    engine: str
    executor_id: NotRequired[str | None]
    workers: NotRequired[list[WorkerRow]]


class ServeStatus(EngineStatus):
    """``GET /control/runtime/status``: the process and the activity of the home."""

    pid: int
    version: str
    started_at: str
    home_dir: str
    http_addr: str | None
    socket_path: str | None
    concurrency: int
    draining: bool
    running_agents: list[str]
    active_agent_count: int
    active_task_count: int
    processing_agent_count: int
    waiting_agent_count: int
    activity: str
    turns: int
    passes: int
    busy_skips: int
    failures: int
    last_failure: Mapping[str, object] | None


@dataclass
class ServeOptions:
    concurrency: int = 4
    drain_s: float = 10.0
    listen: str | None = None  # HOST:PORT; None = no HTTP (library use)
    token: str | None = None
    advertise: str | None = None
    socket_path: str | None = None  # None = no Unix socket
    engine: str = "local"  # "local" | "dbos"
    database_url: str | None = None  # --engine dbos only
    executor_id: str | None = None  # --engine dbos only


def resolve_token(token_file: str | None) -> str | None:
    """``--token-file`` wins over ``HOLON_CONTROL_TOKEN``; an empty token is an error."""
    import os

    from holon_cli.errors import UsageError

    if token_file:
        try:
            with open(token_file, encoding="utf-8") as f:
                tok = f.read().strip()
        except OSError as exc:
            raise UsageError(
                f"cannot read --token-file {token_file}: {exc.strerror or exc}",
                hint="pass a readable file holding the bearer token",
            ) from None
        if not tok:
            raise UsageError(f"--token-file {token_file} is empty", hint="put the token in it")
        return tok
    env = os.environ.get("HOLON_CONTROL_TOKEN")
    return env.strip() or None if env is not None else None


class Host:
    """One serve process: owns the scheduler and, when configured, the HTTP server."""

    def __init__(self, opts: ServeOptions, *, catalog: Toolbox | None = None) -> None:
        self.opts = opts
        if opts.engine == "dbos":
            from holon_cli.serve.dbos.engine import DbosScheduler

            assert opts.database_url is not None
            self.scheduler: Scheduler = DbosScheduler(
                database_url=opts.database_url,
                executor_id=opts.executor_id,
                concurrency=opts.concurrency,
                catalog=catalog,
                log=log_line,
                drain_s=opts.drain_s,
            )
        else:
            self.scheduler = Scheduler(
                concurrency=opts.concurrency, catalog=catalog, log=log_line, drain_s=opts.drain_s
            )
        self.shutdown_requested = threading.Event()
        self.http_addr: str | None = None
        self.socket_path: str | None = None
        self._unix_ino: int | None = None

    def request_shutdown(self, reason: str = "requested") -> None:
        if not self.shutdown_requested.is_set():
            self.shutdown_requested.set()
            log_line(f"shutdown requested ({reason})")
        self.scheduler.stop()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.shutdown_requested.set()
        self.scheduler.stop()

    # ------------------------------------------------------------ status
    def runtime_status(self) -> ServeStatus:
        """``GET /control/runtime/status``: the process and the activity of the home."""
        import os

        from holon_cli import __version__
        from holon_cli.runtime.agents.lifecycle import last_runtime_failure, list_agents, open_agent
        from holon_cli.runtime.tasks.plane import active_tasks
        from holon_cli.serve.loop import agent_deadline

        agents = list_agents()
        running = self.scheduler.running()
        active = [a for a in agents if a.status not in ("stopped",)]
        processing = {a.agent_id for a in agents if a.status == "awake_running"} | set(running)
        tasks = 0
        waiting = 0
        for a in active:
            try:
                n = len(active_tasks(open_agent(a.agent_id, create_default=False)))
                # resting is not waiting: an asleep agent waits only on a timer
                # (spec L516-520); an awaiting_task agent on its task
                timed = a.status == "asleep" and agent_deadline(a.agent_id) is not None
            except Exception:  # noqa: BLE001 - a damaged agent does not hide the others
                n, timed = 0, False
            tasks += n
            if a.agent_id not in processing and (n or timed or a.status == "awaiting_task"):
                waiting += 1
        activity = "processing" if processing else ("waiting" if waiting else "idle")
        st = self.scheduler.stats
        failures: list[Mapping[str, object]] = [
            f for f in (st.last_failure, last_runtime_failure()) if f
        ]
        last_failure = max(failures, key=lambda f: str(f.get("occurred_at", "")), default=None)
        return {
            "pid": os.getpid(),
            "version": __version__,
            "started_at": st.started_at,
            "home_dir": str(self.scheduler.root),
            "http_addr": self.http_addr,
            "socket_path": self.socket_path,
            "concurrency": self.opts.concurrency,
            "draining": self.scheduler.stopping.is_set(),
            "running_agents": running,
            "active_agent_count": len(active),
            "active_task_count": tasks,
            "processing_agent_count": len(processing),
            "waiting_agent_count": waiting,
            "activity": activity,
            "turns": st.turns,
            "passes": st.passes,
            "busy_skips": st.busy_skips,
            "failures": st.failures,
            "last_failure": last_failure,
            **self._engine_status(),
        }

    def _engine_status(self) -> EngineStatus:
        """``engine``; under ``--engine dbos`` also this worker's executor id and
        the cluster's workers (from the heartbeat table; [] if unreachable)."""
        if self.opts.engine != "dbos":
            return {"engine": "local"}
        from holon_cli.serve.dbos.engine import DbosScheduler

        assert isinstance(self.scheduler, DbosScheduler)
        try:
            workers: list[WorkerRow] = list(self.scheduler.workers())
        except Exception:  # noqa: BLE001 - the database is away: say so, still answer
            workers = []
        return {"engine": "dbos", "executor_id": self.scheduler.executor_id, "workers": workers}

    # ------------------------------------------------------------ sockets
    def _bind(self) -> list[Any]:
        from holon_cli.errors import RejectedError
        from holon_cli.serve.http import listen

        socks: list[Any] = []
        if self.opts.listen is not None:
            host, port = listen.parse_listen(self.opts.listen)
            if not listen.is_loopback(host) and not self.opts.token:
                raise RejectedError(
                    f"refusing to listen on {self.opts.listen} without a control token",
                    hint="set HOLON_CONTROL_TOKEN or pass --token-file, or listen on 127.0.0.1",
                )
            tcp = listen.bind_tcp(host, port)
            self.http_addr = listen.format_addr(host, tcp.getsockname()[1])
            socks.append(tcp)
        if self.opts.socket_path is not None:
            socks.append(self._bind_unix(self.opts.socket_path))
        return socks

    def _bind_unix(self, path: str) -> Any:
        import os

        from holon_cli.serve.http.listen import bind_unix

        sock = bind_unix(path)
        self.socket_path = path
        self._unix_ino = os.stat(path).st_ino
        return sock

    def _unlink_unix(self) -> None:
        import os

        if self.socket_path and self._unix_ino is not None:
            try:
                if os.stat(self.socket_path).st_ino == self._unix_ino:
                    os.unlink(self.socket_path)
            except OSError:
                pass

    def _write_runfile(self) -> None:
        import os

        from holon_cli.store.fsio import write_snapshot
        from holon_cli.store.layout import HomeLayout

        run = HomeLayout.current().run_dir
        run.mkdir(parents=True, exist_ok=True)
        write_snapshot(
            run / "serve.json",
            {
                "v": 1,
                "pid": os.getpid(),
                "started_at": self.scheduler.stats.started_at,
                "http_addr": self.http_addr,
                "socket_path": self.socket_path,
            },
        )

    def _remove_runfile(self) -> None:
        import os

        from holon_cli.store.fsio import read_snapshot
        from holon_cli.store.layout import HomeLayout

        path = HomeLayout.current().run_dir / "serve.json"
        try:
            rec = read_snapshot(path)
            if rec and rec.get("pid") == os.getpid():
                path.unlink()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass

    def _launch_engine(self) -> None:
        if self.opts.engine != "dbos":
            return
        from holon_cli.errors import HolonError
        from holon_cli.serve.dbos.database import shown_url
        from holon_cli.serve.dbos.engine import DbosScheduler

        if isinstance(self.scheduler, DbosScheduler):
            self.scheduler.http_addr = self.http_addr
            try:
                self.scheduler.launch()
            except HolonError:
                raise
            except Exception as exc:  # noqa: BLE001 - DBOS could not start: one line, exit 1
                try:
                    self.scheduler.shutdown()  # DBOS's threads must not keep the process up
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
                why = " ".join(str(exc).split())[:300] or type(exc).__name__
                secret = _password(self.scheduler.database_url)
                if secret:
                    why = why.replace(secret, "***")
                raise HolonError(
                    f"--engine dbos could not start on {shown_url(self.scheduler.database_url)}: "
                    f"{type(exc).__name__}: {why}",
                    hint="check the database (`psql` with the same URL); nothing was served",
                    kind="database_unavailable",
                ) from None
            log_line(f"engine dbos: worker {self.scheduler.executor_id}")

    # ------------------------------------------------------------ main
    def serve_forever(self) -> int:
        from holon_cli.runtime.agents.lifecycle import ensure_home

        ensure_home()
        _ensure_default_agent()  # /agents/main/... answers from the first request
        if self.opts.listen is not None or self.opts.socket_path is not None:
            from holon_cli.serve.http.ingress import check_ingress_env

            check_ingress_env()  # a bad ingress config or unset secret: refuse to start
        if self.opts.engine == "dbos":
            from holon_cli.serve.dbos.database import check_database

            assert self.opts.database_url is not None
            check_database(self.opts.database_url)  # unreachable: one line, nothing listens
        socks = self._bind()
        server = None
        if socks:
            from holon_cli.serve.http import app as http
            from holon_cli.serve.http.listen import parse_listen
            from holon_cli.serve.http.server import HttpServer

            settings = http.HttpSettings(
                host=parse_listen(self.opts.listen)[0] if self.opts.listen else "127.0.0.1",
                port=parse_listen(self.http_addr)[1] if self.http_addr else 0,
                token=self.opts.token,
                advertise=self.opts.advertise,
                socket_path=self.socket_path,
            )
            app = http.build_app(
                settings,
                runtime_status=self.runtime_status,
                request_shutdown=lambda: self.request_shutdown("control surface"),
                stopping=self.scheduler.stopping,
            )
            server = HttpServer(app, socks)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        from holon_cli.runtime.tasks.recovery import runtime_owner_of_process

        # this process watches running tasks now; tasks a serve that is gone
        # watched were recovered by this restart (each agent's first pass says so)
        runtime_owner_of_process(True)
        started = False
        try:
            # the engine first (dbos: a database it cannot use ends serve
            # here), so "listening" is said only of a serve that will run
            self._launch_engine()
            if server is not None:
                server.start()
                started = True
            self._write_runfile()
            if self.http_addr:
                auth = "bearer token" if self.opts.token else "loopback only, no token"
                log_line(f"listening on http://{self.http_addr} ({auth})")
                log_line(f"web console: http://{self.http_addr}/ui/")
            if self.socket_path:
                log_line(f"listening on unix:{self.socket_path}")
            threading.Thread(
                target=_warm_up_then_freeze,
                args=(self.scheduler,),
                name="holon-warm-up",
                daemon=True,
            ).start()
            self.scheduler.start_watching()
            log_line(
                f"watching {self.scheduler.root} "
                f"(concurrency {self.opts.concurrency}); pid {_pid()}"
            )
            self.scheduler.run()
            log_line("stopping: no new work; draining running turns")
            left = self.scheduler.drain()
        finally:
            runtime_owner_of_process(False)
            if server is not None and started:
                server.stop()
            for sock in socks if not started else ():
                sock.close()
            self._unlink_unix()
            self._remove_runfile()
            _stop_mcp_servers()
        if left:
            log_line(
                f"interrupting turns still running after {self.opts.drain_s:g} s: {', '.join(left)}"
                " (the turn journal replays them on the next turn)"
            )
            log_line("stopped")
            import os

            # daemon threads mid-turn: leave at once rather than through an
            # interpreter shutdown racing them
            os._exit(0)
        log_line("stopped")
        return 0


def _stop_mcp_servers() -> None:
    """Stop the MCP servers kept warm (only if this process started the plane)."""
    import sys

    mcp_host = sys.modules.get("holon_cli.runtime.mcp.host")
    if mcp_host is not None:
        h = mcp_host.existing()
        if h is not None:
            h.close_all()


def _ensure_default_agent() -> None:
    """Create the default agent (``main`` or ``HOLON_AGENT_ID``) as ``holon
    enqueue`` does. A damaged one is logged; serve still runs the others."""
    from holon_cli.errors import HolonError
    from holon_cli.runtime.agents.lifecycle import open_agent

    try:
        open_agent(None)
    except HolonError as exc:
        log_line(f"default agent: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))


def _warm_up_then_freeze(scheduler: Any) -> None:
    """:func:`warm_up`, then what serve holds by now (modules, the web
    console's templates, the warm client) moves out of the cycle collector's
    reach (``gc.freeze``): a full collection re-scanned all of it, 15-57 ms
    on the serve thread it landed on, the tail of serve's reaction to a
    message (issue 44 item 2)."""
    import gc

    warm_up(scheduler)
    gc.freeze()


def warm_up(scheduler: Any = None) -> None:
    """Import what the first turn needs (the turn loop, the model transports,
    and for a model behind an HTTP endpoint the httpx2 client with its CA
    store) ahead of it: the first message after serve starts waited ~150 ms
    longer than the rest for these; then what the web console's first page
    needs. Best effort, on a background thread."""
    import importlib

    for name in (
        "holon_cli.runtime.turn",
        "holon_cli.runtime.tick",
        "holon_cli.providers.chain",
        "holon_cli.providers.http_common",
    ):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the first turn imports it (and reports) anyway
            pass
    try:
        # tracing (OTEL_* or telemetry.enabled): the SDK is set up before the first turn
        from holon_cli.runtime import telemetry
        from holon_cli.store.config import load_config

        telemetry.plane(load_config())
    except Exception:  # noqa: BLE001 - the first turn sets it up (and reports) anyway
        pass
    schemes = _default_model_schemes()
    if schemes:
        # httpx2 and its client (~80 ms), for https its CA store (~20 ms)
        from holon_cli.providers.http_common import warm_client

        try:
            warm_client(tls="https" in schemes)
        except Exception:  # noqa: BLE001 - the first request reports it
            pass
    # last, after what turns need: the web console's Jinja2, markdown-it-py and
    # compiled templates (~150 ms of CPU; the first page would wait for them)
    try:
        from holon_cli.serve.http.ui.render import warm
        from holon_cli.serve.http.ui.views import warm_rows

        warm()
        ready, running = getattr(scheduler, "ready", None), getattr(scheduler, "running", None)
        if ready is not None and running is not None:  # rows read before the start-up
            end = time.monotonic() + 30.0  # passes would go stale: read them after
            while time.monotonic() < end and not (ready.is_set() and not running()):
                time.sleep(0.05)
        warm_rows()  # the home page's rows, read once (a home up to WARM_ROWS_MAX agents)
    except Exception:  # noqa: BLE001 - the first page imports it (and reports) anyway
        pass


def _default_model_schemes() -> set[str]:
    """The URL schemes (``http``, ``https``) of the home's default model chain
    (``$HOLON_MODEL``, config); empty for a scripted model, which never loads
    httpx2. Plain-http setups (a local server) never load the CA store."""
    from holon_cli.providers.registry import model_chain, resolve_transport

    schemes: set[str] = set()
    try:
        primary, fallbacks = model_chain(None)
    except Exception:  # noqa: BLE001 - no model configured: nothing to warm
        return schemes
    for ref in (primary, *fallbacks):
        try:
            base = str(getattr(resolve_transport(ref), "base_url", "") or "")
        except Exception:  # noqa: BLE001 - a ref that cannot be served is reported by its turn
            continue
        scheme = base.lower().partition("://")[0]
        if scheme in ("http", "https"):
            schemes.add(scheme)
    return schemes


def _password(url: str) -> str | None:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _pid() -> int:
    import os

    return os.getpid()
