"""Bodies the HTTP routes refuse with 400 and no traceback (issue 31, items
15 and 24): non-standard JSON, lone surrogates, deep nesting, huge integers.
Nothing is persisted."""

from __future__ import annotations

import pytest
from http_app import make_client

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent

BAD_BODIES = [
    b'{"json": NaN, "origin": "webhook:gh"}',
    b'{"json": {"a": Infinity}, "origin": "webhook:gh"}',
    b'{"json": {"a": "\\ud800"}, "origin": "webhook:gh"}',
    b'{"text": "\\udfff", "origin": "channel:c"}',
    b'{"json": ' + b"[" * 5000 + b"]" * 5000 + b', "origin": "webhook:gh"}',
    b'{"json": ' + b"[" * 200_000 + b', "origin": "webhook:gh"}',
    b'{"json": ' + b"7" * 5000 + b', "origin": "webhook:gh"}',
    b'{"json": 1, "origin": "webhook:gh"' + b"\xff}",
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_public_route_refuses_bad_json_with_400(body: bytes) -> None:
    store = open_agent("main")
    c = make_client()
    hdr = {"Content-Type": "application/json"}
    r = c.post("/agents/main/enqueue", content=body, headers=hdr)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["kind"] == "invalid_json" and "not valid JSON" in err["message"]
    r = c.post(
        "/control/agents/main/prompt", content=body.replace(b'"json"', b'"text"'), headers=hdr
    )
    assert r.status_code == 400
    assert q.pending_count(store) + store.inbox.pending_count() == 0


def test_good_json_still_admitted() -> None:
    open_agent("main")
    c = make_client()
    r = c.post(
        "/agents/main/enqueue", json={"json": {"n": 2.5, "a": [1] * 3}, "origin": "webhook:gh"}
    )
    assert r.status_code == 202, r.text


@pytest.mark.parametrize(
    "body",
    [b'{"a": NaN}', b'{"a": "\\ud800"}', b"[" * 5000 + b"]" * 5000, b"9" * 5000],
    ids=["nan", "surrogate", "deep", "bigint"],
)
def test_callback_route_refuses_bad_json_with_400(body: bytes) -> None:
    from holon_cli.runtime.waiting import triggers

    store = open_agent("main")
    url = triggers.show(store)["trigger_url"]
    assert url
    token = url.rsplit("/", 1)[-1]
    c = make_client()
    r = c.post(
        f"/callbacks/wake/{token}", content=body, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["kind"] == "invalid_json"
    assert q.pending_count(store) + store.inbox.pending_count() == 0
    assert triggers.show(store)["trigger_count"] == 0
