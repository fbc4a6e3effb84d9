"""The spec's Additional State Fields (runtime-spec.md "Additional State
Fields", L1320-1331; AgentState L1107-1131): ``compactedMessageCount``,
``contextSummary``, ``toolLatency`` and ``executionProfile``, snake_case on
disk and in ``--json``, folded in once per settled turn; ``holon status``
shows ``last_brief_at`` (AgentState ``lastBriefAt``, L1117)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn, stats
from holon_cli.runtime.turn.journal import Journal
from holon_cli.runtime.turn.settle import finish_agent_state
from holon_cli.tools.catalog import default_catalog

KB_CMD = "printf '%01024d\\n' 0"


class Only:
    """The default catalog cut down to some tools (a small fixed frame)."""

    def __init__(self, *names: str) -> None:
        self.cat = default_catalog()
        self.specs = [s for s in self.cat.specs if s.name in names]
        self.guidance = self.cat.guidance

    def execute(self, ctx: Any, call: Any) -> Any:
        return self.cat.execute(ctx, call)


def script(tmp_path: Path, steps: list[Any], name: str = "s") -> str:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def state() -> dict[str, Any]:
    return dict(open_agent(None).read_record()["state"])


def test_a_new_agent_has_the_fields_at_their_zero_values() -> None:
    """AgentState (L1118-1125): compactedMessageCount and toolLatency and
    executionProfile are not optional; contextSummary is."""
    st = state()
    assert st["compacted_message_count"] == 0
    assert st["context_summary"] is None
    assert st["tool_latency"] == []
    prof = st["execution_profile"]
    assert prof["turns"] == 0 and prof["last_turn_id"] is None


def test_a_turn_folds_its_tool_calls_and_its_timing_in(tmp_path: Path) -> None:
    """toolLatency: per-tool timing metrics; executionProfile: descriptive
    metadata about historical performance (L1328-1329)."""
    call = {"name": "ExecCommand", "arguments": {"cmd": "true"}}
    bad = {"name": "ExecCommand", "arguments": {}}  # a tool error: counted as one
    model = script(
        tmp_path,
        [{"tool_calls": [call, call]}, {"tool_calls": [bad]}, {"text": "done"}],
    )
    admit("run it")
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.status == "completed"
    st = state()
    (row,) = st["tool_latency"]
    assert row["tool_name"] == "ExecCommand"
    assert row["calls"] == 3 and row["errors"] == 1
    assert row["max_ms"] >= row["mean_ms"] >= 0 and row["total_ms"] >= row["max_ms"]
    assert row["last_at"] == st["last_turn_at"]
    prof = st["execution_profile"]
    assert prof["turns"] == 1 and prof["aborted_turns"] == 0
    assert prof["model_rounds"] == 3 and prof["tool_calls"] == 3
    assert prof["last_turn_id"] == res.turn_id
    assert prof["last_turn_ms"] == prof["total_turn_ms"] == res.duration_ms
    assert prof["mean_tool_calls_per_turn"] == 3.0

    # a second turn adds to both
    model2 = script(tmp_path, [{"tool_calls": [call]}, {"text": "again"}], "s2")
    admit("once more")
    run_turn(None, cli_model=model2, catalog=default_catalog())
    st = state()
    assert st["tool_latency"][0]["calls"] == 4
    assert st["execution_profile"]["turns"] == 2
    assert st["execution_profile"]["mean_tool_calls_per_turn"] == 2.0
    assert st["total_model_rounds"] == 5


def test_compaction_is_counted_and_its_summary_kept(tmp_path: Path) -> None:
    """compactedMessageCount: messages removed from the active window;
    contextSummary: the legacy compacted fallback summary (L1324-1326)."""
    from holon_cli.store.layout import home_root

    home_root().mkdir(parents=True, exist_ok=True)
    (home_root() / "config.yaml").write_text(
        yaml.safe_dump({"runtime": {"context_budget_tokens": 3000}})
    )
    call = {"name": "ExecCommand", "arguments": {"cmd": KB_CMD}}
    model = script(tmp_path, [{"tool_calls": [call]}] * 14 + [{"text": "all done"}])
    admit("run the checks")
    res = run_turn(None, cli_model=model, catalog=Only("ExecCommand"))
    assert res.status == "completed", res
    store = open_agent(None)
    compacted = [e["data"] for e in store.events.records() if e["kind"] == "context_compacted"]
    assert compacted
    st = state()
    assert st["compacted_message_count"] == sum(c["compacted_message_count"] for c in compacted)
    assert st["compacted_message_count"] == st["working_memory"]["compacted_message_count"]
    summary = st["context_summary"]
    assert summary and "context compacted" in summary.lower()
    assert len(summary) <= stats.SUMMARY_CHARS
    assert st["execution_profile"]["compacted_turns"] == 1

    # a turn that compacts nothing keeps the count and the summary
    admit("thanks")
    small = script(tmp_path, ["ok"], "s2")
    run_turn(None, cli_model=small, catalog=Only("ExecCommand"))
    st2 = state()
    assert st2["compacted_message_count"] == st["compacted_message_count"]
    assert st2["context_summary"] == summary


def test_a_replayed_settle_counts_nothing_twice(tmp_path: Path) -> None:
    """Updated at the turn boundary only (L1348-1350), and once: a settle
    replayed after a kill between the agent update and the journal's removal
    (turn/settle.py) adds neither totals nor latency again."""
    store = open_agent(None)
    j = Journal(store, "turn_x", "msg_x")
    j.counted = {"input_tokens": 10, "output_tokens": 5, "rounds": 2}
    j.latency = [("ExecCommand", 12.5, True)]
    s: Any = {
        "turn_id": "turn_x",
        "turn_index": 1,
        "status": "completed",
        "closure": {"outcome": "completed", "runtime_posture": "awake"},
        "final_text": "x",
        "brief": None,
        "failure_artifact": None,
        "failure_kind": None,
        "sleep": None,
        "turn_skills": {},
        "duration_ms": 40,
        "completed_at": "2026-05-28T20:27:00Z",
    }
    finish_agent_state(store, s, j)
    finish_agent_state(store, s, j)
    st = state()
    assert st["total_input_tokens"] == 10 and st["total_model_rounds"] == 2
    assert st["tool_latency"][0]["calls"] == 1
    assert st["execution_profile"]["turns"] == 1


def test_latency_is_bounded_and_keeps_the_most_recent_tools() -> None:
    prev = stats.fold_latency([], [(f"t{i:03d}", 1.0, True) for i in range(stats.MAX_TOOLS)], "a")
    out = stats.fold_latency(prev, [("new", 3.0, False)], "b")
    names = [r["tool_name"] for r in out]
    assert len(out) == stats.MAX_TOOLS and "new" in names and "t000" not in names
    assert names == sorted(names)
    row = next(r for r in out if r["tool_name"] == "new")
    assert (row["calls"], row["errors"], row["mean_ms"], row["last_at"]) == (1, 1, 3.0, "b")


def test_status_shows_the_fields_and_last_brief_at(tmp_path: Path, script_runner: Any) -> None:
    """`holon status` shows last_brief_at (issue 37 item 1); --json carries
    the snake_case fields."""
    model = script(tmp_path, ["hello there"])
    admit("hi")
    run_turn(None, cli_model=model, catalog=default_catalog())
    st = state()
    assert st["last_brief_at"]
    brief = open_agent(None).ledger("briefs").last()
    assert brief and st["last_brief_at"] == brief["at"]
    r = script_runner.run(["holon", "status", "--json"])
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)["data"]
    assert data["last_brief_at"] == st["last_brief_at"]
    for key in ("compacted_message_count", "context_summary", "tool_latency"):
        assert key in data
    assert data["execution_profile"]["turns"] == 1
    r = script_runner.run(["holon", "status"])
    assert r.returncode == 0
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("last brief"))
    assert st["last_brief_at"] in line
    assert any(ln.strip().startswith("turns") for ln in r.stdout.splitlines())
