"""The conversation window across turns (``state/prompt_history.jsonl``,
runtime/memory/history.py): append-only within an epoch and once per
message, rolled to a new epoch by whole rounds newest first, every tool call
answered, disposable (a torn line ignored, a damaged file set aside), and
byte-identical when read back (a fresh process sends the same prefix)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.model.provider import ConversationItem, ToolCall
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.memory.history import (
    PromptHistory,
    answered,
    earlier_conversation,
    history_path,
    rounds_of,
    shown_in,
)
from holon_cli.runtime.turn import run_turn
from holon_cli.runtime.turn.journal import Journal
from holon_cli.tools.catalog import default_catalog


def _turn(n: int, rounds: int = 1) -> list[ConversationItem]:
    items = [
        ConversationItem("user", f"Turn mode: operator request. ({n})"),
        ConversationItem("user", f"[message id=msg_{n} kind=operator_prompt]\nquestion {n}"),
    ]
    for r in range(rounds):
        call = ToolCall(f"call_{n}_{r}", "ExecCommand", {"cmd": f"echo {n}.{r}"})
        items.append(ConversationItem("assistant", "", [call]))
        items.append(ConversationItem("tool", f"EV-{n}{r} " + "x" * 400, call_id=call.id))
    items.append(ConversationItem("assistant", f"answer {n}"))
    return items


@pytest.fixture
def store(holon_home: Path) -> Any:
    return open_agent(None)


def test_a_turn_is_appended_once_and_read_back_byte_identical(store: Any) -> None:
    h = PromptHistory.load(store)
    assert not h.exists and h.turns == []
    h.start(None, None)
    assert h.append("msg_1", "turn_1", _turn(1)) is True
    assert h.append("msg_1", "turn_1b", _turn(1)) is False  # a replayed settle adds nothing
    assert h.append("msg_2", "turn_2", _turn(2, rounds=2)) is True
    back = PromptHistory.load(store)
    assert back.items() == h.items() and [t.message_id for t in back.turns] == ["msg_1", "msg_2"]
    assert back.tokens() == h.tokens() and back.digest() == h.digest()
    # append-only: the file grows, the earlier bytes stay
    raw = history_path(store).read_bytes()
    h.append("msg_3", "turn_3", _turn(3))
    assert history_path(store).read_bytes().startswith(raw)


def test_a_torn_last_line_is_ignored_and_a_damaged_file_set_aside(store: Any) -> None:
    h = PromptHistory.load(store)
    h.start(None, None)
    h.append("msg_1", "turn_1", _turn(1))
    path = history_path(store)
    with path.open("ab") as f:
        f.write(b'{"v": 1, "op": "turn", "message_id": "msg_2", "ite')  # killed mid-append
    assert [t.message_id for t in PromptHistory.load(store).turns] == ["msg_1"]
    path.write_bytes(b"not json\n")
    # a read-only caller (debug prompt) leaves the file; a turn sets it aside
    assert not PromptHistory.load(store, repair=False).exists and path.exists()
    assert not PromptHistory.load(store).exists
    assert not path.exists() and path.with_name(path.name + ".damaged").exists()


def _ids(h: PromptHistory) -> list[str]:
    return [t.message_id for t in h.turns]


def test_a_second_read_parses_only_what_was_appended_and_hands_out_the_same_turns(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holon_cli.model import provider
    from holon_cli.runtime.memory import history

    h = PromptHistory.load(store)
    h.start(None, None)
    for n in (1, 2, 3):
        h.append(f"msg_{n}", f"turn_{n}", _turn(n))
    first = PromptHistory.load(store)
    parsed: list[object] = []
    real = provider.item_from_dict
    monkeypatch.setattr(provider, "item_from_dict", lambda d: parsed.append(d) or real(d))
    hashed: list[int] = []
    real_digest = history._digest
    monkeypatch.setattr(history, "_digest", lambda raw, n: hashed.append(n) or real_digest(raw, n))
    again = PromptHistory.load(store)
    assert parsed == [] and _ids(again) == _ids(first)
    assert len(hashed) == 1  # the bytes read before are hashed to compare, not again to keep
    # the same objects: the replay capture's memo packs them once, not every turn
    assert all(a is b for a, b in zip(again.turns, first.turns, strict=True))
    assert again.turns is not first.turns  # a turn's own list: appending leaves the others'
    h.append("msg_4", "turn_4", _turn(4, rounds=2))
    grown = PromptHistory.load(store)
    assert len(parsed) == len(_turn(4, rounds=2))  # only the new line was parsed
    assert _ids(grown) == ["msg_1", "msg_2", "msg_3", "msg_4"]
    assert grown.items() == h.items() and grown.tokens() == h.tokens()


def test_a_read_after_the_file_changed_underneath_parses_it_whole(store: Any) -> None:
    h = PromptHistory.load(store)
    h.start(None, None)
    for n in (1, 2):
        h.append(f"msg_{n}", f"turn_{n}", _turn(n))
    path = history_path(store)
    assert _ids(PromptHistory.load(store)) == ["msg_1", "msg_2"]
    # an edit in place that keeps the length and only grows the file: not
    # taken for an append (the bytes read before are compared, not the size)
    raw = path.read_bytes()
    edited = raw.replace(b"question 1", b"QUESTION 1")
    assert len(edited) == len(raw)
    with path.open("r+b") as f:
        f.write(edited)
    got = PromptHistory.load(store)
    assert "QUESTION 1" in got.turns[0].items[1].text
    # a torn append is ignored, then read once it is whole
    line = json.dumps(PromptHistory._turn_record(h.turns[1]._replace(message_id="msg_9")))
    with path.open("ab") as f:
        f.write(line[:40].encode())
    assert _ids(PromptHistory.load(store)) == ["msg_1", "msg_2"]
    with path.open("ab") as f:
        f.write(line[40:].encode() + b"\n")
    assert _ids(PromptHistory.load(store)) == ["msg_1", "msg_2", "msg_9"]
    # a new epoch (a roll writes a new file): read whole, the old turns gone
    h.roll(keep_tokens=0, memory=None, summary="earlier")
    rolled = PromptHistory.load(store)
    assert rolled.epoch == h.epoch and rolled.summary == "earlier" and rolled.turns == []
    # damage after a good read: set aside as before
    with path.open("ab") as f:
        f.write(b'{"v": 1, "op": "nonsense"}\n')
    assert not PromptHistory.load(store).exists
    assert path.with_name(path.name + ".damaged").exists()


def test_the_read_cache_keeps_a_bounded_number_of_files(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holon_cli.runtime.memory import history

    cache = history._ReadCache(files=2)
    monkeypatch.setattr(history, "_READ", cache)
    from holon_cli.runtime.agents.lifecycle import create_agent

    for name in ("a", "b", "c"):
        s = create_agent(name)
        h = PromptHistory.load(s)
        h.start(None, None)
        h.append("msg_1", "turn_1", _turn(1))
        assert _ids(PromptHistory.load(s)) == ["msg_1"]
    assert len(cache._known) == 2 and all("/a/" not in k for k in cache._known)
    # and a bound on the bytes they came from, all files together: with room
    # for two files' bytes, a third read drops the oldest though ten may stay
    lengths = {k.rsplit("/agents/", 1)[1].split("/")[0]: v.length for k, v in cache._known.items()}
    cache.files = 10
    monkeypatch.setattr(history, "READ_CACHE_MAX_BYTES", lengths["b"] + lengths["c"])
    PromptHistory.load(open_agent("a"))
    assert sorted(k.rsplit("/agents/", 1)[1].split("/")[0] for k in cache._known) == ["a", "c"]
    # one file larger than the whole bound is not kept
    monkeypatch.setattr(history, "READ_CACHE_MAX_BYTES", lengths["b"] - 1)
    PromptHistory.load(open_agent("b"))
    assert "b" not in {k.rsplit("/agents/", 1)[1].split("/")[0] for k in cache._known}
    # a file with no whole line yet is not kept (nothing to know of it)
    path = holon_home / "loose.jsonl"
    cache.keep(path, b'{"op": "epoch"', 0, [])
    assert str(path) not in cache._known


def test_every_tool_call_keeps_a_result() -> None:
    call = ToolCall("call_x", "ExecCommand", {"cmd": "sleep 100"})
    items = [
        ConversationItem("user", "[message id=msg_1 kind=operator_prompt]\nwait"),
        ConversationItem("assistant", "", [call]),  # aborted while it ran
    ]
    out = answered(items)
    assert out[:2] == items and out[2].role == "tool" and out[2].call_id == "call_x"
    assert out[2].is_error and "interrupted" in out[2].text
    whole = _turn(1)
    assert answered(whole) is whole  # nothing to add: the same list


def test_a_roll_keeps_the_newest_rounds_and_a_larger_budget_keeps_more(store: Any) -> None:
    h = PromptHistory.load(store)
    h.start(None, None)
    for n in range(1, 5):
        h.append(f"msg_{n}", f"turn_{n}", _turn(n, rounds=2))
    units = rounds_of(h.turns[-1].items)
    assert [len(u) for u in units] == [2, 2, 2, 1]  # head, two rounds, the answer
    small = h.keep_newest(300)
    large = h.keep_newest(900)
    flat = [i.text for i in h.items()]

    def suffix(kept: list[Any]) -> list[str]:
        texts = [i.text for t in kept for i in t.items]
        assert texts == flat[len(flat) - len(texts) :]  # a suffix of the history
        return texts

    assert len(suffix(small)) < len(suffix(large))
    assert small[0].items[0].role == "assistant"  # the oldest kept turn lost its head
    before = h.compression_epoch
    found = history_path(store).read_bytes()
    dropped = h.roll(keep_tokens=300, memory=None, summary="# Earlier conversation\n...")
    assert dropped > 0 and h.compression_epoch == before + 1
    # the window as this turn found it is kept for `holon replay`, by the first roll only
    prev = history_path(store).with_name("prompt_history.prev.jsonl")
    assert prev.read_bytes() == found
    back = PromptHistory.load(store)
    assert back.epoch == h.epoch and back.summary == h.summary and back.items() == h.items()
    # the newest message was appended before the roll: a replayed settle skips it
    assert back.has("msg_4") and back.through == "msg_4"
    messages, answered_turns = shown_in(back.turns)
    assert "msg_4" in messages and "turn_4" in answered_turns
    h.roll(keep_tokens=100, memory=None, summary=None)  # the same turn rolls again
    assert prev.read_bytes() == found


def test_the_earlier_conversation_leaves_out_what_the_window_shows(
    tmp_path: Path, holon_home: Path
) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"loop": True, "steps": ["noted."]}))
    for text in ("alpha fact", "beta fact", "gamma fact"):
        admit(text)
        assert run_turn(None, cli_model=f"scripted:{script}", catalog=default_catalog()).ran
    store = open_agent(None)
    h = PromptHistory.load(store)
    last = h.turns[-1]
    messages, turns = shown_in([last])
    text = earlier_conversation(
        store, exclude_messages=messages, exclude_turns=turns, max_chars=4000
    )
    assert text is not None and text.startswith("# Earlier conversation")
    assert "alpha fact" in text and "beta fact" in text and "gamma fact" not in text


def test_the_journal_keeps_the_turns_blocks_and_its_update(store: Any) -> None:
    """A replayed turn sends the context blocks its first request carried,
    and the update a change appended (one record: never half of it)."""
    j = Journal(store, "turn_1", "msg_1")
    j.begin()
    j.add_item(ConversationItem("user", "[message id=msg_1 kind=operator_prompt]\nhi"))
    j.record_context([["turn mode", "Turn mode: x"]], {"turn mode": "Turn mode: x"})
    upd = ConversationItem("user", "# Context update\n\n## Work queue\n- one")
    j.record_context(
        [["turn mode", "Turn mode: x"]], {"turn mode": "Turn mode: x", "work queue": "q"}, upd
    )
    back = Journal.load(store)
    assert back is not None
    assert back.context == {
        "blocks": [["turn mode", "Turn mode: x"]],
        "shown": {"turn mode": "Turn mode: x", "work queue": "q"},
    }
    assert back.items[-1] == upd
    lines = [json.loads(x) for x in back.path.read_text().splitlines()]
    assert sum(1 for r in lines if r.get("op") == "context") == 2


@pytest.mark.parametrize(
    "damage",
    [
        b'{"v": 1, "op": "epoch", "epoch": 0, "memory": "text", "summary": null}\n',
        b'{"v": 1, "op": "epoch", "epoch": null}\n',
        b'{"v": 2, "op": "epoch", "epoch": 0}\n',
        b"[1, 2]\n",
        b'{"v": 1, "op": "epoch", "epoch": 0}\n{"v": 1, "op": "turn", "items": "x"}\n',
        b'{"v": 1, "op": "epoch", "epoch": 0}\n{"v": 1, "op": "turn", "message_id": "m", '
        b'"items": [{"role": "user", "text": 5}]}\n',
        b'{"v": 1, "op": "epoch", "epoch": 0}\n{"v": 1, "op": "turn", "message_id": "m", '
        b'"items": [{"role": "assistant", "tool_calls": ["call"]}]}\n',
        b"\xff\xfe\x00",
        b"[" * 100_000 + b"\n",
    ],
)
def test_any_damage_reads_as_a_new_window_never_an_error(store: Any, damage: bytes) -> None:
    path = history_path(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(damage)
    h = PromptHistory.load(store)
    assert not h.exists and h.turns == []
    assert path.with_name(path.name + ".damaged").read_bytes() == damage


def test_a_turn_over_a_damaged_history_starts_a_new_window(store: Any, tmp_path: Path) -> None:
    path = history_path(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"garbage\n")
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"steps": ["fine."]}))
    admit("hello")
    res = run_turn(None, cli_model=f"scripted:{script}", catalog=default_catalog())
    assert res.ran and res.status == "completed"
    h = PromptHistory.load(store)
    assert h.exists and len(h.turns) == 1 and h.items()[-1].text == "fine."


def test_the_budgets_cuts_are_journaled_so_a_replay_sends_the_same_bytes(store: Any) -> None:
    """A clipped result or a shrunk block depends on the provider's reported
    sizes, which a replayed turn does not have: the journal keeps them."""
    from holon_cli.runtime.turn.fit import ContextFit
    from holon_cli.runtime.turn.recorder import TurnRecorder

    j = Journal(store, "turn_1", "msg_1")
    j.begin()
    j.record_fit(
        {"clip": 300, "shrinks": 2, "summary_shown": False, "memory_chars": 600, "queue_chars": 800}
    )
    back = Journal.load(store)
    assert back is not None
    msg: Any = {"id": "msg_1"}
    fit = ContextFit(back, TurnRecorder(store, msg, "turn_1"), {})
    assert fit.window.clip == 300 and fit.shrinks == 2 and not fit.summary_shown
    assert (fit.memory_chars, fit.queue_chars) == (600, 800)
