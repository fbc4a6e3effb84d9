"""The one client of a running serve's control surface, over the token-free
Unix socket ``$HOLON_HOME/run/holon.sock`` (its 0600 mode is the access
control). ``holon tui`` (interactive and ``--script``) talks to serve only
through this module, so the HTTP library is one import here.

- :func:`require_serve` answers "is a serve listening?" with the standard
  library alone (no HTTP library loaded), so a console without a serve
  fails fast and cheap;
- every refusal of the server (``{"error": {kind, message, hint}}``) becomes
  the matching :class:`~holon_cli.errors.HolonError` (404 not found, 400
  usage, 409 rejected); a socket that stops answering is
  :class:`ServeUnavailable`;
- :meth:`AsyncServeClient.events` follows ``/agents/{id}/events/stream`` (SSE)
  from an ``event_seq`` cursor (``Last-Event-ID``), so a caller resumes
  exactly where it stopped after a reconnect.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli.errors import HolonError, NotFoundError, RejectedError, UsageError
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.model.typed_base import Json, JsonObject

STREAM_READ_TIMEOUT_S = 40.0  # serve sends a keep-alive comment every 15 s


class ServeUnavailable(HolonError):
    """No serve answers on the home's socket (or it stopped answering)."""

    kind = "serve_unavailable"


def socket_path() -> Path:
    return HomeLayout.current().run_dir / "holon.sock"


def serve_listening(path: Path, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on the Unix socket ``path``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except OSError:
        return False
    finally:
        s.close()
    return True


def candidate_sockets(run_dir: Path | None = None) -> list[Path]:
    """Where a serve of this home may answer, most likely first: the local
    engine's ``run/holon.sock``, the socket the newest serve (``serve.json``)
    and the daemon (``daemon.json``) recorded (a ``--socket`` elsewhere),
    then DBOS workers' ``run/holon-<executor id>.sock`` and their short
    ``run/w-<digest>.sock``. Files only: nothing is connected to."""
    run = run_dir if run_dir is not None else HomeLayout.current().run_dir
    out: list[Path] = []

    def add(p: Path) -> None:
        if p not in out:
            out.append(p)

    add(run / "holon.sock")
    for name in ("serve.json", "daemon.json"):
        try:
            rec = json.loads((run / name).read_bytes())
        except (OSError, ValueError):
            continue
        sock = rec.get("socket_path") if isinstance(rec, dict) else None
        if isinstance(sock, str) and sock:
            add(Path(sock))
    for pattern in ("holon-*.sock", "w-*.sock"):
        try:
            for p in sorted(run.glob(pattern)):
                add(p)
        except OSError:
            pass
    return out


def live_sockets(run_dir: Path | None = None, timeout: float = 0.5) -> list[Path]:
    """The candidate sockets something answers on now (a stale socket file
    left by a killed serve refuses the connection at once)."""
    return [p for p in candidate_sockets(run_dir) if serve_listening(p, timeout)]


def require_serve(path: str | os.PathLike[str] | None = None) -> Path:
    """The socket of a running serve of this home: ``path`` when given (``holon
    tui --socket``), else the first that answers of :func:`candidate_sockets`
    (a DBOS worker's too); :class:`ServeUnavailable` naming where it looked."""
    if path is not None:
        p = Path(path).expanduser()
        if not serve_listening(p):
            raise ServeUnavailable(
                f"nothing answers on {p}",
                hint="check the path (`holon daemon status` names the running serve's socket)",
            )
        return p
    live = live_sockets()
    if not live:
        run = HomeLayout.current().run_dir
        raise ServeUnavailable(
            f"no serve is running for this home (nothing answers on {run}/holon.sock "
            "or a worker's holon-*.sock)",
            hint="start one with `holon daemon start` (or `holon serve` in another terminal); "
            "a serve with its socket elsewhere: pass --socket PATH",
        )
    return live[0]


def _refusal(status: int, body: Any) -> HolonError:
    err = body.get("error") if isinstance(body, dict) else None
    err = err if isinstance(err, dict) else {}
    message = str(err.get("message") or f"serve answered HTTP {status}")
    hint = str(err.get("hint") or "") or None
    cls = {404: NotFoundError, 400: UsageError, 409: RejectedError}.get(status, HolonError)
    return cls(message, hint=hint)


def _gone(exc: Exception) -> ServeUnavailable:
    return ServeUnavailable(
        f"serve stopped answering ({type(exc).__name__})",
        hint="check it with `holon daemon status`; start it with `holon daemon start`",
    )


class ServeClient:
    """Requests to one serve over its Unix socket."""

    def __init__(self, path: Path, timeout: float = 5.0) -> None:
        import httpx2 as httpx

        self._httpx = httpx
        self._http = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(path)),
            base_url="http://holon.sock",
            timeout=timeout,
        )

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, **kw: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kw)
        except self._httpx.HTTPError as exc:
            raise _gone(exc) from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code >= 400:
            raise _refusal(resp.status_code, body)
        return body

    def get(self, path: str, **params: Any) -> Any:
        return self._send("GET", path, params=params or None)

    def post(self, path: str, body: Mapping[str, Json]) -> Any:
        return self._send("POST", path, json=body)

    def prompt(self, agent_id: str, text: str) -> str:
        """Admit an operator prompt (surface ``http_control_prompt``); its message id."""
        return str(self.post(f"/control/agents/{agent_id}/prompt", {"text": text})["message_id"])


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _sse_step(line: str, data: list[str], name: list[str] | None = None) -> list[JsonObject]:
    """One line of an SSE stream: the event it completes, if any. With
    ``name`` (the ``event:`` field is kept there) serve's id-less notice
    ``history_trimmed`` comes out as ``{"kind": "history_trimmed", "data": ...}``."""
    if line.startswith("event:") and name is not None:
        name[:] = [line[6:].strip()]
        return []
    if line.startswith("data:"):
        data.append(line[5:].removeprefix(" "))
        return []
    if line != "" or not data:
        return []
    ev = _json_or_none("\n".join(data))
    data.clear()
    called = name.pop() if name else None
    if isinstance(ev, dict) and called == "history_trimmed" and "event_seq" not in ev:
        ev = {"kind": called, "data": ev}
    return [ev] if isinstance(ev, dict) else []


class AsyncServeClient:
    """The same requests for an asyncio caller (the Textual console): a
    cancelled task stops its read at once, so closing the console never
    waits on an open event stream."""

    def __init__(self, path: Path, timeout: float = 5.0) -> None:
        import httpx2 as httpx

        self._httpx = httpx
        self._http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=str(path)),
            base_url="http://holon.sock",
            timeout=timeout,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, **kw: Any) -> Any:
        try:
            resp = await self._http.request(method, path, **kw)
        except self._httpx.HTTPError as exc:
            raise _gone(exc) from None
        body = _json_or_none(resp.text)
        if resp.status_code >= 400:
            raise _refusal(resp.status_code, body)
        return body

    async def get(self, path: str, **params: Any) -> Any:
        return await self._send("GET", path, params=params or None)

    async def post(self, path: str, body: Mapping[str, Json]) -> Any:
        return await self._send("POST", path, json=body)

    async def prompt(self, agent_id: str, text: str) -> str:
        body = await self.post(f"/control/agents/{agent_id}/prompt", {"text": text})
        return str(body["message_id"])

    async def events(
        self, agent_id: str, after: int, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[JsonObject]:
        """Events after ``after`` as they are appended (``Last-Event-ID``: resume
        exactly after it); ``on_open`` runs once the stream is established."""
        timeout = self._httpx.Timeout(5.0, read=STREAM_READ_TIMEOUT_S)
        headers = {"Last-Event-ID": str(after), "Accept": "text/event-stream"}
        try:
            async with self._http.stream(
                "GET", f"/agents/{agent_id}/events/stream", headers=headers, timeout=timeout
            ) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise _refusal(resp.status_code, _json_or_none(resp.text))
                if on_open is not None:
                    on_open()
                data: list[str] = []
                name: list[str] = []
                async for line in resp.aiter_lines():
                    for ev in _sse_step(line, data, name):
                        yield ev
        except self._httpx.HTTPError as exc:
            raise _gone(exc) from None
