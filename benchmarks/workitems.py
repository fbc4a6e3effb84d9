#!/usr/bin/env python3
"""Work item writes on a home with many items (issue 44 item 7).

Two homes, one agent each: ``empty`` (no work item) and ``big`` (``--items``
work items, default 10,000: all but ``--open`` completed with a report, as
a long-lived agent accumulates them; each with its plan file). The big
home's ledger lines are clones of one item really created and completed by
this build, renumbered; then this build folds them into its own index
(``load`` + ``save(force=True)`` under the agent lock), so each build is
measured on the files it writes itself.

1. ``holon workitem create`` (a real process, the console script) on the
   empty home and on the big one, paired (A B, B A, ...): the per-pair ratio
   big / empty. Goal: median <= 1.2 (writes cost O(1) in the number of items).
2. What reads cost on the big home (must not get slower): ``holon workitem
   list`` (every item), ``holon workitem list --filter open``, ``holon
   status`` and the prompt's work-queue projection (timed inside a fresh
   process, imports done: the index load and ``project_work_queue``, what a
   turn pays for its first projection), each as wall time medians.
   With ``--compare PYTHON`` (another build's interpreter, its ``holon``
   beside it) the same reads run on that build's own big home, paired with
   this build's, and the per-pair ratios this / other of wall and of CPU
   time are printed; goal: the median CPU ratio <= 1.10 for each read (not
   slower, within the noise of a shared machine: the reads wait on nothing,
   so their CPU time is what they cost, and it moves far less with other
   jobs than wall time does). Without ``--compare`` the reads are a report.

    python benchmarks/workitems.py [--items 10000] [--open 20] [--pairs 15]
        [--compare PYTHON] [--json] [--keep]

Run it with another build's interpreter (``/path/venv/bin/python
benchmarks/workitems.py``) to measure that build: the script drives the
``holon`` beside the interpreter it runs under.
"""

from __future__ import annotations

import argparse
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

CREATE_GOAL = 1.2
READ_GOAL = 1.10

SEED = r"""
import json, os, sys, time
from pathlib import Path
from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime import workitems as wi
from holon_cli.store import workitem_index as wix
from holon_cli.store.ledger_mark import write_mark

n, n_open = int(sys.argv[1]), int(sys.argv[2])
store = create_agent("main")
if n:
    steps = [{"text": "first step", "state": "completed"}, {"text": "second", "state": "completed"}]
    w = wi.create_work_item(store, "template item", todo_list=steps,
                            source="operator")
    wid = w["work_item"]["id"]
    # a build where work items take the waiting plane's hook (issue 43 item 3)
    kw = {}
    if "cancel_waits" in wi.complete_work_item.__code__.co_varnames:
        from holon_cli.runtime.waiting.intents import cancel_for_work_item
        kw["cancel_waits"] = cancel_for_work_item
    wi.complete_work_item(store, wid, report="finished: " + "r" * 200, source="operator", **kw)
    led = store.ledger(wix.WORK_ITEMS_LEDGER)
    lines = [json.loads(x) for x in led.path.read_text().splitlines()]
    # each clone's plan file: the template's bytes and modification time, so
    # its descriptor (hash, size, time) is exact and no read refreshes it
    tpl = store.layout.work_items_dir / wid / "plan.md"
    plan, tpl_st = tpl.read_bytes(), tpl.stat()
    base_ms = int(time.time() * 1000) - 86_400_000 * 30
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    def b32(v, width):
        out = []
        for _ in range(width):
            out.append(alphabet[v % 32]); v //= 32
        return "".join(reversed(out))
    with open(led.path, "a") as f:
        for i in range(n - n_open - 1):
            new = f"wi_{b32(base_ms + i * 60_000, 10)}0000{b32(i, 6)}"
            d = store.layout.work_items_dir / new
            d.mkdir(parents=True)
            (d / "plan.md").write_bytes(plan)
            os.utime(d / "plan.md", ns=(tpl_st.st_atime_ns, tpl_st.st_mtime_ns))
            for rec in lines:
                text = json.dumps(rec, separators=(",", ":")).replace(wid, new)
                f.write(text.replace("template item", f"historical item {i}") + "\n")
    write_mark(led.mark_path, led.path.stat().st_size)
    for i in range(n_open):
        todo = [{"text": "a step", "state": "pending"}]
        wi.create_work_item(store, f"open item {i}", todo_list=todo, source="operator")
    with store.lock():
        wix.save(store, wix.load(store), force=True)
    os.sync()
"""

PROJECT = r"""
import time, sys
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.workitems import project_work_queue
from holon_cli.runtime.workitems import projection  # imported before the clock starts
# what a turn pays for its first projection: the load and the block
t0, c0 = time.perf_counter(), time.process_time()
store = open_agent("main", create_default=False)
text = project_work_queue(store)
assert text, "no projection"
print((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000)
"""


def seed(python: str, home: Path, items: int, n_open: int) -> float:
    t0 = time.perf_counter()
    home.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOLON_HOME": str(home)}
    res = subprocess.run(  # cwd: never this checkout (``-c`` puts the cwd on sys.path)
        [python, "-c", SEED, str(items), str(n_open)],
        env=env,
        capture_output=True,
        text=True,
        cwd=home.parent,
    )
    if res.returncode != 0:
        raise bk.broken(f"seeding {home} failed: {res.stderr[-2000:]}")
    return time.perf_counter() - t0


def holon_of(python: str) -> str:
    here = Path(python).parent / "holon"
    if not (here.is_file() and os.access(here, os.X_OK)):
        raise bk.broken(f"no `holon` script beside {python}")
    return str(here)


class Build:
    """One build under test: its interpreter, its ``holon``, its homes."""

    def __init__(self, name: str, python: str, root: Path, cache: Path) -> None:
        self.name = name
        self.python = python
        self.holon = holon_of(python)
        self.root = root
        self.env = bk.bytecode_env(
            {k: v for k, v in os.environ.items() if not k.startswith("HOLON_")}, cache
        )
        self.env["HOME"] = str(root)

    def home(self, which: str) -> dict[str, str]:
        return {**self.env, "HOLON_HOME": str(self.root / which)}

    def cmd(self, which: str, *args: str) -> tuple[float, float]:
        argv = [self.holon, *args, "--agent", "main"]
        got = bk.run_child(argv, self.home(which), cwd=self.root)
        return got.wall_ms, got.cpu_ms

    def project(self, which: str) -> tuple[float, float]:
        res = subprocess.run(
            [self.python, "-c", PROJECT],
            env=self.home(which),
            capture_output=True,
            text=True,
            cwd=self.root,
        )
        if res.returncode != 0:
            raise bk.broken(f"projection failed: {res.stderr[-2000:]}")
        wall, cpu = res.stdout.split()
        return float(wall), float(cpu)


READS = {
    "workitem list": ("workitem", "list"),
    "workitem list --filter open": ("workitem", "list", "--filter", "open"),
    "status": ("status",),
}


def reads_of(b: Build) -> dict[str, Any]:
    out: dict[str, Any] = {name: (lambda a=args: b.cmd("big", *a)) for name, args in READS.items()}
    out["projection (load + project, fresh process)"] = lambda: b.project("big")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--open", type=int, default=20, help="of --items, how many stay open")
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--compare", default=None, help="another build's python, for the reads")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary homes")
    a = ap.parse_args()
    if a.items < a.open + 1 or a.open < 1:
        ap.error("--open must be at least 1 and --items greater than --open")
    if a.pairs < 1:
        ap.error("--pairs must be at least 1")
    load = bk.Load()
    tmp = Path(tempfile.mkdtemp(prefix="holon-bench-workitems-"))
    try:
        this = Build("this", sys.executable, tmp / "this", tmp / "pycache-this")
        builds = [this]
        if a.compare:
            builds.append(
                Build("other", os.path.abspath(a.compare), tmp / "other", tmp / "pycache-other")
            )
        seeded = {}
        for b in builds:
            seed(b.python, b.root / "empty", 0, 0)
            seeded[b.name] = round(seed(b.python, b.root / "big", a.items, a.open), 1)
        index_bytes = {
            b.name: sum(
                p.stat().st_size
                for p in (b.root / "big" / "agents" / "main" / ".holon" / "state").glob(
                    "work_item*"
                )
            )
            for b in builds
        }
        n = [0]

        def create(which: str) -> float:
            n[0] += 1
            return this.cmd(which, "workitem", "create", f"benchmark item {n[0]}")[0]

        cr = bk.interleave(
            {"empty": lambda: create("empty"), "big": lambda: create("big")}, a.pairs
        )
        create_ratios = bk.ratios(cr["big"], cr["empty"])
        report: dict[str, Any] = {
            "items": a.items,
            "open": a.open,
            "pairs": a.pairs,
            "seed_s": seeded,
            "index_bytes": index_bytes,
            "create_ms": {k: bk.spread_json(v, 1) for k, v in cr.items()},
            "create_ratio": bk.spread_json(create_ratios),
        }
        reads: dict[str, Any] = {}
        for name, fn in reads_of(this).items():
            if a.compare:
                other = reads_of(builds[1])[name]
                got = bk.interleave({"this": fn, "other": other}, a.pairs)
                mine = [w for w, _ in got["this"]], [c for _, c in got["this"]]
                theirs = [w for w, _ in got["other"]], [c for _, c in got["other"]]
                reads[name] = {
                    "this_ms": bk.spread_json(mine[0], 1),
                    "other_ms": bk.spread_json(theirs[0], 1),
                    "this_cpu_ms": bk.spread_json(mine[1], 1),
                    "other_cpu_ms": bk.spread_json(theirs[1], 1),
                    "ratio": bk.spread_json(bk.ratios(mine[0], theirs[0])),
                    "cpu_ratio": bk.spread_json(bk.ratios(mine[1], theirs[1])),
                }
            else:
                got = bk.interleave({"this": fn}, a.pairs)
                reads[name] = {
                    "this_ms": bk.spread_json([w for w, _ in got["this"]], 1),
                    "this_cpu_ms": bk.spread_json([c for _, c in got["this"]], 1),
                }
        report["reads"] = reads
    finally:
        if a.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    goals = bk.Goals()
    goals.check(
        f"workitem create, {a.items:,} items / empty (median of pairs)",
        round(report["create_ratio"]["median"], 3),
        "<=",
        CREATE_GOAL,
        "x",
    )
    for name, r in reads.items():
        if "ratio" in r:
            goals.check(
                f"{name}, this / other build, CPU (median of pairs)",
                round(r["cpu_ratio"]["median"], 3),
                "<=",
                READ_GOAL,
                "x",
            )
    if not a.json:
        import holon_cli

        print(
            f"work items: {a.items:,} on the big home ({a.open} open), build "
            f"{Path(holon_cli.__file__).parent} (python {sys.executable})"
        )
        for b in builds:
            print(
                f"  {b.name}: seeded in {seeded[b.name]} s; index files "
                f"{index_bytes[b.name] / 1e6:.2f} MB"
            )
        e, g = report["create_ms"]["empty"], report["create_ms"]["big"]
        print(
            f"holon workitem create: empty {e['median']} ms, big {g['median']} ms (medians of "
            f"{a.pairs})"
        )
        print("  " + bk.ratio_line("big / empty", create_ratios))
        for name, r in reads.items():
            line = (
                f"{name} on the big home: wall {r['this_ms']['median']} ms, CPU "
                f"{r['this_cpu_ms']['median']} ms"
            )
            if "ratio" in r:
                w, c = r["ratio"], r["cpu_ratio"]
                line += (
                    f"; other build {r['other_ms']['median']} ms, CPU "
                    f"{r['other_cpu_ms']['median']} ms; this / other: wall median "
                    f"{w['median']:.2f}x (min {w['min']:.2f}x, max {w['max']:.2f}x), CPU median "
                    f"{c['median']:.2f}x (min {c['min']:.2f}x, max {c['max']:.2f}x)"
                )
            print(line)
    return bk.finish(goals, load, report, as_json=a.json)


if __name__ == "__main__":
    raise SystemExit(main())
