"""Shared HTTP plumbing for the HTTP transports: the one door they send through.

Owns: sending one request (one attempt; no retries here, except the one
re-send of a request a reused idle connection never answered) through the
process's httpx2 client (:mod:`holon_cli.providers.http_session`), mapping
every transport-level failure and every HTTP error status to a classified
:class:`ProviderFailure` (kind, stage, status, ``retry_after_s``), decoding
JSON bodies, and reading ``text/event-stream`` bodies into :class:`SSEEvent`
values (parsed by :mod:`holon_cli.providers.sse`). Transports supply the wire
lowering and a parse callback.

Invariants:
- credentials are sent in headers only and never appear in a failure
  message, a body preview, a diagnostic URL or a log line (values listed in
  ``HttpTarget.secrets`` are redacted from anything echoed back);
- httpx2 is imported only when a request is sent (this module loads without
  it: the CLI's hot paths never pay for it), and the CA store only for the
  first ``https`` connection (a local ``http://`` model server never loads it);
- every attempt has an overall deadline (``HttpTarget.deadline_s``), a body
  is read to at most ``MAX_BODY_BYTES`` (on the wire and decompressed), one
  event of a stream to at most ``MAX_EVENT_BYTES`` (8 MiB); each limit is a
  classified failure, never a hang or unbounded memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from holon_cli import __version__, clock
from holon_cli.model.provider import ModelResponse
from holon_cli.model.value import Value
from holon_cli.providers.base import CONTEXT_OVERFLOW_HINT, DEFAULT_TIMEOUT_S, ProviderFailure
from holon_cli.providers.sse import SSEEvent, iter_sse
from holon_cli.providers.wire import (
    error_fields,
    is_context_overflow,
    redact,
    retry_hint_from_message,
)

if TYPE_CHECKING:
    import httpx2

BODY_PREVIEW_CHARS = 500
# the overall deadline of one attempt, unless the read timeout is longer:
# a long answer streams for minutes, a server dripping bytes never ends
ATTEMPT_DEADLINE_S = 900.0
# the same limits as http_session's (which only loads with httpx2)
MAX_EVENT_BYTES = 8 * 1024 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024

# HTTP statuses that are server trouble but not worth retrying: the answer will not change
_DETERMINISTIC_5XX = {501, 505}
_QUOTA_CODES = {
    "insufficient_quota",
    "billing_hard_limit_reached",
    "billing_not_active",
    "billing_error",
}


class HttpTarget(Value):
    """Everything needed to send one request; built fresh per attempt by a transport."""

    def __init__(
        self,
        provider: str,
        model_ref: str,
        url: str,
        headers: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        secrets: tuple[str, ...] = (),
        key_env: str | None = None,
        deadline_s: float | None = None,
    ) -> None:
        self.provider = provider
        self.model_ref = model_ref
        self.url = url
        self.headers: dict[str, str] = {} if headers is None else headers
        self.timeout_s = timeout_s
        # credential values to scrub from anything echoed back
        self.secrets = secrets
        # the environment variable the credential came from (for hints only)
        self.key_env = key_env
        # the whole attempt, connect to last byte (None: ATTEMPT_DEADLINE_S or timeout_s)
        self.deadline_s = deadline_s

    @property
    def attempt_deadline_s(self) -> float:
        if self.deadline_s is not None:
            return self.deadline_s
        return max(ATTEMPT_DEADLINE_S, self.timeout_s)

    @property
    def safe_url(self) -> str:
        return safe_url(self.url)


def safe_url(url: str) -> str:
    """The URL without user-info or query string (either may carry a credential)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<invalid url>"
    netloc = parts.hostname or ""
    if port:
        netloc = f"{netloc}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def join_url(base: str, path: str) -> str:
    return base.rstrip("/") + "/" + path.lstrip("/")


# ---------------------------------------------------------------- failures


def stamp(
    failure: ProviderFailure, target: HttpTarget, status: int | None = None
) -> ProviderFailure:
    """Fill the transport diagnostics a parser could not know, and scrub secrets."""
    failure.provider = failure.provider or target.provider
    failure.model_ref = failure.model_ref or target.model_ref
    failure.url = failure.url or target.safe_url
    if failure.status is None and status is not None:
        failure.status = status
    if target.secrets:
        failure.message = redact(failure.message, target.secrets)
        failure.args = (failure.message,)
        if failure.body_preview:
            failure.body_preview = redact(failure.body_preview, target.secrets)
        failure.source_chain = [redact(s, target.secrets) for s in failure.source_chain]
    return failure


def exception_chain(exc: BaseException) -> list[str]:
    out: list[str] = []
    cur: BaseException | None = exc
    while cur is not None and len(out) < 8:
        text = str(cur)
        out.append(f"{type(cur).__name__}: {text}" if text else type(cur).__name__)
        cur = cur.__cause__ or cur.__context__
    return out


def parse_retry_after(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``retry-after`` (seconds or an HTTP date)."""
    get = headers.get
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    ra = get("retry-after")
    if not ra:
        return None
    ra = ra.strip()
    try:
        return max(float(ra), 0.0)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    base = clock.now() if now is None else now
    return max(when.timestamp() - base, 0.0)


def classify_http_error(
    status: int,
    headers: Any,
    raw: bytes,
    target: HttpTarget,
) -> ProviderFailure:
    """Turn an HTTP error response into a classified failure (the message
    includes the provider's own)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        body: Any = json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        body = None
    code, type_, msg = error_fields(body)
    detail = msg or " ".join(text.split())[:300] or "(empty body)"
    label = f"{target.provider} returned HTTP {status}"
    tag = code or type_
    message = f"{label}: {detail}" + (f" [{tag}]" if tag else "")
    preview = text[:BODY_PREVIEW_CHARS]
    kind: str
    hint: str | None = None
    retry_after: float | None = None
    quota = (code in _QUOTA_CODES) or (type_ in _QUOTA_CODES)

    if status == 429:
        if quota:
            kind = "quota_exceeded"
            hint = (
                "the account is out of quota or credits; add credits or switch model "
                "(fallback models are tried automatically)"
            )
        else:
            kind = "rate_limited"
            retry_after = parse_retry_after(headers) or retry_hint_from_message(msg)
    elif status in (401, 403):
        kind = "auth"
        env = target.key_env
        hint = (
            f"check the API key in ${env} (it was rejected by {target.provider})"
            if env
            else f"check the credentials configured for {target.provider}"
        )
    elif status == 408:
        kind = "timeout"
    elif quota:
        kind = "quota_exceeded"
    elif 400 <= status < 500 and is_context_overflow(code, msg):
        kind = "context_length_exceeded"
        hint = CONTEXT_OVERFLOW_HINT
    elif 400 <= status < 500:
        kind = "client_error"
        if status == 404:
            hint = f"check the model name in {target.model_ref} and the endpoint {target.safe_url}"
    elif status >= 500 and status not in _DETERMINISTIC_5XX:
        kind = "server_error"
        retry_after = parse_retry_after(headers)
    else:
        kind = "client_error"
        message = f"{label} (unexpected status): {detail}"
    return stamp(
        ProviderFailure(
            kind,
            message,
            status=status,
            retry_after_s=retry_after,
            stage="status",
            body_preview=preview,
            hint=hint,
        ),
        target,
    )


def map_transport_error(exc: BaseException, target: HttpTarget, stage: str) -> ProviderFailure:
    """Classify a transport failure raised while sending (``request``), reading a
    body (``body``) or reading an event stream (``stream``)."""
    import httpx2

    from holon_cli.providers import http_session as hs

    where = target.safe_url
    kind: str
    hint: str | None = None
    if isinstance(exc, httpx2.TimeoutException) and hs.deadline_passed():
        kind = "timeout"
        what = (
            f"no complete answer from {where} within the attempt's deadline of "
            f"{target.attempt_deadline_s:g}s"
        )
        hint = (
            "the server kept the request open without finishing its answer; "
            "retry, or check the endpoint (a proxy or gateway in between?)"
        )
    elif isinstance(exc, (httpx2.ConnectTimeout, httpx2.PoolTimeout)):
        kind, stage, what = "timeout", "connect", f"timed out connecting to {where}"
    elif isinstance(exc, httpx2.TimeoutException):
        kind, what = "timeout", f"timed out after {target.timeout_s:g}s waiting for {where}"
    elif isinstance(exc, httpx2.ProxyError):
        kind, stage, what = "connection", "connect", f"the proxy failed to reach {where}"
    elif isinstance(exc, httpx2.ConnectError):
        kind, stage, what = "connection", "connect", f"could not connect to {where}"
    elif isinstance(exc, (hs.SetupError, httpx2.UnsupportedProtocol, httpx2.InvalidURL)):
        # the endpoint's URL, the proxy or CA setting: the message says which
        kind, what = "client_error", f"cannot send a request to {where!r}"
    elif isinstance(exc, (httpx2.LocalProtocolError, UnicodeEncodeError)):
        kind, what = "client_error", f"cannot send this request to {where!r}"
    elif isinstance(exc, hs.TooLarge):
        kind, what = "invalid_response", f"{target.provider} sent more than holon reads ({where})"
        hint = (
            "a model answer is far smaller (limits: 32 MiB per body, 8 MiB per event, "
            "256 MiB per stream); check that the base URL points at the model API"
        )
    elif stage == "stream":
        kind, what = "stream_interrupted", f"event stream from {where} was cut off"
    else:
        kind, what = (
            "connection",
            f"connection to {where} failed while reading the "
            f"{'response body' if stage == 'body' else 'response'}",
        )
    return stamp(
        ProviderFailure(
            kind,
            f"{what}: {exc or type(exc).__name__}",
            stage=stage,
            source_chain=exception_chain(exc),
            hint=hint,
        ),
        target,
    )


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What sending or reading can raise short of a bug: httpx2's errors, ours,
    and a header value httpx2 cannot encode."""
    import httpx2

    from holon_cli.providers import http_session as hs

    return (
        httpx2.HTTPError,
        httpx2.InvalidURL,
        hs.SetupError,
        hs.TooLarge,
        UnicodeEncodeError,
    )


def decode_json(raw: bytes, target: HttpTarget, status: int | None = None) -> Any:
    """Parse a 2xx body as JSON or fail with ``invalid_response`` at stage ``decode``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise stamp(
            ProviderFailure(
                "invalid_response",
                f"{target.provider} sent a body that is not UTF-8 ({exc.reason})",
                stage="decode",
            ),
            target,
            status,
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) - 1 and text.lstrip().startswith(("{", "["))
        what = "a truncated JSON body" if truncated else "a body that is not JSON"
        preview = text[:BODY_PREVIEW_CHARS]
        raise stamp(
            ProviderFailure(
                "invalid_response",
                f"{target.provider} sent {what} ({exc.msg} at char {exc.pos} of {len(text)}); "
                f"body starts: {preview[:120]!r}",
                stage="decode",
                body_preview=preview,
            ),
            target,
            status,
        ) from None


# -------------------------------------------------------------------- send


class _Counted:
    """Wraps an event iterator and counts what it yielded."""

    def __init__(self, events: Iterator[SSEEvent]) -> None:
        self._events = events
        self.count = 0

    def __iter__(self) -> Iterator[SSEEvent]:
        for ev in self._events:
            self.count += 1
            yield ev


@contextmanager
def _attempt(target: HttpTarget, accept: str, payload: bytes) -> Iterator[httpx2.Response]:
    """POST ``payload`` under the attempt's deadline and yield the response
    with its head read (the caller reads the body); closed on the way out."""
    from holon_cli.providers import http_session as hs

    errors = _transport_errors()
    try:
        _ = urlsplit(target.url).port  # httpx2 would try a port out of range, and fail late
    except ValueError as exc:
        raise stamp(
            ProviderFailure("client_error", f"cannot send a request to {target.safe_url}: {exc}"),
            target,
        ) from None
    with hs.deadline(target.attempt_deadline_s):
        try:
            resp = hs.send(target.url, _headers(target, accept), payload, target.timeout_s)
        except errors as exc:
            raise map_transport_error(exc, target, "request") from None
        try:
            yield resp
        finally:
            resp.close()


def _headers(target: HttpTarget, accept: str) -> dict[str, str]:
    h = {
        "content-type": "application/json",
        "accept": accept,
        "accept-encoding": "gzip, deflate",
        "user-agent": f"holon-cli/{__version__}",
    }
    h.update(target.headers)
    return h


def _read(resp: httpx2.Response, target: HttpTarget, *, error: bool = False) -> bytes:
    """The body (an error answer only its start: its message is there)."""
    from holon_cli.providers import http_session as hs

    try:
        if error:
            return hs.read_body(resp, hs.MAX_ERROR_BODY_BYTES, cut=True)
        return hs.read_body(resp, MAX_BODY_BYTES)
    except _transport_errors() as exc:
        raise map_transport_error(exc, target, "body") from None


def _check_status(resp: httpx2.Response, target: HttpTarget) -> None:
    status = resp.status_code
    if 200 <= status < 300:
        return
    raw = _read(resp, target, error=True)
    if 300 <= status < 400:
        loc = safe_url(resp.headers.get("location", "")) or "?"
        raise stamp(
            ProviderFailure(
                "client_error",
                f"{target.provider} answered HTTP {status} redirecting to {loc}; "
                "set the base URL to the final endpoint",
                status=status,
                stage="status",
            ),
            target,
        )
    raise classify_http_error(status, resp.headers, raw, target)


def _parse(
    parse: Callable[[Any], ModelResponse], obj: Any, target: HttpTarget, status: int
) -> ModelResponse:
    try:
        return parse(obj)
    except ProviderFailure as f:
        raise stamp(f, target, status) from None


def post_json(
    target: HttpTarget, body: Mapping[str, object], parse: Callable[[Any], ModelResponse]
) -> ModelResponse:
    """POST ``body`` as JSON, expect a JSON response, hand it to ``parse``. One attempt."""
    payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
    with _attempt(target, "application/json", payload) as resp:
        _check_status(resp, target)
        raw = _read(resp, target)
        status = resp.status_code
    obj = decode_json(raw, target, status)
    return _parse(parse, obj, target, status)


def _lines(resp: httpx2.Response, target: HttpTarget) -> Iterator[str]:
    """The stream's lines, split on CR/LF only, one event capped; a read
    failure or a cap is a classified failure at stage ``stream``."""
    from holon_cli.providers import http_session as hs

    try:
        yield from hs.iter_lines(resp.iter_bytes(), MAX_EVENT_BYTES)
    except _transport_errors() as exc:
        raise map_transport_error(exc, target, "stream") from None


def post_stream(
    target: HttpTarget,
    body: Mapping[str, object],
    on_events: Callable[[Iterable[SSEEvent]], ModelResponse],
    on_json: Callable[[Any], ModelResponse] | None = None,
) -> ModelResponse:
    """POST ``body`` and consume a ``text/event-stream`` response through ``on_events``.

    Errors before the stream starts arrive as ordinary JSON error responses
    and are classified like any other. A server that ignores ``stream: true``
    and answers with plain JSON is handed to ``on_json``. Read errors while
    streaming become ``stream_interrupted`` (or ``timeout``); an event over
    8 MiB is ``invalid_response``.
    """
    payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
    with _attempt(target, "text/event-stream", payload) as resp:
        _check_status(resp, target)
        status = resp.status_code
        ctype = resp.headers.get("content-type", "").lower()
        if "json" in ctype and "event-stream" not in ctype and on_json is not None:
            raw = _read(resp, target)
            return _parse(on_json, decode_json(raw, target, status), target, status)
        counted = _Counted(iter_sse(_lines(resp, target)))
        try:
            return on_events(counted)
        except ProviderFailure as f:
            if f.kind == "stream_interrupted" and counted.count == 0 and f.source_chain == []:
                raise stamp(
                    ProviderFailure(
                        "invalid_response",
                        f"{target.provider} answered {status} "
                        f"({ctype or 'no content-type'}) without any server-sent events",
                        stage="stream",
                    ),
                    target,
                    status,
                ) from None
            raise stamp(f, target, status) from None


def warm_client(tls: bool = False) -> None:
    """Build the process's httpx2 client ahead of the first request, and with
    ``tls`` its CA store (serve's warm-up)."""
    from holon_cli.providers import http_session

    if tls:
        http_session.warm_trust()
    else:
        http_session.client()


class HttpTransport:
    """Shared state of the HTTP transports: model, endpoint, credential, limits.

    Subclasses name their endpoint path (``endpoint``) and credential header
    (``auth_headers``), and implement ``build_body`` and ``complete``.
    """

    endpoint = ""

    def __init__(
        self,
        *,
        model: str,
        provider: str,
        base_url: str,
        api_key: str | None = None,
        key_env: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        headers: dict[str, str] | None = None,
        max_output_tokens: int | None = None,
        stream: bool = False,
    ) -> None:
        self.provider = provider
        self.model = model
        self.model_ref = f"{provider}/{model}"
        self.base_url = base_url
        self._api_key = api_key
        self.key_env = key_env
        self.timeout_s = timeout_s
        self.extra_headers = dict(headers or {})
        self.max_output_tokens = max_output_tokens
        self.stream = stream

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_ref={self.model_ref!r}, base_url={self.base_url!r})"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"}

    def url(self) -> str:
        return join_url(self.base_url, self.endpoint)

    def target(self) -> HttpTarget:
        headers = dict(self.extra_headers)
        if self._api_key:
            headers.update(self.auth_headers(self._api_key))
        return HttpTarget(
            provider=self.provider,
            model_ref=self.model_ref,
            url=self.url(),
            headers=headers,
            timeout_s=self.timeout_s,
            secrets=(self._api_key,) if self._api_key else (),
            key_env=self.key_env,
        )
