"""The waiting plane inside turns: continuation decisions, settling without
a provider request, control messages, the external-wait closure, Sleep."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli import clock
from holon_cli.model.continuation import control_action, resolve
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.inspect import agent_summary
from holon_cli.runtime.tick import tick_agent
from holon_cli.runtime.turn import run_turn
from holon_cli.runtime.waiting import timers, triggers
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.catalog import default_catalog

T0 = 1_780_000_000.0


def script(tmp_path: Path, steps: list[Any], name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


@pytest.fixture
def now() -> Iterator[list[float]]:
    t = [T0]
    clock.set_clock(lambda: t[0])
    yield t
    clock.set_clock(None)


@pytest.fixture
def store() -> AgentStore:
    return open_agent()


def provider_rounds(store: AgentStore) -> int:
    return sum(1 for e in store.events.records() if e["kind"] == "provider_round_completed")


def state(store: AgentStore) -> dict[str, Any]:
    return store.read_record()["state"]


def token(store: AgentStore) -> str:
    return str(triggers.show(store)["trigger_url"]).rsplit("/", 1)[-1]


def messages(store: AgentStore) -> list[dict[str, Any]]:
    return [t for t in store.ledger("transcript").records() if t["kind"] == "message"]


# ------------------------------------------------------------ pure resolver


def env(kind: str, **kw: Any) -> dict[str, Any]:
    from holon_cli.model.envelope import build_envelope

    return build_envelope(
        message_id="msg_1",
        agent_id="a",
        created_at="t",
        body=kw.pop("body", {"type": "text", "text": "x"}),
        kind=kind,
        delivery_surface=kw.pop("delivery_surface", "runtime_system"),
        admission_context=kw.pop("admission_context", "runtime_owned"),
        **kw,
    )


WAIT_EXT = {
    "outcome": "waiting",
    "runtime_posture": "asleep",
    "waiting_reason": "awaiting_external_change",
}


@pytest.mark.parametrize(
    ("kind", "prior", "visible", "matched"),
    [
        (
            "operator_prompt",
            {"outcome": "waiting", "waiting_reason": "awaiting_operator_input"},
            True,
            True,
        ),
        ("operator_prompt", WAIT_EXT, True, False),
        ("timer_tick", {"outcome": "waiting", "waiting_reason": "awaiting_timer"}, True, True),
        (
            "task_result",
            {"outcome": "waiting", "waiting_reason": "awaiting_task_result"},
            True,
            True,
        ),
        ("task_status", None, False, False),
        ("brief_ack", None, False, False),
        ("brief_result", None, False, False),
        ("internal_followup", {"outcome": "continuable"}, True, False),
        ("webhook_event", WAIT_EXT, True, True),
    ],
)
def test_resolution_table(
    kind: str, prior: dict[str, Any] | None, visible: bool, matched: bool
) -> None:
    r = resolve(env(kind), prior, at="t")
    assert r["model_visible"] is visible and r["matched_waiting_reason"] is matched
    assert r["prior_closure_outcome"] == (prior or {}).get("outcome", "completed")


def hint_env(body: dict[str, Any] | None) -> dict[str, Any]:
    return env(
        "system_tick",
        origin="callback:etr_1",
        metadata={
            "tick_reason": "wake_hint",
            "wake_hint": {"external_trigger_id": "etr_1", "body": body},
        },
    )


def test_wake_hint_resolutions() -> None:
    plain = hint_env(None)
    assert resolve(plain, None, at="t")["resolution"] == "liveness_only"
    assert resolve(plain, {"outcome": "completed"}, at="t")["model_visible"] is False
    r = resolve(plain, WAIT_EXT, at="t")
    assert (
        r["resolution"] == "resume_expected_wait"
        and r["model_visible"]
        and r["matched_waiting_reason"]
    )
    full = hint_env({"type": "json", "value": {"ci": "green"}})
    assert resolve(full, None, at="t")["resolution"] == "local_continuation"
    # a non-hint system tick (work activation, recheck) stays model-visible
    assert resolve(env("system_tick"), None, at="t")["model_visible"] is True


@pytest.mark.parametrize(
    ("body", "action"),
    [
        ({"type": "json", "value": {"action": "pause"}}, "pause"),
        ({"type": "json", "value": {"control": "STOP"}}, "stop"),
        ({"type": "json", "value": "resume"}, "resume"),
        ({"type": "text", "text": " resume\n"}, "resume"),
        ({"type": "json", "value": {"action": "explode"}}, None),
    ],
)
def test_control_actions(body: dict[str, Any], action: str | None) -> None:
    assert control_action(env("control", body=body)) == action


# ---------------------------------------------------- settle without model


@pytest.mark.parametrize("kind", ["task_status", "brief_ack", "brief_result"])
def test_observational_messages_make_no_provider_request(
    tmp_path: Path, store: AgentStore, kind: str
) -> None:
    model = script(tmp_path, [{"text": "must not be requested"}])
    if kind == "task_status":
        admit(
            "progress 40%",
            kind=kind,
            origin="task:tsk_1",
            delivery_surface="task_rejoin",
            admission_context="runtime_owned",
        )
    else:
        admit("progress 40%", kind=kind, origin="operator")
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.ran and res.status == "settled" and res.model_rounds == 0
    assert provider_rounds(store) == 0
    lc = agent_summary(store)["last_continuation"]
    assert lc["model_visible"] is False and lc["resolution"] == "observational"
    assert q.load(store).processed == 1 and q.pending_count(store) == 0
    assert run_turn(None, cli_model=model, catalog=default_catalog()).ran is False


def test_rest_then_plain_hint_makes_no_provider_request(tmp_path: Path, store: AgentStore) -> None:
    model = script(
        tmp_path,
        [{"text": "resting", "tool_calls": [{"name": "Sleep", "arguments": {}}]}],
    )
    admit("nothing to do for now")
    assert run_turn(None, cli_model=model, catalog=default_catalog()).status == "completed"
    assert state(store)["status"] == "asleep" and provider_rounds(store) == 1
    res = triggers.deliver(token(store))
    assert res.disposition == "system_tick_admitted"
    turn = run_turn(
        None, cli_model=model, catalog=default_catalog()
    )  # the script is exhausted: a request would fail
    assert turn.status == "settled" and provider_rounds(store) == 1
    st = state(store)
    assert st["status"] == "asleep"  # a liveness-only wake does not end the rest
    assert st["last_continuation"]["resolution"] == "liveness_only"
    assert st["last_continuation"]["model_visible"] is False
    assert all(m["message_id"] != res.message_id for m in messages(store))  # no transcript noise


def test_plain_hint_while_waiting_on_external_change_resumes(
    tmp_path: Path, store: AgentStore
) -> None:
    model = script(tmp_path, [{"text": "checked the external system"}])
    store.update_state(lambda s: s.update(last_closure=dict(WAIT_EXT)))
    triggers.deliver(token(store))
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.status == "completed" and provider_rounds(store) == 1
    lc = state(store)["last_continuation"]
    assert lc["resolution"] == "resume_expected_wait" and lc["matched_waiting_reason"] is True


def test_control_messages_drive_the_lifecycle(tmp_path: Path, store: AgentStore) -> None:
    model = script(tmp_path, [{"text": "hello"}])
    admit('{"action": "pause"}', kind="control", json_body=True)
    admit("work after the pause")
    admit('{"action": "resume"}', kind="control", json_body=True)
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.status == "settled" and state(store)["status"] == "paused"
    assert provider_rounds(store) == 0
    # a paused agent runs no turn, but tick applies the queued resume
    acts = tick_agent(store)["actions"]
    assert [a["action"] for a in acts][:1] == ["control_applied"] and acts[0][
        "status"
    ] == "awake_idle"
    assert state(store)["status"] == "awake_idle"
    assert (
        run_turn(None, cli_model=model, catalog=default_catalog()).status == "completed"
        and provider_rounds(store) == 1
    )
    admit('{"action": "stop"}', kind="control", json_body=True)
    run_turn(None, cli_model=model, catalog=default_catalog())
    assert state(store)["status"] == "stopped"


def test_untrusted_control_is_not_applied(store: AgentStore) -> None:
    # admission already refuses control from external origins; the runtime
    # still checks trust itself before acting on a lifecycle command
    from holon_cli.runtime.waiting.continuation import apply_control

    msg = {
        "id": "msg_x",
        "kind": "control",
        "trust": "untrusted_external",
        "body": {"type": "json", "value": {"action": "stop"}},
    }
    out = apply_control(store, msg)
    assert out["applied"] is False and out["reason"] == "untrusted_origin"
    assert state(store)["status"] == "awake_idle"
    assert (
        admit_refused('{"action": "stop"}', kind="control", origin="channel:slack", json_body=True)
        == "kind_origin_mismatch"
    )


def admit_refused(text: str, **kw: Any) -> str:
    from holon_cli.errors import HolonError

    try:
        admit(text, **kw)
    except HolonError as err:
        return err.kind
    return "admitted"


def test_status_shows_last_continuation(tmp_path: Path, store: AgentStore) -> None:
    admit("hello")
    run_turn(None, cli_model=script(tmp_path, [{"text": "hi"}]), catalog=default_catalog())
    lc = agent_summary(store)["last_continuation"]
    assert lc["model_visible"] is True and lc["trigger_kind"] == "operator_input"
    assert set(lc) >= {
        "model_visible",
        "prior_closure_outcome",
        "matched_waiting_reason",
        "evidence",
    }


# ---------------------------------------------------------- waits, sleep


def test_turn_ending_with_an_external_wait_closes_waiting(
    tmp_path: Path, store: AgentStore
) -> None:
    model = script(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"id": "c_a", "name": "CreateWorkItem", "arguments": {"objective": "ship v2"}},
                ]
            },
            {
                "tool_calls": [
                    {"name": "PickWorkItem", "arguments": {"work_item_id": "{{c_a.work_item_id}}"}},
                ]
            },
            {
                "tool_calls": [
                    {
                        "id": "c_w",
                        "name": "RecordExternalWait",
                        "arguments": {"description": "CI for v2", "source": "github"},
                    }
                ]
            },
            {"text": "Waiting for CI."},
        ],
    )
    admit("ship v2 once CI is green")
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.closure is not None
    assert res.closure["outcome"] == "waiting"
    assert res.closure["waiting_reason"] == "awaiting_external_change"
    out = [
        t
        for t in store.ledger("transcript").records()
        if t.get("tool_name") == "RecordExternalWait"
    ]
    receipt = json.loads(out[0]["output"])
    assert (
        receipt["trigger_url"].endswith(token(store))
        and "capability secret" in receipt["trigger_url_note"]
    )


def test_timed_sleep_in_a_turn_wakes_once_through_a_timer(
    tmp_path: Path, store: AgentStore, now: list[float]
) -> None:
    model = script(
        tmp_path,
        [
            {"text": "nap", "tool_calls": [{"name": "Sleep", "arguments": {"duration_ms": 60000}}]},
            {"text": "awake again"},
        ],
    )
    admit("wait a minute then continue")
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.closure and res.closure["waiting_reason"] == "awaiting_timer"
    (t,) = timers.list_timers(store)
    assert t["next_fire_at"] == clock.iso(T0 + 60)
    now[0] += 30
    tick_agent(store)
    assert run_turn(None, cli_model=model, catalog=default_catalog()).ran is False
    now[0] += 31
    acts = [a["action"] for a in tick_agent(store)["actions"]]
    assert "timer_fired" in acts and "woke" in acts
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.status == "completed" and res.final_text == "awake again"
    assert state(store)["last_continuation"]["trigger_kind"] == "timer_fire"
    assert state(store)["last_continuation"]["matched_waiting_reason"] is True
    now[0] += 3600
    tick_agent(store)
    assert run_turn(None, cli_model=model, catalog=default_catalog()).ran is False


def test_a_message_turn_cancels_a_pending_sleep_wake(
    tmp_path: Path, store: AgentStore, now: list[float]
) -> None:
    model = script(
        tmp_path,
        [
            {"text": "nap", "tool_calls": [{"name": "Sleep", "arguments": {"duration_ms": 60000}}]},
            {"text": "handled the operator"},
        ],
    )
    admit("nap")
    run_turn(None, cli_model=model, catalog=default_catalog())
    admit("actually, look at this now")
    run_turn(None, cli_model=model, catalog=default_catalog())
    assert timers.list_timers(store) == []
    now[0] += 120
    tick_agent(store)
    assert q.pending_count(store) == 0
