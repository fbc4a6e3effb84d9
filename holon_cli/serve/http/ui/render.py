"""HTML for the web console: the Jinja2 environment over ``ui/templates/``,
Markdown for ``plan.md``, the static files and the headers every console
response carries.

Invariants:
- autoescape is on for every template and nothing is marked safe except
  what :func:`markdown` returns, which markdown-it-py rendered with raw HTML
  off (``html: False``: a ``<script>`` in plan.md comes out as text), images
  off (nothing is fetched) and links limited to ``http``, ``https``,
  ``mailto``, in-page and relative ones (``rel="noopener noreferrer
  nofollow"``); every other value is escaped where it is written;
- control characters are shown as symbols (as the TUI shows them) and text
  that is not valid UTF-8 is shown escaped, never an error (:func:`page`
  encodes with ``backslashreplace``);
- ``Content-Security-Policy: default-src 'self'`` (no inline script, style
  or handler anywhere: the one script is ``static/console.js``), no framing,
  no referrer to other sites, ``nosniff``; pages are never cached, static files are cached
  by content hash.

Jinja2 and markdown-it-py are imported on the first page (or by serve's
warm-up thread), never on serve's start-up path.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from holon_cli import clock

if TYPE_CHECKING:
    import jinja2
    from markdown_it import MarkdownIt

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
CSP = (
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    "object-src 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # no-referrer would make forms send `Origin: null`
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
NO_STORE = {"Cache-Control": "no-store"}
_LINK_OK = re.compile(r"^(https?:|mailto:|#|/(?!/)|\.{0,2}/|[^:/?#]*(?:[/?#]|$))", re.I)
# C0 controls but tab and newline, DEL and the C1 controls: shown, not obeyed
_CONTROLS = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)}
_CONTROLS |= {0x7F: 0x2421} | {c: 0xFFFD for c in range(0x80, 0xA0)}


def headers(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**SECURITY_HEADERS, **(extra or {})}


def shown(value: Any) -> str:
    """Text as the console shows it: control characters as symbols."""
    return ("" if value is None else str(value)).translate(_CONTROLS)


# ------------------------------------------------------------ markdown


def _link_ok(url: str) -> bool:
    return bool(_LINK_OK.match(url.strip()))


def _link_rel(state: Any) -> None:
    """Every link opens with ``rel="noopener noreferrer nofollow"``."""
    for block in state.tokens:
        for tok in block.children or ():
            if tok.type == "link_open":
                tok.attrSet("rel", "noopener noreferrer nofollow")


@functools.cache
def _md() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")  # an image would be fetched: its markup stays text
    md.validateLink = _link_ok  # type: ignore[method-assign]
    md.core.ruler.push("holon_link_rel", _link_rel)
    return md


def markdown(text: str) -> Any:
    """``text`` (Markdown) as HTML with raw HTML shown as text (see above)."""
    from markupsafe import Markup

    return Markup(_md().render(shown(text)))  # noqa: S704 - html off: nothing raw gets through


# ------------------------------------------------------------ filters


def when(iso: Any) -> str:
    """``05:50:24`` today, ``Nov 28 05:50`` before, ``-`` for nothing (UTC)."""
    if not isinstance(iso, str) or not iso:
        return "-"
    try:
        t = clock.parse_iso(iso)
    except ValueError:
        return shown(iso)
    import time

    now = clock.now()
    if int(t // 86400) == int(now // 86400):
        return time.strftime("%H:%M:%S", time.gmtime(t))
    return time.strftime("%b %d %H:%M", time.gmtime(t))


def ago(iso: Any) -> str:
    """``3 min ago``, ``in 2 h``: relative to now (when the page was drawn)."""
    if not isinstance(iso, str) or not iso:
        return ""
    try:
        delta = clock.parse_iso(iso) - clock.now()
    except ValueError:
        return ""
    n = abs(delta)
    if n < 60:
        text = f"{n:.0f} s"
    elif n < 3600:
        text = f"{n / 60:.0f} min"
    elif n < 86400:
        text = f"{n / 3600:.1f} h"
    else:
        text = f"{n / 86400:.1f} d"
    return f"in {text}" if delta > 0 else f"{text} ago"


def duration(ms: Any) -> str:
    """``90 s``, ``5 min``, ``2 h``, ``1 d``: a timer's period."""
    if not isinstance(ms, (int, float)):
        return "-"
    s = ms / 1000
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s / size:g} {unit}" if (s / size) % 1 == 0 else f"{s / size:.1f} {unit}"
    return f"{s:g} s"


def tokens(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    return f"{n:,}"


def usd(n: Any) -> str:
    return f"${n:.2f}" if isinstance(n, (int, float)) and n else ""


# ------------------------------------------------------------ environment


def static_version(name: str) -> str:
    return _static(name)[1]


@functools.cache
def _static(name: str) -> tuple[bytes, str]:
    """A static file's bytes and content hash (read once per process)."""
    from holon_cli.digest import sha256_hex

    path = STATIC / name
    data = path.read_bytes()
    return data, sha256_hex(data)[:12]


def static_response(name: str, version: str | None) -> Response:
    """A file of ``ui/static/`` (404 for anything else); cached for a year
    when asked for by its current hash (the pages always do)."""
    ctype = STATIC_TYPES.get(Path(name).suffix)
    if ctype is None or "/" in name or name.startswith(".") or not (STATIC / name).is_file():
        return Response(
            "not found", status_code=404, media_type="text/plain", headers=headers(NO_STORE)
        )
    data, digest = _static(name)
    cache = "public, max-age=31536000, immutable" if version == digest else "no-cache"
    return Response(data, media_type=ctype, headers=headers({"Cache-Control": cache}))


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}``: ``None`` is empty, text has its control
    characters shown (then autoescape escapes it); rendered Markdown stays."""
    from markupsafe import Markup

    if value is None:
        return ""
    if isinstance(value, str) and not isinstance(value, Markup):
        return shown(value)
    return value


@functools.cache
def env() -> jinja2.Environment:
    import jinja2

    e = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        auto_reload=False,  # the templates are part of the installed package
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    e.filters.update(
        when=when, ago=ago, duration=duration, tokens=tokens, usd=usd, markdown=markdown
    )
    e.globals["static_v"] = static_version
    return e


def html(template: str, **context: Any) -> str:
    return env().get_template(template).render(**context)


def macro(template: str, name: str, *args: Any) -> str:
    """One macro of a template, rendered (a panel or a row the live stream sends)."""
    fn = getattr(env().get_template(template).module, name)
    return str(fn(*args))


def page(template: str, status_code: int = 200, **context: Any) -> Response:
    body = html(template, **context).encode("utf-8", "backslashreplace")
    return Response(
        body,
        status_code=status_code,
        media_type="text/html; charset=utf-8",
        headers=headers(NO_STORE),
    )


def warm() -> None:
    """Import Jinja2 and markdown-it-py and compile the templates (serve's
    warm-up thread calls this, so the first page does not pay for it)."""
    e = env()
    for name in e.list_templates():
        e.get_template(name)
    _md()
    for name in ("console.css", "console.js", "icon.svg"):
        _static(name)
