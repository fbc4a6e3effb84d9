"""The external trigger capability, callback delivery and wake hints."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from holon_cli.errors import HolonError, RejectedError, UsageError
from holon_cli.model.trigger import TOKEN_RE, token_sha256
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent, set_lifecycle
from holon_cli.runtime.tick import tick_agent
from holon_cli.runtime.waiting import hints, intents, triggers
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store.agent_store import AgentStore


@pytest.fixture
def store() -> AgentStore:
    return open_agent()


def ef(env: dict[str, Any], camel: str) -> Any:
    """An envelope field under its camelCase or snake_case name."""
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return env[snake] if snake in env else env[camel]


def token_of(store: AgentStore) -> str:
    url = triggers.show(store)["trigger_url"]
    assert url
    return url.rsplit("/", 1)[-1]


def queued(store: AgentStore) -> list[dict[str, Any]]:
    with store.lock():
        st = q.load(store)
        q.ingest(store, st)
    return [dict(q.load_envelope(store, e)) for e in st.pending()]


def runtime_bytes(store: AgentStore) -> bytes:
    out = b""
    for p in sorted(store.layout.runtime.rglob("*")):
        if p.is_file() and "secrets" not in p.parts:
            out += p.read_bytes()
    return out


def snapshot_tree(home: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes()
        for p in sorted(home.rglob("*"))
        if p.is_file() and "locks" not in p.parts
    }


# ------------------------------------------------------------ capability


def test_lazily_provisioned_once_and_only_the_hash_is_stored(store: AgentStore) -> None:
    d1 = triggers.show(store)
    d2 = triggers.show(store)
    assert d1 == d2 and d1["status"] == "active" and d1["delivery_mode"] == "wake_hint"
    assert d1["target_agent_id"] == "main" and d1["trigger_count"] == 0
    tok = token_of(store)
    assert TOKEN_RE.match(tok)
    assert d1["trigger_url"] == f"http://127.0.0.1:7878/callbacks/wake/{tok}"
    assert tok.encode() not in runtime_bytes(store)  # never in a ledger or snapshot
    assert token_sha256(tok).encode() in runtime_bytes(store)
    secret = store.layout.runtime / "secrets" / "trigger_token"
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(secret.parent).st_mode) == 0o700
    assert sum(1 for e in store.events.records() if e["kind"] == "trigger_provisioned") == 1


def test_url_base_follows_holon_http_addr(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_HTTP_ADDR", "10.0.0.5:9000")
    assert str(triggers.show(store)["trigger_url"]).startswith(
        "http://10.0.0.5:9000/callbacks/wake/cb_"
    )


def test_rotate_invalidates_the_old_token(store: AgentStore) -> None:
    old = token_of(store)
    d = triggers.rotate(store)
    new = token_of(store)
    assert new != old and d["trigger_url"].endswith(new)  # type: ignore[union-attr]
    assert d["external_trigger_id"] == triggers.show(store)["external_trigger_id"]
    with pytest.raises(RejectedError) as ei:
        triggers.deliver(old)
    assert ei.value.kind == "invalid_callback_token" and ei.value.exit_code == 4
    assert triggers.deliver(new).disposition == "system_tick_admitted"


def test_revoke_fails_every_token_until_rotate(store: AgentStore) -> None:
    tok = token_of(store)
    d, changed = triggers.revoke(store)
    assert changed and d["status"] == "revoked" and d["trigger_url"] is None
    assert triggers.revoke(store)[1] is False
    before = snapshot_tree(store.layout.home)
    with pytest.raises(RejectedError):
        triggers.deliver(tok)
    assert snapshot_tree(store.layout.home) == before  # nothing persisted
    triggers.rotate(store)
    assert triggers.show(store)["status"] == "active"
    with pytest.raises(RejectedError):
        triggers.deliver(tok)
    triggers.deliver(token_of(store))


@pytest.mark.parametrize("bad", ["", "cb_", "cb_" + "0" * 32, "CB_" + "a" * 32, "x" * 40, "../etc"])
def test_unknown_tokens_are_refused_and_nothing_is_persisted(store: AgentStore, bad: str) -> None:
    triggers.show(store)
    before = snapshot_tree(store.layout.home)
    with pytest.raises(RejectedError):
        triggers.deliver(bad, b"{}", "application/json")
    assert snapshot_tree(store.layout.home) == before


def test_deliver_accepts_the_url_form(store: AgentStore) -> None:
    url = triggers.show(store)["trigger_url"]
    assert url
    assert triggers.deliver(url + "/").agent_id == "main"


def test_token_routes_to_its_own_agent(store: AgentStore) -> None:
    other = create_agent("other")
    tok = token_of(other)
    token_of(store)
    res = triggers.deliver(tok)
    assert res.agent_id == "other"
    assert queued(store) == [] and len(queued(other)) == 1


def test_stopped_agent_refuses_with_resume_guidance(store: AgentStore) -> None:
    tok = token_of(store)
    set_lifecycle(None, "stop")
    before = snapshot_tree(store.layout.home)
    with pytest.raises(RejectedError) as ei:
        triggers.deliver(tok, b"hello")
    assert ei.value.kind == "agent_stopped" and "resume" in (ei.value.hint or "")
    assert triggers.HTTP_STATUS_BY_KIND[ei.value.kind] == 409
    assert snapshot_tree(store.layout.home) == before


@pytest.mark.parametrize(
    ("body", "ctype", "kind"),
    [
        (b"x" * (256 * 1024 + 1), "text/plain", "payload_too_large"),
        (b"{not json", "application/json", "invalid_json"),
        (b"\xff\xfe", "text/plain", "invalid_body"),
    ],
)
def test_bad_bodies_are_refused_and_nothing_is_persisted(
    store: AgentStore, body: bytes, ctype: str, kind: str
) -> None:
    tok = token_of(store)
    before = snapshot_tree(store.layout.home)
    with pytest.raises(UsageError) as ei:
        triggers.deliver(tok, body, ctype)
    assert ei.value.kind == kind and kind in triggers.HTTP_STATUS_BY_KIND
    assert snapshot_tree(store.layout.home) == before


# ------------------------------------------------------------ wake hints


def test_delivery_to_an_idle_agent_admits_one_system_tick(store: AgentStore) -> None:
    res = triggers.deliver(token_of(store), b'{"ci": "green"}', "application/json", "github")
    assert res.disposition == "system_tick_admitted" and res.trigger_count == 1
    (msg,) = queued(store)
    assert msg["id"] == res.message_id and msg["kind"] == "system_tick"
    assert msg["origin"]["kind"] == "callback" and msg["origin"]["source"] == "github"
    assert (
        msg["trust"] == "trusted_integration" and ef(msg, "authorityClass") == "integration_signal"
    )
    assert ef(msg, "deliverySurface") == "http_callback_wake"
    assert ef(msg, "admissionContext") == "external_trigger_capability"
    hint = msg["metadata"]["wake_hint"]
    assert hint["contentful"] is True and hint["body_type"] == "json" and "body" not in hint
    assert "```integration_signal" in msg["body"]["text"] and '"ci": "green"' in msg["body"]["text"]
    assert store.read_record()["state"]["pending_wake_hint"] is None
    assert triggers.show(store)["trigger_count"] == 1


def test_deliveries_while_a_hint_tick_is_queued_coalesce(store: AgentStore) -> None:
    tok = token_of(store)
    triggers.deliver(tok, b"first")
    for i in range(5):
        res = triggers.deliver(tok, f"body {i}".encode(), "text/plain")
        assert res.disposition == "coalesced"
    assert len(queued(store)) == 1
    pending = store.read_record()["state"]["pending_wake_hint"]
    assert pending["coalesced_count"] == 5 and pending["body"]["text"] == "body 4"
    # tick does not add a second hint tick while one is queued
    tick_agent(store)
    assert len(queued(store)) == 1


def test_fence_survives_backticks_in_the_body() -> None:
    text = hints.render({"body": {"type": "text", "text": "a ``` b ```` c"}, "coalesced_count": 1})
    assert "`````integration_signal" in text


@pytest.mark.parametrize("n", [pytest.param(1000, marks=pytest.mark.slow), 25])
def test_burst_during_a_turn_costs_at_most_one_extra_turn(store: AgentStore, n: int) -> None:
    """1,000 deliveries while a turn runs: one pending hint, one more system_tick."""
    tok = token_of(store)
    store.update_state(lambda s: s.update(status="awake_running", current_run_pid=os.getpid()))
    for i in range(n):
        assert triggers.deliver(tok, f"event {i}".encode()).disposition == "coalesced"
    assert queued(store) == []
    pending = store.read_record()["state"]["pending_wake_hint"]
    assert pending["coalesced_count"] == n and pending["body"]["text"] == f"event {n - 1}"
    assert triggers.show(store)["trigger_count"] == n
    # the turn ends
    store.update_state(lambda s: s.update(status="awake_idle", current_run_pid=None))
    from holon_cli.runtime.waiting.scheduler import after_turn

    acts = after_turn(store)
    assert [a["action"] for a in acts] == ["hint_converted"]
    assert (
        len(queued(store)) == 1
        and queued(store)[0]["metadata"]["wake_hint"]["coalesced_count"] == n
    )
    assert store.read_record()["state"]["pending_wake_hint"] is None
    assert after_turn(store) == [] and tick_agent(store)["actions"] == []
    assert len(queued(store)) == 1


def test_a_stale_running_marker_does_not_swallow_the_hint(store: AgentStore) -> None:
    store.update_state(lambda s: s.update(status="awake_running", current_run_pid=2**22 + 12345))
    assert triggers.deliver(token_of(store)).disposition == "system_tick_admitted"


def test_paused_agent_keeps_the_hint_until_resumed(store: AgentStore) -> None:
    tok = token_of(store)
    store.update_state(lambda s: s.update(status="paused"))
    assert triggers.deliver(tok, b"x").disposition == "coalesced"
    assert tick_agent(store)["skipped"] == "paused" and queued(store) == []
    set_lifecycle(None, "start")
    acts = tick_agent(store)["actions"]
    assert any(a["action"] == "hint_converted" for a in acts) and len(queued(store)) == 1


# ------------------------------------------------------- waiting intents


def test_delivery_updates_active_intents_and_never_touches_the_item(store: AgentStore) -> None:
    from holon_cli.runtime import workitems as wi

    wid = wi.create_work_item(store, "ship it")["work_item"]["id"]
    wi.update_work_item(store, wid, blocked_by="waiting for CI")
    w = intents.record_wait(store, description="CI run", source="github", work_item_id=wid)
    other = intents.record_wait(store, description="old", source="x", work_item_id=wid)
    intents.cancel_wait(store, other["id"])
    res = triggers.deliver(token_of(store), b'{"ci": "green"}', "application/json")
    assert res.waiting_intent_ids == [w["id"]]
    cur = intents.load(store)
    assert (
        cur[w["id"]]["trigger_count"] == 1 and cur[w["id"]]["last_triggered_at"] == res.received_at
    )
    assert cur[other["id"]]["trigger_count"] == 0
    item = wi.get_work_item(store, wid)["work_item"]
    assert item["blocked_by"] == "waiting for CI" and item["state"] == "open"
    assert item["has_triggered_waits"] is True and item["has_active_waits"] is True
    assert triggers.show(store)["status"] == "active"
    (msg,) = queued(store)
    assert ef(msg, "workItemId") == wid and ef(msg, "sourceRefs")["waiting_intent_id"] == w["id"]
    # triggered stays derived across repeated deliveries, even after the item changed
    wi.update_work_item(store, wid, blocked_by="still waiting for CI")
    assert wi.get_work_item(store, wid)["work_item"]["has_triggered_waits"] is True


def test_record_wait_needs_an_open_item(store: AgentStore) -> None:
    from holon_cli.runtime import workitems as wi

    with pytest.raises(UsageError):
        intents.record_wait(store, description="x", source="y")
    with pytest.raises(HolonError):
        intents.record_wait(store, description="x", source="y", work_item_id="wi_nope")
    wid = wi.create_work_item(store, "a")["work_item"]["id"]
    with pytest.raises(UsageError):
        intents.record_wait(store, description=" ", source="y", work_item_id=wid)
    wi.pick_work_item(store, wid)
    w = intents.record_wait(store, description="x", source="y")
    assert w["work_item_id"] == wid  # defaults to the current item
    wi.complete_work_item(store, wid, source="operator", cancel_waits=cancel_for_work_item)
    with pytest.raises(RejectedError):
        intents.record_wait(store, description="x", source="y", work_item_id=wid)


def test_completing_an_item_cancels_its_waits_and_later_deliveries_skip_it(
    store: AgentStore,
) -> None:
    """Runtime spec: work-item cleanup cancels its bound waiting state (never
    the capability); later deliveries no longer count against the item."""
    from holon_cli.runtime import workitems as wi

    done = wi.create_work_item(store, "ship it")["work_item"]["id"]
    other = wi.create_work_item(store, "keep waiting")["work_item"]["id"]
    w = intents.record_wait(store, description="CI run", source="github", work_item_id=done)
    keep = intents.record_wait(store, description="review", source="github", work_item_id=other)
    res = wi.complete_work_item(
        store, done, source="operator", report="shipped", cancel_waits=cancel_for_work_item
    )
    assert res["cancelled_waiting_intent_ids"] == [w["id"]]
    cur = intents.load(store)
    assert cur[w["id"]]["status"] == "cancelled" and cur[w["id"]]["cancelled_at"]
    assert cur[keep["id"]]["status"] == "active"
    ev = [e for e in store.ledger("events").records() if e["kind"] == "waiting_intent_cancelled"]
    assert [(e["data"]["waiting_intent_id"], e["data"]["reason"]) for e in ev] == [
        (w["id"], "work_item_completed")
    ]
    delivered = triggers.deliver(token_of(store), b"ci done", "text/plain")
    assert delivered.waiting_intent_ids == [keep["id"]]
    cur = intents.load(store)
    assert cur[w["id"]]["trigger_count"] == 0 and cur[w["id"]]["last_triggered_at"] is None
    assert wi.get_work_item(store, done)["work_item"]["has_active_waits"] is False
    assert triggers.show(store)["status"] == "active"  # the capability is untouched


@pytest.fixture
def ticking_clock() -> Any:
    """Every reading of the clock is 1 ms later: each step has its own
    timestamp (the review rule compares an event's time with an update's)."""
    from holon_cli import clock

    t = [1_800_000_000.0]

    def tick() -> float:
        t[0] += 0.001
        return t[0]

    clock.set_clock(tick)
    yield
    clock.set_clock(None)


@pytest.mark.usefixtures("ticking_clock")
def test_a_triggered_blocked_item_stays_triggered_after_an_update(store: AgentStore) -> None:
    """Work-item RFC: candidate classes are derived from `triggered`
    (trigger_count > 0, last_triggered_at set), whatever changed since."""
    from holon_cli.model import workitem_readiness as wr
    from holon_cli.runtime import workitems as wi
    from holon_cli.store.workitem_index import load

    wid = wi.create_work_item(store, "ship it")["work_item"]["id"]
    wi.update_work_item(store, wid, blocked_by="waiting for CI")
    intents.record_wait(store, description="CI run", source="github", work_item_id=wid)
    triggers.deliver(token_of(store), b"ci green", "text/plain")

    def classes() -> dict[str, list[str]]:
        idx = load(store)
        cand = wr.classify(idx.open_records(), current_id=None, waits=idx.wait_summaries())
        return {c: [r["id"] for r in rs] for c, rs in cand.classes.items() if rs}

    assert classes() == {"triggered_blocked": [wid]}
    wi.update_work_item(store, wid, blocked_by="still waiting for CI")
    assert classes() == {"triggered_blocked": [wid]}
    assert "triggered" in (wi.project_work_queue(store) or "")
    # the review tick is still once per event: the update reviewed this one
    assert wi.activation_signal(store) is None
    triggers.deliver(token_of(store), b"ci red", "text/plain")
    sig = wi.activation_signal(store)
    assert sig is not None and sig["action"] == "review_triggered"


def test_the_trigger_descriptor_is_in_context_as_a_capability_secret(
    store: AgentStore, tmp_path: Path
) -> None:
    """Runtime spec (Default External Ingress Flow): the model learns its wake
    URL from context, marked as a capability secret, without a tool call;
    after `revoke` the URL is gone from context; status shows the state."""
    import yaml

    from holon_cli.runtime.debug import debug_prompt
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.inspect import agent_summary
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    def context_text() -> str:
        d = debug_prompt(store, catalog=default_catalog())
        return "\n".join(d["context_blocks"])

    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"steps": [{"text": "ok"}]}))
    admit("hello")
    run_turn(None, cli_model=f"scripted:{script}", catalog=default_catalog())
    built = [e for e in store.events.records() if e["kind"] == "turn_context_built"][-1]
    assert "external trigger" in [s["title"] for s in built["data"]["sections"]]
    url = triggers.show(store)["trigger_url"]  # provisioned by the turn, not by show
    assert sum(1 for e in store.events.records() if e["kind"] == "trigger_provisioned") == 1
    text = context_text()
    assert f"trigger_url (capability secret): {url}" in text
    assert "Do not repeat, store or forward it" in text
    assert agent_summary(store)["external_trigger"]["status"] == "active"
    assert "trigger_url" not in agent_summary(store)["external_trigger"]  # status shows no secret

    triggers.revoke(store)
    text = context_text()
    assert url not in text and "cb_" not in text and "status: revoked" in text
    assert agent_summary(store)["external_trigger"]["status"] == "revoked"
    new_url = triggers.rotate(store)["trigger_url"]
    assert new_url and new_url in context_text()


def test_status_shows_no_trigger_before_one_is_provisioned(store: AgentStore) -> None:
    from holon_cli.runtime.inspect import agent_summary

    assert agent_summary(store)["external_trigger"] is None
    assert not (store.layout.state_dir / "trigger.json").exists()  # status provisions nothing
