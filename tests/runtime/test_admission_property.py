"""Property: whatever a caller passes to admission, it ends in a valid
envelope or in the project's own error types, never a stray exception."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from holon_cli.errors import HolonError
from holon_cli.model import envelope as E
from holon_cli.runtime.enqueue import admit

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
anything = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
surrogate_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from(["\udcff", "\udc80"]),
    max_size=40,
)
kinds = st.one_of(st.none(), st.sampled_from(E.MESSAGE_KINDS), surrogate_text, anything)
origins = st.one_of(
    st.none(),
    st.sampled_from(["operator", "channel:slack", "webhook:gh", "system:x", "task:t", "timer:t"]),
    surrogate_text,
    st.dictionaries(st.sampled_from(["kind", "channel_id", "taskId", "source"]), anything),
    anything,
)
surfaces = st.one_of(st.sampled_from(E.DELIVERY_SURFACES), anything)
contexts = st.one_of(st.sampled_from(E.ADMISSION_CONTEXTS), anything)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=kinds,
    origin=origins,
    priority=st.one_of(st.sampled_from(E.PRIORITIES), anything),
    surface=surfaces,
    context=contexts,
    work_item_id=st.one_of(st.none(), anything),
    metadata=st.one_of(st.none(), anything),
)
def test_build_envelope_raises_only_holon_errors(
    kind: Any,
    origin: Any,
    priority: Any,
    surface: Any,
    context: Any,
    work_item_id: Any,
    metadata: Any,
) -> None:
    try:
        env = E.build_envelope(
            message_id="msg_1",
            agent_id="main",
            created_at="2025-01-01T00:00:00.000Z",
            body={"type": "text", "text": "x"},
            kind=kind,
            origin=origin,
            priority=priority,
            delivery_surface=surface,
            admission_context=context,
            work_item_id=work_item_id,
            metadata=metadata,
        )
    except HolonError:
        return
    # what was admitted obeys the policy
    assert (
        env["kind"] in E.ORIGINS_BY_KIND and env["origin"]["kind"] in E.ORIGINS_BY_KIND[env["kind"]]
    )
    assert env["trust"] == E.TRUST_BY_ORIGIN[env["origin"]["kind"]]
    assert env["origin"]["kind"] in E.ORIGINS_BY_SURFACE[env["delivery_surface"]]


@settings(max_examples=examples(150), deadline=None)
@given(raw=anything)
def test_stored_envelopes_raise_only_envelope_errors(raw: Any) -> None:
    try:
        E.validate_stored(raw)
    except E.EnvelopeError:
        pass


@settings(max_examples=examples(150), deadline=None)
@given(origin=st.one_of(anything, surrogate_text))
def test_origin_checks_raise_only_holon_errors(origin: Any) -> None:
    for fn in (E.check_origin, E.parse_origin, E.check_kind, E.check_priority):
        try:
            fn(origin)
        except HolonError:
            pass
    assert isinstance(E.origin_label(origin), str)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    text=surrogate_text,
    kind=kinds,
    origin=origins,
    priority=st.one_of(st.sampled_from(E.PRIORITIES), surrogate_text),
    json_body=st.booleans(),
)
def test_admit_raises_only_holon_errors(
    text: str, kind: Any, origin: Any, priority: Any, json_body: bool
) -> None:
    try:
        env = admit(text, kind=kind, origin=origin, priority=priority, json_body=json_body)
    except HolonError:
        return
    assert env["id"].startswith("msg_")
