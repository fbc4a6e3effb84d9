"""The projection benchmark (issues 23, 44) keeps its own promises: its cases
pass every invariant, each invariant catches a broken projection, and its
prompt-cache figures come from the bytes the transports sent: a case with one
request per turn has no pair within a turn (n/a, never a vacuous 1.000), and a
transport that misses the goal makes it exit 1."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from holon_cli.providers.anthropic import AnthropicTransport
from holon_cli.providers.openai_chat import OpenAIChatTransport
from holon_cli.providers.openai_responses import OpenAIResponsesTransport

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "projection_eval.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_projection_eval", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    # the benchmark wraps the transports' complete(): put them back after
    for cls in (OpenAIResponsesTransport, OpenAIChatTransport, AnthropicTransport):
        monkeypatch.setattr(cls, "complete", cls.complete)
    monkeypatch.setenv("HOLON_HOME", str(tmp_path / "unused"))  # restored after the run
    # the homes live where the benchmark makes them (a fresh temporary folder
    # it removes): a long pytest path in every prompt would not fit the 2k budget
    monkeypatch.delenv("HOLON_BENCH_TOOLS", raising=False)
    return _load()


@pytest.mark.slow
def test_one_case_over_the_wire_reports_per_transport_and_no_vacuous_ratio(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--case", "short_reference", "--transport", "anthropic", "--json"]
    assert bench.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    runs = out["runs"]
    assert [r["budget"] for r in runs] == [2000, 4000, 16000]
    assert all(r["pass"] for r in runs)
    # one request per turn: nothing to measure within a turn
    assert all(r["within"]["pairs"] == 0 and r["within"]["kept"] is None for r in runs)
    across = next(c for c in out["cache"] if c["pairs_of"] == "across")
    assert across["transport"] == "anthropic" and across["pairs"] > 0
    assert across["kept"] == 1.0 and across["extends"] == across["pairs"]
    assert len(out["load"]) == 6 and out["goal"] == 0.95


@pytest.mark.slow
def test_a_missed_goal_exits_1(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    bench.GOAL = 1.01  # no layout keeps more than all of the previous request
    assert bench.main(["--case", "short_reference", "--transport", "chat"]) == 1
    assert "MISSED" in capsys.readouterr().out


@pytest.mark.slow
def test_the_projection_benchmark_passes_and_its_mutations_are_caught(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = ["long_tool_loop", "wait_external_resume", "workitem_switch_return"]
    argv = [a for c in cases for a in ("--case", c)]
    assert bench.main([*argv, "--mutate"]) == 0
    out = capsys.readouterr().out
    assert "36 of 36 transport x case x budget runs keep every invariant" in out
    assert "MISSED" not in out and out.count("caught") >= 15
