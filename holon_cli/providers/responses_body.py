"""The Responses API request body as types (``openai_responses`` builds it,
``incremental`` continues it): a module of its own, so the two need not
import each other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Required, TypedDict

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject


class Part(TypedDict, total=False):
    """A message's content part (``input_text``, ``output_text``)."""

    type: Required[str]
    text: Required[str]
    annotations: list[JsonObject]


class InputItem(TypedDict, total=False):
    """An ``input`` item: a message, a ``function_call`` or its output."""

    type: str
    role: str
    content: list[Part]
    call_id: str
    name: str
    arguments: str
    output: str


class ToolOut(TypedDict):
    type: str
    name: str
    description: str
    parameters: JsonObject
    strict: bool


class Body(TypedDict, total=False):
    """A Responses request body, in the order it is sent (the prompt last:
    :data:`PROMPT_KEYS`)."""

    model: Required[str]
    prompt_cache_key: str
    max_output_tokens: int
    store: bool
    stream: bool
    tool_choice: str
    reasoning: None
    include: list[str]
    tools: list[ToolOut]
    instructions: str
    input: list[InputItem]
    previous_response_id: str
