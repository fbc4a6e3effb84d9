"""Request builders shared by the provider tests (imported by module name;
``tests/providers`` is on ``sys.path`` via its conftest)."""

from __future__ import annotations

from pathlib import Path

from holon_cli.providers.base import (
    ConversationItem,
    PromptFrame,
    ProviderRequest,
    ToolCall,
    ToolSpec,
)

WEATHER_TOOL = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)


def build_request(
    conversation: list[ConversationItem] | None = None,
    *,
    tools: list[ToolSpec] | None = None,
    system: str = "You are a test agent.",
    system_blocks: list[str] | None = None,
    context_blocks: list[str] | None = None,
    prompt_cache_key: str | None = None,
    max_output_tokens: int | None = None,
    state_dir: Path | None = None,
    stable_blocks: list[str] | None = None,
    history: list[ConversationItem] | None = None,
) -> ProviderRequest:
    """``stable_blocks`` lead the context (before ``history``);
    ``context_blocks`` are the turn's (after it)."""
    stable = list(stable_blocks or [])
    return ProviderRequest(
        frame=PromptFrame(
            system_prompt=system,
            system_blocks=list(system_blocks or []),
            context_blocks=[*stable, *(context_blocks or [])],
            prompt_cache_key=prompt_cache_key,
            stable_blocks=len(stable),
        ),
        history=list(history or []),
        conversation=conversation
        if conversation is not None
        else [ConversationItem(role="user", text="hello")],
        tools=list(tools or []),
        max_output_tokens=max_output_tokens,
        state_dir=state_dir,
    )


def tool_round_conversation(
    call_id: str = "call_1", *, result: str = "sunny, 21C"
) -> list[ConversationItem]:
    """user asks -> assistant calls get_weather -> the tool answers."""
    return [
        ConversationItem(role="user", text="Weather in Paris?"),
        ConversationItem(
            role="assistant",
            text="Let me check.",
            tool_calls=[ToolCall(id=call_id, name="get_weather", arguments={"city": "Paris"})],
        ),
        ConversationItem(role="tool", call_id=call_id, name="get_weather", text=result),
    ]
