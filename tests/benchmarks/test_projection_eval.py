"""The projection benchmark (issue 23) keeps its own promises: its cases
pass every invariant and each invariant catches a broken projection."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from holon_cli.providers.scripted import ScriptedTransport

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "projection_eval.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_projection_eval", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_the_projection_benchmark_passes_and_its_mutations_are_caught(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(ScriptedTransport, "complete", ScriptedTransport.complete)  # restored
    monkeypatch.setenv("HOLON_HOME", str(tmp_path / "unused"))  # restored after the run
    bench = _load()
    cases = ["long_tool_loop", "wait_external_resume", "workitem_switch_return"]
    argv = [a for c in cases for a in ("--case", c)]
    assert bench.main([*argv, "--mutate"]) == 0
    out = capsys.readouterr().out
    assert "9 of 9 case x budget runs keep every invariant" in out
    assert "MISSED" not in out and out.count("caught") >= 15
