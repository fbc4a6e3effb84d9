"""A real browser cannot drive ``holon serve``'s control routes from another
site's page (issue 21, item 1): headless Chromium loads a page from a second
loopback origin (another port) that tries what an attacker would, and
nothing reaches the agent's queue as an operator message.

The page also posts to the public ``/agents/{id}/enqueue`` route (meant for
other sites); that one arrives, which shows the browser did reach the server
and the control refusals are not a network accident.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from serve_helpers import scripted_model, serve_addr, start_serve, stop, wait_for  # noqa: E402

from holon_cli.runtime.agents.lifecycle import open_agent  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

PAGE = """<!doctype html><html><body><pre id="out">running</pre><script>
const serve = %(serve)s;
const results = {};
async function attempt(name, url, init) {
  try { const r = await fetch(url, init); results[name] = r.status; }
  catch (e) { results[name] = "blocked"; }
}
(async () => {
  await attempt("public", serve + "/agents/main/enqueue",
                {method: "POST", mode: "no-cors",
                 body: '{"text": "from a page", "origin": "channel:browser"}'});
  const plain = {method: "POST", body: '{"text": "x"}', headers: {"Content-Type": "text/plain"}};
  await attempt("prompt_text_plain", serve + "/control/agents/main/prompt", plain);
  await attempt("prompt_no_cors", serve + "/control/agents/main/prompt",
                {...plain, mode: "no-cors"});
  await attempt("prompt_json", serve + "/control/agents/main/prompt",
                {method: "POST", body: '{"text": "x"}',
                 headers: {"Content-Type": "application/json"}});
  await attempt("work_item", serve + "/control/agents/main/work-items",
                {method: "POST", mode: "no-cors", body: '{"objective": "x"}'});
  await attempt("shutdown", serve + "/control/runtime/shutdown",
                {method: "POST", mode: "no-cors"});
  await attempt("read_list", serve + "/agents/list", {});
  document.getElementById("out").textContent = "RESULTS " + JSON.stringify(results);
  await fetch("/done", {method: "POST", body: JSON.stringify(results)});
})();
</script></body></html>"""


class _Page(BaseHTTPRequestHandler):
    page = b""
    reports: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("Content-Length") or 0)
        self.reports.append(self.rfile.read(n).decode())
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def page_server() -> Iterator[tuple[ThreadingHTTPServer, type[_Page]]]:
    handler = type("Page", (_Page,), {"reports": []})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # shutdown() waits out a poll of serve_forever: the default is 0.5 s
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    t.start()
    try:
        yield srv, handler
    finally:
        srv.shutdown()
        srv.server_close()


def _operator_messages() -> list[str]:
    store = open_agent("main", create_default=False)
    found = [p.read_text() for p in store.inbox.pending()]
    found += [json.dumps(r) for r in store.ledger("queue").records()]
    return [m for m in found if "operator_prompt" in m]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium)")
def test_headless_chromium_cannot_drive_control_routes(
    tmp_path: Path, holon_home: Path, page_server: tuple[ThreadingHTTPServer, type[_Page]]
) -> None:
    assert CHROMIUM is not None
    srv, handler = page_server
    open_agent("main")
    proc = start_serve(tmp_path, env={"HOLON_MODEL": scripted_model(tmp_path)})
    try:
        addr = serve_addr(holon_home)
        handler.page = (PAGE % {"serve": json.dumps(addr)}).encode()
        page_url = f"http://127.0.0.1:{srv.server_address[1]}/"
        browser = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'chromium-profile'}",
                "--virtual-time-budget=15000",
                "--dump-dom",
                page_url,
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert "RESULTS" in browser.stdout, browser.stderr[-2000:]
        assert wait_for(lambda: bool(handler.reports), 10), browser.stdout
        results = json.loads(handler.reports[0])
        # the public route arrived (opaque to the page, but admitted) ...
        store = open_agent("main", create_default=False)
        assert wait_for(
            lambda: any(
                '"channel_id": "browser"' in json.dumps(r) for r in store.ledger("queue").records()
            ),
            10,
        ), (results, (tmp_path / "serve.log").read_text())
        # ... while no control request did anything
        assert _operator_messages() == [], results
        assert proc.poll() is None, "a cross-site page shut serve down"
        items = open_agent("main", create_default=False).ledger("work_items").records()
        assert items == [], results
        assert results["read_list"] == "blocked"  # no CORS header: unreadable
        assert results["prompt_json"] == "blocked"  # needs a preflight, which fails
    finally:
        stop(proc)
