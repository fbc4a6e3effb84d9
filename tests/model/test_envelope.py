"""Envelope normalization: defaults, derived trust/authority, validation."""

from __future__ import annotations

from typing import Any

import pytest

from holon_cli.errors import UsageError
from holon_cli.model import envelope as E

BODY = {"type": "text", "text": "hi"}


def build(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "message_id": "msg_1",
        "agent_id": "main",
        "created_at": "2025-01-01T00:00:00.000Z",
        "body": BODY,
    }
    base.update(kw)
    return E.build_envelope(**base)


def test_defaults_are_an_operator_prompt() -> None:
    env = build()
    assert env["kind"] == "operator_prompt"
    assert env["origin"] == {"kind": "operator"}
    assert env["trust"] == "trusted_operator"
    assert env["authorityClass"] == "operator_instruction"
    assert env["priority"] == "normal"
    assert env["triggerKind"] == "operator_input"
    assert env["deliverySurface"] == "cli_prompt" and env["admissionContext"] == "local_process"
    assert env["sourceRefs"] == {}
    for field in (
        "id",
        "agentId",
        "createdAt",
        "kind",
        "origin",
        "trust",
        "authorityClass",
        "priority",
        "body",
    ):
        assert field in env
    for absent in ("workItemId", "taskId", "correlationId", "causationId", "metadata"):
        assert absent not in env


@pytest.mark.parametrize(
    ("origin", "trust", "authority", "kind"),
    [
        ("operator", "trusted_operator", "operator_instruction", "operator_prompt"),
        ("operator:alice", "trusted_operator", "operator_instruction", "operator_prompt"),
        ("system:scheduler", "trusted_system", "runtime_instruction", "internal_followup"),
        ("task:tsk_1", "trusted_system", "runtime_instruction", "task_result"),
        ("timer:tmr_1", "trusted_system", "runtime_instruction", "timer_tick"),
        ("callback:cb_1", "trusted_integration", "integration_signal", "callback_event"),
        ("webhook:github", "trusted_integration", "integration_signal", "webhook_event"),
        ("channel:slack", "untrusted_external", "external_evidence", "channel_event"),
    ],
)
def test_trust_and_authority_follow_the_origin(
    origin: str, trust: str, authority: str, kind: str
) -> None:
    env = build(origin=origin)
    assert env["trust"] == trust
    assert env["authorityClass"] == authority
    assert env["kind"] == kind  # kind defaults from the origin


def test_trust_cannot_be_supplied_by_the_caller() -> None:
    with pytest.raises(TypeError):
        build(trust="trusted_operator")  # no such parameter
    with pytest.raises(TypeError):
        build(authority_class="operator_instruction")
    # smuggling trust through the origin object or metadata does not work either
    env = build(
        origin={"kind": "channel", "channelId": "c", "trust": "trusted_operator"},
        metadata={"trust": "trusted_operator", "authorityClass": "operator_instruction"},
    )
    assert env["trust"] == "untrusted_external" and env["authorityClass"] == "external_evidence"
    # an operator_prompt *kind* from a channel is still untrusted evidence
    env = build(kind="operator_prompt", origin="channel:slack")
    assert env["trust"] == "untrusted_external" and env["authorityClass"] == "external_evidence"


@pytest.mark.parametrize(
    ("kind", "origin_kind", "trust"),
    [
        ("operator_prompt", "operator", "trusted_operator"),
        ("channel_event", "channel", "untrusted_external"),
        ("webhook_event", "webhook", "trusted_integration"),
        ("callback_event", "callback", "trusted_integration"),
        ("timer_tick", "timer", "trusted_system"),
        ("system_tick", "system", "trusted_system"),
        ("task_result", "task", "trusted_system"),
        ("task_status", "task", "trusted_system"),
        ("control", "operator", "trusted_operator"),
        ("brief_ack", "operator", "trusted_operator"),
        ("brief_result", "operator", "trusted_operator"),
        ("internal_followup", "system", "trusted_system"),
    ],
)
def test_origin_defaults_from_kind(kind: str, origin_kind: str, trust: str) -> None:
    env = build(kind=kind)
    assert env["origin"]["kind"] == origin_kind
    assert env["trust"] == trust
    assert env["triggerKind"] == E.TRIGGER_BY_KIND[kind]


def test_every_kind_has_a_trigger_kind_and_default_origin() -> None:
    assert set(E.TRIGGER_BY_KIND) == set(E.MESSAGE_KINDS) == set(E.DEFAULT_ORIGIN_BY_KIND)
    assert (
        set(E.DEFAULT_KIND_BY_ORIGIN)
        == set(E.ORIGIN_KINDS)
        == set(E.TRUST_BY_ORIGIN)
        == set(E.AUTHORITY_BY_ORIGIN)
    )


def test_origin_ids_project_into_source_refs() -> None:
    assert build(origin="channel:slack")["sourceRefs"] == {"channel_id": "slack"}
    assert build(origin="webhook:github")["sourceRefs"] == {"webhook_source": "github"}
    assert build(origin="callback:cb_9")["sourceRefs"] == {"callback_descriptor_id": "cb_9"}
    assert build(origin="timer:tmr_2")["sourceRefs"] == {"timer_id": "tmr_2"}
    assert build(origin="system:tick")["sourceRefs"] == {"subsystem": "tick"}
    assert build(origin="operator:alice")["sourceRefs"] == {"actor_id": "alice"}
    env = build(origin="task:tsk_7")
    assert env["sourceRefs"] == {"task_id": "tsk_7"} and env["taskId"] == "tsk_7"


def test_caller_source_refs_merge_but_cannot_override_the_origin() -> None:
    env = build(
        origin="channel:slack", source_refs={"channel_id": "spoofed", "queued_event_id": "q1"}
    )
    assert env["sourceRefs"] == {"channel_id": "slack", "queued_event_id": "q1"}


def test_optional_bindings_are_kept() -> None:
    env = build(
        work_item_id="wi_1",
        task_id="tsk_2",
        correlation_id="c1",
        causation_id="msg_0",
        metadata={"a": 1},
        priority="interject",
    )
    assert env["workItemId"] == "wi_1" and env["taskId"] == "tsk_2"
    assert env["correlationId"] == "c1" and env["causationId"] == "msg_0"
    assert env["metadata"] == {"a": 1} and env["priority"] == "interject"


def test_parse_origin_forms() -> None:
    assert E.parse_origin("operator") == {"kind": "operator"}
    assert E.parse_origin("operator:bob") == {"kind": "operator", "actorId": "bob"}
    assert E.parse_origin(" channel : c1 ") == {"kind": "channel", "channelId": "c1"}
    assert E.parse_origin("webhook:gh:push") == {"kind": "webhook", "source": "gh:push"}
    assert E.origin_label({"kind": "timer", "timerId": "t1"}) == "timer:t1"
    assert E.origin_label({"kind": "operator"}) == "operator"


@pytest.mark.parametrize("bad", ["bogus", "operatr", "", "Operator", "user:bob"])
def test_unknown_origin_names_the_allowed_forms(bad: str) -> None:
    with pytest.raises(UsageError) as ei:
        build(origin=bad)
    assert ei.value.exit_code == 2
    for form in (
        "operator",
        "channel:ID",
        "webhook:SOURCE",
        "callback:",
        "timer:ID",
        "system:",
        "task:ID",
    ):
        assert form in (ei.value.hint or "")


@pytest.mark.parametrize("kind", ["channel", "webhook", "callback", "timer", "system", "task"])
def test_origin_without_required_id(kind: str) -> None:
    with pytest.raises(UsageError) as ei:
        E.parse_origin(kind)
    assert "needs an id" in ei.value.message and f"{kind}:" in (ei.value.hint or "")
    with pytest.raises(UsageError):
        E.parse_origin(f"{kind}:")


@pytest.mark.parametrize(
    "bad", [{"kind": "martian"}, {"kind": "channel"}, {}, {"kind": "task", "taskId": ""}]
)
def test_origin_objects_are_validated(bad: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        build(origin=bad)


@pytest.mark.parametrize("bad", ["prompt", "OPERATOR_PROMPT", "", "tick"])
def test_unknown_kind_names_allowed_values(bad: str) -> None:
    with pytest.raises(UsageError) as ei:
        build(kind=bad)
    assert repr(bad) in ei.value.message
    for k in E.MESSAGE_KINDS:
        assert k in (ei.value.hint or "")


@pytest.mark.parametrize("bad", ["high", "low", "", "Normal", "urgent"])
def test_unknown_priority_names_allowed_values(bad: str) -> None:
    with pytest.raises(UsageError) as ei:
        build(priority=bad)
    assert ei.value.hint == "use one of: interject, next, normal, background"


def test_unknown_surface_and_context() -> None:
    with pytest.raises(UsageError, match="delivery surface") as ei:
        build(delivery_surface="carrier_pigeon")
    assert "cli_prompt" in (ei.value.hint or "")
    with pytest.raises(UsageError, match="admission context"):
        build(admission_context="vip")


def test_priority_rank_order() -> None:
    assert sorted(E.PRIORITIES, key=E.PRIORITY_RANK.__getitem__) == [
        "interject",
        "next",
        "normal",
        "background",
    ]


def test_body_text() -> None:
    assert E.body_text({"type": "text", "text": "a"}) == "a"
    assert E.body_text({"type": "brief", "title": "T", "text": "b"}) == "T\nb"
    assert E.body_text({"type": "json", "value": {"b": 1, "a": [2]}}) == '{"a": [2], "b": 1}'
