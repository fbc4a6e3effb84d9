"""Transports declare their prompt capabilities (runtime spec: Provider
Prompt Frame, ``ProviderPromptCapability``; issue 37 item 1), from one table
that ``holon debug providers`` shows too."""

from __future__ import annotations

from typing import get_args

import pytest

from holon_cli.model.provider import PromptCapability
from holon_cli.providers.anthropic import AnthropicTransport
from holon_cli.providers.openai_chat import OpenAIChatTransport
from holon_cli.providers.openai_codex import OpenAICodexTransport
from holon_cli.providers.openai_responses import OpenAIResponsesTransport
from holon_cli.providers.scripted import ScriptedTransport
from holon_cli.providers.wire import PROMPT_SUPPORT, prompt_support


@pytest.mark.parametrize(
    ("cls", "kind", "caps"),
    [
        (
            OpenAIResponsesTransport,
            "openai_responses",
            {"prompt_cache_key", "incremental_responses"},
        ),
        (OpenAICodexTransport, "openai_codex", {"full_request_only", "prompt_cache_key"}),
        (OpenAIChatTransport, "openai_chat_completions", {"full_request_only"}),
        (
            AnthropicTransport,
            "anthropic_messages",
            {"full_request_only", "prompt_cache_blocks", "context_management"},
        ),
        (ScriptedTransport, "scripted", {"full_request_only"}),
    ],
)
def test_each_transport_declares_what_it_does_with_a_prompt(
    cls: type, kind: str, caps: set[str]
) -> None:
    assert cls.prompt_capabilities == caps == PROMPT_SUPPORT[kind].capabilities  # type: ignore[attr-defined]
    assert caps <= set(get_args(PromptCapability))


def test_only_block_caching_lowers_breakpoints_and_only_responses_continues() -> None:
    for kind, support in PROMPT_SUPPORT.items():
        blocks = "prompt_cache_blocks" in support.capabilities
        assert bool(support.breakpoints) == blocks and (support.max_breakpoints > 0) == blocks
        assert (support.continuation is not None) == (
            "incremental_responses" in support.capabilities
        )
    assert PROMPT_SUPPORT["anthropic_messages"].breakpoints == (
        "tools",
        "system",
        "history",
        "rolling",
    )
    assert prompt_support("some_future_kind") == PROMPT_SUPPORT["openai_chat_completions"]
