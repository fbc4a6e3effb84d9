"""The benchmarks' shared helper (``benchmarks/benchkit.py``): sides paired in
alternating order, ratios and percentiles named honestly, goals that make a
script exit 1, and every script's arguments checked before it measures."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bk = _load("benchkit")


def test_two_sides_alternate_which_goes_first() -> None:
    calls: list[str] = []

    def side(name: str, value: float):  # type: ignore[no-untyped-def]
        def run() -> float:
            calls.append(name)
            return value

        return run

    got = bk.interleave({"A": side("A", 1.0), "B": side("B", 2.0)}, 4, warmup=1)
    # warm-up round, then A B / B A alternating: neither side always goes first
    assert calls == ["A", "B", "B", "A", "A", "B", "B", "A", "A", "B"]
    assert got == {"A": [1.0] * 4, "B": [2.0] * 4}  # the warm-up round is not kept


def test_more_sides_rotate_and_each_round_is_a_set() -> None:
    calls: list[str] = []
    sides = {n: (lambda n=n: calls.append(n) or len(calls)) for n in "XYZ"}
    got = bk.interleave(sides, 3, warmup=0)
    assert calls == ["X", "Y", "Z", "Y", "Z", "X", "Z", "X", "Y"]
    # the i-th values of the sides were measured in the same round
    assert got == {"X": [1, 6, 8], "Y": [2, 4, 9], "Z": [3, 5, 7]}


def test_interleave_refuses_no_rounds() -> None:
    with pytest.raises(ValueError):
        bk.interleave({"A": lambda: 1.0}, 0)


def test_ratios_are_per_pair_and_refuse_unpaired_sides() -> None:
    assert bk.ratios([2.0, 3.0, 8.0], [1.0, 3.0, 4.0]) == [2.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="unpaired"):
        bk.ratios([1.0], [1.0, 2.0])
    s = bk.spread([3.0, 1.0, 2.0])
    assert (s.n, s.min, s.median, s.max) == (3, 1.0, 2.0, 3.0)
    line = bk.ratio_line("big / empty", [1.5, 0.9, 1.1])
    assert line == "big / empty: median 1.10x (min 0.90x, max 1.50x; 3 pairs)"
    assert bk.spread_json([1.0, 2.0]) == {"n": 2, "min": 1.0, "median": 1.5, "max": 2.0}


def test_a_tail_percentile_is_named_max_when_samples_are_too_few() -> None:
    fifty = [float(i) for i in range(1, 51)]
    assert bk.tail(fifty, 99) == ("max", 50.0)  # 50 samples have no p99: it is their max
    hundred = [float(i) for i in range(1, 101)]
    assert bk.tail(hundred, 99) == ("p99", 99.0)
    assert bk.tail(hundred, 50) == ("p50", 50.0)
    assert bk.tail([5.0] * 10, 90) == ("p90", 5.0)
    assert bk.samples_for(99) == 100 and bk.samples_for(90) == 10
    assert bk.tail(hundred[:99], 99)[0] == "max"


def test_goals_pass_miss_and_the_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    g = bk.Goals()
    assert g.check("fast enough", 10.0, "<=", 15, " ms")
    assert g.exit_code() == 0
    assert not g.check("small enough", 1.3, "<=", 1.2, "x")
    assert not g.check("a number at all", float("nan"), "<=", 1.0)  # NaN never meets a goal
    assert g.check("at least", 3.2, ">=", 3.2)
    assert g.exit_code() == 1
    assert [m.name for m in g.missed] == ["small enough", "a number at all"]
    assert g.lines()[:2] == [
        "PASS: fast enough 10 ms (goal <= 15 ms)",
        "MISS: small enough 1.30x (goal <= 1.20x)",
    ]
    with pytest.raises(ValueError):
        g.check("bad", 1.0, "~", 1.0)
    load = bk.Load()
    assert bk.finish(g, load, {"figure": 1}, as_json=True) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["figure"] == 1
    assert len(out["goals"]) == 4 and out["goals"][1]["met"] is False
    assert len(out["load"]["start"]) == 3 and len(out["load"]["end"]) == 3


def test_a_report_without_goals_exits_0_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert bk.finish(bk.Goals(), bk.Load()) == 0
    out = capsys.readouterr().out
    assert "load average (1/5/15 min): start" in out and "no goal: a report" in out


def test_run_child_times_a_command_and_its_peak_memory(tmp_path: Path) -> None:
    got = bk.run_child([sys.executable, "-c", "x = bytearray(60 * 1024 * 1024)"], rss=True)
    assert got.code == 0 and got.wall_ms > 0 and got.cpu_ms >= 0
    if bk.can_measure_rss():
        # the command's own peak, not this process's (which a vforked child would carry)
        assert 60 <= got.peak_rss_mib < 200  # type: ignore[operator]
    with pytest.raises(SystemExit) as exc:
        bk.run_child([sys.executable, "-c", "raise SystemExit(3)"])
    assert exc.value.code == bk.EXIT_BROKEN
    assert bk.run_child([sys.executable, "-c", "raise SystemExit(3)"], check=False).code == 3


def test_the_shebang_interpreter_of_a_script(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text(f"#!{sys.executable}\nprint(1)\n")
    assert bk.shebang_interpreter(str(script)) == sys.executable
    script.write_text("#!/usr/bin/env python3\n")
    assert bk.shebang_interpreter(str(script)) == sys.executable  # never `env`


# the scripts (a `main`); the modules they share (benchkit, the fake
# providers) have none; projection_eval is the prompt work's (issue 44 item 1)
SCRIPTS = sorted(
    p.stem
    for p in BENCH.glob("*.py")
    if "\ndef main(" in p.read_text() and p.stem != "projection_eval"
)

# one bad value each script refuses before it measures anything (exit 2)
BAD = {
    "audit": ["--agents", "1"],
    "children": ["--samples", "0"],
    "cli_startup": ["--runs", "0"],
    "client_round": ["--requests", "0"],
    "completion": ["--runs", "0"],
    "dbos_step_write": ["--turns", "0"],
    "exec_overhead": ["--calls", "0"],
    "hardening_probe": ["--parts", "nonsense"],
    "incremental": ["--rounds", "2"],
    "large_backlog": ["--sizes", "5,10"],
    "mcp": ["--pairs", "0"],
    "memory_search": ["--sources", "10"],
    "queue_backlog": ["--messages", "0"],
    "replay": ["--rounds", "1"],
    "run_oneshot": ["--runs", "0"],
    "scaleout": ["--workers", "1"],
    "serve_reaction": ["--samples", "0"],
    "slow_disk": ["--fsync-ms", "0"],
    "storage": ["--turns", "1"],
    "telemetry": ["--pairs", "0"],
    "tick_all": ["--runs", "0"],
    "tui": ["--runs", "0"],
    "turn_cost": ["--rounds", "1"],
    "turn_overhead": ["--turns", "0"],
    "web_console": ["--runs", "0"],
    "workitems": ["--open", "0"],
}


def test_every_script_has_a_bad_argument_case() -> None:
    assert set(SCRIPTS) == set(BAD)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_parses_its_arguments_before_measuring(name: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    ok = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert ok.returncode == 0 and "usage:" in ok.stdout, ok.stderr
    bad = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *BAD[name]],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert bad.returncode == 2 and "error:" in bad.stderr, (bad.stdout, bad.stderr)


def test_children_cache_their_bytecode_whatever_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With PYTHONDONTWRITEBYTECODE set (as on this machine), every child run
    would compile every module: a figure that is not the command's."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    where = bk.cache_bytecode()
    try:
        assert "PYTHONDONTWRITEBYTECODE" not in os.environ
        assert os.environ["PYTHONPYCACHEPREFIX"] == where and Path(where).is_dir()
        mod = Path(where) / "probe_mod.py"
        mod.write_text("X = 1\n")
        subprocess.run(
            [sys.executable, "-c", "import probe_mod"], cwd=where, check=True, env=dict(os.environ)
        )
        assert list(Path(where).rglob("probe_mod*.pyc"))
    finally:
        monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
