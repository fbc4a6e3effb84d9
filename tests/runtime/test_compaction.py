"""Compaction inside a turn (issue 23 item 4): the tool loop that grew until
the provider refused it, ``context_compacted``, the retry after a provider's
``context_length_exceeded``, and a budget below the frame's fixed part."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.model.provider import ConversationItem, ToolCall
from holon_cli.providers.base import ProviderFailure
from holon_cli.providers.scripted import ScriptedTransport
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.memory import compaction as cp
from holon_cli.runtime.memory import working
from holon_cli.runtime.turn import run_turn
from holon_cli.tools.catalog import default_catalog

KB_CMD = "printf '%01024d\\n' 0"  # 1 KB of output


class Only:
    """The default catalog cut down to some tools (a small fixed frame)."""

    def __init__(self, *names: str) -> None:
        self.cat = default_catalog()
        self.specs = [s for s in self.cat.specs if s.name in names]
        self.guidance = self.cat.guidance

    def execute(self, ctx: Any, call: Any) -> Any:
        return self.cat.execute(ctx, call)


def script(tmp_path: Path, steps: list[Any]) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def set_budget(tokens: Any) -> None:
    from holon_cli.store.layout import home_root

    home_root().mkdir(parents=True, exist_ok=True)
    (home_root() / "config.yaml").write_text(
        yaml.safe_dump({"runtime": {"context_budget_tokens": tokens}})
    )


def request_tokens(req: Any) -> int:
    """The refusing provider's own count: every byte it is sent / 4."""
    f = req.frame
    parts = [f.system_prompt, *f.system_blocks, *f.context_blocks]
    parts += [json.dumps([[t.name, t.description, t.input_schema] for t in req.tools])]
    for it in req.conversation:
        parts.append(it.text)
        parts += [json.dumps(c.arguments) for c in it.tool_calls]
    return sum(len(p.encode()) for p in parts) // 4


@pytest.fixture
def window(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A provider whose context window is ``limit`` tokens: a larger request
    is refused with ``context_length_exceeded``, as real ones do."""
    box: dict[str, Any] = {"limit": 3000, "sizes": [], "requests": [], "refused": 0}
    real = ScriptedTransport.complete

    def complete(self: ScriptedTransport, request: Any) -> Any:
        size = request_tokens(request)
        box["sizes"].append(size)
        box["requests"].append(request)
        if size > box["limit"]:
            box["refused"] += 1
            raise ProviderFailure("context_length_exceeded", f"{size} > {box['limit']} tokens")
        return real(self, request)

    monkeypatch.setattr(ScriptedTransport, "complete", complete)
    return box


def kinds(store: Any) -> list[str]:
    return [e["kind"] for e in store.events.records()]


def test_a_long_tool_loop_completes_under_a_small_budget(
    tmp_path: Path, window: dict[str, Any]
) -> None:
    """30 rounds of 1 KB tool output under a 3,000-token budget: before, the
    conversation grew until the provider refused it (the turn failed)."""
    set_budget(3000)
    call = {"name": "ExecCommand", "arguments": {"cmd": KB_CMD}}
    model = script(tmp_path, [{"tool_calls": [call]}] * 30 + [{"text": "all 30 done"}])
    env = admit("run the 30 checks")
    res = run_turn(None, cli_model=model, catalog=Only("ExecCommand"))
    assert res.status == "completed" and res.final_text == "all 30 done", res
    assert window["refused"] == 0 and max(window["sizes"]) <= 3000
    store = open_agent(None)
    compacted = [e["data"] for e in store.events.records() if e["kind"] == "context_compacted"]
    assert compacted, kinds(store)
    assert [c["compression_epoch"] for c in compacted] == list(range(1, len(compacted) + 1))
    assert all(c["compacted_message_count"] > 0 for c in compacted)
    header = f"[message id={env['id']} "
    for req in window["requests"]:
        conv = req.conversation
        # the current input, with its provenance header, first and exactly once
        assert conv[0].text.startswith(header)
        assert sum(header in it.text for it in conv) == 1
        # tool results always follow the call that asked for them
        for i, it in enumerate(conv):
            if it.role == "tool":
                calls = {c.id for c in conv[i - 1].tool_calls} | {
                    c.id for j in range(i) for c in conv[j].tool_calls
                }
                assert it.call_id in calls
    last = window["requests"][-1].conversation
    # the direct predecessor (the newest round) is kept whole
    assert last[-1].role == "tool" and "0" * 1024 in last[-1].text
    assert "context compacted" in last[0].text
    wm = working.state_of(store.read_record()["state"]["working_memory"])
    assert wm["compacted_message_count"] == sum(c["compacted_message_count"] for c in compacted)


def test_compaction_keeps_the_prefix_stable_between_compactions(
    tmp_path: Path, window: dict[str, Any]
) -> None:
    """After a compaction, the next rounds append to the same prefix (the
    summary does not change until the next compaction)."""
    set_budget(3000)
    call = {"name": "ExecCommand", "arguments": {"cmd": KB_CMD}}
    model = script(tmp_path, [{"tool_calls": [call]}] * 12 + [{"text": "done"}])
    admit("go")
    run_turn(None, cli_model=model, catalog=Only("ExecCommand"))
    reqs = window["requests"]
    appended = 0
    for prev, nxt in zip(reqs, reqs[1:], strict=False):
        a, b = prev.conversation, nxt.conversation
        if a[0].text == b[0].text:  # no compaction in between
            assert [i.text for i in b[: len(a)]] == [i.text for i in a]
            appended += 1
    assert appended >= len(reqs) // 2


def test_a_provider_refusal_compacts_once_and_retries(
    tmp_path: Path, window: dict[str, Any]
) -> None:
    """The budget thinks the request fits, the provider's window is smaller:
    one compaction and a retry instead of ending the turn."""
    set_budget(100_000)
    window["limit"] = 2600
    call = {"name": "ExecCommand", "arguments": {"cmd": KB_CMD}}
    model = script(tmp_path, [{"tool_calls": [call]}] * 6 + [{"text": "ok"}])
    admit("go")
    res = run_turn(None, cli_model=model, catalog=Only("ExecCommand"))
    assert res.status == "completed", res
    store = open_agent(None)
    reasons = [
        e["data"]["reason"] for e in store.events.records() if e["kind"] == "context_compacted"
    ]
    assert reasons and set(reasons) == {"context_length_exceeded"}
    assert window["refused"] == len(reasons)


def test_a_refusal_that_compaction_cannot_help_still_fails_the_turn(
    tmp_path: Path, window: dict[str, Any]
) -> None:
    set_budget(100_000)
    window["limit"] = 10  # nothing fits
    model = script(tmp_path, [{"text": "never"}])
    admit("go")
    res = run_turn(None, cli_model=model, catalog=Only("ExecCommand"))
    assert res.status == "aborted" and res.failure_kind == "context_length_exceeded"
    assert window["refused"] == 1


def test_a_budget_below_the_fixed_frame_is_refused_before_the_dequeue(
    tmp_path: Path, window: dict[str, Any]
) -> None:
    """Issue 36 §6: a budget the fixed frame does not fit in would fail every
    turn: the turn refuses it (ConfigError, exit 2) before taking the
    message, naming both numbers; nothing is sent, nothing is consumed."""
    from holon_cli.errors import ConfigError

    set_budget(1000)  # the default catalog's schemas alone are larger
    model = script(tmp_path, [{"text": "never sent"}])
    admit("hello")
    with pytest.raises(ConfigError) as e:
        run_turn(None, cli_model=model, catalog=default_catalog())
    assert e.value.exit_code == 2
    fixed = int(e.value.details["fixed_tokens"])
    assert "runtime.context_budget_tokens is 1000" in e.value.message
    assert f"about {fixed} tokens" in e.value.message and "nothing was dequeued" in e.value.message
    assert fixed > 1000 and window["requests"] == []  # no request was sent
    store = open_agent(None)
    assert q.pending_count(store) == 1  # still queued, untouched
    assert store.ledger("transcript").records() == []
    # the turn's own check (a smaller catalog, a prompt that grew since) still fails it
    from holon_cli.runtime.turn import preflight

    preflight_below = preflight.CHECK_BUDGET_BELOW
    try:
        preflight.CHECK_BUDGET_BELOW = 0
        res = run_turn(None, cli_model=model, catalog=default_catalog())
    finally:
        preflight.CHECK_BUDGET_BELOW = preflight_below
    assert res.status == "aborted" and res.failure_kind == "context_budget_too_small"
    assert int((res.failure_artifact or {})["fixed_tokens"]) == fixed


def _items(rounds: int, size: int) -> list[ConversationItem]:
    items = [ConversationItem("user", "[message id=m1 kind=operator_input]\nstart")]
    for i in range(rounds):
        call = ToolCall(f"c{i}", "ExecCommand", {"cmd": f"step {i}"})
        items.append(ConversationItem("assistant", f"note {i}", [call]))
        items.append(ConversationItem("tool", "x" * size, call_id=f"c{i}", name="ExecCommand"))
    return items


def test_the_window_drops_whole_rounds_and_keeps_the_newest() -> None:
    items = _items(10, 400)
    w = cp.Window()
    removed = w.compact(items, 150, "wi_1")
    assert removed == 18 and w.cut == 19 and w.epoch == 1  # all but the last round
    view = w.view(items)
    assert [i.role for i in view] == ["user", "assistant", "tool"]
    assert view[0].text.startswith("[message id=m1 kind=operator_input]\nstart\n\n")
    assert "Current work item: wi_1" in view[0].text and "`step 8`" in view[0].text
    # nothing more to drop: the newest round stays whole
    assert w.compact(items, 10, None) == 0 and w.epoch == 1


def test_the_summary_is_deterministic_and_lists_compacted_headers() -> None:
    items = _items(4, 100)
    items.insert(3, ConversationItem("user", "[message id=m2 kind=operator_input]\nalso this"))
    a, b = cp.Window(), cp.Window()
    a.compact(items, 120, None)
    b.compact(items, 120, None)
    assert a.summary == b.summary and "[message id=m2 kind=operator_input]" in a.summary


def test_a_smaller_budget_never_keeps_more() -> None:
    items = _items(12, 300)
    kept = []
    for target in (4000, 2000, 1000, 400):
        w = cp.Window()
        w.compact(items, target, None)
        kept.append(len(w.view(items)))
    assert kept == sorted(kept, reverse=True)


# ------------------------------------------------------- prompt caching


def _request_bytes(req: Any) -> bytes:
    f = req.frame
    parts = [f.system_prompt, *f.system_blocks, *f.context_blocks]
    parts += [
        f"{i.role}\x00{i.text}\x00{[c.to_dict() for c in i.tool_calls]}" for i in req.conversation
    ]
    return "\x01".join(parts).encode()


def test_within_a_turn_each_request_starts_with_the_previous_one(
    tmp_path: Path, window: dict[str, Any]
) -> None:
    """A tool loop on a work item: the frame (work queue included: the
    running turn's own trace is in its conversation, not in the block) does
    not change between rounds, so each request extends the previous one."""
    from holon_cli.runtime import workitems as wi

    store = open_agent(None)
    wid = wi.create_work_item(store, "check the build", plan="# check the build\n- run it\n")[
        "work_item"
    ]["id"]
    wi.pick_work_item(store, wid)
    call = {"name": "ExecCommand", "arguments": {"cmd": "echo step"}}
    model = script(tmp_path, [{"tool_calls": [call]}] * 5 + [{"text": "done"}])
    admit("go on with the build check")
    assert run_turn(None, cli_model=model, catalog=Only("ExecCommand")).status == "completed"
    reqs = window["requests"]
    assert len(reqs) == 6
    assert any(wid in b for b in reqs[0].frame.context_blocks)
    sent = [_request_bytes(r) for r in reqs]
    reused = 0
    for prev, nxt in zip(sent, sent[1:], strict=False):
        assert nxt.startswith(prev)
        reused += len(prev)
    assert reused / sum(len(s) for s in sent[1:]) >= 0.9


class _Killed(BaseException):
    """Stands for SIGKILL inside a provider request."""


def test_a_restart_sends_the_request_it_would_have_sent(
    tmp_path: Path, window: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Restart then compaction equals compaction without restart: the window
    is journaled, so the replayed turn's first request is byte-identical to
    the one in flight when the process died."""
    set_budget(3000)
    call = {"name": "ExecCommand", "arguments": {"cmd": KB_CMD}}
    model = script(tmp_path, [{"tool_calls": [call]}] * 20 + [{"text": "done"}])
    admit("run them")
    inner = ScriptedTransport.complete  # the window fixture's recorder

    def dies_at_15(self: ScriptedTransport, request: Any) -> Any:
        if len(window["requests"]) == 14:
            window["requests"].append(request)
            raise _Killed
        return inner(self, request)

    monkeypatch.setattr(ScriptedTransport, "complete", dies_at_15)
    with pytest.raises(_Killed):
        run_turn(None, cli_model=model, catalog=Only("ExecCommand"))
    in_flight = window["requests"][-1]
    assert "context compacted" in in_flight.conversation[0].text
    monkeypatch.setattr(ScriptedTransport, "complete", inner)
    res = run_turn(None, cli_model=model, catalog=Only("ExecCommand"))
    assert res.status == "completed", res
    replayed = window["requests"][15]
    assert [(i.role, i.text) for i in replayed.conversation] == [
        (i.role, i.text) for i in in_flight.conversation
    ]
    assert replayed.frame.system_blocks == in_flight.frame.system_blocks


def test_clipping_is_the_last_resort_and_says_so() -> None:
    items = _items(2, 2000)
    w = cp.Window()
    assert w.clip_to(items, 200) is True
    view = w.view(items)
    tool = view[-1]
    assert (
        tool.text.startswith("x" * 256) and "characters cut to fit the context budget" in tool.text
    )
    assert len(tool.text) < 2000
    assert [i.text for i in view if i.role != "tool"] == [i.text for i in items if i.role != "tool"]
    w.clip = cp.MIN_CLIP
    assert w.clip_to(items, 10_000) is False  # nothing more to cut


def test_the_providers_reported_input_tokens_count_toward_the_budget(
    tmp_path: Path, window: dict[str, Any]
) -> None:
    """The contract's count: last reported input tokens plus bytes / 4 of
    what was appended since (here the bytes alone are far below the budget)."""
    set_budget(3000)
    call = {"name": "ExecCommand", "arguments": {"cmd": "echo small"}}
    usage = {"input_tokens": 2990, "output_tokens": 5}
    model = script(
        tmp_path, [{"tool_calls": [call], "usage": usage}] * 3 + [{"text": "done", "usage": usage}]
    )
    admit("go")
    assert run_turn(None, cli_model=model, catalog=Only("ExecCommand")).status == "completed"
    assert max(window["sizes"]) < 2500  # what was really sent
    store = open_agent(None)
    compacted = [e["data"] for e in store.events.records() if e["kind"] == "context_compacted"]
    assert compacted and compacted[0]["estimated_tokens"] > 3000
    assert compacted[0]["reason"] == "over_budget"


def test_the_readme_states_the_real_floor() -> None:
    """The floor the memory guide documents is computed, not guessed: the fixed
    prompt of a new agent with the built-in tools, within 10 %."""
    import re

    from holon_cli.runtime.turn.preflight import fixed_prompt_tokens

    readme = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "memory.md").read_text()
    m = re.search(r"about\s+([\d,]+)\s+tokens\s+for\s+a\s+new\s+agent", readme)
    assert m, "docs/guides/memory.md: the context budget's floor is not stated"
    stated = int(m.group(1).replace(",", ""))
    fixed = fixed_prompt_tokens(open_agent(None), default_catalog(), {})
    assert abs(stated - fixed) <= fixed * 0.1, (stated, fixed)
