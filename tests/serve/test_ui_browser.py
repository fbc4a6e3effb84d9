"""The web console in a real browser (headless Chromium through Selenium,
``browser.py``) against a real ``holon serve`` with a scripted model: pages
load with no console error and fetch nothing from another origin, a CLI
enqueue appears without a reload, each action works through the control
routes, the login sets a strict HttpOnly cookie and keeps the token out of
every URL, a page of another loopback origin can neither act nor read, and
every text source carrying markup stays text. Every test but the smoke test
is slow."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from browser import Browser, needs_browser

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from serve_helpers import HOLON, serve_addr, start_serve, stop, wait_for  # noqa: E402

from holon_cli.runtime.agents.lifecycle import open_agent  # noqa: E402
from holon_cli.serve.http import app as http  # noqa: E402
from holon_cli.serve.http.ui.actions import ACTION_ROUTES  # noqa: E402

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
TOKEN = "ui-test-token-0123456789"


class Console:
    """A running serve and how to reach it."""

    def __init__(
        self, proc: subprocess.Popen[bytes], url: str, home: Path, log: Path | None = None
    ) -> None:
        self.proc, self.url, self.home, self.log = proc, url, home, log

    def holon(self, *args: str, check: bool = True) -> str:
        res = subprocess.run(
            [*HOLON, *args], capture_output=True, text=True, timeout=60, check=False
        )
        if check and res.returncode != 0:
            raise AssertionError(f"holon {' '.join(args)}: {res.returncode}\n{res.stderr}")
        return res.stdout


def _script(tmp_path: Path, reply: str = "done", tool: str | None = None) -> str:
    steps: list[Any] = [{"text": reply}]
    if tool is not None:  # a tool call first (its name is model text too)
        steps.insert(0, {"tool_calls": [{"name": tool, "arguments": {}}]})
    script = {
        "agents": {
            # a turn that runs long enough to be aborted from the page
            "slow": {"steps": [{"sleep_ms": 60_000, "text": "too late"}], "loop": True},
        },
        "loop": True,
        "steps": steps,
    }
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(script))
    return f"scripted:{path}"


def _serve(
    tmp_path: Path,
    holon_home: Path,
    *,
    token: str | None = None,
    reply: str = "done",
    tool: str | None = None,
) -> Iterator[Console]:
    env = {"HOLON_MODEL": _script(tmp_path, reply, tool)}
    if token:
        env["HOLON_CONTROL_TOKEN"] = token
    open_agent("main")
    proc = start_serve(tmp_path, env=env)
    try:
        url = serve_addr(holon_home)
        assert wait_for(lambda: (holon_home / "run" / "holon.sock").exists(), 20)
        yield Console(proc, url, holon_home, tmp_path / "serve.log")
    finally:
        stop(proc)


@pytest.fixture
def console(tmp_path: Path, holon_home: Path) -> Iterator[Console]:
    yield from _serve(tmp_path, holon_home)


@pytest.fixture
def token_console(tmp_path: Path, holon_home: Path) -> Iterator[Console]:
    yield from _serve(tmp_path, holon_home, token=TOKEN)


def _clean(b: Browser, c: Console) -> None:
    """No console error or warning, nothing fetched from elsewhere."""
    assert b.console_errors() == [], b.logs
    assert b.foreign_requests(c.url) == []


def _has(route_name: str) -> bool:
    return ACTION_ROUTES[route_name] in {r.path for r in http.ROUTES}


# ------------------------------------------------------------ smoke (not slow)


@pytest.mark.slow
@needs_browser
def test_pages_load_clean_and_a_cli_enqueue_appears_without_reload(
    browser: Browser, console: Console
) -> None:
    b, c = browser, console
    assert c.log is not None
    assert f"web console: {c.url}/ui/" in c.log.read_text()  # serve says where it is
    b.open(c.url + "/ui/")
    b.wait_text("main", "#agents-body")
    b.wait(lambda: b.text("#live") == "live", what="the home page's live stream")
    c.holon("agent", "create", "fresh")  # a new agent: the table is sent again, whole
    b.wait_text("fresh", "#agents-body")
    assert b.js("return document.querySelector('#agents-body > tr#agent-fresh') !== null")
    _clean(b, c)
    b.click("a", "main")
    b.wait(lambda: b.driver.current_url.endswith("/ui/agents/main"), what="the agent page")
    b.wait(lambda: b.text("#live") == "live", what="the agent page's live stream")
    b.js("window.__marker = 'same page'")
    c.holon("enqueue", "hello from the cli")
    b.wait_text("hello from the cli", "#conversation")
    b.wait_text("done", "#conversation .cat-brief")  # the reply, from the same stream
    assert b.js("return window.__marker") == "same page"  # no reload happened
    assert b.js("return document.querySelectorAll('#conversation [data-seq]').length") >= 2
    _clean(b, c)


# ------------------------------------------------------------ slow


@pytest.mark.slow
@needs_browser
def test_display_modes_send_and_each_action(
    browser: Browser, console: Console, tmp_path: Path
) -> None:
    b, c = browser, console
    # what the actions will act on: a work item, a timer, a running task
    first = json.loads(c.holon("workitem", "create", "first item", "--json"))["data"]["work_item"][
        "id"
    ]
    c.holon("timer", "add", "--after", "1h", "--message", "check later")
    task = json.loads(c.holon("task", "run", "--json", "--", "sleep 120"))["data"]
    tid = task.get("task_id") or task["task"]["task_id"]
    b.open(c.url + "/ui/agents/main")
    b.wait(lambda: b.text("#live") == "live", what="live")

    # Send: the composer posts to /control/agents/main/prompt
    b.type("#prompt-text", "typed in the page")
    b.click("#composer button", "Send")
    b.wait_text("typed in the page", "#conversation")
    b.wait_text("Sent", "#notice")
    assert b.js("return document.getElementById('prompt-text').value") == ""

    # display modes: a progress row shows at verbose, a trace row only at debug
    visible = (
        "return [...document.querySelectorAll('#conversation .row')]"
        ".filter(r => r.offsetParent).map(r => r.className)"
    )
    b.wait_text("done", "#conversation .cat-brief")
    info = b.js(visible)
    assert info and all("m-info" in cls for cls in info)
    b.click(".modes a", "verbose")
    assert b.js("return document.body.dataset.mode") == "verbose"
    assert "mode=verbose" in b.driver.current_url
    verbose = b.js(visible)
    assert len(verbose) > len(info) and any("vis-progress" in cls for cls in verbose)
    b.click(".modes a", "debug")
    debug = b.js(visible)
    assert len(debug) > len(verbose) and any("vis-trace" in cls for cls in debug)
    b.click(".modes a", "info")
    back = b.js(visible)  # rows may have arrived meanwhile: only info rows show
    assert back[: len(info)] == info and all("m-info" in cls for cls in back)

    # Create a work item, then Pick it (focus moves from the first one)
    b.type("#objective", "second item")
    b.click("#panel-workitems form[data-post$='/work-items'] button", "Create")
    b.wait_text("second item", "#panel-workitems")
    store = open_agent("main", create_default=False)
    second = next(
        r["id"] for r in store.ledger("work_items").records() if r.get("objective") == "second item"
    )
    c.holon("workitem", "pick", first)
    b.wait(
        lambda: b.js(f"return !!document.querySelector(\"form[data-post$='/{second}/pick']\")"),
        what="a Pick button",
    )
    b.click(f"form[data-post$='/{second}/pick'] button", "Pick")
    b.wait(lambda: store.read_record()["state"]["current_work_item_id"] == second, what="the pick")
    b.wait_text("Picked", "#notice")

    # Cancel the timer
    b.click("#panel-timers button", "Cancel")
    b.wait(
        lambda: json.loads(c.holon("timer", "list", "--json"))["data"]["timers"] == [],
        what="the timer cancelled",
    )
    # Stop the task (its output tail is on the page while it runs)
    b.wait(lambda: tid in b.text("#panel-tasks"), what="the task listed")
    b.click("#panel-tasks button", "Stop")
    b.wait_text("Stopped", "#notice", timeout=20)
    status = json.loads(c.holon("task", "status", tid, "--json"))["data"]["task"]["status"]
    assert status != "running"

    # Pause and Start when serve has the routes; no such button when it has not
    if _has("pause"):
        b.click("#panel-summary button", "Pause")
        b.wait(lambda: store.read_record()["state"]["status"] == "paused", what="paused")
        b.wait(lambda: "Start" in b.text("#panel-summary"), what="a Start button")
        b.click("#panel-summary button", "Start")
        b.wait(lambda: store.read_record()["state"]["status"] != "paused", what="started")
    else:
        assert "Pause" not in b.text("#panel-summary")
    _clean(b, c)


@pytest.mark.slow
@needs_browser
def test_abort_stops_the_running_turn(browser: Browser, console: Console) -> None:
    b, c = browser, console
    c.holon("agent", "create", "slow")
    b.open(c.url + "/ui/agents/slow")
    b.wait(lambda: b.text("#live") == "live", what="live")
    c.holon("enqueue", "--agent", "slow", "take your time")
    b.wait(
        lambda: b.js(
            "return !document.querySelector("
            "'#panel-summary form[data-post$=\"/abort\"] button').disabled"
        ),
        what="Abort enabled while the turn runs",
    )
    b.click("#panel-summary button", "Abort")
    store = open_agent("slow", create_default=False)
    b.wait(lambda: store.read_record()["state"]["status"] == "paused", timeout=20, what="aborted")
    b.wait_text("aborted", "#conversation")
    _clean(b, c)


@pytest.mark.slow
@needs_browser
def test_login_sets_a_strict_httponly_cookie_and_no_url_holds_the_token(
    browser: Browser, token_console: Console
) -> None:
    b, c = browser, token_console
    b.open(c.url + "/ui/agents/main")
    b.wait(lambda: "/ui/login" in b.driver.current_url, what="the login page")
    b.type("#token", "not the token")
    b.click("form button", "Log in")
    b.wait_text("not this serve's control token")
    assert b.driver.get_cookies() == []
    refused = [e for e in b.read_log() if e.get("level") == "SEVERE"]
    assert len(refused) == 1 and "401" in refused[0]["message"]  # the wrong token, said so
    b.logs.clear()
    b.type("#token", TOKEN)
    b.click("form button", "Log in")
    b.wait(lambda: b.driver.current_url == c.url + "/ui/agents/main", what="back on the page")
    cookies = b.driver.get_cookies()
    assert len(cookies) == 1
    (cookie,) = cookies
    assert cookie["name"] == "holon_console" and cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert TOKEN not in cookie["value"]
    assert b.js("return document.cookie") == ""  # no script can read it
    history = b.js("return performance.getEntriesByType('navigation').map(e => e.name)")
    assert all(TOKEN not in u for u in [b.driver.current_url, *history, *b.visited])
    # the cookie authorises the page's own actions and stream
    b.wait(lambda: b.text("#live") == "live", what="live with the cookie")
    b.type("#prompt-text", "sent with the cookie")
    b.click("#composer button", "Send")
    b.wait_text("sent with the cookie", "#conversation")
    _clean(b, c)
    b.click(".logout button", "Log out")
    b.wait(lambda: "/ui/login" in b.driver.current_url, what="logged out")
    assert b.driver.get_cookies() == []


ATTACK = """<!doctype html><html><body><pre id="out">running</pre>
<iframe id="frame" src="%(serve)s/ui/"></iframe>
<script>
const serve = %(serve_json)s;
const results = {};
const evil = '{"text": "from evil"}';
async function attempt(name, url, init) {
  try {
    const r = await fetch(url, {credentials: "include", ...init});
    results[name] = r.type === "opaque" ? "opaque" : r.status + ":" + (await r.text());
  } catch (e) { results[name] = "blocked"; }
}
(async () => {
  const prompt = serve + "/control/agents/main/prompt";
  const json = {"Content-Type": "application/json"};
  await attempt("prompt_json", prompt, {method: "POST", headers: json, body: evil});
  await attempt("prompt_plain", prompt, {method: "POST", mode: "no-cors", body: evil});
  await attempt("pause", serve + "/control/agents/main/pause", {method: "POST", mode: "no-cors"});
  await attempt("read_page", serve + "/ui/agents/main", {});
  await attempt("read_status", serve + "/agents/main/status", {});
  await attempt("read_page_no_cors", serve + "/ui/agents/main", {mode: "no-cors"});
  await new Promise((done) => {
    const es = new EventSource(serve + "/ui/agents/main/live", {withCredentials: true});
    const end = (what) => { results.stream = results.stream || what; es.close(); done(); };
    es.addEventListener("row", () => end("read"));
    es.onerror = () => end("refused");
    setTimeout(() => end("nothing"), 4000);
  });
  try {
    const doc = document.getElementById("frame").contentDocument;
    results.frame = doc && doc.body && doc.body.innerText ? "readable" : "unreadable";
  } catch (e) { results.frame = "unreadable"; }
  document.getElementById("out").textContent = "RESULTS " + JSON.stringify(results);
})();
</script></body></html>"""


class _Attacker(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.mark.slow
@needs_browser
def test_a_page_of_another_loopback_origin_cannot_act_or_read(
    browser: Browser, token_console: Console
) -> None:
    """Logged in first (the SameSite=Strict cookie is sent to another port of
    the same host: ports are one "site"), then the browser visits a page on
    another loopback port that tries everything through it."""
    b, c = browser, token_console
    b.open(c.url + "/ui/login")
    b.type("#token", TOKEN)
    b.click("form button", "Log in")
    b.wait(lambda: b.driver.current_url == c.url + "/ui/", what="logged in")
    handler = type("Attack", (_Attacker,), {})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        handler.page = (ATTACK % {"serve": c.url, "serve_json": json.dumps(c.url)}).encode()
        b.open(f"http://127.0.0.1:{srv.server_address[1]}/")
        b.wait_text("RESULTS", "#out", timeout=30)
        results: dict[str, Any] = json.loads(b.text("#out").split("RESULTS ", 1)[1])
    finally:
        srv.shutdown()
        srv.server_close()
    assert results["prompt_json"] == "blocked"  # no CORS: the preflight fails
    assert results["read_page"] == "blocked" and results["read_status"] == "blocked"
    # Cross-Origin-Resource-Policy: same-origin: not even an opaque response
    assert results["read_page_no_cors"] == "blocked"
    assert results["stream"] != "read"
    assert results["frame"] == "unreadable"
    store = open_agent("main", create_default=False)
    texts = json.dumps(store.ledger("queue").records()) + "".join(
        p.read_text() for p in store.inbox.pending()
    )
    assert "from evil" not in texts, results
    assert store.read_record()["state"]["status"] != "paused"
    # the frame was refused by the console's headers, not shown
    assert any(
        "frame-ancestors" in str(e.get("message")) or "X-Frame-Options" in str(e.get("message"))
        for e in b.console_errors()
    ), b.logs


@pytest.mark.slow
@needs_browser
def test_markup_in_every_text_source_stays_text(
    tmp_path: Path, holon_home: Path, browser: Browser
) -> None:
    b = browser
    gen = _serve(tmp_path, holon_home, reply="reply " + XSS, tool="tool" + XSS)
    c = next(gen)
    try:
        odd = tmp_path / ('ws<img src=x onerror="window.__xss=3">')
        odd.mkdir()
        c.holon("workspace", "use", str(odd))
        plan = tmp_path / "plan.md"
        plan.write_text("# Plan\n\nplan " + XSS + "\n\n![px](http://127.0.0.2:9/p.png)\n")
        made = c.holon("workitem", "create", "objective " + XSS, "--plan-file", str(plan), "--json")
        c.holon("workitem", "pick", json.loads(made)["data"]["work_item"]["id"])
        c.holon("timer", "add", "--after", "1h", "--message", "timer " + XSS)
        c.holon("task", "run", "--", "printf '%s\\n' 'task " + XSS + "'; sleep 60")
        b.open(c.url + "/ui/agents/main?mode=debug")
        b.wait(lambda: b.text("#live") == "live", what="live")
        c.holon("enqueue", "message " + XSS)  # arrives over the live stream
        b.wait_text("message <script>", "#conversation")
        b.wait_text("reply <script>", "#conversation")
        b.wait_text("tool<script>", "#conversation")  # the tool's name, at debug
        b.wait(lambda: "task <script>" in b.text("#panel-tasks"), what="the task's output")
        body = b.text()
        for source in ("objective ", "plan ", "timer ", "message ", "reply ", "task "):
            assert source + "<script>window.__xss=1</script>" in body.replace("\n", ""), source
        assert 'ws<img src=x onerror="window.__xss=3">' in body
        _no_markup_ran(b)
        # memory search (the agent's and across agents) shows the same text as text
        b.open(c.url + "/ui/agents/main?q=objective")
        b.wait_text("objective <script>", "#panel-memory")
        _no_markup_ran(b)
        b.open(c.url + "/ui/search?q=objective")
        b.wait_text("objective <script>")
        _no_markup_ran(b)
        b.open(c.url + "/ui/")
        b.wait_text("objective <script>", "#agents-body")  # the current work item
        _no_markup_ran(b)
        _clean(b, c)
    finally:
        gen.close()


def _no_markup_ran(b: Browser) -> None:
    assert b.js("return window.__xss") is None
    assert b.js("return document.querySelectorAll('img').length") == 0
    assert b.js("return document.scripts.length") == 1
    assert b.js("return document.querySelectorAll('[onerror],[onload],[onclick]').length") == 0


@pytest.mark.slow
@needs_browser
def test_phone_width_pages_fit_the_screen(browser: Browser, console: Console) -> None:
    b, c = browser, console
    b.driver.set_window_size(390, 844)
    c.holon("workitem", "create", "a long objective " + "word " * 40)
    c.holon("enqueue", "a message " + "x" * 300)
    for path in ("/ui/", "/ui/agents/main", "/ui/search?q=objective"):
        b.open(c.url + path)
        width = b.js("return window.innerWidth")
        assert b.js("return document.documentElement.scrollWidth") <= width, path
    b.open(c.url + "/ui/agents/main")
    composer = b.driver.find_element("id", "prompt-text")
    assert composer.is_displayed() and composer.size["width"] > 200
    _clean(b, c)


@pytest.mark.slow
@needs_browser
def test_an_mcp_request_is_answered_from_the_page(
    browser: Browser, tmp_path: Path, holon_home: Path
) -> None:
    pytest.importorskip("mcp", reason="needs the MCP SDK (pip install -e '.[test]')")
    from mcp_helpers import fake, write_config

    b = browser
    write_config(holon_home, {"fake": fake("--era", "modern")})
    model = tmp_path / "mcp-model.yaml"
    steps = [{"tool_calls": [{"name": "mcp__fake__color", "arguments": {}}]}, "asked", "thanks"]
    model.write_text(yaml.safe_dump({"steps": steps}))
    open_agent("main")
    proc = start_serve(tmp_path, env={"HOLON_MODEL": f"scripted:{model}"})
    try:
        c = Console(proc, serve_addr(holon_home), holon_home)
        b.open(c.url + "/ui/agents/main")
        b.wait(lambda: b.text("#live") == "live", what="live")
        c.holon("enqueue", "pick a color")
        b.wait(
            lambda: b.js("return !document.getElementById('panel-mcp').hidden"), 30, "the request"
        )
        b.wait_text("Which color?", "#panel-mcp")
        b.type("#panel-mcp input[name=color]", "teal")
        b.click("#panel-mcp button", "Answer")
        b.wait_text("Answered", "#notice", timeout=30)
        b.wait(lambda: b.js("return document.getElementById('panel-mcp').hidden"), 30, "answered")
        rows = json.loads(c.holon("mcp", "requests", "--all", "--json"))["data"]["requests"]
        assert [r["state"] for r in rows] == ["resolved"] and rows[0]["outcome"] == "result"
        _clean(b, c)
    finally:
        stop(proc)
