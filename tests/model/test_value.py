"""The plain value classes of the start-up paths (``model/value.py``) keep
what ``@dataclass`` gave them: equality by class and fields, a readable
repr, no hash for a mutable value, copies that share nothing by accident."""

from __future__ import annotations

import pytest

from holon_cli.model.provider import ConversationItem, ModelResponse, TokenUsage, ToolCall


def test_equality_is_by_class_and_fields() -> None:
    a = ToolCall("c1", "ExecCommand", {"cmd": "ls"})
    assert a == ToolCall("c1", "ExecCommand", {"cmd": "ls"})
    assert a != ToolCall("c1", "ExecCommand", {"cmd": "pwd"})
    assert a != ToolCall("c1", "ExecCommand", {"cmd": "ls"}, raw_arguments='{"cmd":"ls"}')
    assert TokenUsage(1, 2, 3) != (1, 2, 3)  # not a tuple
    assert ModelResponse([], "end_turn") == ModelResponse([], "end_turn", usage=None)


def test_repr_names_the_fields_in_order() -> None:
    assert repr(TokenUsage(1, 2, 3)) == (
        "TokenUsage(input_tokens=1, output_tokens=2, total_tokens=3, "
        "cache_read_input_tokens=0, cache_creation_input_tokens=0)"
    )


def test_a_mutable_value_is_not_hashable() -> None:
    with pytest.raises(TypeError):
        hash(TokenUsage())


def test_defaults_are_fresh_lists_and_with_text_copies() -> None:
    a, b = ConversationItem("user"), ConversationItem("user")
    a.tool_calls.append(ToolCall("c", "n", {}))
    assert b.tool_calls == []
    tool = ConversationItem("tool", "long output", call_id="c", name="n", is_error=True)
    cut = tool.with_text("long")
    assert cut.text == "long" and tool.text == "long output"
    assert (cut.role, cut.call_id, cut.name, cut.is_error) == ("tool", "c", "n", True)
