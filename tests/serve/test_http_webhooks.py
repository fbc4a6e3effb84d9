"""``POST /webhooks/{source}/{agent_id}`` (issue 21, item 2): any body as
evidence, GitHub and Standard Webhooks signatures, replay dedupe that
survives a restart, and nothing persisted on a refusal."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from http_app import client_for, make_app, make_client

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.serve.http.webhooks import DEDUPE_TTL_S, LEDGER

PUSH = (Path(__file__).parent / "fixtures" / "github_push.json").read_bytes()
GH_SECRET = "It's a Secret to Everybody"
STD_KEY = b"holon-standard-webhooks-test-key"
STD_SECRET = "whsec_" + base64.b64encode(STD_KEY).decode()


def _config(home: Path, ingress: dict[str, Any]) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"ingress": ingress}))


def _messages(agent: str = "main") -> list[dict[str, Any]]:
    store = open_agent(agent, create_default=False)
    q.try_ingest(store)
    return [r["message"] for r in store.ledger("queue").records() if r.get("op") == "admitted"]


def _nothing_persisted(agent: str = "main") -> None:
    store = open_agent(agent, create_default=False)
    assert store.inbox.pending_count() == 0 and q.pending_count(store) == 0
    assert not store.layout.ledger_path(LEDGER).exists()


def _gh_headers(body: bytes, delivery: str, secret: str | None = GH_SECRET) -> dict[str, str]:
    hdr = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/044aadd",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Hook-ID": "292430182",
    }
    if secret is not None:
        mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        hdr["X-Hub-Signature-256"] = f"sha256={mac}"
    return hdr


def _std_headers(body: bytes, wid: str, ts: int, key: bytes = STD_KEY) -> dict[str, str]:
    mac = hmac.new(key, f"{wid}.{ts}.".encode() + body, hashlib.sha256).digest()
    return {
        "Content-Type": "application/json",
        "webhook-id": wid,
        "webhook-timestamp": str(ts),
        "webhook-signature": f"v1,{base64.b64encode(mac).decode()}",
    }


@pytest.fixture(autouse=True)
def _main_agent() -> None:
    open_agent("main")


def test_real_github_push_unsigned_is_evidence(holon_home: Path) -> None:
    c = make_client()
    r = c.post("/webhooks/github/main", content=PUSH, headers=_gh_headers(PUSH, "d-1", None))
    assert r.status_code == 202, r.text
    mid = r.json()["message_id"]
    [msg] = _messages()
    assert msg["id"] == mid and msg["kind"] == "webhook_event"
    assert msg["origin"] == {"kind": "webhook", "source": "github", "event_type": "push"}
    assert msg["trust"] == "trusted_integration"
    assert msg["delivery_surface"] == "http_webhook"
    assert msg["admission_context"] == "public_unauthenticated"
    assert msg["body"] == {"type": "json", "value": json.loads(PUSH)}
    # a redelivery (same id): 200 duplicate, no second message
    r = c.post("/webhooks/github/main", content=PUSH, headers=_gh_headers(PUSH, "d-1", None))
    assert r.status_code == 200 and r.json()["duplicate"] is True
    assert r.json()["message_id"] == mid
    assert len(_messages()) == 1
    # another delivery of the same body is a new message
    r = c.post("/webhooks/github/main", content=PUSH, headers=_gh_headers(PUSH, "d-2", None))
    assert r.status_code == 202 and len(_messages()) == 2


def test_text_and_form_bodies(holon_home: Path) -> None:
    c = make_client()
    r = c.post(
        "/webhooks/ci/main", content=b"build 17 green", headers={"Content-Type": "text/plain"}
    )
    assert r.status_code == 202
    r = c.post(
        "/webhooks/ci/main",
        content=b"payload=%7B%22a%22%3A1%7D",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 202
    r = c.post(
        "/webhooks/ci/main",
        content=b"name=a&other=b",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 202
    bodies = [m["body"] for m in _messages()]
    # GitHub's form delivery: the payload field is the JSON body (issue 35 item 7);
    # a form without one stays text
    assert bodies[0] == {"type": "text", "text": "build 17 green"}
    assert bodies[1]["type"] == "json" and bodies[1]["value"] == {"a": 1}
    assert bodies[2] == {"type": "text", "text": "name=a&other=b"}


@pytest.mark.parametrize(
    ("body", "ctype", "status"),
    [
        (b"\xff\xfe binary", "application/octet-stream", 400),
        (b"{not json", "application/json", 400),
        (b'{"a": NaN}', "application/json", 400),
        (b"", "text/plain", 400),
        (b"x" * ((1 << 20) + 1), "text/plain", 413),
    ],
)
def test_bad_bodies_persist_nothing(holon_home: Path, body: bytes, ctype: str, status: int) -> None:
    c = make_client()
    hdr = {"Content-Type": ctype, "X-GitHub-Delivery": "d-bad"}
    r = c.post("/webhooks/ci/main", content=body, headers=hdr)
    assert r.status_code == status, r.text
    assert set(r.json()["error"]) == {"kind", "message", "hint"}
    _nothing_persisted()


def test_bad_source_agent_and_delivery_id(holon_home: Path) -> None:
    c = make_client()
    assert c.post("/webhooks/bad%20source/main", content=b"x").status_code == 400
    assert c.post("/webhooks/ci/nobody", content=b"x").status_code == 404
    r = c.post("/webhooks/ci/main", content=b"x", headers={"X-GitHub-Delivery": "a b"})
    assert r.status_code == 400
    _nothing_persisted()


def test_github_signature(holon_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_HOOK_SECRET", GH_SECRET)
    _config(
        holon_home, {"webhooks": {"github": {"secret_env": "GH_HOOK_SECRET", "scheme": "github"}}}
    )
    c = make_client()
    url = "/webhooks/github/main"
    for hdr in (
        _gh_headers(PUSH, "d-1", None),  # unsigned
        _gh_headers(PUSH, "d-1", "wrong secret"),
        _gh_headers(PUSH + b" ", "d-1"),  # signed another body
        {**_gh_headers(PUSH, "d-1"), "X-Hub-Signature-256": "sha1=abc"},
    ):
        r = c.post(url, content=PUSH, headers=hdr)
        assert r.status_code == 401, r.text
        assert r.json()["error"]["kind"] == "bad_signature"
    _nothing_persisted()  # not even the delivery id
    r = c.post(url, content=PUSH, headers=_gh_headers(PUSH, "d-1"))
    assert r.status_code == 202, r.text  # d-1 was not remembered by the refusals
    r = c.post(url, content=PUSH, headers=_gh_headers(PUSH, "d-1"))
    assert r.status_code == 200 and r.json()["duplicate"] is True
    # a source without a secret stays open
    assert c.post("/webhooks/other/main", content=b"x").status_code == 202
    assert len(_messages()) == 2


def test_standard_webhooks(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch, now: list[float]
) -> None:
    monkeypatch.setenv("STD_SECRET", STD_SECRET)
    _config(
        holon_home, {"webhooks": {"stripe": {"secret_env": "STD_SECRET", "scheme": "standard"}}}
    )
    c = make_client()
    url = "/webhooks/stripe/main"
    body = b'{"type": "invoice.paid", "data": {"id": "in_1"}}'
    t = int(now[0])
    good = _std_headers(body, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", t)
    refused = [
        _std_headers(body, "msg_a", t - 301),  # stale
        _std_headers(body, "msg_a", t + 301),  # from the future
        _std_headers(body, "msg_a", t, key=b"another key"),
        {**good, "webhook-id": "msg_other"},  # id not what was signed
        {k: v for k, v in good.items() if k != "webhook-signature"},
        {k: v for k, v in good.items() if k != "webhook-timestamp"},
        {**good, "webhook-timestamp": "soon"},
        {**good, "webhook-timestamp": "9" * 5000},
        {**good, "webhook-signature": good["webhook-signature"].replace("v1,", "v2,")},
    ]
    for hdr in refused:
        r = c.post(url, content=body, headers=hdr)
        assert r.status_code == 401, (hdr, r.text)
    _nothing_persisted()
    # several signatures (a secret rotation): one valid v1 is enough
    rotated = {**good, "webhook-signature": "v1,Zm9vYmFy " + good["webhook-signature"]}
    r = c.post(url, content=body, headers=rotated)
    assert r.status_code == 202, r.text
    # within the tolerance is fine; the same webhook-id is a duplicate
    late = _std_headers(body, good["webhook-id"], t - 299)
    r = c.post(url, content=body, headers=late)
    assert r.status_code == 200 and r.json()["duplicate"] is True
    [msg] = _messages()
    assert msg["origin"] == {"kind": "webhook", "source": "stripe"}
    assert msg["body"]["value"]["type"] == "invoice.paid"


def test_dedupe_survives_a_restart_and_expires(holon_home: Path, now: list[float]) -> None:
    hdr = {"Content-Type": "text/plain", "webhook-id": "evt-1"}
    r = make_client().post("/webhooks/ci/main", content=b"one", headers=hdr)
    assert r.status_code == 202
    # a new app (serve restarted) still knows the id: durable, not in memory
    r = make_client().post("/webhooks/ci/main", content=b"one", headers=hdr)
    assert r.status_code == 200 and r.json()["duplicate"] is True
    # the same id from another source is another delivery
    r = make_client().post("/webhooks/cd/main", content=b"one", headers=hdr)
    assert r.status_code == 202
    now[0] += DEDUPE_TTL_S + 1
    r = make_client().post("/webhooks/ci/main", content=b"one", headers=hdr)
    assert r.status_code == 202
    assert len(_messages()) == 3


def test_dedupe_ledger_is_compacted(holon_home: Path, now: list[float]) -> None:
    from holon_cli.serve.http import webhooks

    store = open_agent("main", create_default=False)
    led = store.ledger(LEDGER)
    old = now[0] - DEDUPE_TTL_S - 10
    for i in range(3500):
        led.append({"source": "ci", "delivery_id": f"old-{i}", "message_id": "m", "at": old})
    assert led.size() > webhooks.COMPACT_BYTES
    c = make_client()
    r = c.post("/webhooks/ci/main", content=b"x", headers={"webhook-id": "new-1"})
    assert r.status_code == 202
    records = store.ledger(LEDGER).records()
    assert [r["delivery_id"] for r in records] == ["new-1"]
    r = c.post("/webhooks/ci/main", content=b"x", headers={"webhook-id": "new-1"})
    assert r.status_code == 200


def test_stopped_agent_is_409_and_remembers_nothing(holon_home: Path) -> None:
    from holon_cli.runtime.agents.lifecycle import set_lifecycle

    set_lifecycle("main", "stop")
    c = make_client()
    hdr = {"webhook-id": "evt-9"}
    r = c.post("/webhooks/ci/main", content=b"x", headers=hdr)
    assert r.status_code == 409
    _nothing_persisted()


def test_one_app_many_clients_rate_limit(holon_home: Path, now: list[float]) -> None:
    _config(holon_home, {"rate_per_minute": 3})
    app = make_app()
    a, b = client_for(app, "10.0.0.1"), client_for(app, "10.0.0.2")
    body = {"text": "x", "origin": "channel:c"}
    codes = [a.post("/agents/main/enqueue", json=body).status_code for _ in range(3)]
    assert codes == [202] * 3
    before = len(_messages())
    for path, kw in (
        ("/agents/main/enqueue", {"json": body}),
        ("/webhooks/ci/main", {"content": b"x"}),
        ("/callbacks/wake/cb_" + "0" * 32, {"json": {}}),
    ):
        r = a.post(path, **kw)
        assert r.status_code == 429, (path, r.text)
        assert r.json()["error"]["kind"] == "rate_limited"
        assert int(r.headers["Retry-After"]) >= 1
    assert len(_messages()) == before  # nothing persisted
    # another client has its own budget; control routes are not limited
    assert b.post("/agents/main/enqueue", json=body).status_code == 202
    assert client_for(app).get("/agents/list").status_code == 200
    # a minute later the first client may send again (one every 20 s)
    now[0] += 20
    assert a.post("/agents/main/enqueue", json=body).status_code == 202
    assert a.post("/agents/main/enqueue", json=body).status_code == 429
    now[0] += 60
    codes = [a.post("/agents/main/enqueue", json=body).status_code for _ in range(4)]
    assert codes == [202, 202, 202, 429]


def test_default_rate_is_60(holon_home: Path, now: list[float]) -> None:
    c = make_client(client_addr="10.0.0.3")
    codes = [c.post("/webhooks/ci/main", content=b"x").status_code for _ in range(61)]
    assert codes.count(202) == 60 and codes[-1] == 429


def test_concurrent_copies_of_a_delivery_admit_one_message(holon_home: Path) -> None:
    import threading

    app = make_app()
    codes: list[int] = []

    def send() -> None:
        c = client_for(app)
        codes.append(
            c.post("/webhooks/ci/main", content=b"x", headers={"webhook-id": "e"}).status_code
        )

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] * 7 + [202]
    assert len(_messages()) == 1


def test_broken_config_pauses_webhooks_and_keeps_the_default_rate(
    holon_home: Path, now: list[float]
) -> None:
    (holon_home / "config.yaml").write_text("ingress: [unclosed\n")
    c = make_client(client_addr="10.0.0.9")
    r = c.post("/webhooks/ci/main", content=b"x", headers={"webhook-id": "e1"})
    assert r.status_code == 503 and r.json()["error"]["kind"] == "config_error"
    _nothing_persisted()
    body = {"text": "x", "origin": "channel:c"}
    codes = [c.post("/agents/main/enqueue", json=body).status_code for _ in range(59)]
    assert codes == [202] * 59  # the default 60 a minute, 1 spent on the webhook
    assert c.post("/agents/main/enqueue", json=body).status_code == 429


def test_an_odd_event_header_is_dropped_not_refused(holon_home: Path) -> None:
    c = make_client()
    for event in ("push event!", "x" * 300, ""):
        r = c.post("/webhooks/gh/main", content=b"x", headers={"X-GitHub-Event": event})
        assert r.status_code == 202, r.text
    assert [m["origin"] for m in _messages()] == [{"kind": "webhook", "source": "gh"}] * 3
