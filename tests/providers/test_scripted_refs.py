"""``{{call_id.path}}`` references in scripted steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from holon_cli.providers.base import ConversationItem, PromptFrame, ProviderFailure, ProviderRequest
from holon_cli.providers.scripted import ScriptedTransport


def req(state: Path, conv: list[ConversationItem]) -> ProviderRequest:
    return ProviderRequest(
        frame=PromptFrame(system_prompt="s"), conversation=conv, tools=[], state_dir=state
    )


def test_reference_threads_values_across_turns(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(
        "steps:\n"
        "  - tool_calls: [{id: mk, name: CreateWorkItem, arguments: {objective: x}}]\n"
        "  - text: 'created {{mk.work_item_id}}'\n"
        "  - tool_calls: [{name: PickWorkItem, arguments: "
        "{work_item_id: '{{mk.work_item_id}}', n: '{{mk.items.1}}'}}]\n"
    )
    t = ScriptedTransport(str(script))
    t.complete(req(tmp_path, [ConversationItem("user", "go")]))
    tool = ConversationItem(
        "tool",
        '{"ok": true, "work_item_id": "wi_42", "items": [1, 7]}',
        call_id="mk",
        name="CreateWorkItem",
    )
    r2 = t.complete(req(tmp_path, [ConversationItem("user", "go"), tool]))
    assert r2.text == "created wi_42"
    # a later turn: the earlier result is no longer in the conversation, but remembered
    r3 = ScriptedTransport(str(script)).complete(
        req(tmp_path, [ConversationItem("user", "next turn")])
    )
    assert r3.tool_calls[0].arguments == {"work_item_id": "wi_42", "n": 7}


def test_unresolved_reference_is_script_error(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("steps:\n  - text: 'value {{nope.field}}'\n")
    with pytest.raises(ProviderFailure) as exc:
        ScriptedTransport(str(script)).complete(req(tmp_path, [ConversationItem("user", "go")]))
    assert (
        exc.value.kind == "script_error"
        and "nope" in exc.value.message
        and "step 1" in exc.value.message
    )
