"""The web console's routes in-process (starlette's TestClient, no browser):
what each page shows, that every text source is escaped, that plan.md is
Markdown with raw HTML as text, the guards (Host, cross-site, the token's
login cookie), the static files, and the control routes the console's
task, timer and work-item buttons post to. The browser tests
(``test_ui_browser.py``) drive the same pages in Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from http_app import BASE, client_for, make_app, make_client

from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.serve.http.ui import render
from holon_cli.serve.http.ui.session import COOKIE, session_value

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
OWN = {"Origin": BASE}
JSON_OWN = {"Origin": BASE, "Content-Type": "application/json"}


def _prompt(text: str, agent: str = "main") -> str:
    """An operator message, admitted and ingested (so it is an event)."""
    from holon_cli.runtime import queue as q

    store = open_agent(agent)
    env = admit(
        text,
        store=store,
        kind="operator_prompt",
        origin="operator",
        delivery_surface="http_control_prompt",
        admission_context="control_authenticated",
    )
    with store.lock():
        q.ingest(store, q.load(store))
    return str(env["id"])


def _no_raw_payload(html: str) -> None:
    """The payload is in the page as text only: no element it would make."""
    assert "<script>window.__xss" not in html
    assert "<img" not in html
    assert not re.search(r"<[^>]*\sonerror=", html)
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html


# ------------------------------------------------------------ pages


def test_home_lists_every_agent_with_its_state_and_security_headers() -> None:
    create_agent("dev")
    _prompt("first", "dev")
    c = make_client()
    r = c.get("/ui/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["cache-control"] == "no-store"
    assert 'id="agent-dev"' in r.text and 'href="/ui/agents/dev"' in r.text
    # every column the home page promises
    for label in (
        "Status",
        "Queue",
        "Work item",
        "Tasks",
        "Next wake",
        "Last activity",
        "Spend today",
    ):
        assert f'data-label="{label}"' in r.text
    # no inline script or handler anywhere: the one script is a file of ours
    assert re.findall(r"<script[^>]*>", r.text) == [
        f'<script src="/ui/static/console.js?v={render.static_version("console.js")}" defer>'
    ]
    assert not re.search(r"\son[a-z]+=", r.text)
    assert "style=" not in r.text


def test_agent_page_shows_conversation_panels_and_controls() -> None:
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.waiting.timers import add_timer

    store = open_agent("main")
    _prompt("hello there")
    wi.create_work_item(store, "ship the console", plan="# Plan\n\n- step **one**\n")
    add_timer(store, after_ms=3_600_000, message="check the build")
    c = make_client()
    r = c.get("/ui/agents/main")
    assert r.status_code == 200
    html = r.text
    assert 'data-live="/ui/agents/main/live?after=' in html
    assert "hello there" in html and 'class="row vis-turn_result cat-message m-info' in html
    assert "ship the console" in html
    assert "<h1>Plan</h1>" in html and "<strong>one</strong>" in html  # plan.md as Markdown
    assert "check the build" in html and ">Cancel</button>" in html
    assert ">Send</button>" in html and ">Abort</button>" in html
    for mode in ("info", "verbose", "debug"):
        assert f'data-mode-link="{mode}"' in html and f">{mode}</a>" in html
    assert 'body data-mode="info"' in html
    assert 'body data-mode="debug"' in c.get("/ui/agents/main?mode=5").text


def test_bad_mode_unknown_and_private_agents_are_html_errors() -> None:
    from holon_cli.runtime.agents.lifecycle import create_agent as make

    make(
        "kid",
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id="main",
    )
    open_agent("main")
    c = make_client()
    r = c.get("/ui/agents/main?mode=loud")
    assert r.status_code == 400 and "use ?mode=info, verbose or debug" in r.text
    assert r.headers["content-type"].startswith("text/html")
    r = c.get("/ui/agents/ghost")
    assert r.status_code == 404 and "unknown agent" in r.text
    assert c.get("/ui/agents/kid").status_code == 404  # a private child has no page
    assert c.get("/ui/agents/kid/live").status_code == 404
    # it is still on the home page, under its parent, without a link
    home = c.get("/ui/").text
    assert 'id="agent-kid"' in home and 'href="/ui/agents/kid"' not in home
    assert home.index('id="agent-main"') < home.index('id="agent-kid"')


def test_every_text_source_is_escaped(tmp_path: Path) -> None:
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.memory.search import memory_search
    from holon_cli.runtime.waiting.timers import add_timer

    store = open_agent("main")
    _prompt("msg " + XSS)
    wi.create_work_item(store, "obj " + XSS, plan="plan " + XSS)
    add_timer(store, after_ms=3_600_000, message="timer " + XSS)
    c = make_client()
    html = c.get("/ui/agents/main?mode=debug").text
    _no_raw_payload(html)
    for prefix in ("msg ", "obj ", "plan ", "timer "):
        assert prefix + "&lt;script&gt;" in html
    # the cross-agent search and the agent's memory search show snippets as text
    assert memory_search(store, "obj", include_all_workspaces=True)["results"]
    found = c.get("/ui/search", params={"q": "obj"}).text
    assert "obj &lt;script&gt;" in found
    _no_raw_payload(found)
    mem = c.get("/ui/agents/main", params={"q": "obj"}).text
    assert mem.count("obj &lt;script&gt;") >= 2  # the work item and the search result
    _no_raw_payload(mem)


def test_plan_markdown_keeps_raw_html_and_bad_links_as_text() -> None:
    out = str(
        render.markdown(
            "# Title\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n"
            "[ok](https://example.org/a) [js](javascript:alert(3)) [vb](VBScript:x) "
            "[data](data:text/html;base64,PHNjcmlwdD4=) [rel](notes.md) [frag](#top)\n\n"
            "![pixel](https://tracker.example/p.png)\n\n"
            "[spaced](  jav&#x09;ascript:alert(4))\n"
        )
    )
    assert "<h1>Title</h1>" in out
    assert "<script>" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "<img" not in out and "&lt;img src=x onerror=alert(2)&gt;" in out
    assert '<a href="https://example.org/a" rel="noopener noreferrer nofollow">ok</a>' in out
    # images are off: the pixel is a link a person may follow, nothing is fetched
    hrefs = re.findall(r'href="([^"]*)"', out)
    assert hrefs == ["https://example.org/a", "notes.md", "#top", "https://tracker.example/p.png"]


def test_control_characters_are_shown_and_undecodable_text_never_breaks_a_page() -> None:
    _prompt("bell\x07 esc\x1b[31m end")
    c = make_client()
    r = c.get("/ui/agents/main")
    assert r.status_code == 200
    assert "bell\u2407 esc\u241b[31m end" in r.text
    # text that is not valid UTF-8 (a lone surrogate) is shown escaped
    page = render.page("error.html", status=500, kind="k", message="lone \udcff", hint="")
    assert b"lone \\udcff" in page.body


# ------------------------------------------------------------ guards


def test_cross_site_requests_are_refused_on_pages_and_streams() -> None:
    open_agent("main")
    c = make_client()
    for path in ("/ui/", "/ui/agents/main", "/ui/search?q=x", "/ui/agents/main/live", "/ui/live"):
        for headers in (
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},  # another port of localhost
            {"Origin": "http://127.0.0.1:9999"},
            {"Origin": "null"},
        ):
            r = c.get(path, headers=headers)
            assert r.status_code == 403, (path, headers)
    assert c.get("/ui/", headers={"Host": "evil.example"}).status_code == 403
    assert c.get("/ui/static/console.css", headers={"Host": "evil.example"}).status_code == 403
    # a typed-in address is fine
    assert c.get("/ui/", headers={"Sec-Fetch-Site": "none"}).status_code == 200


def test_without_a_token_the_console_is_loopback_only() -> None:
    open_agent("main")
    app = make_app()
    r = client_for(app, "10.0.0.5").get("/ui/")
    assert r.status_code == 403 and "loopback clients only" in r.text
    assert client_for(app, "10.0.0.5").get("/ui/login", follow_redirects=False).status_code == 303


def _login(c: Any, token: str, next_: str = "/ui/") -> Any:
    return c.post(
        "/ui/login",
        data={"token": token, "next": next_},
        headers=OWN,
        follow_redirects=False,
    )


def test_with_a_token_pages_ask_for_a_login_that_sets_a_strict_httponly_cookie() -> None:
    open_agent("main")
    c = make_client(token="s3cret-token", client_addr="10.0.0.5")
    r = c.get("/ui/agents/main?mode=verbose", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/login?next=/ui/agents/main%3Fmode%3Dverbose"
    form = c.get("/ui/login?next=/ui/agents/main")
    assert form.status_code == 200 and 'type="password"' in form.text
    assert 'action="/ui/login"' in form.text and 'method="post"' in form.text
    bad = _login(c, "wrong")
    assert bad.status_code == 401 and "set-cookie" not in bad.headers
    assert "not this serve&#39;s control token" in bad.text
    ok = _login(c, "s3cret-token", "/ui/agents/main")
    assert ok.status_code == 303 and ok.headers["location"] == "/ui/agents/main"
    cookie = ok.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={session_value('s3cret-token')};")
    low = cookie.lower()
    assert "httponly" in low and "samesite=strict" in low and "path=/" in low
    assert "s3cret-token" not in cookie  # an HMAC of it, not the token
    assert "token" not in ok.headers["location"]
    page = c.get("/ui/agents/main")
    assert page.status_code == 200 and ">Log out</button>" in page.text
    # the same cookie opens the live stream and the control routes (a browser POST
    # always carries Origin); without Origin it is not enough
    r = c.post("/control/agents/main/prompt", json={"text": "via cookie"}, headers=OWN)
    assert r.status_code == 202
    r = c.post("/control/agents/main/prompt", json={"text": "no origin"})
    assert r.status_code == 401
    r = c.post(
        "/control/agents/main/prompt",
        json={"text": "x"},
        headers={"Origin": "http://127.0.0.1:9999"},
    )
    assert r.status_code == 403
    # a bearer header is judged on its own: a wrong one is not rescued by the cookie
    r = c.get("/agents/main/status", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    out = c.post("/ui/logout", headers=OWN, follow_redirects=False)
    assert out.status_code == 303 and f"{COOKIE}=" in out.headers["set-cookie"]
    assert c.get("/ui/", follow_redirects=False).status_code == 303


def test_a_cookie_for_another_token_is_refused() -> None:
    open_agent("main")
    c = make_client(token="new-token")
    c.cookies.set(COOKIE, session_value("old-token"))
    assert c.get("/ui/", follow_redirects=False).status_code == 303
    assert c.get("/agents/main/status").status_code == 401


def test_login_refuses_other_sites_missing_origin_and_open_redirects() -> None:
    c = make_client(token="tok")
    r = c.post("/ui/login", data={"token": "tok"}, follow_redirects=False)
    assert r.status_code == 403 and "set-cookie" not in r.headers
    r = c.post(
        "/ui/login",
        data={"token": "tok"},
        headers={"Origin": "http://evil.example"},
        follow_redirects=False,
    )
    assert r.status_code == 403 and "set-cookie" not in r.headers
    for target in ("//evil.example/", "https://evil.example/", "/ui/\\evil", "/other", "/ui/\n"):
        r = _login(c, "tok", target)
        assert r.headers["location"] == "/ui/", target


def test_login_attempts_are_rate_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    from holon_cli.serve.http import ingress

    monkeypatch.setattr(ingress, "rate_per_minute", lambda: 3)
    c = make_client(token="tok")
    codes = [_login(c, "wrong").status_code for _ in range(5)]
    assert codes[:3] == [401, 401, 401] and codes[3:] == [429, 429]


def test_login_without_a_token_goes_straight_to_the_console() -> None:
    c = make_client()
    r = c.get("/ui/login", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/"


# ------------------------------------------------------------ static files


def test_static_files_are_ours_typed_and_cached_by_hash() -> None:
    c = make_client()
    v = render.static_version("console.js")
    r = c.get(f"/ui/static/console.js?v={v}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert "immutable" in r.headers["cache-control"]
    assert "new EventSource" in r.text and 'addEventListener("row"' in r.text
    assert c.get("/ui/static/console.js?v=old").headers["cache-control"] == "no-cache"
    assert c.get("/ui/static/console.css").headers["content-type"].startswith("text/css")
    assert c.get("/ui/static/icon.svg").headers["content-type"] == "image/svg+xml"
    for bad in ("nope.js", "..%2Frender.py", ".hidden.css", "render.py"):
        assert c.get(f"/ui/static/{bad}").status_code == 404, bad


def test_the_script_and_styles_fetch_nothing_from_elsewhere() -> None:
    for name in ("console.js", "console.css", "icon.svg"):
        text = (render.STATIC / name).read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text and "@import" not in text and "url(" not in text
        assert "eval(" not in text and "new Function" not in text
    for t in render.TEMPLATES.iterdir():
        assert "http" not in t.read_text().replace("http-equiv", ""), t.name


# ------------------------------------------------------------ actions


def test_buttons_appear_only_for_routes_serve_has(monkeypatch: pytest.MonkeyPatch) -> None:
    from holon_cli.serve.http import app as http
    from holon_cli.serve.http.ui import actions

    open_agent("main")
    have = {r.path for r in http.ROUTES}
    html = make_client().get("/ui/agents/main").text
    for name, label in (("pause", "Pause"), ("abort", "Abort"), ("prompt", "Send")):
        assert (f">{label}</button>" in html) == (actions.ACTION_ROUTES[name] in have), name
    trimmed = [r for r in http.ROUTES if not r.path.endswith("/abort")]
    monkeypatch.setattr(http, "ROUTES", trimmed)
    assert ">Abort</button>" not in make_client().get("/ui/agents/main").text


def test_task_stop_timer_cancel_and_work_item_pick_routes(tmp_path: Path) -> None:
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.tasks import plane
    from holon_cli.runtime.waiting.timers import add_timer

    store = open_agent("main")
    c = make_client()
    tid = plane.run_task(store, "sleep 30", workdir=tmp_path)["task_id"]
    html = c.get("/ui/agents/main").text
    assert f'data-post="/control/agents/main/tasks/{tid}/stop"' in html
    r = c.post(f"/control/agents/main/tasks/{tid}/stop", json={})
    assert r.status_code == 200 and r.json()["stop_requested"] is True
    assert r.json()["task"]["status"] in ("cancelled", "killed", "failed")
    again = c.post(f"/control/agents/main/tasks/{tid}/stop", headers={"Content-Length": "0"})
    assert again.status_code == 200 and again.json()["stop_requested"] is False
    assert c.post("/control/agents/main/tasks/task_nope/stop", json={}).status_code == 404

    timer = add_timer(store, after_ms=60_000, message="later")
    r = c.post(f"/control/agents/main/timers/{timer['id']}/cancel", json={})
    assert r.status_code == 200 and r.json()["changed"] is True
    assert c.post("/control/agents/main/timers/tmr_nope/cancel", json={}).status_code == 404

    first = wi.create_work_item(store, "first")["work_item"]["id"]
    second = wi.create_work_item(store, "second")["work_item"]["id"]
    r = c.post(f"/control/agents/main/work-items/{first}/pick", json={})
    assert r.status_code == 200 and r.json()["current_work_item_id"] == first
    r = c.post(f"/control/agents/main/work-items/{second}/pick", json={"reason": "more urgent"})
    assert r.json()["current_work_item_id"] == second
    assert store.read_record()["state"]["current_work_item_id"] == second
    assert (
        c.post(f"/control/agents/main/work-items/{first}/pick", json={"reason": 3}).status_code
        == 400
    )
    assert c.post("/control/agents/main/work-items/wi_nope/pick", json={}).status_code == 404
    # the guards of every control route: JSON only, never cross-site
    r = c.post(
        f"/control/agents/main/work-items/{first}/pick",
        content=b"{}",
        headers={"Content-Type": "text/plain"},
    )
    assert r.status_code == 415
    r = c.post(
        f"/control/agents/main/work-items/{first}/pick",
        json={},
        headers={"Origin": "http://evil.example"},
    )
    assert r.status_code == 403
    assert store.read_record()["state"]["current_work_item_id"] == second


def test_serve_builds_its_app_without_loading_the_console_libraries() -> None:
    """Jinja2 and markdown-it-py load with the first page (or serve's warm-up
    thread), never on the way to listening."""
    import subprocess
    import sys

    code = (
        "import sys, threading\n"
        "from holon_cli.serve.http.app import HttpSettings, build_app\n"
        "build_app(HttpSettings(host='127.0.0.1', port=1), runtime_status=dict,\n"
        "          request_shutdown=lambda: None, stopping=threading.Event())\n"
        "print(sorted(m for m in ('jinja2', 'markupsafe', 'markdown_it') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_home_rows_follow_every_change_they_are_read_from(
    now: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The home page keeps an agent's row while nothing it is read from
    changed; a message still in the inbox, a new task folder, a state change
    or a passed deadline each show at once."""
    from holon_cli.runtime.agents.lifecycle import set_lifecycle
    from holon_cli.runtime.waiting.timers import add_timer
    from holon_cli.serve.http.ui import views

    store = open_agent("main")
    reads: list[str] = []
    real = views.home_row

    def counted(st: Any, cfg: dict[str, Any]) -> dict[str, Any]:
        reads.append(st.agent_id)
        return real(st, cfg)

    monkeypatch.setattr(views, "home_row", counted)

    def row() -> dict[str, Any]:
        return next(r for r in views.home_rows() if r["agent_id"] == "main")

    assert row()["pending"] == 0 and len(reads) == 1
    assert row()["pending"] == 0 and len(reads) == 1  # nothing changed: kept
    admit(
        "in the inbox only",
        store=store,
        kind="operator_prompt",
        origin="operator",
        delivery_surface="http_control_prompt",
        admission_context="control_authenticated",
    )
    assert row()["pending"] == 1  # no event yet: the inbox's own signature
    (store.layout.tasks_dir / "task_x").mkdir(parents=True)
    n = len(reads)
    row()
    assert len(reads) == n + 1  # a new task folder: read again
    set_lifecycle("main", "pause")
    assert [h["kind"] for h in row()["holds"]] == ["paused"]
    set_lifecycle("main", "start")
    add_timer(store, after_ms=60_000)
    assert row()["next_wake"] is not None
    n = len(reads)
    row()
    assert len(reads) == n
    now[0] += 61
    row()
    assert len(reads) == n + 1  # its wake passed: read again


# ------------------------------------------------------------ live streams


def _stream(path: str, seconds: float, during: Any = None) -> str:
    """The text of a console stream, read until serve's stop flag is set
    after ``seconds`` (``during`` runs meanwhile, once the stream is open)."""
    import threading

    app = make_app()
    c = client_for(app)
    stopping = app.state.holon.stopping
    if during is not None:
        threading.Timer(seconds / 2, during).start()
    threading.Timer(seconds, stopping.set).start()
    r = c.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    assert "default-src 'self'" in r.headers["content-security-policy"]
    return r.text


def _events(text: str) -> list[dict[str, Any]]:
    """The stream's events: every one that carries data is named."""
    import json

    out = []
    for block in text.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            fields[name] = value
        if "data" in fields:
            assert "event" in fields, block  # a browser's onmessage would see it: none is
            out.append({**fields, "data": json.loads(fields["data"])})
    return out


@pytest.mark.slow
def test_agent_stream_sends_named_rows_and_panels_the_script_listens_for() -> None:
    _prompt("before the stream " + XSS)
    evs = _events(_stream("/ui/agents/main/live?after=0", 1.0, lambda: _prompt("during")))
    names = {e["event"] for e in evs}
    assert names == {"row", "panel"}
    rows = [e for e in evs if e["event"] == "row"]
    assert [int(e["id"]) for e in rows] == sorted(int(e["id"]) for e in rows)
    html = "".join(e["data"]["html"] for e in rows)
    assert "before the stream &lt;script&gt;" in html and "during" in html
    _no_raw_payload(html)
    panels = {e["data"]["id"] for e in evs if e["event"] == "panel"}
    assert "panel-summary" in panels and "panel-workitems" in panels
    # the page's script listens for exactly these names
    script = (render.STATIC / "console.js").read_text()
    listened = set(re.findall(r'addEventListener\("([a-z]+)"', script))
    assert names <= listened


@pytest.mark.slow
def test_agent_stream_resumes_after_last_event_id() -> None:
    _prompt("one")
    _prompt("two")
    store = open_agent("main")
    seqs = [e["event_seq"] for e in store.events.records() if e["kind"] == "message_admitted"]
    app = make_app()
    c = client_for(app)
    import threading

    threading.Timer(0.6, app.state.holon.stopping.set).start()
    text = c.get("/ui/agents/main/live", headers={"Last-Event-ID": str(seqs[0])}).text
    rows = [e for e in _events(text) if e["event"] == "row"]
    assert rows and all(int(e["id"]) > seqs[0] for e in rows)
    assert "two" in "".join(e["data"]["html"] for e in rows)
    assert ">one<" not in "".join(e["data"]["html"] for e in rows)
    bad = client_for(make_app()).get("/ui/agents/main/live?after=x")
    assert bad.status_code == 400 and bad.json()["error"]["kind"] == "invalid_query"


@pytest.mark.slow
def test_home_stream_sends_a_changed_agents_row() -> None:
    create_agent("dev")
    open_agent("main")
    evs = _events(_stream("/ui/live", 3.2, lambda: _prompt("new work", "dev")))
    assert evs and {e["event"] for e in evs} == {"panel"}
    html = "".join(e["data"]["html"] for e in evs)
    assert 'id="agent-dev"' in html


def test_a_budget_hold_shows_with_its_reason_and_end(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holon_cli.runtime.turn.entry import run_turn
    from holon_cli.tools.catalog import default_catalog

    script = tmp_path / "m.yaml"
    script.write_text(
        'loop: true\nsteps:\n  - text: "spent"\n    usage: {input_tokens: 100, output_tokens: 10}\n'
    )
    monkeypatch.setenv("HOLON_MODEL", f"scripted:{script}")
    store = open_agent("main")
    (holon_home / "config.yaml").write_text("budgets:\n  tokens_per_day: 150\n")
    for text in ("first", "second"):
        _prompt(text)
        run_turn(store=store, catalog=default_catalog())
    c = make_client()
    home = c.get("/ui/").text
    assert '<span class="tag hold-tag" title="' in home and ">budget</span>" in home
    page = c.get("/ui/agents/main").text
    assert '<li class="hold hold-budget"><strong>budget</strong>' in page
    assert "tokens_per_day" in page and "(until " in page


def test_an_mcp_request_is_a_form_answered_through_its_control_route(
    script_runner: Any, holon_home: Path, tmp_path: Path
) -> None:
    """An MCP server's question (the fake server's ``color`` tool) shows as
    a form built from its schema, escaped; Answer posts ``{"content"}`` to
    ``/control/agents/{id}/mcp/requests/{rid}/answer`` (Decline posts
    ``{"decline": true}``); an answered request leaves the page."""
    pytest.importorskip("mcp", reason="needs the MCP SDK (pip install -e '.[test]')")
    import yaml
    from mcp_helpers import close_servers, fake, write_config

    write_config(holon_home, {"fake": fake("--era", "modern")})
    model = tmp_path / "s.yaml"
    model.write_text(
        yaml.safe_dump(
            {"steps": [{"tool_calls": [{"name": "mcp__fake__color", "arguments": {}}]}, "asked"]}
        )
    )
    try:
        script_runner.run(["holon", "enqueue", "pick a color"], check=True)
        res = script_runner.run(["holon", "turn", "--model", f"scripted:{model}"])
        assert res.returncode == 0, res.stderr
        c = make_client()
        page = c.get("/ui/agents/main").text
        panel = page[page.index('<section id="panel-mcp"') :]
        panel = panel[: panel.index("</section>")]
        assert "hidden" not in panel.split(">", 1)[0]
        assert "Which color?" in panel and "fake · color" in panel
        assert '<input name="color" data-type="string" required>' in panel
        assert ">Answer</button>" in panel and ">Decline</button>" in panel
        assert 'data-wrap="content"' in panel and "data-json='{\"decline\": true}'" in panel
        rid = re.search(r"/mcp/requests/(mcpreq_[a-z0-9]+)/answer", panel).group(1)  # type: ignore[union-attr]
        url = f"/control/agents/main/mcp/requests/{rid}/answer"
        bad = c.post(url, json={"content": {"colour": "teal"}})
        assert bad.status_code == 400 and "color" in bad.json()["error"]["message"]
        ok = c.post(url, json={"content": {"color": "teal"}})
        assert ok.status_code == 200 and ok.json()["state"] == "resolved"
        after = c.get("/ui/agents/main").text
        panel = after[after.index('<section id="panel-mcp"') :]
        assert "hidden" in panel.split(">", 1)[0] and rid not in panel.split("</section>")[0]
    finally:
        close_servers()


def test_the_reference_lists_every_console_route_and_stream_event() -> None:
    """``docs/reference/http.md`` is generated from ``pages.PAGES`` and
    ``live.EVENTS``: they name exactly what serve mounts and sends."""
    from starlette.routing import Route

    from holon_cli.serve.http.ui import live, pages

    mounted = {
        (m, r.path)
        for r in make_app().routes
        if isinstance(r, Route) and r.path.startswith("/ui/")
        for m in (r.methods or set()) - {"HEAD"}
    }
    assert mounted == {(m, p) for m, p, _, _ in pages.PAGES}
    assert set(live.EVENTS) == {"row", "panel"}
    sent = set(re.findall(r'sse\("([a-z]+)"', (Path(live.__file__)).read_text()))
    assert sent == set(live.EVENTS)


def test_serves_warm_up_reads_the_home_rows_once_for_a_small_home(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """serve's warm-up fills the home-row cache (the first home page after a
    start read every agent: 418 ms to DOMContentLoaded with 100 agents), and
    leaves a home larger than WARM_ROWS_MAX to its first page."""
    from holon_cli.serve.http.ui import views

    open_agent()
    create_agent("ops")
    views._ROWS.clear()
    assert views.warm_rows() == 2
    assert set(views._ROWS) == {"main", "ops"}
    calls: list[str] = []
    real = views.home_row
    monkeypatch.setattr(
        views, "home_row", lambda store, cfg: calls.append(store.agent_id) or real(store, cfg)
    )
    views.home_rows()  # nothing changed: every row from the cache
    assert calls == []
    views._ROWS.clear()
    monkeypatch.setattr(views, "WARM_ROWS_MAX", 1)
    assert views.warm_rows() == 0 and views._ROWS == {}
