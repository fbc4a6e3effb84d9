"""The emitted schemas of ExecCommand, ExecCommandBatch, ApplyPatch, Sleep,
Enqueue and AgentGet, in the relaxed and the strict provider forms."""

from __future__ import annotations

from typing import Any

import pytest

from holon_cli.tools.catalog import registry

OURS = {
    "ExecCommand": (
        {"cmd"},
        {
            "workdir",
            "shell",
            "login",
            "tty",
            "yield_time_ms",
            "max_output_tokens",
            "accepts_input",
            "duplicate_policy",
        },
    ),
    "ExecCommandBatch": ({"commands"}, set()),
    "ApplyPatch": ({"patch"}, set()),
    "Sleep": (set(), {"duration_ms", "reason"}),
    "Enqueue": ({"text"}, {"priority"}),
    "AgentGet": (set(), {"agent_id"}),
}


def _walk_objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    if schema.get("type") == "object" or (
        isinstance(schema.get("type"), list) and "object" in schema["type"]
    ):
        if "properties" in schema:
            out.append(schema)
            for sub in schema["properties"].values():
                out.extend(_walk_objects(sub))
    if "items" in schema:
        out.extend(_walk_objects(schema["items"]))
    return out


@pytest.mark.parametrize("name", sorted(OURS))
def test_relaxed_schema_keeps_optional_fields_optional(name: str) -> None:
    required, optional = OURS[name]
    tool = registry()[name]
    schema = tool.spec(strict=False).input_schema
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == required
    assert set(schema["properties"]) == required | optional
    for prop in schema["properties"].values():
        assert "null" not in str(prop.get("type")), "relaxed form must not mark fields nullable"
    assert tool.description


@pytest.mark.parametrize("name", sorted(OURS))
def test_strict_schema_requires_everything_and_nulls_optionals(name: str) -> None:
    required, optional = OURS[name]
    schema = registry()[name].spec(strict=True).input_schema
    for obj in _walk_objects(schema):
        assert obj["additionalProperties"] is False
        assert set(obj["required"]) == set(obj["properties"])
    for f in optional:
        t = schema["properties"][f]["type"]
        assert isinstance(t, list) and "null" in t, f
    for f in required:
        assert "null" not in str(schema["properties"][f]["type"]), f


def test_exec_schema_details() -> None:
    relaxed = registry()["ExecCommand"].spec().input_schema["properties"]
    assert relaxed["cmd"]["type"] == "string"
    assert relaxed["yield_time_ms"]["type"] == "integer"
    assert relaxed["login"]["type"] == "boolean"
    assert relaxed["duplicate_policy"]["enum"] == ["reuse_running", "start_new"]
    strict = registry()["ExecCommand"].spec(strict=True).input_schema["properties"]
    assert strict["duplicate_policy"]["enum"] == ["reuse_running", "start_new", None]


def test_batch_items_reject_tty_and_accepts_input_in_schema() -> None:
    item = registry()["ExecCommandBatch"].spec().input_schema["properties"]["commands"]["items"]
    assert item["required"] == ["cmd"]
    assert "tty" not in item["properties"] and "accepts_input" not in item["properties"]
    assert item["additionalProperties"] is False


def test_enqueue_priority_enum() -> None:
    prop = registry()["Enqueue"].spec().input_schema["properties"]["priority"]
    assert prop["enum"] == ["interject", "next", "normal", "background"]
