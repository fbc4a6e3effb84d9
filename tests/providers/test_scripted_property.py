"""Property test for the script loader: whatever YAML a user writes, loading
and replaying a ``scripted:`` file ends in a script or in the project's own
error (:class:`ProviderFailure`, ``script_error`` for a bad script, naming the
file), never in a ``TypeError`` that the chain would report as a provider
failure."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples
from provider_helpers import build_request

from holon_cli.providers.base import ConversationItem, ProviderFailure
from holon_cli.providers.scripted import (
    CALL_KEYS,
    FAIL_KEYS,
    SCRIPT_KEYS,
    STEP_KEYS,
    ScriptedTransport,
    load_script,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2100, 1, 1)),
    st.sampled_from(["end_turn", "tool_use", "rate_limited", "timeout", "{{c1.x}}", "ls"]),
)
keys = st.one_of(
    st.sampled_from(sorted(STEP_KEYS | SCRIPT_KEYS | CALL_KEYS | FAIL_KEYS)),
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.text(max_size=6),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(keys, inner, max_size=5),
    ),
    max_leaves=25,
)


def _near_valid_step() -> st.SearchStrategy[Any]:
    call = st.dictionaries(st.sampled_from(sorted(CALL_KEYS)) | keys, values, max_size=4)
    fail = st.dictionaries(st.sampled_from(sorted(FAIL_KEYS)) | keys, values, max_size=4)
    field_values = st.one_of(values, st.lists(call, max_size=3), fail)
    return st.one_of(
        st.text(max_size=10),
        values,
        st.dictionaries(st.sampled_from(sorted(STEP_KEYS)) | keys, field_values, max_size=5),
    )


documents = st.one_of(
    values,
    st.lists(_near_valid_step(), max_size=4),
    st.fixed_dictionaries(
        {"steps": st.lists(_near_valid_step(), max_size=4)},
        optional={"loop": values, "name": values},
    ),
    st.dictionaries(st.sampled_from(sorted(SCRIPT_KEYS)) | keys, values, max_size=4),
)


def _check(path: Path, text: str | bytes) -> None:
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    try:
        script = load_script(path)
    except ProviderFailure as f:
        assert f.kind == "script_error", f.message
        assert str(path) in f.message
        return
    # a script that loads replays every step into a response or a ProviderFailure
    transport = ScriptedTransport(str(path), sleep=lambda s: None)
    convo = [
        ConversationItem(role="user", text="go"),
        ConversationItem(role="tool", call_id="c1", name="f", text='{"x": 1}'),
    ]
    for _ in range(len(script.steps)):
        try:
            transport.complete(build_request(convo))
        except ProviderFailure:
            pass


_SETTINGS = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@_SETTINGS
@given(doc=documents)
def test_any_yaml_document_ends_in_a_script_or_script_error(doc: Any) -> None:
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        return
    with tempfile.TemporaryDirectory() as d:
        _check(Path(d) / "s.yaml", text)


@_SETTINGS
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_any_text_ends_in_a_script_or_script_error(text: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        _check(Path(d) / "s.yaml", text)


def test_step_errors_name_the_step(tmp_path: Path) -> None:
    p = tmp_path / "mixed.yaml"
    p.write_text("steps:\n  - text: ok\n  - {1: a, b: c}\n")
    try:
        load_script(p)
    except ProviderFailure as f:
        assert f.kind == "script_error"
        assert f"{p}: step 2: unknown key 1" in f.message
    else:
        raise AssertionError("a step with keys 1 and b loaded")
