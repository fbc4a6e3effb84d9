"""``docs/reference/http.md``: every route of ``holon serve`` with its
method, access, body and answers, and the server-sent event names, from the
route table in ``holon_cli/serve/http/app.py``."""

from __future__ import annotations

from .md import cell, code, note, page, prose, table

SOURCE = "the route table in holon_cli/serve/http/app.py"

AUTH = {
    "open": "none",
    "control": "`Authorization: Bearer <token>` when a token is configured, else a "
    "loopback client; the Unix socket needs none",
    "public": "none (rate-limited per client address)",
}


def _anchor(method: str, path: str) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in path.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"{method.lower()}-{slug}"


def render() -> str:
    from holon_cli.serve.http import app

    lines = [
        note(SOURCE),
        "",
        "# HTTP routes",
        "",
        "`holon serve` (and `holon daemon start`) answers on `127.0.0.1:7878` "
        "(`--listen`, `HOLON_HTTP_ADDR`) and on the Unix socket "
        "`$HOLON_HOME/run/holon.sock` (mode 0600, no token). Three kinds of access:",
        "",
        "- **control**: " + AUTH["control"] + "; a browser's cross-site request is "
        "refused, and a POST with a body must be `Content-Type: application/json` "
        "(see [Safety](../guides/safety.md#tokens-and-the-origin-rule));",
        "- **public**: no token, what they admit is external evidence, never an operator "
        "instruction; `ingress.rate_per_minute` requests per client address;",
        "- **open**: `/healthz` only.",
        "",
        'Every error is `{"error": {"kind", "message", "hint"}}`. When the '
        "runtime step a route calls refuses, it answers " + app.RUNTIME_ANSWERS + ".",
        "",
        "## Routes",
        "",
    ]
    rows = [
        [
            f"[{code(r.method + ' ' + r.path)}](#{_anchor(r.method, r.path)})",
            r.access,
            cell(r.summary),
        ]
        for r in app.ROUTES
    ]
    lines += table(["route", "access", "what it does"], rows)
    for r in app.ROUTES:
        lines += [f"### {code(r.method + ' ' + r.path)} {{#{_anchor(r.method, r.path)}}}", ""]
        lines += [prose(r.summary[0].upper() + r.summary[1:]) + ".", ""]
        facts = [["access", r.access], ["auth", AUTH[r.access]]]
        if r.query:
            facts.append(["query", cell(r.query)])
        if r.body:
            facts.append(
                [
                    "body (JSON)" if r.access != "public" or "json" in r.body else "body",
                    cell(r.body),
                ]
            )
        if r.cli:
            facts.append(["from the shell", code(r.cli)])
        lines += table(["", ""], facts)
        answers = [*r.answers, *app.ACCESS_ANSWERS[r.access]]
        lines += ["Answers:", ""]
        lines += [f"- {prose(a)}" for a in answers]
        lines += [""]
        if r.sse:
            names = ", ".join(code(n) if n in app.STREAM_NOTES else prose(n) for n in r.sse)
            lines += [f"Server-sent events: {names} (see [below](#server-sent-events)).", ""]
    streams = [r for r in app.ROUTES if r.sse]
    lines += [
        "## Server-sent events",
        "",
        "The event routes with `Accept: text/event-stream` ("
        + ", ".join(code(r.method + " " + r.path) for r in streams)
        + ") send each event as",
        "",
        "```",
        "id: <event_seq>",
        "event: <kind>",
        "data: <the event, one JSON object>",
        "```",
        "",
        "Every event is **named** by its kind, so a browser's `EventSource.onmessage` "
        "fires for none of them: add a listener per name "
        '(`source.addEventListener("turn_terminal", ...)`). The names are every '
        "[event kind](events.md#index), and two notes that carry no `id`:",
        "",
    ]
    lines += table(
        ["event", "data", "when"],
        [
            [
                code("history_trimmed"),
                "`{through_seq, before, segments, bytes}`",
                "once, first, when the stream starts inside history that retention dropped",
            ],
            [
                code("history_damaged"),
                "`{path, line, message}`",
                "once per damaged line or segment that was skipped",
            ],
        ],
    )
    lines += [
        "A `: keep-alive` comment comes every 15 s of silence. To resume, reconnect with "
        "`Last-Event-ID` (browsers do it themselves) or `?after=<event_seq>`: "
        "`event_seq` never repeats, so nothing is missed or sent twice.",
        "",
    ]
    lines += _console()
    return page(lines)


def _console() -> list[str]:
    """The web console's routes (``serve/http/ui/``), beside the table above."""
    from holon_cli.serve.http.ui import live, pages

    lines = [
        "## The web console",
        "",
        "`/ui/` is the operator's console in a browser "
        "([Consoles](../guides/consoles.md#the-web-console)). Its pages and streams pass "
        "the control routes' guards (a page asked for without the login cookie, when a "
        "token is configured, goes to `/ui/login`); `browser` routes refuse another "
        "site's requests but need no login; every answer carries "
        "`Content-Security-Policy: default-src 'self'`. Its buttons post to the control "
        "routes above.",
        "",
    ]
    lines += table(
        ["route", "access", "what it serves"],
        [[code(f"{m} {p}"), a, cell(what)] for m, p, a, what in pages.PAGES],
    )
    lines += [
        'Its streams send named events only (listen with `source.addEventListener("row", ...)`):',
        "",
    ]
    lines += table(["event", "data"], [[code(n), cell(d)] for n, d in live.EVENTS.items()])
    return lines
