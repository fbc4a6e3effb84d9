"""The HTTP surface's refusal: :class:`HttpError` and the JSON error body
``{"error": {"kind", "message", "hint"}}``. Below ``serve/http/app.py`` and the
policy modules it calls (``ingress``, ``webhooks``), so they import it
without importing the app."""

from __future__ import annotations

from starlette.responses import JSONResponse

from holon_cli.errors import HolonError

_STATUS_BY_EXIT = {2: 400, 3: 404, 4: 409, 75: 409}


class HttpError(Exception):
    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        hint: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.hint = status, kind, message, hint
        self.headers = headers or {}


def error_response(
    status: int, kind: str, message: str, hint: str = "", headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"kind": kind, "message": message, "hint": hint}},
        status_code=status,
        headers=headers,
    )


def from_holon(err: HolonError) -> JSONResponse:
    """A runtime refusal as the HTTP answer, in the HTTP surface's words
    (body fields and routes, not the command line's flags)."""
    status = _STATUS_BY_EXIT.get(err.exit_code, 500)
    message, hint = err.said_on("http")
    return error_response(status, str(err.kind), message, hint or "")


def too_large(cap: int) -> HttpError:
    return HttpError(
        413,
        "payload_too_large",
        f"the body is larger than {cap} bytes",
        "put large content in a file and send its path",
    )
