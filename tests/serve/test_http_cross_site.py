"""No cross-site control: a control route refuses what a browser sends on
behalf of another site's page (Origin, Sec-Fetch-Site), a control POST needs
``application/json``, and no response carries a CORS header (contract "Safe
to leave running"). The real-browser check is in test_http_browser.py."""

from __future__ import annotations

import pytest
from http_app import BASE, PORT, make_client

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.serve.http.app import origin_key


@pytest.fixture(autouse=True)
def _main_agent() -> None:
    open_agent("main")


def _pending() -> int:
    store = open_agent("main", create_default=False)
    return q.pending_count(store) + store.inbox.pending_count()


FOREIGN_ORIGINS = [
    "http://127.0.0.1:9999",  # another port of loopback: same-site, other origin
    "http://localhost:9999",
    "http://evil.example",
    "https://127.0.0.1:7878",  # other scheme
    "null",  # sandboxed iframes, file:// pages, redirects
    "http://127.0.0.1:7878/path",
    "garbage",
]


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
def test_foreign_origin_is_refused_on_every_control_route(origin: str) -> None:
    c = make_client()
    hdr = {"Origin": origin}
    for path in ("/agents/list", "/control/runtime/status", "/agents/main/status"):
        r = c.get(path, headers=hdr)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["error"]["kind"] == "cross_site"
        assert set(r.json()["error"]) == {"kind", "message", "hint"}
    r = c.post("/control/agents/main/prompt", json={"text": "rm -rf ~"}, headers=hdr)
    assert r.status_code == 403
    r = c.post("/control/agents/main/work-items", json={"objective": "x"}, headers=hdr)
    assert r.status_code == 403
    assert _pending() == 0


@pytest.mark.parametrize("site", ["cross-site", "same-site", "CROSS-SITE"])
def test_sec_fetch_site_from_another_site_is_refused(site: str) -> None:
    c = make_client()
    r = c.post(
        "/control/agents/main/prompt",
        json={"text": "x"},
        headers={"Sec-Fetch-Site": site},
    )
    assert r.status_code == 403 and r.json()["error"]["kind"] == "cross_site"
    assert c.get("/agents/list", headers={"Sec-Fetch-Site": site}).status_code == 403
    assert _pending() == 0


@pytest.mark.parametrize(
    "origin",
    [
        f"http://127.0.0.1:{PORT}",
        f"http://localhost:{PORT}",
        f"http://[::1]:{PORT}",
        f"HTTP://LOCALHOST:{PORT}",
    ],
)
def test_own_origins_and_no_origin_are_served(origin: str) -> None:
    c = make_client()
    assert c.get("/agents/list").status_code == 200  # curl, the CLI: no Origin
    hdr = {"Origin": origin, "Sec-Fetch-Site": "same-origin"}
    assert c.get("/agents/list", headers=hdr).status_code == 200
    r = c.post("/control/agents/main/prompt", json={"text": "hi"}, headers=hdr)
    assert r.status_code == 202, r.text
    assert c.get("/agents/list", headers={"Sec-Fetch-Site": "none"}).status_code == 200


def test_advertise_origin_is_own() -> None:
    c = make_client(advertise="https://holon.example.com/base", token="t")
    auth = {"Authorization": "Bearer t", "Host": "holon.example.com"}
    ok = c.get("/agents/list", headers={**auth, "Origin": "https://holon.example.com"})
    assert ok.status_code == 200
    bad = c.get("/agents/list", headers={**auth, "Origin": "https://holon.example.com:8443"})
    assert bad.status_code == 403


def test_cross_site_refused_before_the_token_is_looked_at() -> None:
    c = make_client(token="t")
    hdr = {"Authorization": "Bearer t", "Origin": "http://evil.example"}
    r = c.post("/control/agents/main/prompt", json={"text": "x"}, headers=hdr)
    assert r.status_code == 403 and _pending() == 0


@pytest.mark.parametrize(
    "ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x", None]
)
def test_control_post_needs_json_content_type(ctype: str | None) -> None:
    c = make_client()
    headers = {"Content-Type": ctype} if ctype else {}
    for path, body in (
        ("/control/agents/main/prompt", b'{"text": "x"}'),
        ("/control/agents/main/work-items", b'{"objective": "x"}'),
    ):
        r = c.post(path, content=body, headers=headers)  # bytes: no Content-Type added
        assert r.status_code == 415, (path, ctype, r.text)
        assert r.json()["error"]["kind"] == "unsupported_media_type"
    assert _pending() == 0
    r = c.post(
        "/control/agents/main/prompt",
        content=b'{"text": "x"}',
        headers={"Content-Type": "Application/JSON; charset=utf-8"},
    )
    assert r.status_code == 202


def test_bodiless_control_post_needs_no_content_type() -> None:
    shutdowns: list[int] = []
    c = make_client(shutdowns=shutdowns)
    assert c.post("/control/runtime/shutdown").status_code == 202
    r = c.post("/control/runtime/shutdown", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    assert shutdowns == [1]


def test_no_cors_headers_ever() -> None:
    c = make_client()
    hdr = {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}
    responses = [
        c.options("/control/agents/main/prompt", headers=hdr),
        c.get("/agents/list", headers=hdr),
        c.get("/healthz", headers=hdr),
        c.post("/agents/main/enqueue", json={"text": "x", "origin": "channel:c"}, headers=hdr),
        c.get("/agents/list", headers={"Origin": BASE}),
    ]
    for r in responses:
        assert not [h for h in r.headers if h.lower().startswith("access-control-")], r.headers


def test_public_routes_take_foreign_origins() -> None:
    c = make_client()
    hdr = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
    r = c.post("/agents/main/enqueue", json={"text": "x", "origin": "channel:c"}, headers=hdr)
    assert r.status_code == 202
    assert c.get("/healthz", headers=hdr).status_code == 200


def test_origin_key() -> None:
    assert origin_key("http://LocalHost") == ("http", "localhost", 80)
    assert origin_key("https://[::1]:8443") == ("https", "::1", 8443)
    assert origin_key("null") is None
    assert origin_key("http://x:99999") is None
    assert origin_key("ftp://x") is None
