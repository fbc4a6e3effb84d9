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
interleaved A B, B A, ... and each pair's ratio is printed (min / median /
max). Goals (issue 44): 1,000 agents <= 0.3 s, 10,000 <= 2 s (wall
median); exits 1 when one is missed.

    python benchmarks/tick_all.py [--agents 100,1000,10000] [--runs 5]
        [--baseline /path/to/checkout] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
        raise SystemExit(f"holon tick --all exited {proc.returncode}: {err[-2000:]}")
    if proc.stderr:
        proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime


def spread(values: list[float]) -> dict[str, float]:
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def measure(n: int, runs: int, baseline: str | None, base: Path) -> dict[str, Any]:
    home = base / f"home-{n}"
    make_home(home, n)
    sides: dict[str, tuple[Path, str | None]] = {"this": (home, None)}
    if baseline:
        other = base / f"home-{n}-baseline"
        shutil.copytree(home, other, symlinks=True)
        sides["baseline"] = (other, baseline)
    for h, pp in sides.values():
        run_tick(sys.executable, h, pp)  # the first pass: every agent, writes the index
    walls: dict[str, list[float]] = {k: [] for k in sides}
    cpus: dict[str, list[float]] = {k: [] for k in sides}
    names = list(sides)
    for r in range(runs):
        order = names[r % len(names) :] + names[: r % len(names)]
        for k in order:
            h, pp = sides[k]
            w, c = run_tick(sys.executable, h, pp)
            walls[k].append(w)
            cpus[k].append(c)
    out: dict[str, Any] = {"agents": n, "runs": runs}
    for k in names:
        out[k] = {"wall_s": spread(walls[k]), "cpu_s": spread(cpus[k])}
    if baseline:
        out["ratio_wall"] = spread(
            [a / b for a, b in zip(walls["this"], walls["baseline"], strict=True)]
        )
        out["ratio_cpu"] = spread(
            [a / b for a, b in zip(cpus["this"], cpus["baseline"], strict=True)]
        )
    shutil.rmtree(home, ignore_errors=True)
    if baseline:
        shutil.rmtree(sides["baseline"][0], ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default="100,1000,10000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", help="a checkout of another build to pair against")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load0 = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="holon-tick-bench-") as tmp:
        for n in (int(x) for x in args.agents.split(",")):
            results.append(measure(n, args.runs, args.baseline, Path(tmp)))
    load1 = os.getloadavg()
    load = {"start": [round(x, 2) for x in load0], "end": [round(x, 2) for x in load1]}
    missed = [
        r["agents"]
        for r in results
        if r["agents"] in GOALS_S and r["this"]["wall_s"]["median"] > GOALS_S[r["agents"]]
    ]
    if args.json:
        print(json.dumps({"results": results, "load": load, "missed": missed}))
    else:
        for r in results:
            t = r["this"]
            goal = GOALS_S.get(r["agents"])
            line = (
                f"tick --all, {r['agents']} idle agents ({r['runs']} runs): wall "
                f"{t['wall_s']['min']} / {t['wall_s']['median']} / {t['wall_s']['max']} s "
                f"(min / median / max), CPU median {t['cpu_s']['median']} s"
            )
            if goal is not None:
                line += f" (goal <= {goal} s)"
            print(line)
            if "baseline" in r:
                b = r["baseline"]
                print(
                    f"  baseline: wall median {b['wall_s']['median']} s, CPU median "
                    f"{b['cpu_s']['median']} s; ratio this/baseline wall "
                    f"{r['ratio_wall']['min']} / {r['ratio_wall']['median']} / "
                    f"{r['ratio_wall']['max']}, CPU {r['ratio_cpu']['median']} (median)"
                )
        print(
            f"machine load (1/5/15 min): {load['start']} at start, {load['end']} at end "
            f"({os.cpu_count()} CPUs)"
        )
    if missed:
        print(f"FAIL: goal missed for {missed} agents", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
