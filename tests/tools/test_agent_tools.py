"""Sleep, Enqueue and AgentGet against a real agent home."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from holon_cli.runtime import queue
from holon_cli.runtime.agents.lifecycle import create_agent, set_lifecycle
from holon_cli.store.inbox import Inbox
from holon_cli.tools.agent_tools import MAX_FOLLOWUPS_PER_TURN
from holon_cli.tools.base import SleepRequest, ToolContext, ToolResult

Call = Callable[..., ToolResult]


# ------------------------------------------------------------------- Sleep


def test_sleep_without_duration_rests_indefinitely(call: Call, ctx: ToolContext) -> None:
    r = call("Sleep")
    assert r.ok
    assert r.effects.sleep == SleepRequest(None, None)
    assert json.loads(r.content)["sleeping"] is True


def test_sleep_zero_is_treated_as_omitted(call: Call, ctx: ToolContext) -> None:
    r = call("Sleep", duration_ms=0, reason="nothing to do")
    assert r.ok and r.effects.sleep == SleepRequest(None, "nothing to do")


def test_sleep_with_duration(call: Call, ctx: ToolContext) -> None:
    r = call("Sleep", duration_ms=1500)
    assert r.ok and r.data["duration_ms"] == 1500
    assert r.effects.sleep is not None and r.effects.sleep.duration_ms == 1500
    assert "after 1500 ms" in r.content


def test_sleep_negative_is_invalid_and_has_no_effect(call: Call, ctx: ToolContext) -> None:
    r = call("Sleep", duration_ms=-5)
    assert r.error and r.error["kind"] == "invalid_arguments"
    assert r.error["details"]["field"] == "duration_ms" and r.error["recovery_hint"]
    assert r.effects.sleep is None and ctx.report.sleep is None


def test_sleep_rejects_non_integer(call: Call, ctx: ToolContext) -> None:
    r = call("Sleep", duration_ms="soon")
    assert r.error and r.error["kind"] == "invalid_arguments"
    assert r.effects.sleep is None


# ----------------------------------------------------------------- Enqueue


def test_enqueue_lands_in_the_same_agents_inbox(call: Call, ctx: ToolContext) -> None:
    ctx.message = {"id": "msg_cause", "correlation_id": "corr_1"}
    before = queue.pending_count(ctx.store)
    r = call("Enqueue", text="check the build again", priority="next")
    assert r.ok, r.content
    assert queue.pending_count(ctx.store) == before + 1
    mid = r.data["message_id"]
    (path,) = [p for p in ctx.store.inbox.pending() if p.name.startswith(mid)]
    env = Inbox.read(path)
    assert env["agent_id"] == ctx.agent_id
    assert env["kind"] == "internal_followup"
    assert env["origin"] == {"kind": "system", "subsystem": "self_followup"}
    assert env["trust"] == "trusted_system"
    assert env["priority"] == "next"
    assert env["delivery_surface"] == "runtime_system"
    assert env["admission_context"] == "runtime_owned"
    assert env["causation_id"] == "msg_cause"
    assert env["correlation_id"] == "corr_1"
    assert env["body"] == {"type": "text", "text": "check the build again"}
    assert ctx.effects["enqueued"] == [mid]


def test_enqueue_defaults_to_normal_priority_without_causation(
    call: Call, ctx: ToolContext
) -> None:
    r = call("Enqueue", text="later")
    assert r.ok
    env = Inbox.read(ctx.store.inbox.pending()[-1])
    assert env["priority"] == "normal" and "causation_id" not in env


@pytest.mark.parametrize(
    ("args", "field"),
    [({"text": "   "}, "text"), ({"text": "x", "priority": "urgent"}, "priority"), ({}, "text")],
)
def test_enqueue_bad_arguments_deliver_nothing(
    call: Call, ctx: ToolContext, args: dict[str, object], field: str
) -> None:
    r = call("Enqueue", **args)
    assert r.error and r.error["kind"] == "invalid_arguments"
    assert r.error["details"]["field"] == field
    assert queue.pending_count(ctx.store) == 0


def test_enqueue_to_stopped_agent_is_rejected(call: Call, ctx: ToolContext) -> None:
    set_lifecycle(ctx.agent_id, "stop")
    r = call("Enqueue", text="hello")
    assert r.error and r.error["kind"] == "agent_stopped" and r.error["recovery_hint"]
    assert queue.pending_count(ctx.store) == 0


def test_enqueue_is_bounded_per_turn(call: Call, ctx: ToolContext) -> None:
    for i in range(MAX_FOLLOWUPS_PER_TURN):
        assert call("Enqueue", text=f"f{i}").ok
    r = call("Enqueue", text="one too many")
    assert r.error and r.error["kind"] == "limit_exceeded"
    assert queue.pending_count(ctx.store) == MAX_FOLLOWUPS_PER_TURN


# ---------------------------------------------------------------- AgentGet


def test_agent_get_self(call: Call, ctx: ToolContext) -> None:
    r = call("AgentGet")
    assert r.ok
    agent = json.loads(r.content)["agent"]
    assert agent["agent_id"] == ctx.agent_id and agent["is_self"] is True
    assert agent["identity"] == {
        "kind": "default",
        "visibility": "public",
        "ownership": "self_owned",
        "profile_preset": "public_named",
        "lineage_parent_agent_id": None,
    }
    assert agent["status"] == "awake_idle"
    assert call("AgentGet", agent_id=ctx.agent_id).data["agent"]["is_self"] is True


def test_agent_get_public_other(call: Call) -> None:
    create_agent("helper")
    r = call("AgentGet", agent_id="helper")
    assert r.ok, r.content
    assert r.data["agent"]["agent_id"] == "helper" and r.data["agent"]["is_self"] is False
    assert r.data["agent"]["identity"]["visibility"] == "public"


@pytest.mark.parametrize("agent_id", ["ghost", "../main", "bad id"])
def test_agent_get_unknown_is_not_found(call: Call, agent_id: str) -> None:
    r = call("AgentGet", agent_id=agent_id)
    assert r.error and r.error["kind"] == "not_found"
    assert r.error["details"]["field"] == "agent_id"


def test_agent_get_private_is_not_found_unless_own_child(call: Call, ctx: ToolContext) -> None:
    create_agent(
        "secret",
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id="someone-else",
    )
    r = call("AgentGet", agent_id="secret")
    assert r.error and r.error["kind"] == "not_found"
    assert r.content == call("AgentGet", agent_id="ghost").content.replace("ghost", "secret"), (
        "private and unknown look the same"
    )
    create_agent(
        "kid",
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id=ctx.agent_id,
    )
    r = call("AgentGet", agent_id="kid")
    assert r.ok, r.content
    ident = r.data["agent"]["identity"]
    assert (
        ident["lineage_parent_agent_id"] == ctx.agent_id
        and ident["ownership"] == "parent_supervised"
    )
