"""The Postgres database of ``holon serve --engine dbos``: its URL (flag or
``HOLON_DATABASE_URL``), how it is shown to a person (never its password),
the check before anything starts, and the extra that must be installed.

Imports neither ``dbos`` nor ``psycopg`` at module level: ``holon serve``
reads its options through here before it decides to load either.
"""

from __future__ import annotations

import os

from holon_cli.errors import HolonError, UsageError


def database_url(flag: str | None) -> str:
    """``--database-url`` wins over ``HOLON_DATABASE_URL``; neither is a usage error."""
    url = (flag or os.environ.get("HOLON_DATABASE_URL") or "").strip()
    if not url:
        raise UsageError(
            "--engine dbos needs a Postgres database: no --database-url and no HOLON_DATABASE_URL",
            hint="pass --database-url postgresql://USER@HOST:PORT/DB or set HOLON_DATABASE_URL",
        )
    if not url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        raise UsageError(
            f"--database-url must be a postgresql:// URL, not {url.split(':', 1)[0]!r}",
            hint="e.g. postgresql://holon@127.0.0.1:5432/holon",
        )
    return url


def psycopg_url(url: str) -> str:
    """The URL as psycopg takes it (no SQLAlchemy driver suffix)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def shown_url(url: str) -> str:
    """The database URL as shown to a person: never its password (nor a
    ``password=`` query parameter)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "(the configured database)"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    user = f"{parts.username}@" if parts.username else ""
    query = "&".join(
        q for q in parts.query.split("&") if q and not q.lower().startswith("password=")
    )
    return f"{parts.scheme}://{user}{host}{port}{parts.path}" + (f"?{query}" if query else "")


def check_database(url: str, timeout_s: int = 5) -> None:
    """Connect once before anything starts: a database this worker cannot
    reach is one line naming it (never its password), exit 1, before serve
    listens or DBOS launches."""
    import psycopg

    try:
        psycopg.connect(psycopg_url(url), autocommit=True, connect_timeout=timeout_s).close()
    except Exception as exc:  # noqa: BLE001 - any failure to connect is this one error
        why = " ".join(str(exc).split()) or type(exc).__name__
        from urllib.parse import urlsplit

        try:
            secret = urlsplit(url).password
        except ValueError:
            secret = None
        if secret:
            why = why.replace(secret, "***")
        raise HolonError(
            f"--engine dbos cannot use the database {shown_url(url)}: {why[:300]}",
            hint="start Postgres there, or fix --database-url / HOLON_DATABASE_URL; "
            "nothing was started",
            kind="database_unavailable",
        ) from None


def require_dbos() -> None:
    """The extra is installed, or a usage error saying how to get it."""
    import importlib.util

    for mod in ("dbos", "psycopg"):
        if importlib.util.find_spec(mod) is None:
            raise UsageError(
                f"--engine dbos needs the {mod!r} package, which is not installed",
                hint="pip install 'holon-cli[dbos]'",
            )
