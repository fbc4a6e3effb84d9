#!/usr/bin/env python3
"""What ``holon tick --all`` costs over idle agents (the cron line's
``holon tick --all && holon turn --all``, every minute).

A home of N idle agents (made once by ``create_agent``, then copied with
the agent's id rewritten: creating 10,000 agents one by one would take
minutes of fsyncs), one ``holon tick --all`` to settle it (the first pass
looks at every agent and writes the wake index), then ``--runs`` timed runs
of the real command in a child process (wall, and CPU from ``wait4``).

With ``--baseline DIR`` (a checkout of another build, e.g. a worktree of
``main``), the same command of that build runs on its own copy of the home,
interleaved A B, B A, ... (``benchkit.interleave``; its warm-up round is the
settling pass) and each pair's ratio is printed (min / median / max), with
the load at the start and the end. Goals (issue 44): 1,000 agents <= 0.3 s,
10,000 <= 2 s (wall median); exits 1 when one is missed, 2 when it could
not measure.

    python benchmarks/tick_all.py [--agents 100,1000,10000] [--runs 5]
        [--baseline /path/to/checkout] [--json]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402

GOALS_S = {1000: 0.3, 10000: 2.0}
TEMPLATE = "zzbenchtemplatezz"


def make_home(home: Path, n: int) -> None:
    env = {**os.environ, "HOLON_HOME": str(home)}
    code = f"from holon_cli.runtime.agents.lifecycle import create_agent;create_agent({TEMPLATE!r})"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    src = home / "agents" / TEMPLATE
    rewrite = [
        p.relative_to(src)
        for p in src.rglob("*")
        if p.is_file() and TEMPLATE.encode() in p.read_bytes()
    ]
    for i in range(n):
        aid = f"a{i:05d}"
        dst = home / "agents" / aid
        shutil.copytree(src, dst, symlinks=True)
        for rel in rewrite:
            f = dst / rel
            f.write_bytes(f.read_bytes().replace(TEMPLATE.encode(), aid.encode()))
    shutil.rmtree(src)
    shutil.rmtree(home / "run" / "wake", ignore_errors=True)


def run_tick(python: str, home: Path, pythonpath: str | None) -> tuple[float, float]:
    env = {**os.environ, "HOLON_HOME": str(home)}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [python, "-m", "holon_cli", "tick", "--all"],
        env=env,
        cwd=home,  # not this checkout: `-m` puts the working folder first on sys.path
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise bk.broken(f"holon tick --all exited {proc.returncode}: {err[-2000:]}")
    if proc.stderr:
        proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime


def measure(n: int, runs: int, baseline: str | None, base: Path) -> dict[str, Any]:
    """``runs`` timed runs of each side over a home of ``n`` idle agents,
    interleaved (``benchkit.interleave``: A B, B A, ...; the first round
    settles each side's home: every agent looked at, the index written)."""
    home = base / f"home-{n}"
    make_home(home, n)
    sides: dict[str, tuple[Path, str | None]] = {"this": (home, None)}
    if baseline:
        other = base / f"home-{n}-baseline"
        shutil.copytree(home, other, symlinks=True)
        sides["baseline"] = (other, baseline)
    got = bk.interleave(
        {k: functools.partial(run_tick, sys.executable, h, pp) for k, (h, pp) in sides.items()},
        runs,
    )
    out: dict[str, Any] = {"agents": n, "runs": runs}
    for k, vals in got.items():
        out[k] = {
            "wall_s": bk.spread_json([w for w, _c in vals]),
            "cpu_s": bk.spread_json([c for _w, c in vals]),
        }
    if baseline:
        this, other_vals = got["this"], got["baseline"]
        out["ratio_wall"] = bk.ratios([w for w, _ in this], [w for w, _ in other_vals])
        out["ratio_cpu"] = bk.ratios([c for _, c in this], [c for _, c in other_vals])
    for h, _pp in sides.values():
        shutil.rmtree(h, ignore_errors=True)
    return out


def _agent_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of agent counts: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"agent counts must be at least 1: {text!r}")
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--agents", type=_agent_counts, default=[100, 1000, 10000])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", help="a checkout of another build to pair against")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if args.baseline and not (Path(args.baseline) / "holon_cli").is_dir():
        ap.error(f"--baseline {args.baseline}: no holon_cli package there")
    load = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run
    results = []
    with tempfile.TemporaryDirectory(prefix="holon-tick-bench-") as tmp:
        for n in args.agents:
            results.append(measure(n, args.runs, args.baseline, Path(tmp)))
    goals = bk.Goals()
    for r in results:
        t = r["this"]
        if not args.json:
            print(
                f"tick --all, {r['agents']} idle agents ({r['runs']} runs): wall "
                f"{t['wall_s']['min']} / {t['wall_s']['median']} / {t['wall_s']['max']} s "
                f"(min / median / max), CPU median {t['cpu_s']['median']} s"
            )
            if "baseline" in r:
                b = r["baseline"]
                print(
                    f"  baseline: wall median {b['wall_s']['median']} s, "
                    f"CPU median {b['cpu_s']['median']} s"
                )
                print("  " + bk.ratio_line("this / baseline, wall", r["ratio_wall"]))
                print("  " + bk.ratio_line("this / baseline, CPU", r["ratio_cpu"]))
        if "baseline" in r:
            r["ratio_wall"] = bk.spread_json(r["ratio_wall"])
            r["ratio_cpu"] = bk.spread_json(r["ratio_cpu"])
        goal = GOALS_S.get(r["agents"])
        if goal is not None:
            goals.check(
                f"tick --all wall median, {r['agents']} idle agents",
                t["wall_s"]["median"],
                "<=",
                goal,
                " s",
            )
    return bk.finish(goals, load, {"results": results}, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
