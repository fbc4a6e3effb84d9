"""The web console's login: with a control token, ``/ui/login`` takes the
token once (a form POST, never a URL) and sets a cookie the control routes
accept in place of ``Authorization: Bearer``.

- The cookie holds an HMAC of a fixed label under the token, not the token:
  it opens the same routes (the console's pages, its live streams and the
  control routes) but is no bearer token for the CLI; a new token ends every
  session. It is ``HttpOnly`` (no script reads it), ``SameSite=Strict``
  (another site's page never sends it), ``Path=/``, 30 days, and ``Secure`` when the
  console is reached over https.
- The cookie counts only when the request carries no ``Authorization``
  header, after the cross-site refusal (``Origin``, ``Sec-Fetch-Site``) every
  control route applies; a state-changing request (POST) must also carry an
  ``Origin`` header, which browsers send on every POST, so a request the
  cookie authorises came from this server's own page.
- Browsers do not keep cookies apart by port: the cookie also reaches other
  services on the same host name (the README says so).

Imports nothing heavy: ``serve/http/app.py`` calls :func:`session_ok` for
every control request without a bearer token.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request
from starlette.responses import Response

COOKIE = "holon_console"
_LABEL = b"holon web console session v1"
_SAFE_METHODS = frozenset({"GET", "HEAD"})
MAX_AGE_S = 30 * 86400  # asked for once a month per browser, not on every visit


def session_value(token: str) -> str:
    return hmac.new(token.encode(), _LABEL, hashlib.sha256).hexdigest()


def has_session(request: Request, token: str) -> bool:
    given = request.cookies.get(COOKIE, "")
    return bool(given) and hmac.compare_digest(given.encode(), session_value(token).encode())


def session_ok(request: Request, token: str) -> bool:
    """Whether the console's cookie authorises this request (see above)."""
    if request.method not in _SAFE_METHODS and "origin" not in request.headers:
        return False
    return has_session(request, token)


def set_session(response: Response, request: Request, token: str) -> None:
    response.set_cookie(
        COOKIE,
        session_value(token),
        max_age=MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_session(response: Response, request: Request) -> None:
    response.delete_cookie(
        COOKIE, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )
