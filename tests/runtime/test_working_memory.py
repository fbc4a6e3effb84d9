"""Working memory and episodes (issue 23 items 1-3): state fields updated only
when a turn settles, episodes finalized on their boundaries and appended once,
the prompt's working-memory block, and the operator fact that used to be gone
after 7 turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.providers.scripted import ScriptedTransport
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.memory import episodes as ep
from holon_cli.runtime.memory import working
from holon_cli.runtime.memory.search import memory_search
from holon_cli.runtime.memory.sources import episode_doc
from holon_cli.runtime.turn import run_turn
from holon_cli.tools.catalog import default_catalog

FACT = "the staging database listens on port 54329 (codename kestrel-blue)"


def script(tmp_path: Path, steps: list[Any], name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def wm_of(store: Any) -> dict[str, Any]:
    return dict(store.read_record()["state"].get("working_memory") or {})


def turn(model: str) -> Any:
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.ran, res
    return res


@pytest.fixture
def prompts(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every provider request the scripted model receives."""
    seen: list[Any] = []
    real = ScriptedTransport.complete

    def capture(self: ScriptedTransport, request: Any) -> Any:
        seen.append(request)
        return real(self, request)

    monkeypatch.setattr(ScriptedTransport, "complete", capture)
    return seen


def request_text(req: Any) -> str:
    f = req.frame
    parts = [f.system_prompt, *f.system_blocks, *f.context_blocks]
    return "\n".join(parts + [i.text for i in [*req.history, *req.conversation]])


# ------------------------------------------------------------ state fields


def test_a_settled_turn_derives_working_memory_from_its_effects(tmp_path: Path) -> None:
    patch = "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+hello\n"
    model = script(
        tmp_path,
        [
            {"tool_calls": [{"name": "ApplyPatch", "arguments": {"patch": patch}}]},
            {"tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "false"}}]},
            {"tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "cat notes.txt"}}]},
            {"text": "Wrote notes.txt; `false` failed as expected."},
        ],
    )
    store = open_agent(None)
    admit("write notes.txt, then check it")
    assert wm_of(store) == {}
    turn(model)
    wm = working.state_of(wm_of(store))
    # one settled turn = one revision, however many rounds it had
    assert wm["working_memory_revision"] == 1
    assert wm["last_prompted_working_memory_revision"] == 0
    cur = wm["current_working_memory"]
    assert cur is not None
    assert cur["recent_files"] == ["notes.txt"]
    assert cur["recent_commands"] == [
        {"cmd": "false", "exit_status": 1},
        {"cmd": "cat notes.txt", "exit_status": 0},
    ]
    assert cur["operator_requests"][0].endswith("write notes.txt, then check it")
    assert cur["last_result"] == "Wrote notes.txt; `false` failed as expected."
    assert "touched notes.txt" in str(wm["pending_working_memory_delta"])
    assert "ran 2 command(s), 1 failed" in str(wm["pending_working_memory_delta"])
    assert wm["active_episode_id"] is not None and wm["archived_episode_count"] == 0


def test_the_next_prompt_projects_working_memory_and_the_delta(
    tmp_path: Path, prompts: list[Any], holon_home: Path
) -> None:
    """The next turn carries the earlier one in full (the history, before its
    own blocks) and the delta after it; working memory is the conversation
    window's: it joins the stable prefix when older turns leave it (a roll),
    and the frame's cache record names its revision (issue 37 item 1)."""
    from holon_cli.runtime.memory import compaction as cp

    model = script(tmp_path, ["first answer", "second answer", "third answer"])
    admit("please remember the word heliotrope")
    turn(model)
    first = prompts[-1]
    assert not any("# Working memory" in b for b in first.frame.context_blocks)
    assert first.history == []
    admit("anything new?")
    turn(model)
    second = prompts[-1]
    assert "heliotrope" in second.history[1].text  # turn 1's message, as it was sent
    assert second.history[-1].text == "first answer"
    turn_blocks = second.frame.turn_context
    delta = next(b for b in turn_blocks if b.startswith("# Since your last turn"))
    assert "working memory revision 0 -> 1" in delta
    assert not any("# Working memory" in b for b in second.frame.context_blocks)
    assert second.frame.cache.working_memory_revision == 0
    # the instruction prefix and cache key do not move with memory
    assert second.frame.prompt_cache_key == first.frame.prompt_cache_key
    assert second.frame.system_blocks == first.frame.system_blocks
    wm = working.state_of(wm_of(open_agent(None)))
    assert wm["last_prompted_working_memory_revision"] == 1
    # a budget the two earlier turns outgrow: the window rolls, and the
    # working memory (revision 2, with the fact) leads the conversation
    fixed = cp.fixed_tokens(second.frame, second.tools)
    (holon_home / "config.yaml").write_text(f"runtime:\n  context_budget_tokens: {fixed + 200}\n")
    admit("and now?")
    turn(model)
    third = prompts[-1]
    block = next(b for b in third.frame.stable_context if b.startswith("# Working memory"))
    assert "heliotrope" in block and "(revision 2)" in block
    assert third.frame.cache.working_memory_revision == 2
    assert third.frame.cache.compression_epoch > second.frame.cache.compression_epoch


def test_an_unchanged_turn_keeps_the_revision(tmp_path: Path) -> None:
    d = _delta("turn_1", 1, authority="external_evidence")
    wm1, _ = working.apply_delta(working.empty_state(), d, agent_id="main", now="t")
    d2 = {**d, "turn_id": "turn_2", "turn_index": 2}
    wm2, _ = working.apply_delta(wm1, d2, agent_id="main", now="t")  # type: ignore[arg-type]
    assert wm2["working_memory_revision"] == wm1["working_memory_revision"] == 1
    # applying the same turn again changes nothing (exactly once)
    assert working.apply_delta(wm2, d2, agent_id="main", now="t") == (wm2, [])  # type: ignore[arg-type]


def test_external_evidence_text_never_enters_working_memory() -> None:
    d = _delta("turn_1", 1, authority="external_evidence")
    d["input_excerpt"] = ""  # turn_delta keeps no text of evidence
    wm, _ = working.apply_delta(working.empty_state(), d, agent_id="main", now="t")
    assert wm["current_working_memory"] is not None
    assert wm["current_working_memory"]["operator_requests"] == []


def _delta(turn_id: str, index: int, **kw: Any) -> Any:
    d = {
        "turn_id": turn_id,
        "turn_index": index,
        "message_id": f"msg_{index}",
        "message_kind": "operator_input",
        "authority_class": kw.get("authority", "operator_instruction"),
        "input_excerpt": kw.get("text", f"request {index}"),
        "status": "completed",
        "work_item_id": kw.get("work_item_id"),
        "workspace_id": "agent_home",
        "work_focus": None,
        "open_work_items": [],
        "files_touched": kw.get("files", []),
        "commands": kw.get("commands", []),
        "completed_work_item": kw.get("completed", False),
        "waiting": kw.get("waiting"),
        "final_excerpt": f"answer {index}",
        "prompted_revision": 0,
        "compacted_message_count": 0,
    }
    return d


# ------------------------------------------------------------ episodes


def _fold(deltas: list[Any]) -> tuple[Any, list[Any]]:
    wm = working.empty_state()
    out: list[Any] = []
    for d in deltas:
        wm, done = working.apply_delta(wm, d, agent_id="main", now="2026-01-01T00:00:00Z")
        out += done
    return wm, out


def test_an_episode_ends_on_a_switch_of_work_item() -> None:
    wm, done = _fold(
        [
            _delta("turn_1", 1, work_item_id="wi_a", files=["a.py"]),
            _delta("turn_2", 2, work_item_id="wi_a"),
            _delta("turn_3", 3, work_item_id="wi_b"),
        ]
    )
    assert [e["boundary"] for e in done] == ["work_item_switch"]
    e = done[0]
    assert e["episode_id"] == "ep_turn_1" and e["work_item_id"] == "wi_a"
    assert e["turn_range"] == [1, 2] and e["message_range"] == ["msg_1", "msg_2"]
    assert e["touched_files"] == ["a.py"]
    assert wm["active_episode_id"] == "ep_turn_3" and wm["archived_episode_count"] == 1


@pytest.mark.parametrize(
    ("kw", "boundary"),
    [
        ({"completed": True, "work_item_id": "wi_a"}, "completion_checkpoint"),
        ({"waiting": "asleep (done for today)"}, "waiting_boundary"),
    ],
)
def test_an_episode_ends_at_a_checkpoint_or_a_wait(kw: dict[str, Any], boundary: str) -> None:
    wm, done = _fold([_delta("turn_1", 1), _delta("turn_2", 2, **kw)])
    assert [e["boundary"] for e in done] == [boundary]
    assert wm["active_episode_builder"] is None and wm["active_episode_id"] is None


def test_an_episode_ends_at_the_hard_cap_with_a_bounded_summary() -> None:
    long = "x" * 3000
    deltas = [_delta(f"turn_{i}", i, text=f"{i} {long}") for i in range(1, 20)]
    _, done = _fold(deltas)
    assert [e["boundary"] for e in done] == ["hard_cap", "hard_cap"]
    assert [e["turn_range"] for e in done] == [[1, 8], [9, 16]]
    for e in done:
        assert len(e["summary"]) <= ep.SUMMARY_CHARS


def test_the_episode_record_has_the_shape_memory_search_indexes() -> None:
    _, done = _fold([_delta("turn_1", 1, commands=[{"cmd": "pytest -q", "exit_status": 0}])])
    _, done = _fold(
        [
            _delta("turn_1", 1, commands=[{"cmd": "pytest -q", "exit_status": 0}]),
            _delta("turn_2", 2, completed=True),
        ]
    )
    rec = done[0]
    for key in ("episode_id", "work_item_id", "workspace_id", "turn_range", "touched_files"):
        assert key in rec
    assert rec["commands"] == ["pytest -q"] and rec["verification"][0]["exit_status"] == 0
    doc = episode_doc(open_agent(None), rec)
    assert doc is not None and "pytest -q" in doc.body


def test_append_once_writes_an_episode_a_single_time() -> None:
    store = open_agent(None)
    _, done = _fold([_delta("turn_1", 1, completed=True)])
    assert ep.append_once(store, done[0]) is True
    assert ep.append_once(store, done[0]) is False
    assert [r["episode_id"] for r in store.ledger("context_episodes").records()] == ["ep_turn_1"]


# --------------------------------------------- the scenario (7 turns)


@pytest.mark.slow
def test_an_operator_fact_survives_twelve_unrelated_turns(
    tmp_path: Path, prompts: list[Any]
) -> None:
    """Tried as a new user would: before, the fact was gone from the prompt
    after 7 turns (a 4,000-character transcript tail)."""
    reply = "Here is a long answer. " * 60  # ~1,400 characters
    model = script(tmp_path, [reply] * 14)
    admit(f"Remember this for later: {FACT}.")
    turn(model)
    for i in range(12):
        admit(f"Unrelated question {i}: summarise topic {i} at length.")
        turn(model)
    admit("Which port does staging use?")
    turn(model)
    last = prompts[-1]
    assert FACT in request_text(last)  # in the prompt (recent conversation)
    store = open_agent(None)
    wm = working.state_of(wm_of(store))
    assert wm["working_memory_revision"] == 14
    assert wm["archived_episode_count"] >= 1  # turns 1-8 became an episode
    episodes = store.ledger("context_episodes").records()
    assert episodes[0]["turn_range"] == [1, 8] and FACT[:60] in episodes[0]["summary"]
    # and findable by the model
    found = memory_search(store, "kestrel-blue")["results"]
    assert any(r["kind"] == "episode" for r in found), found


# -------------------------------------------- exactly once across a kill


class _Killed(BaseException):
    """Stands for SIGKILL: nothing of the turn's own error handling runs."""


@pytest.mark.parametrize("where", ["before_memory", "after_episodes"])
def test_a_kill_between_settle_and_the_memory_update_replays_to_the_same_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    from holon_cli.runtime.turn import settle

    steps = ["one"] * 7 + ["the eighth"]  # the eighth turn finalizes an episode (hard cap)
    model = script(tmp_path, steps)
    for i in range(7):
        admit(f"message {i}")
        turn(model)
    store = open_agent(None)
    before = working.state_of(wm_of(store))
    real = settle._settle_memory

    def killed(*a: Any, **kw: Any) -> Any:
        if where == "after_episodes":
            real(*a, **kw)
        raise _Killed

    monkeypatch.setattr(settle, "_settle_memory", killed)
    admit("message 7")
    with pytest.raises(_Killed):
        run_turn(None, cli_model=model, catalog=default_catalog())
    assert working.state_of(wm_of(store)) == before  # not applied yet
    monkeypatch.setattr(settle, "_settle_memory", real)
    res = run_turn(None, cli_model=model, catalog=default_catalog())  # repairs, then idle
    assert res.ran is False
    wm = working.state_of(wm_of(store))
    assert wm["working_memory_revision"] == before["working_memory_revision"] + 1 == 8
    assert wm["archived_episode_count"] == 1
    eps = store.ledger("context_episodes").records()
    assert [e["turn_range"] for e in eps] == [[1, 8]]
    # and nothing of it is applied twice by a later turn
    admit("message 8")
    steps_file = Path(model.removeprefix("scripted:"))
    steps_file.write_text(yaml.safe_dump({"steps": [*steps, "ninth"]}))
    turn(model)
    assert working.state_of(wm_of(store))["archived_episode_count"] == 1


# ------------------------------------------------------ damaged ledger


def test_a_damaged_episode_line_does_not_stop_turns_and_home_check_reports_it(
    tmp_path: Path,
) -> None:
    from holon_cli.runtime.inspect import home_check

    store = open_agent(None)
    _, done = _fold([_delta("turn_x", 1, completed=True)])
    ep.append_once(store, done[0])
    path = store.ledger("context_episodes").path
    path.write_bytes(b"{not json\n" + path.read_bytes())
    model = script(tmp_path, ["ok"] * 8)
    for i in range(8):  # the eighth turn appends an episode after the damaged line
        admit(f"m{i}")
        assert turn(model).status == "completed"
    assert json.loads(path.read_bytes().splitlines()[-1])["turn_range"] == [1, 8]
    report = home_check()
    assert any(str(path) in str(p) for p in report["problems"]), report


def test_the_working_memory_block_keeps_to_its_share_of_the_budget() -> None:
    wm = working.empty_state()
    for i in range(1, 12):
        d = _delta(f"turn_{i}", i, text=f"request {i} " + "y" * 380, files=[f"f{i}.py"])
        wm, _ = working.apply_delta(wm, d, agent_id="main", now="t")
    full = working.render(wm)
    assert full is not None and "request 11" in full and "request 4 " in full
    small = working.render(wm, max_chars=working.memory_chars_for(2000))
    assert small is not None and len(small) <= 1000
    # the newest request survives; the oldest went first
    assert "request 11" in small and "request 4 " not in small
    assert working.render(wm, max_chars=working.memory_chars_for(2000)) == small


def test_the_agent_state_is_not_touched_by_memory_during_the_tool_loop(
    tmp_path: Path, commands_on_host: Path
) -> None:
    store = open_agent(None)
    agent_file = store.layout.agent_file
    cat = {"name": "ExecCommand", "arguments": {"cmd": f"cat '{agent_file}'"}}
    model = script(tmp_path, [{"tool_calls": [cat]}, "first", {"tool_calls": [cat]}, "second"])
    admit("one")
    turn(model)
    results = [r for r in store.ledger("transcript").records() if r["kind"] == "tool_result"]
    assert "working_memory" not in results[-1]["output"]  # mid-loop: nothing yet
    admit("two")
    turn(model)
    results = [r for r in store.ledger("transcript").records() if r["kind"] == "tool_result"]
    # the second turn's loop sees revision 1 (the first turn's), not its own
    seen = json.loads(json.loads(results[-1]["output"])["stdout_preview"])
    assert seen["state"]["working_memory"]["working_memory_revision"] == 1
    assert working.state_of(wm_of(store))["working_memory_revision"] == 2


def test_switching_work_items_between_turns_archives_the_first_episode(tmp_path: Path) -> None:
    from holon_cli.runtime import workitems as wi

    store = open_agent(None)
    a = wi.create_work_item(store, "write the parser")["work_item"]["id"]
    wi.pick_work_item(store, a)
    model = script(tmp_path, ["parser started", "parser progress", "scheduler started"])
    for text in ("start the parser", "continue the parser"):
        admit(text)
        turn(model)
    b = wi.create_work_item(store, "fix the scheduler")["work_item"]["id"]
    wi.pick_work_item(store, b, reason="operator asked")
    admit("now the scheduler")
    turn(model)
    eps = store.ledger("context_episodes").records()
    assert [(e["work_item_id"], e["boundary"], e["turn_range"]) for e in eps] == [
        (a, "work_item_switch", [1, 2])
    ]
    assert "start the parser" in eps[0]["summary"] and "parser progress" in eps[0]["summary"]
    wm = working.state_of(wm_of(store))
    cur = wm["current_working_memory"]
    assert cur is not None and cur["active_work_item"] is not None
    assert cur["active_work_item"]["id"] == b and wm["archived_episode_count"] == 1


def test_home_check_names_an_episode_line_of_the_wrong_shape() -> None:
    from holon_cli.runtime.inspect import home_check

    store = open_agent(None)
    _, done = _fold([_delta("turn_x", 1, completed=True)])
    ep.append_once(store, done[0])
    path = store.ledger("context_episodes").path
    path.write_bytes(path.read_bytes() + b'{"v": 1, "episode_id": 7, "summary": "s"}\n')
    report = home_check()
    found = [p for p in report["problems"] if str(path) in str(p)]
    assert found and "episode_id" in str(found[0]), report["problems"]


def test_a_turn_replayed_after_a_kill_keeps_the_effects_of_its_earlier_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool calls' effects are journaled with their round, so the settled
    delta of a replayed turn still names the files and commands of the
    rounds before the kill."""
    patch = "--- /dev/null\n+++ b/kept.txt\n@@ -0,0 +1 @@\n+kept\n"
    model = script(
        tmp_path,
        [
            {"tool_calls": [{"name": "ApplyPatch", "arguments": {"patch": patch}}]},
            {"tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "cat kept.txt"}}]},
            "done",
        ],
    )
    real = ScriptedTransport.complete
    calls = {"n": 0}

    def dies_on_third(self: ScriptedTransport, request: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise _Killed
        return real(self, request)

    monkeypatch.setattr(ScriptedTransport, "complete", dies_on_third)
    admit("make kept.txt and show it")
    with pytest.raises(_Killed):
        run_turn(None, cli_model=model, catalog=default_catalog())
    monkeypatch.setattr(ScriptedTransport, "complete", real)
    assert turn(model).status == "completed"
    cur = working.state_of(wm_of(open_agent(None)))["current_working_memory"]
    assert cur is not None and cur["recent_files"] == ["kept.txt"]
    assert cur["recent_commands"] == [{"cmd": "cat kept.txt", "exit_status": 0}]
