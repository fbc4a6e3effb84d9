"""How the provider layer is put together: neutral values in ``model/`` (and
still importable from ``providers.base``), imports that run one way
(codex -> responses, providers -> model), and one transport table."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from holon_cli.model import provider as neutral
from holon_cli.providers import base, registry

ROOT = Path(__file__).resolve().parents[2]
VALUES = (
    "ToolSpec",
    "ToolCall",
    "ConversationItem",
    "PromptFrame",
    "TokenUsage",
    "ModelResponse",
    "STOP_END_TURN",
    "STOP_TOOL_USE",
    "STOP_MAX_TOKENS",
    "STOP_STOP_SEQUENCE",
    "STOP_CONTENT_FILTER",
)


def _loaded_after(code: str) -> list[str]:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=True,
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


@pytest.mark.parametrize("name", VALUES)
def test_neutral_values_live_in_model_and_are_reexported(name: str) -> None:
    value = getattr(neutral, name)
    assert getattr(base, name) is value
    if isinstance(value, type):
        assert value.__module__ == "holon_cli.model.provider"


def test_model_values_import_no_provider_code() -> None:
    loaded = _loaded_after("import holon_cli.model.provider")
    assert not [m for m in loaded if m.startswith("holon_cli.providers")]


def test_responses_transport_does_not_import_codex() -> None:
    loaded = _loaded_after(
        "import holon_cli.providers.openai_responses as r\nr.parse_responses_stream"
    )
    assert "holon_cli.providers.openai_responses" in loaded
    assert "holon_cli.providers.openai_codex" not in loaded


def test_registry_imports_no_transport_until_resolving() -> None:
    loaded = _loaded_after("import holon_cli.providers.registry")
    assert "holon_cli.providers.http_common" not in loaded
    assert "email.utils" not in loaded and "httpx" not in loaded and "httpx2" not in loaded


def test_one_table_names_every_transport() -> None:
    kinds = {k for k, *_ in registry.BUILTIN.values()} | set(registry.CONFIG_TRANSPORTS)
    assert kinds == set(registry.TRANSPORTS)
    for kind, (module, cls) in registry.TRANSPORTS.items():
        assert isinstance(getattr(importlib.import_module(module), cls), type), kind


@pytest.mark.parametrize(
    ("ref", "cls"),
    [
        ("openai/gpt", "OpenAIResponsesTransport"),
        ("openai-codex/gpt", "OpenAICodexTransport"),
        ("anthropic/claude", "AnthropicTransport"),
    ],
)
def test_builtin_refs_resolve_through_the_table(ref: str, cls: str) -> None:
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    t = registry.resolve_transport(ref, config={}, env=env)
    assert type(t).__name__ == cls and t.model_ref == ref


@pytest.mark.parametrize(("kind", "cls"), [(k, v[1]) for k, v in registry.TRANSPORTS.items()])
def test_config_kinds_resolve_through_the_table(kind: str, cls: str) -> None:
    config = {"providers": {"local": {"transport": kind, "base_url": "http://127.0.0.1:1/v1"}}}
    if kind not in registry.CONFIG_TRANSPORTS:
        with pytest.raises(base.ProviderFailure) as ei:
            registry.resolve_transport("local/m", config=config, env={})
        assert ei.value.kind == "unsupported_transport"
        return
    t = registry.resolve_transport("local/m", config=config, env={})
    assert type(t).__name__ == cls and t.model_ref == "local/m"
