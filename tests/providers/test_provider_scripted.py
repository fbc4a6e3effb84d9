"""The scripted:<path> model: replay order across processes (a cursor file in
state_dir), exhaustion and looping, fail steps, and clear script errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from provider_helpers import build_request

from holon_cli.providers.base import ConversationItem, ProviderFailure
from holon_cli.providers.chain import ChainFailure, call_with_fallback
from holon_cli.providers.registry import resolve_transport
from holon_cli.providers.scripted import ScriptedTransport


def write(tmp_path: Path, data: Any, name: str = "script.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def req(state: Path | None, conversation: list[ConversationItem] | None = None) -> Any:
    return build_request(conversation, state_dir=state)


def fail_of(t: ScriptedTransport, state: Path | None) -> ProviderFailure:
    with pytest.raises(ProviderFailure) as ei:
        t.complete(req(state))
    return ei.value


STEPS = {
    "steps": [
        {
            "text": "Looking.",
            "tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "ls"}}],
            "usage": {"input_tokens": 12, "output_tokens": 3},
        },
        {"text": "Second."},
        "Third (string shorthand).",
    ]
}


def test_replay_order_across_instances_sharing_state_dir(tmp_path: Path) -> None:
    script = write(tmp_path, STEPS)
    state = tmp_path / "state"
    first = ScriptedTransport(str(script)).complete(req(state))
    assert first.text == "Looking." and first.stop_reason == "tool_use"
    (call,) = first.tool_calls
    assert call.name == "ExecCommand" and call.arguments == {"cmd": "ls"} and call.id
    assert first.usage is not None and first.usage.to_dict() == {
        "input_tokens": 12,
        "output_tokens": 3,
        "total_tokens": 15,
    }

    # a new instance (as in a separate `holon turn` process) continues the script
    second = ScriptedTransport(str(script)).complete(req(state))
    assert second.text == "Second." and second.stop_reason == "end_turn" and second.usage is None
    third = ScriptedTransport(str(script)).complete(req(state))
    assert third.text == "Third (string shorthand)."

    cursors = list(state.glob("scripted-*.json"))
    assert len(cursors) == 1
    data = json.loads(cursors[0].read_text())
    assert data["v"] == 1 and data["next"] == 3 and data["script"] == str(script)
    assert not list(state.glob(".*tmp*"))  # atomic write left no temp file


def test_separate_state_dirs_have_separate_cursors(tmp_path: Path) -> None:
    script = write(tmp_path, STEPS)
    t = ScriptedTransport(str(script))
    assert t.complete(req(tmp_path / "agent-a")).text == "Looking."
    assert t.complete(req(tmp_path / "agent-b")).text == "Looking."


def test_exhaustion_names_file_and_step_count(tmp_path: Path) -> None:
    script = write(tmp_path, {"steps": [{"text": "only"}]})
    state = tmp_path / "state"
    t = ScriptedTransport(str(script))
    t.complete(req(state))
    f = fail_of(t, state)
    assert f.kind == "script_exhausted" and not f.retryable
    assert str(script) in f.message and "all 1 step" in f.message
    assert f.hint and "loop: true" in f.hint and "scripted-" in f.hint


def test_loop_restarts(tmp_path: Path) -> None:
    script = write(tmp_path, {"loop": True, "steps": [{"text": "a"}, {"text": "b"}]})
    t = ScriptedTransport(str(script))
    state = tmp_path / "s"
    assert [t.complete(req(state)).text for _ in range(5)] == ["a", "b", "a", "b", "a"]


def test_tool_call_ids_unique_across_loops_unless_given(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        {"loop": True, "steps": [{"tool_calls": [{"name": "A"}, {"name": "B", "id": "fixed"}]}]},
    )
    t = ScriptedTransport(str(script))
    ids = [c.id for _ in range(2) for c in t.complete(req(tmp_path / "s")).tool_calls]
    assert ids[1] == ids[3] == "fixed"
    assert ids[0] != ids[2]


def test_fail_step_raises_that_kind_and_consumes_the_step(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        {
            "steps": [
                {
                    "fail": {
                        "kind": "rate_limited",
                        "message": "simulated 429",
                        "status": 429,
                        "retry_after_s": 1.5,
                    }
                },
                {"text": "recovered"},
            ]
        },
    )
    t = ScriptedTransport(str(script))
    state = tmp_path / "s"
    f = fail_of(t, state)
    assert (f.kind, f.message, f.status, f.retry_after_s, f.provider) == (
        "rate_limited",
        "simulated 429",
        429,
        1.5,
        "scripted",
    )
    assert f.model_ref == f"scripted:{script}"
    assert t.complete(req(state)).text == "recovered"


def test_fail_step_through_the_chain_retries_then_succeeds(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        {"steps": [{"fail": {"kind": "server_error", "status": 503}}, {"text": "second try"}]},
    )
    slept: list[float] = []
    res = call_with_fallback(
        [f"scripted:{script}"],
        req(tmp_path / "s"),
        sleep=slept.append,
        rand=lambda: 1.0,
        config={},
        env={},
    )
    assert res.response.text == "second try" and slept == [0.5]
    assert [a["outcome"] for a in res.timeline["attempts"]] == ["retrying", "succeeded"]
    assert res.timeline["attempts"][0]["provider"] == "scripted"


def test_auth_fail_step_falls_back_to_next_script(tmp_path: Path) -> None:
    bad = write(tmp_path, {"steps": [{"fail": "auth"}]}, "bad.yaml")
    good = write(tmp_path, {"steps": [{"text": "from fallback"}]}, "good.yaml")
    res = call_with_fallback(
        [f"scripted:{bad}", f"scripted:{good}"],
        req(tmp_path / "s"),
        sleep=lambda s: None,
        config={},
        env={},
    )
    assert res.response.text == "from fallback" and res.model_ref == f"scripted:{good}"


def test_sleep_ms_uses_injected_sleep(tmp_path: Path) -> None:
    script = write(tmp_path, {"steps": [{"text": "slow", "sleep_ms": 250}]})
    slept: list[float] = []
    out = ScriptedTransport(str(script), sleep=slept.append).complete(req(None))
    assert out.text == "slow" and slept == [0.25]


def test_stop_reason_override(tmp_path: Path) -> None:
    script = write(tmp_path, {"steps": [{"text": "cut", "stop_reason": "max_tokens"}]})
    assert ScriptedTransport(str(script)).complete(req(None)).stop_reason == "max_tokens"


def test_no_state_dir_keeps_cursor_in_memory(tmp_path: Path) -> None:
    script = write(tmp_path, STEPS)
    t = ScriptedTransport(str(script))
    assert [t.complete(req(None)).text for _ in range(2)] == ["Looking.", "Second."]
    assert not list(tmp_path.glob("scripted-*.json"))


def test_relative_path_resolved_against_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "examples").mkdir()
    write(tmp_path / "examples", {"steps": [{"text": "hello from examples"}]}, "hello.yaml")
    monkeypatch.chdir(tmp_path)
    t = resolve_transport("scripted:examples/hello.yaml", config={}, env={})
    assert t.model_ref == "scripted:examples/hello.yaml" and t.provider == "scripted"
    assert t.complete(req(tmp_path / "s")).text == "hello from examples"


def test_expect_tool_result_contains(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        {
            "steps": [
                {"expect_tool_result_contains": "README", "text": "saw it"},
                {"expect_tool_result_contains": "nope", "text": "x"},
            ]
        },
    )
    t = ScriptedTransport(str(script))
    convo = [
        ConversationItem(role="user", text="list"),
        ConversationItem(role="assistant", text=""),
        ConversationItem(role="tool", call_id="c", text="README.md\nsetup.py"),
    ]
    assert t.complete(req(tmp_path / "s", convo)).text == "saw it"
    with pytest.raises(ProviderFailure) as ei:
        t.complete(req(tmp_path / "s", convo))
    assert (
        ei.value.kind == "script_error"
        and "step 2" in ei.value.message
        and "'nope'" in ei.value.message
    )


# ------------------------------------------------------------ bad scripts


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("steps: [unclosed", "invalid YAML"),
        ("- just\n- a list of\n- {bogus: 1}\n", "step 3: unknown key 'bogus'"),
        ({"steps": []}, "'steps' must be a non-empty list"),
        ({"stepz": [{"text": "x"}]}, "unknown top-level key 'stepz'"),
        (
            {"steps": [{"text": "ok"}, {"tool_calls": [{"arguments": {}}]}]},
            "step 2: tool_calls[1] needs a 'name'",
        ),
        ({"steps": [{"fail": {"kind": "kaboom"}}]}, "step 1: fail.kind 'kaboom'"),
        ({"steps": [{"text": "x", "usage": {"input_tokens": -1}}]}, "step 1: 'usage'"),
        ({"steps": [{"text": 5}]}, "step 1: 'text' must be a string"),
        ({"steps": [{"sleep_ms": 10}]}, "step 1: needs 'text', 'tool_calls' or 'fail'"),
        ({"steps": [{"text": "x", "stop_reason": "because"}]}, "step 1: stop_reason"),
        ({"steps": [42]}, "step 1: expected a mapping"),
        ("just a string", "expected a mapping"),
        # keys of mixed types and unhashable values used to raise TypeError
        ("steps:\n  - {1: a, text: c}\n", "step 1: unknown key 1"),
        ("{1: a, b: c}", "unknown top-level key 1"),
        ("steps:\n  - {text: x, fail: {kind: [a], 2: b}}\n", "step 1: fail: unknown key 2"),
        ("steps:\n  - {fail: {kind: [a]}}\n", "step 1: fail.kind ['a']"),
        ("steps:\n  - {text: x, stop_reason: [a]}\n", "step 1: stop_reason"),
        (
            "steps:\n  - tool_calls: [{name: f, 7: x}]\n",
            "step 1: tool_calls[1]: unknown key 7",
        ),
        (
            "steps:\n  - tool_calls: [{name: f, arguments: {when: 2026-01-01}}]\n",
            "step 1: tool_calls[1].arguments has no JSON form",
        ),
        (
            "steps:\n  - tool_calls: [{name: f, arguments: {1: a, '1': b}}]\n",
            "step 1: tool_calls[1].arguments has no JSON form",
        ),
        ("steps:\n  - {text: x, sleep_ms: .nan}\n", "step 1: sleep_ms"),
        ("steps:\n  - {text: x, sleep_ms: 1e300}\n", "step 1: sleep_ms"),
        ("steps:\n  - {fail: {kind: timeout, retry_after_s: .inf}}\n", "step 1: fail.retry"),
        ("steps:\n  - {fail: {kind: timeout, status: [1]}}\n", "step 1: fail.status"),
        ("steps:\n  - {text: x, usage: {input_tokens: [1]}}\n", "step 1: 'usage'"),
    ],
)
def test_bad_script_is_script_error_naming_file_and_step(
    tmp_path: Path, content: Any, needle: str
) -> None:
    script = write(tmp_path, content)
    state = tmp_path / "s"
    f = fail_of(ScriptedTransport(str(script)), state)
    assert f.kind == "script_error" and not f.retryable
    assert str(script) in f.message and needle in f.message, f.message
    assert f.hint
    assert not state.exists()  # a broken script consumes nothing


def test_missing_script_file(tmp_path: Path) -> None:
    f = fail_of(ScriptedTransport(str(tmp_path / "nope.yaml")), None)
    assert f.kind == "script_error" and "not found" in f.message and "nope.yaml" in f.message
    assert f.hint and "relative paths" in f.hint


def test_missing_script_through_chain_has_runtime_artifact(tmp_path: Path) -> None:
    with pytest.raises(ChainFailure) as ei:
        call_with_fallback(
            [f"scripted:{tmp_path / 'gone.yaml'}"],
            req(None),
            sleep=lambda s: None,
            config={},
            env={},
        )
    art = ei.value.failure_artifact()
    assert art["category"] == "runtime" and art["metadata"]["failure_kind"] == "script_error"
    assert "gone.yaml" in art["summary"]


def test_corrupt_cursor_is_script_error_with_recovery_hint(tmp_path: Path) -> None:
    script = write(tmp_path, STEPS)
    t = ScriptedTransport(str(script))
    state = tmp_path / "s"
    state.mkdir()
    t.cursor_path(state).write_text("{not json")
    f = fail_of(t, state)
    assert f.kind == "script_error" and f.hint and "delete" in f.hint
