"""The one seam over the official MCP SDK (``mcp`` 2.x on PyPI).

Everything that touches the SDK's types lives here and runs on the host's
event loop (:mod:`.host`); what leaves this module is plain JSON values and
:class:`CallOutcome`. Only public names of the SDK are used: ``ClientSession``
(``send_discover``, ``initialize``, ``adopt``, ``list_tools``, ``call_tool``
with ``allow_input_required``), ``MCPError`` and ``mcp_types``, imported
without the ``mcp`` and ``mcp.client`` packages' ``__init__``
(:mod:`.sdk_import`: they re-export the server side too). The SDK's own
``Client`` is not used: its ``mode="auto"`` probe waits a fixed 10 s for
``server/discover`` and it drives ``input_required`` rounds itself, while
holon bounds the probe by the server's ``startup_timeout`` and must persist
each round for the operator (elicitation that survives a restart).

Era negotiation (:func:`negotiate`, ``protocol: auto``): ``server/discover``
first; ANY other answer (an error of any code, an unparseable result, a
result naming no modern version) or no answer within the probe's share of
the start-up time falls back to ``initialize``. The only answer that does not
fall back is positive proof of a modern-only server with no version in
common (-32022 naming only modern versions), which ``initialize`` could not
fix either. ``-32022`` naming a common version re-probes at it once.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, cast

import anyio

from holon_cli.runtime.mcp import sdk_import

sdk_import.light()  # before the SDK's first import: its packages' __init__ are not run

import mcp_types as types  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402
from mcp_types.version import (  # noqa: E402
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError  # noqa: E402

if TYPE_CHECKING:
    from holon_cli.model.typed import JsonObject
    from holon_cli.runtime.mcp.config import ServerSpec
    from holon_cli.runtime.mcp.launch import Spawned
    from holon_cli.runtime.mcp.shapes import SentAnswer

MODERN = LATEST_MODERN_VERSION  # 2026-07-28
LEGACY = LATEST_HANDSHAKE_VERSION  # 2025-11-25
MAX_LINE = 64 << 20  # one JSON-RPC line from a stdio server (a bigger one ends the connection)
STOP_GRACE_S = 1.0
PAGE_CAP = 100
UNSUPPORTED_PROTOCOL_VERSION = -32022
HEADER_MISMATCH = types.HEADER_MISMATCH

OutcomeKind = Literal["result", "input_required", "error"]
ErrorKind = Literal["mcp_timeout", "mcp_unavailable", "mcp_error"]
# a server's end seen from our side (its stdout ended), whether it exited or
# only closed it: what a call gets and what the server's record says
CLOSED = "the server closed the connection"


class CallOutcome(NamedTuple):
    kind: OutcomeKind
    result: JsonObject | None = None  # CallToolResult as JSON (content, structuredContent, isError)
    # key -> {"method": ..., "params": {...}}: elicitation/create, sampling/createMessage,
    # roots/list
    input_requests: dict[str, JsonObject] | None = None
    request_state: str | None = None
    legacy: bool = False  # the input requests came as server requests (2025-11-25)
    error_kind: ErrorKind | None = None
    error: str | None = None


def _client_info() -> types.Implementation:
    from holon_cli import __version__

    return types.Implementation(name="holon", version=__version__)


def dump(model: Any) -> JsonObject:
    """A model of the SDK as the JSON it stands for (``mode="json"``: JSON values only)."""
    out: JsonObject = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return out


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [exc]


def describe(exc: BaseException) -> str:
    """One line for an operator: the telling cause of a (grouped) failure (a
    protocol error or a timeout before whatever the teardown raised)."""
    found = leaves(exc) or [exc]
    exc = next(
        (e for e in found if isinstance(e, MCPError)),
        next((e for e in found if isinstance(e, TimeoutError)), found[0]),
    )
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, MCPError):
        return f"MCP error {exc.error.code}: {exc.error.message}"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


# ------------------------------------------------------------------ stdio


@asynccontextmanager
async def stdio_streams(spawned: Spawned, sess: Session) -> AsyncIterator[Any]:
    """The SDK's stream pair over a process :func:`.launch.spawn` started.

    Lines are bounded (``MAX_LINE``: a server flooding one endless line ends
    its connection instead of this process's memory), lines that are not
    JSON-RPC are dropped (noted in the server's stderr log), stderr goes to
    that log up to ``launch.STDERR_CAP`` bytes (the rest is read and dropped,
    so the server never blocks on it). ``sess.dead`` is set when stdout ends;
    ``sess.exit_status`` is the server's status if it ended before we stopped it.
    On exit: stdin closed, a grace period, then the lifeline closed (the
    watchdog ends the server's process group), then the watchdog killed."""
    from holon_cli.runtime.mcp.launch import STDERR_CAP

    loop = asyncio.get_running_loop()
    proc = spawned.proc
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    reader = asyncio.StreamReader(limit=MAX_LINE, loop=loop)
    r_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), proc.stdout
    )
    err_reader = asyncio.StreamReader(loop=loop)
    e_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(err_reader), proc.stderr
    )
    w_transport, w_protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop), proc.stdin
    )
    writer = asyncio.StreamWriter(w_transport, w_protocol, None, loop)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](16)
    log = open(spawned.stderr_log, "ab", buffering=0)  # noqa: SIM115 - closed below
    logged = 0

    def note(text: str) -> None:
        nonlocal logged
        if logged < STDERR_CAP:
            data = text.encode("utf-8", "replace")[: STDERR_CAP - logged]
            logged += len(data)
            log.write(data)

    async def read_stdout() -> None:
        try:
            async with read_send:
                while True:
                    try:
                        line = await reader.readline()
                    except (ValueError, asyncio.LimitOverrunError):
                        note(f"holon: a stdout line longer than {MAX_LINE} bytes; disconnected\n")
                        await read_send.send(ConnectionError("the server sent an oversized line"))
                        return
                    if not line:
                        return
                    if not line.strip():
                        continue
                    try:
                        msg = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValidationError:
                        note(f"holon: dropped a stdout line that is not JSON-RPC: {line[:200]!r}\n")
                        continue
                    await read_send.send(SessionMessage(msg))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            sess.dead.set()

    async def read_stderr() -> None:
        while True:
            chunk = await err_reader.read(65536)
            if not chunk:
                return
            if logged < STDERR_CAP:
                note(chunk.decode("utf-8", "replace"))

    async def write_stdin() -> None:
        try:
            async with write_recv:
                async for sm in write_recv:
                    data = sm.message.model_dump_json(by_alias=True, exclude_unset=True)
                    writer.write(data.encode("utf-8") + b"\n")
                    await writer.drain()
        except (ConnectionError, OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            await read_send.aclose()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdout)
            tg.start_soon(read_stderr)
            tg.start_soon(write_stdin)
            try:
                yield read_recv, write_send
            finally:
                sess.exit_status = proc.poll()  # before we stop it: did it end on its own?
                with anyio.CancelScope(shield=True):
                    await _stop_process(spawned, writer)
                tg.cancel_scope.cancel()
    finally:
        for t in (w_transport, r_transport, e_transport):
            with suppress(Exception):
                t.close()
        log.close()


async def _stop_process(spawned: Spawned, writer: asyncio.StreamWriter) -> None:
    """Close stdin (the spec's shutdown), wait out a grace period, then close
    the lifeline (the watchdog ends the whole group), then kill the watchdog."""
    proc = spawned.proc
    with suppress(Exception):
        writer.close()
    if not await _exited(proc, STOP_GRACE_S):
        close_lifeline(spawned)
        if not await _exited(proc, STOP_GRACE_S + 1.5):
            with suppress(OSError):
                proc.kill()
            await _exited(proc, 1.0)
    close_lifeline(spawned)


def close_lifeline(spawned: Spawned) -> None:
    import os

    with suppress(OSError):
        os.close(spawned.lifeline)


async def _exited(proc: Any, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        while proc.poll() is None:
            await anyio.sleep(0.01)
        return True
    return proc.poll() is not None


# ------------------------------------------------------------------- http


@asynccontextmanager
async def http_streams(spec: ServerSpec, headers: dict[str, str]) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    assert spec.url is not None
    timeout = httpx2.Timeout(30.0, read=max(300.0, spec.tool_timeout_s + 5))
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as client:
        async with streamable_http_client(spec.url, http_client=client) as streams:
            yield streams


# --------------------------------------------------------------- session


class Session:
    """One live connection: the SDK session, the era it speaks, the tools it
    listed, and the state of the call in flight (calls on one connection run
    one at a time: a legacy elicitation request is matched to that call)."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.session: ClientSession | None = None
        self.protocol: str | None = None
        self.tools: list[JsonObject] = []
        self.server_info: JsonObject | None = None
        self.dead = anyio.Event()
        self.exit_status: int | None = None
        # set (from the loop's thread) once the connection's runner is done
        # with this session, its end recorded (``death_noted``: it recorded
        # the server's death in the server's record; see host.Host.call)
        self.settled = threading.Event()
        self.death_noted = False
        self.lock = anyio.Lock()
        # the call in flight: legacy elicitation answers to give, requests seen
        self._answers: list[SentAnswer] = []
        self._seen: dict[str, JsonObject] = {}

    # the SDK calls these for server-to-client requests (2025-11-25 era)
    async def _elicit(self, context: Any, params: types.ElicitRequestParams) -> Any:
        if self._answers:
            ans = self._answers.pop(0)
            return _elicit_result(ans)
        key = f"elicitation-{len(self._seen) + 1}"
        self._seen[key] = {"method": "elicitation/create", "params": dump(params)}
        # the operator answers later: this call's result is set aside and the
        # call is sent again with the answer (requests.py)
        return types.ElicitResult(action="cancel")

    async def open(self, stack: AsyncExitStack, streams: Any, *, legacy_era: bool) -> None:
        read, write = streams
        session = ClientSession(
            read,
            write,
            elicitation_callback=self._elicit,
            # no sampling callback: the capability is not advertised and the
            # SDK's default declines a sampling request
            client_info=_client_info(),
        )
        self.session = await stack.enter_async_context(session)
        with anyio.fail_after(self.spec.startup_timeout_s):
            self.protocol = await negotiate(
                self.session, self.spec.protocol, self.spec.startup_timeout_s, legacy_era
            )
            self.tools = await self.list_tools()
        info = self.session.server_info
        self.server_info = dump(info) if info is not None else None

    async def list_tools(self, meta: JsonObject | None = None) -> list[JsonObject]:
        assert self.session is not None
        tools: list[JsonObject] = []
        cursor: str | None = None
        for _ in range(PAGE_CAP):
            page = await self.session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor, _meta=cast(Any, meta))
            )
            tools.extend(dump(t) for t in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, object],
        *,
        timeout_s: float,
        meta: JsonObject | None = None,
        answers: dict[str, SentAnswer] | None = None,
        request_state: str | None = None,
        legacy_answers: list[SentAnswer] | None = None,
    ) -> CallOutcome:
        """One ``tools/call``. ``answers``: the operator's answers to a
        2026-07-28 ``input_required`` round (re-sent with ``inputResponses``
        and the echoed ``request_state``); ``legacy_answers``: answers to give
        a 2025-11-25 server's elicitation requests during this call."""
        assert self.session is not None
        async with self.lock:
            self._answers = list(legacy_answers or [])
            self._seen = {}
            try:
                return await self._call(tool, arguments, timeout_s, meta, answers, request_state)
            finally:
                self._answers, self._seen = [], {}

    async def _call(
        self,
        tool: str,
        arguments: Mapping[str, object],
        timeout_s: float,
        meta: JsonObject | None,
        answers: dict[str, SentAnswer] | None,
        request_state: str | None,
    ) -> CallOutcome:
        assert self.session is not None
        responses = None if answers is None else input_responses(answers)

        async def send() -> Any:
            assert self.session is not None
            return await self.session.call_tool(
                tool,
                dict(arguments),
                read_timeout_seconds=timeout_s,
                input_responses=responses,
                request_state=request_state,
                meta=meta,  # type: ignore[arg-type]
                allow_input_required=True,
            )

        try:
            with anyio.fail_after(timeout_s + 2.0):
                try:
                    result = await send()
                except MCPError as exc:
                    if exc.error.code != HEADER_MISMATCH or self.protocol != MODERN:
                        raise
                    # the spec's recovery: the listing is stale; list again, send once more
                    self.tools = await self.list_tools(meta)
                    result = await send()
        except TimeoutError:
            return CallOutcome("error", error_kind="mcp_timeout", error=_timeout_text(timeout_s))
        except MCPError as exc:
            if exc.error.code == types.REQUEST_TIMEOUT:
                return CallOutcome(
                    "error", error_kind="mcp_timeout", error=_timeout_text(timeout_s)
                )
            if exc.error.code == types.CONNECTION_CLOSED:
                return CallOutcome("error", error_kind="mcp_unavailable", error=CLOSED)
            return CallOutcome("error", error_kind="mcp_error", error=describe(exc))
        except (RuntimeError, ValidationError) as exc:  # a result not matching its schema
            return CallOutcome("error", error_kind="mcp_error", error=describe(exc))
        if isinstance(result, types.InputRequiredResult):
            return CallOutcome(
                "input_required",
                input_requests={k: dump(v) for k, v in (result.input_requests or {}).items()},
                request_state=result.request_state,
            )
        if self._seen:
            return CallOutcome("input_required", input_requests=dict(self._seen), legacy=True)
        return CallOutcome("result", result=dump(result))


def _timeout_text(timeout_s: float) -> str:
    return f"the server did not answer within tool_timeout ({timeout_s:g}s)"


def _elicit_result(ans: SentAnswer) -> types.ElicitResult:
    """An operator's answer as the SDK's result (validated: a content the
    form cannot hold fails here, as the SDK's constructor would)."""
    return types.ElicitResult.model_validate(
        {"action": ans.get("action"), "content": ans.get("content")}
    )


def input_responses(answers: dict[str, SentAnswer]) -> types.InputResponses:
    """The ``inputResponses`` of a re-sent call: each answer is an elicitation
    result (``{"action", "content"}``) or a roots list (``{"roots": []}``)."""
    out: types.InputResponses = {}
    for key, ans in answers.items():
        if "roots" in ans:
            out[key] = types.ListRootsResult(roots=[])
        else:
            out[key] = _elicit_result(ans)
    return out


async def negotiate(
    session: ClientSession, protocol: str, startup_s: float, legacy_era: bool
) -> str:
    """Settle the era (see the module docstring); returns the version spoken.
    ``legacy_era``: this server answered ``initialize`` last time, so an
    ``auto`` start goes straight to it (no probe to wait out)."""
    if protocol == LEGACY or (protocol == "auto" and legacy_era):
        try:
            result = await session.initialize()
            return str(result.protocol_version)
        except MCPError as exc:
            if protocol == LEGACY or exc.error.code != UNSUPPORTED_PROTOCOL_VERSION:
                raise
            # the server moved on to the modern era since: probe it below
    version = MODERN
    probe_s = max(0.5, startup_s * 0.6) if protocol == "auto" else startup_s
    for attempt in range(2):
        try:
            with anyio.fail_after(probe_s):
                raw = await session.send_discover(version)
        except TimeoutError:
            if protocol != "auto":
                raise
            return await _initialize(session)
        except MCPError as exc:
            supported = _supported(exc) if exc.error.code == UNSUPPORTED_PROTOCOL_VERSION else None
            mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in (supported or ())]
            if mutual and attempt == 0:
                version = mutual[-1]
                continue
            modern_only = supported is not None and not any(
                v in HANDSHAKE_PROTOCOL_VERSIONS for v in supported
            )
            if protocol != "auto" or modern_only:
                raise
            return await _initialize(session)
        try:
            found = types.DiscoverResult.model_validate(raw)
        except ValidationError:
            if protocol != "auto":
                raise
            return await _initialize(session)
        if not any(v in found.supported_versions for v in MODERN_PROTOCOL_VERSIONS):
            if protocol != "auto":
                raise RuntimeError(f"it supports {found.supported_versions}, not {protocol}")
            return await _initialize(session)
        session.adopt(found)
        return str(session.protocol_version)
    raise AssertionError("unreachable")  # pragma: no cover


async def _initialize(session: ClientSession) -> str:
    try:
        result = await session.initialize()
    except MCPError as exc:
        # a probe that timed out here but reached a slow server locked it modern
        supported = _supported(exc) if exc.error.code == UNSUPPORTED_PROTOCOL_VERSION else None
        mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in (supported or ())]
        if not mutual:
            raise
        raw = await session.send_discover(mutual[-1])
        session.adopt(types.DiscoverResult.model_validate(raw))
        return str(session.protocol_version)
    return str(result.protocol_version)


def _supported(exc: MCPError) -> list[str] | None:
    try:
        data = types.UnsupportedProtocolVersionErrorData.model_validate(exc.error.data)
    except ValidationError:
        return None
    return list(data.supported)


def stderr_tail(path: Path, limit: int = 400) -> str:
    """The end of a server's stderr log (what it said before it failed)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return " ".join(text.split())[-limit:]


def tool_json(tool: JsonObject) -> str:
    return json.dumps(tool, sort_keys=True)
