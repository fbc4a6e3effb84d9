"""The live MCP connections of this process, on one event loop thread.

One :class:`Host` per process (:func:`current`). Connections are keyed by
(agent, server name, config key): each agent has its own server processes
(their folder, environment and sandbox are the agent's). Callers are
synchronous threads (a turn's tool call, ``holon mcp call``); each request
runs on the loop and the caller waits on its future with a deadline.

Lifetime:
- ``holon turn`` / ``holon mcp ...``: a server starts on first use and is
  stopped when the process ends (:meth:`Host.close_all`, run by ``atexit``
  and by the turn command itself), and the loop's thread with it; a
  SIGKILLed process leaves nothing running (each stdio server runs under
  :mod:`.watchdog`).
- ``holon serve`` (``keep_warm``): a server stays up between turns; when it
  dies it is started again after a backoff (1 s, 2 s, 4 s ... 60 s, reset by
  a good start) without waiting for the next call; a server whose config
  changed or left the agent is stopped (:meth:`Host.prune`).

A start that fails is remembered: until its backoff has passed, a call gets
``mcp_unavailable`` at once naming the error, instead of waiting out another
``startup_timeout``.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import threading
import time
from typing import TYPE_CHECKING, Any, cast

from holon_cli.runtime.mcp import records

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Mapping

    from holon_cli.model.config import HolonConfig
    from holon_cli.runtime.mcp.config import ServerSpec
    from holon_cli.runtime.mcp.launch import Spawned
    from holon_cli.runtime.mcp.sdk import CallOutcome, Session
    from holon_cli.runtime.mcp.shapes import LiveServer
    from holon_cli.store.agent_store import AgentStore

MAX_BACKOFF_S = 60.0
# how long a call that saw its server die waits for the connection's runner
# to record it (the runner stops a dead server at once: well under a second)
SETTLE_S = 10.0
SDK_MISSING = (
    "the MCP SDK is not installed: `pip install 'holon-cli[mcp]'` (the `mcp` package, 2.x)"
)
Key = tuple[str, str, str, str]  # (home, agent, server name, config key)


class McpStartError(Exception):
    """A server could not be started or did not finish its handshake."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # mcp_unavailable | mcp_timeout
        self.message = message


def backoff_s(failures: int) -> float:
    return 0.0 if failures <= 0 else min(MAX_BACKOFF_S, 2.0 ** (failures - 1))


class _Conn:
    def __init__(self, store: AgentStore, cfg: HolonConfig, spec: ServerSpec) -> None:
        self.store, self.cfg, self.spec = store, cfg, spec
        self.ready: concurrent.futures.Future[Session] = concurrent.futures.Future()
        self.done: concurrent.futures.Future[None] | None = None  # the run task
        self.closing: asyncio.Event | None = None
        self.failures = 0
        self.retry_at = 0.0
        self.last_error = ""
        self.session: Session | None = None

    def live(self) -> Session | None:
        if not self.ready.done() or self.ready.exception() is not None:
            return None
        s = self.ready.result()
        return None if s.dead.is_set() else s


class Host:
    def __init__(self, *, keep_warm: bool = False) -> None:
        self.keep_warm = keep_warm
        self._lock = threading.Lock()
        self._conns: dict[Key, _Conn] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._atexit = False

    # ------------------------------------------------------------ the loop

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is not None:
            return self._loop
        import asyncio

        from holon_cli.runtime.mcp import sdk  # noqa: F401 - the SDK import, paid once here

        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            loop.run_forever()

        t = threading.Thread(target=run, name="holon-mcp", daemon=True)
        t.start()
        started.wait()
        self._loop, self._thread = loop, t
        if not self._atexit:
            atexit.register(self.close_all)
            self._atexit = True
        return loop

    def submit(self, coro: Any, timeout: float) -> Any:
        """Run ``coro`` on the loop and wait up to ``timeout`` seconds."""
        import asyncio

        fut = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"no answer within {timeout:g}s") from None

    # ------------------------------------------------------- connections

    def session(
        self, store: AgentStore, cfg: HolonConfig, spec: ServerSpec, *, fresh: bool = False
    ) -> Session:
        """The live session of ``spec`` for the agent, started if needed.
        Raises :class:`McpStartError`."""
        from holon_cli.store.layout import home_root

        key = (str(home_root()), store.agent_id, spec.name, spec.key)
        while True:
            with self._lock:
                conn = self._conns.get(key)
                if conn is not None and fresh:
                    self._stop(conn)
                    conn = None
                    fresh = False
                wait = self._next(conn, spec, store, cfg, key)
            if wait is None:
                break
            time.sleep(wait)  # a restart is due within startup_timeout: wait for it
        conn = self._conns[key]
        try:
            return conn.ready.result(spec.startup_timeout_s + 5.0)
        except concurrent.futures.TimeoutError:
            raise McpStartError(
                "mcp_timeout",
                f"MCP server {spec.name!r} did not start within "
                f"startup_timeout ({spec.startup_timeout_s:g}s)",
            ) from None
        except McpStartError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported as the server's failure
            raise McpStartError("mcp_unavailable", str(exc)) from None

    def _next(
        self,
        conn: _Conn | None,
        spec: ServerSpec,
        store: AgentStore,
        cfg: HolonConfig,
        key: Key,
    ) -> float | None:
        """Under the lock: make sure a connection is live or starting (``None``),
        or say how long to wait for a restart that is due soon. Raises
        :class:`McpStartError` when the next try is further away than the
        server's ``startup_timeout`` (a server failing again and again)."""
        if conn is not None and (conn.live() is not None or not conn.ready.done()):
            return None  # live, or a start under way (serve's restart): wait on it
        left = 0.0 if conn is None else conn.retry_at - time.monotonic()
        if conn is not None and conn.failures and left > 0:
            if left > spec.startup_timeout_s:
                raise McpStartError(
                    "mcp_unavailable",
                    f"MCP server {spec.name!r} failed ({conn.last_error}); "
                    f"the next try is in {left:.0f}s",
                )
            return left + 0.05
        running = conn is not None and conn.done is not None and not conn.done.done()
        if running and self.keep_warm:
            return 0.1  # serve's own restart is about to begin
        if running and conn is not None and conn.done is not None:
            try:  # its process is still being stopped
                conn.done.result(8.0)
            except Exception:  # noqa: BLE001
                pass
        fresh = _Conn(store, cfg, spec)
        fresh.failures = conn.failures if conn is not None else 0
        self._conns[key] = fresh
        self._start(fresh)
        return None

    def _start(self, conn: _Conn) -> None:
        """Spawn (stdio: at once, before the SDK import) and run the connection."""
        import asyncio
        import importlib.util

        if importlib.util.find_spec("mcp") is None:
            self._failed(conn, SDK_MISSING)
            return
        spawned = None
        if conn.spec.transport == "stdio":
            try:
                spawned = _spawn(conn)
            except Exception as exc:  # noqa: BLE001
                self._failed(conn, _spawn_error(conn.spec, exc))
                return
        loop = self._ensure_loop()
        conn.done = asyncio.run_coroutine_threadsafe(self._run(conn, spawned), loop)

    def _failed(self, conn: _Conn, error: str, kind: str = "mcp_unavailable") -> None:
        conn.failures += 1
        conn.retry_at = time.monotonic() + backoff_s(conn.failures)
        conn.last_error = error
        records.note_failed(conn.spec, error)
        if not conn.ready.done():
            conn.ready.set_exception(McpStartError(kind, error))

    async def _run(self, conn: _Conn, spawned: Spawned | None) -> None:
        """One connection's life; under ``keep_warm`` it restarts after a death."""
        import asyncio

        conn.closing = asyncio.Event()
        while True:
            await self._run_once(conn, spawned)
            spawned = None
            if not self.keep_warm or conn.closing.is_set():
                return
            delay = backoff_s(conn.failures or 1)
            try:
                await asyncio.wait_for(conn.closing.wait(), delay)
                return
            except TimeoutError:
                pass
            conn.ready = concurrent.futures.Future()
            if conn.spec.transport == "stdio":
                try:
                    spawned = await asyncio.to_thread(_spawn, conn)
                except Exception as exc:  # noqa: BLE001
                    self._failed(conn, _spawn_error(conn.spec, exc))
                    continue

    async def _run_once(self, conn: _Conn, spawned: Spawned | None) -> None:
        from holon_cli.runtime.mcp import sdk

        sess = sdk.Session(conn.spec)
        try:
            await self._session_life(conn, spawned, sess)
        finally:
            sess.settled.set()

    async def _session_life(self, conn: _Conn, spawned: Spawned | None, sess: Session) -> None:
        from contextlib import AsyncExitStack

        import anyio

        from holon_cli.runtime.mcp import sdk

        spec = conn.spec
        opened = False
        died = False  # the server's end came before ours (conn.closing)
        try:
            async with AsyncExitStack() as stack:
                if spawned is not None:
                    streams = await stack.enter_async_context(sdk.stdio_streams(spawned, sess))
                else:
                    headers = _http_headers(spec)
                    streams = await stack.enter_async_context(sdk.http_streams(spec, headers))
                legacy = records.remembered_protocol(spec) == sdk.LEGACY
                await sess.open(stack, streams, legacy_era=legacy)
                opened = True
                _note_open(spec, sess)
                conn.failures = 0
                conn.session = sess
                conn.ready.set_result(sess)
                assert conn.closing is not None
                closing = conn.closing

                async with anyio.create_task_group() as tg:

                    async def wait(ev: Any) -> None:
                        nonlocal died
                        await ev.wait()
                        died = died or (ev is sess.dead and not closing.is_set())
                        tg.cancel_scope.cancel()

                    tg.start_soon(wait, closing)
                    tg.start_soon(wait, sess.dead)
        except BaseException as exc:  # noqa: BLE001 - a server's failure, never ours
            timed_out = any(isinstance(e, TimeoutError) for e in sdk.leaves(exc))
            if timed_out and not opened:
                self._failed(
                    conn,
                    f"no handshake within startup_timeout ({spec.startup_timeout_s:g}s)"
                    + _said(spawned),
                    "mcp_timeout",
                )
            elif not opened:
                code = sess.exit_status
                what = (
                    f"the server exited with status {code} before its handshake"
                    if code is not None
                    else sdk.describe(exc)
                )
                self._failed(conn, what + _said(spawned))
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return
        if died:
            # the one record of the death (a call that saw it waits for this:
            # Host.call), even when holon started stopping it meanwhile
            conn.failures += 1
            conn.retry_at = time.monotonic() + backoff_s(conn.failures)
            conn.last_error = sdk.CLOSED + _said(spawned)
            records.note_failed(spec, conn.last_error)
            sess.death_noted = True

    # --------------------------------------------------------------- calls

    def call(
        self,
        store: AgentStore,
        cfg: HolonConfig,
        spec: ServerSpec,
        tool: str,
        arguments: Mapping[str, object],
        **kw: Any,
    ) -> CallOutcome:
        """One tool call; every failure is an error outcome, never a raise."""
        from holon_cli.runtime.mcp import sdk
        from holon_cli.runtime.mcp.sdk import CallOutcome

        try:
            sess = self.session(store, cfg, spec)
        except McpStartError as exc:
            return CallOutcome("error", error_kind=cast(Any, exc.kind), error=exc.message)
        try:
            out: CallOutcome = self.submit(
                sess.call(tool, arguments, timeout_s=spec.tool_timeout_s, **kw),
                spec.tool_timeout_s + 5.0,
            )
        except TimeoutError:
            return CallOutcome(
                "error",
                error_kind="mcp_timeout",
                error=f"the server did not answer within tool_timeout ({spec.tool_timeout_s:g}s)",
            )
        if out.error_kind == "mcp_unavailable" or sess.dead.is_set():
            # the server died under the call: its record is the runner's to
            # write (what it said on stderr included), once; two writers made
            # the recorded error whichever thread came last
            if not (sess.settled.wait(SETTLE_S) and sess.death_noted):
                records.note_failed(spec, out.error or sdk.CLOSED)
        elif out.kind != "error" and sess.protocol:
            records.note_ok(spec, sess.protocol)
        return out

    # ------------------------------------------------------------ stopping

    def _stop(self, conn: _Conn) -> None:
        loop = self._loop
        if loop is None or conn.done is None:
            return
        if conn.closing is not None:
            loop.call_soon_threadsafe(conn.closing.set)
        try:
            conn.done.result(8.0)
        except Exception:  # noqa: BLE001 - stopping is best effort; the watchdog is the guarantee
            pass

    def close_agent(self, agent_id: str) -> None:
        with self._lock:
            gone = [k for k in self._conns if k[1] == agent_id]
            conns = [self._conns.pop(k) for k in gone]
        self._stop_all(conns)

    def prune(self, agent_id: str, keep: set[tuple[str, str]]) -> None:
        """Stop the agent's connections whose (name, key) is not in ``keep``."""
        with self._lock:
            gone = [k for k in self._conns if k[1] == agent_id and (k[2], k[3]) not in keep]
            conns = [self._conns.pop(k) for k in gone]
        self._stop_all(conns)

    def _stop_all(self, conns: list[_Conn]) -> None:
        loop = self._loop
        if loop is None:
            return
        for c in conns:
            if c.closing is not None:
                loop.call_soon_threadsafe(c.closing.set)
        for c in conns:
            if c.done is not None:
                try:
                    c.done.result(8.0)
                except Exception:  # noqa: BLE001
                    pass

    def close_all(self) -> None:
        """Stop every server (each: stdin closed, a grace period, then its
        group), then, unless it keeps servers warm (``serve``), the loop's
        thread: a later call starts it again, and a process left with one
        thread ends without the interpreter's teardown (``cli._end_fast``:
        with the SDK's modules loaded, that teardown took ~150 ms)."""
        with self._lock:
            conns = list(self._conns.values())
            self._conns.clear()
        self._stop_all(conns)
        if not self.keep_warm:
            self._stop_loop()

    def _stop_loop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(5.0)
            if thread.is_alive():
                return  # a callback that does not return: the daemon thread ends with us
        loop.close()

    def live_servers(self) -> list[LiveServer]:
        with self._lock:
            return [
                {"agent_id": k[1], "name": k[2], "live": c.live() is not None}
                for k, c in self._conns.items()
            ]


def _spawn(conn: _Conn) -> Spawned:
    from holon_cli.runtime.mcp.launch import spawn

    return spawn(conn.spec, conn.cfg, conn.store)


def _spawn_error(spec: ServerSpec, exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"cannot start {spec.command!r}: {exc.strerror or exc}"
    msg = getattr(exc, "message", None) or str(exc)
    return f"cannot start {spec.command!r}: {msg}"


def _said(spawned: Spawned | None) -> str:
    if spawned is None:
        return ""
    from holon_cli.runtime.mcp.sdk import stderr_tail

    tail = stderr_tail(spawned.stderr_log)
    return f"; its stderr ends: {tail}" if tail else f"; stderr log: {spawned.stderr_log}"


def _http_headers(spec: ServerSpec) -> dict[str, str]:
    import os

    headers = dict(spec.headers)
    if spec.bearer_token_env:
        token = os.environ.get(spec.bearer_token_env, "")
        if not token.strip():
            raise RuntimeError(f"bearer_token_env: ${spec.bearer_token_env} is not set (or empty)")
        headers["Authorization"] = f"Bearer {token.strip()}"
    return headers


def _note_open(spec: ServerSpec, sess: Session) -> None:
    assert sess.protocol is not None
    if (
        records.cached_tools(spec) != sess.tools
        or records.remembered_protocol(spec) != sess.protocol
    ):
        records.note_listed(spec, sess.protocol, sess.tools, server_info=sess.server_info)
    else:
        records.note_ok(spec, sess.protocol)


_current: Host | None = None
_current_lock = threading.Lock()


def current(*, keep_warm: bool | None = None) -> Host:
    """This process's host (``keep_warm``: set once, by ``holon serve``)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = Host(keep_warm=bool(keep_warm))
        elif keep_warm:
            _current.keep_warm = True
        return _current


def existing() -> Host | None:
    """The host if this process started one (nothing is imported otherwise)."""
    return _current
