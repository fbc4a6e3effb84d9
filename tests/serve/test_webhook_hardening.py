"""Webhooks cannot be replayed or crashed (issue 35 item 7): a GitHub-signed
delivery needs its id, a signed body admitted for the agent in the last 24 h
is a duplicate whatever its delivery id, a form delivery's ``payload=`` is
the JSON body, and every malformed header is refused (401), never a 500."""

from __future__ import annotations

import base64
import hashlib
import hmac
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from http_app import make_client
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property_budget import examples

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.serve.http import webhooks
from holon_cli.serve.http.errors import HttpError

sys.path.insert(0, str(Path(__file__).resolve().parent))

PUSH = (Path(__file__).parent / "fixtures" / "github_push.json").read_bytes()
GH_SECRET = "It's a Secret to Everybody"
STD_KEY = b"holon-standard-webhooks-test-key"
STD_SECRET = "whsec_" + base64.b64encode(STD_KEY).decode()


def _config(home: Path, **extra: Any) -> None:
    hooks = {
        "github": {"secret_env": "GH_HOOK_SECRET", "scheme": "github"},
        "std": {"secret_env": "STD_SECRET", "scheme": "standard"},
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        yaml.safe_dump({"ingress": {"webhooks": hooks, "rate_per_minute": 100_000, **extra}})
    )


@pytest.fixture(autouse=True)
def _setup(holon_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_HOOK_SECRET", GH_SECRET)
    monkeypatch.setenv("STD_SECRET", STD_SECRET)
    _config(holon_home)
    from holon_cli.runtime.agents.lifecycle import create_agent

    open_agent("main")
    create_agent("other", exist_ok=True)


def _messages(agent: str = "main") -> list[dict[str, Any]]:
    store = open_agent(agent, create_default=False)
    q.try_ingest(store)
    return [r["message"] for r in store.ledger("queue").records() if r.get("op") == "admitted"]


def _sig(body: bytes, secret: str = GH_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _gh(body: bytes, delivery: str | None, ctype: str = "application/json") -> dict[str, str]:
    hdr = {"Content-Type": ctype, "X-GitHub-Event": "push", "X-Hub-Signature-256": _sig(body)}
    if delivery is not None:
        hdr["X-GitHub-Delivery"] = delivery
    return hdr


def test_a_signed_github_delivery_needs_its_id() -> None:
    c = make_client()
    r = c.post("/webhooks/github/main", content=PUSH, headers=_gh(PUSH, None))
    assert r.status_code == 400 and r.json()["error"]["kind"] == "missing_delivery_id"
    assert _messages() == []
    store = open_agent("main", create_default=False)
    assert not store.layout.ledger_path(webhooks.LEDGER).exists()  # nothing remembered
    assert (
        c.post("/webhooks/github/main", content=PUSH, headers=_gh(PUSH, "d-1")).status_code == 202
    )


def test_replays_of_a_signed_body_under_fresh_ids_are_duplicates(now: list[float]) -> None:
    c = make_client()
    codes = [
        c.post("/webhooks/github/main", content=PUSH, headers=_gh(PUSH, f"fresh-{i}")).status_code
        for i in range(40)
    ]
    # main: 61 turns from 150 replays (only the rate limit stopped them); now one
    assert codes[0] == 202 and codes[1:] == [200] * 39
    assert len(_messages()) == 1
    r = c.post("/webhooks/github/main", content=PUSH, headers=_gh(PUSH, "fresh-x"))
    assert r.json() == {"duplicate": True, "message_id": _messages()[0]["id"]}
    # another agent has not seen it; another body is new
    assert (
        c.post("/webhooks/github/other", content=PUSH, headers=_gh(PUSH, "o-1")).status_code == 202
    )
    other = PUSH.replace(b"refs/heads", b"refs/tags")
    assert (
        c.post("/webhooks/github/main", content=other, headers=_gh(other, "n-1")).status_code == 202
    )
    # after 24 h the same body is admitted again (a sender may send it anew)
    now[0] += webhooks.BODY_DEDUPE_S + 1
    assert (
        c.post("/webhooks/github/main", content=PUSH, headers=_gh(PUSH, "late")).status_code == 202
    )
    assert len(_messages()) == 3


def test_a_restart_remembers_signed_bodies() -> None:
    assert (
        make_client()
        .post("/webhooks/github/main", content=PUSH, headers=_gh(PUSH, "a"))
        .status_code
        == 202
    )
    r = make_client().post("/webhooks/github/main", content=PUSH, headers=_gh(PUSH, "b"))
    assert r.status_code == 200 and r.json()["duplicate"] is True


def test_github_form_deliveries_are_json() -> None:
    from urllib.parse import quote

    body = ("payload=" + quote(PUSH.decode())).encode()
    hdr = _gh(body, "form-1", "application/x-www-form-urlencoded")
    r = make_client().post("/webhooks/github/main", content=body, headers=hdr)
    assert r.status_code == 202, r.text
    [msg] = _messages()
    assert msg["body"]["type"] == "json"
    assert msg["body"]["value"]["ref"] == "refs/heads/main" or "ref" in msg["body"]["value"]
    for bad in (b"payload=%7Bnot", b"payload=1&payload=2"):
        hdr = _gh(bad, "form-bad", "application/x-www-form-urlencoded")
        r = make_client().post("/webhooks/github/main", content=bad, headers=hdr)
        assert r.status_code == 400 and r.json()["error"]["kind"] == "invalid_body", r.text
    assert len(_messages()) == 1


def _std(body: bytes, wid: str, ts: str) -> dict[str, str]:
    mac = hmac.new(STD_KEY, f"{wid}.{ts}.".encode() + body, hashlib.sha256).digest()
    return {
        "Content-Type": "application/json",
        "webhook-id": wid,
        "webhook-timestamp": ts,
        "webhook-signature": f"v1,{base64.b64encode(mac).decode()}",
    }


def _wire(value: str) -> bytes:
    """A header value's bytes: latin-1 where it can be (the server decodes
    latin-1, so "²" arrives as "²"), else UTF-8."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


@pytest.mark.parametrize(
    "stamp",
    ["²", "١٧٨٠٠٠٠٠٠٠", "１７８００００００", "1780000000²", "9" * 5000, "", " ", "-1", "1e9"],
)
def test_a_malformed_timestamp_is_401_never_500(stamp: str, now: list[float]) -> None:
    body = b'{"a": 1}'
    hdr = {k: _wire(v) for k, v in _std(body, "msg_1", stamp).items()}
    r = make_client().post("/webhooks/std/main", content=body, headers=hdr)  # type: ignore[arg-type]
    assert r.status_code == 401, r.text
    assert r.json()["error"]["kind"] == "bad_signature"
    assert _messages() == []


HEADER_NAMES = [
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "x-hub-signature-256",
    "x-github-delivery",
    "x-github-event",
    "content-type",
]
# header values as the server sees them: latin-1 text (any byte), and
# Unicode digits and signs whatever their encoding
header_text = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=300),
    st.text(alphabet=st.characters(categories=["Nd", "No", "Zs", "Sm"]), max_size=40),
    st.sampled_from(["²", "9" * 5000, "v1,", "v1," + "A" * 5000, "sha256=", "sha256=" + "f" * 64]),
)


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    scheme=st.sampled_from(["github", "standard"]),
    values=st.dictionaries(st.sampled_from(HEADER_NAMES), header_text, max_size=len(HEADER_NAMES)),
)
def test_fuzzed_headers_are_refused_never_a_crash(scheme: str, values: dict[str, str]) -> None:
    """``verify`` on any header values: returns (a valid delivery, which
    random values never are) or refuses with a 400/401; nothing else."""
    env = "GH_HOOK_SECRET" if scheme == "github" else "STD_SECRET"
    hook = {"secret_env": env, "scheme": scheme}
    try:
        webhooks.verify("src", hook, b'{"a": 1}', values)
    except HttpError as e:
        assert e.status in (400, 401), (e.status, e.message)
        if e.status == 400:
            assert e.kind == "missing_delivery_id"
    else:
        pytest.fail(f"random headers verified: {values!r}")
    try:
        webhooks.delivery_id(values)
        webhooks.body_text(b'{"a": 1}', values.get("content-type"))
    except HttpError as e:
        assert e.status == 400


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@example(name="webhook-timestamp", raw=b"\xb2")
@example(name="webhook-timestamp", raw=b"\xb3\xb9")
@example(name="webhook-id", raw=b"msg\xff")
@given(
    name=st.sampled_from(["webhook-id", "webhook-timestamp", "webhook-signature"]),
    raw=st.binary(min_size=1, max_size=200).filter(
        lambda b: not any(c in b for c in b"\r\n\x00") and b.strip() == b
    ),
)
def test_fuzzed_header_bytes_over_http_are_401(name: str, raw: bytes) -> None:
    body = b'{"a": 1}'
    good = _std(body, "msg_1", "1780000000")
    hdr = {k: v.encode() for k, v in good.items()}
    hdr[name] = raw
    r = make_client().post("/webhooks/std/main", content=body, headers=hdr)  # type: ignore[arg-type]
    assert r.status_code == 401, (name, raw, r.text)


def test_a_malformed_timestamp_over_a_real_server_is_401(holon_home: Path) -> None:
    from live_server import live_server, raw_request

    body = b'{"a": 1}'
    with live_server() as (_srv, host, port):
        for stamp in ("²".encode("latin-1"), "١٢".encode(), b"9" * 4000):
            head = (
                f"POST /webhooks/std/main HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                "webhook-id: msg_1\r\nwebhook-signature: v1,AAAA\r\n"
            ).encode()
            got = raw_request(
                host, port, head + b"webhook-timestamp: " + stamp + b"\r\n\r\n" + body
            )
            assert got.startswith(b"HTTP/1.1 401"), got[:200]
