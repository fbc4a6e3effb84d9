"""The full built-in tool matrix in Strict emission through the OpenAI and
OpenAI-Codex request payloads (spec: Provider Tool Schema Contract), so schema
drift fails here before a live run does."""

from __future__ import annotations

from typing import Any

import pytest

from holon_cli.providers.base import ConversationItem, PromptFrame, ProviderRequest
from holon_cli.providers.registry import resolve_transport
from holon_cli.tools.catalog import registry

CONTRACT_TOOLS = {
    "ExecCommand",
    "ApplyPatch",
    "Sleep",
    "Enqueue",
    "AgentGet",
    "CreateWorkItem",
    "PickWorkItem",
    "UpdateWorkItem",
    "CompleteWorkItem",
    "GetWorkItem",
    "ListWorkItems",
}


def check_strict(schema: dict[str, Any], where: str) -> None:
    t = schema.get("type")
    types = t if isinstance(t, list) else [t]
    if "object" in types and "properties" in schema:
        assert schema.get("additionalProperties") is False, where
        assert sorted(schema["required"]) == sorted(schema["properties"]), where
        for name, sub in schema["properties"].items():
            check_strict(sub, f"{where}.{name}")
    if "array" in types and "items" in schema:
        check_strict(schema["items"], f"{where}[]")
    if "enum" in schema and "null" in types:
        assert None in schema["enum"], where


def test_contract_tools_are_registered() -> None:
    assert CONTRACT_TOOLS <= set(registry())


@pytest.mark.parametrize("ref", ["openai/gpt-test", "openai-codex/gpt-test"])
def test_strict_matrix_in_openai_payloads(ref: str) -> None:
    specs = [d.spec(strict=True) for d in registry().values()]
    transport = resolve_transport(ref, env={"OPENAI_API_KEY": "k"}, config={})
    req = ProviderRequest(
        frame=PromptFrame(system_prompt="s"),
        conversation=[ConversationItem("user", "hi")],
        tools=specs,
    )
    body = transport.build_body(req)  # type: ignore[attr-defined]
    sent = {t["name"]: t for t in body["tools"]}
    assert set(sent) == set(registry())
    for name, tool in sent.items():
        assert tool["type"] == "function"
        check_strict(tool["parameters"], name)
    if ref.startswith("openai-codex/"):
        assert body["stream"] is True and "max_output_tokens" not in body


def test_relaxed_emission_is_the_runtime_default() -> None:
    for name, d in registry().items():
        relaxed = d.spec().input_schema
        assert relaxed["additionalProperties"] is False, name
        # optional fields stay optional in the relaxed (source) shape
        assert set(relaxed["required"]) <= set(relaxed["properties"]), name
