#!/usr/bin/env python3
"""Time and peak RSS of one `holon turn` with a backlog of 1 MB messages.

For each N (default 0, 10, 60), on a fresh home: N messages of 1 MB are
taken through real turns first (the history a turn's recent conversation
and work-item trace look at), then N more are queued and ingested (the
backlog whose bodies a turn must not read). Each measured `holon turn` is a
real process (scripted model that answers at once) processing one more 1 MB
message admitted and ingested just before it, so every N does the same work
on its own message. The sizes' turns run in rotation (round r starts at
size r), so each round is a set of turns measured side by side; wall time
and peak RSS (``/usr/bin/time``: a child started from this process would
carry this process's high-water mark) per turn, the median wall and the
highest peak over `--turns` rounds, and per round each N's ratio to N=0 as
min / median / max. The load average is printed at the start and the end.

Goal (issue 31 item 27): a turn's cost flat in the backlog's size: the
median per-round ratio of wall and of peak RSS within 1.2x of N=0 (exit 1
otherwise).

    python benchmarks/large_backlog.py [--sizes 0,10,60] [--turns 7] [--mb 1] [--json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402

TARGET = 1.2
REPO = Path(__file__).resolve().parents[1]


def holon(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one `holon` process; fails loudly."""
    got = bk.run_child([sys.executable, "-m", "holon_cli", *args], env, cwd="/", rss=True)
    return got.wall_ms / 1000, got.peak_rss_mib or float("nan")


def body(i: int, size: int) -> str:
    head = f"{i:06d} "
    return head + "x" * (size - len(head))


def seed(n: int, size: int, model: str, first: int) -> None:
    """In a helper process (see ``--helper``): N messages through in-process
    turns, then N queued, all ingested; with ``first`` >= 0 just one message
    numbered ``first`` ahead of the queue. The benchmark process itself never
    loads holon nor holds a body: a child's peak RSS (wait4) counts what its
    parent had resident when it forked."""
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.tick import tick_agent

    if first >= 0:
        # ahead of the queued backlog: the next turn processes this message
        admit(body(first, size), priority="next")
    else:
        from holon_cli.runtime.turn import run_turn
        from holon_cli.tools.catalog import default_catalog

        catalog = default_catalog()
        for i in range(n):
            admit(body(i, size))
            if not run_turn(None, cli_model=model, catalog=catalog).ran:
                raise SystemExit("a seeding turn did not run")
        for i in range(n):
            admit(body(100_000 + i, size))
    tick_agent(open_agent(None))  # ingestion (once per body) is not the turn's cost


def helper(env: dict[str, str], n: int, size: int, first: int = -1) -> float:
    t0 = time.perf_counter()
    args = [str(n), str(size), env["HOLON_MODEL"], str(first)]
    subprocess.run([sys.executable, __file__, "--helper", *args], env=env, check=True)
    # the seed's dirty pages (up to ~200 MB for N=60) are written back now,
    # not during the measured turn (whose fsyncs would wait for them)
    os.sync()
    return time.perf_counter() - t0


def env_for(n: int, root: Path) -> dict[str, str]:
    home = root / f"n{n}" / "home"
    return {
        **os.environ,
        "HOLON_HOME": str(home),
        "HOLON_MODEL": f"scripted:{root / 'model.yaml'}",
        # this checkout first (an A/B of two builds runs each one's copy)
        "PYTHONPATH": os.pathsep.join(
            [
                str(Path(__file__).resolve().parents[1]),
                *filter(None, [os.environ.get("PYTHONPATH")]),
            ]
        ),
    }


def measure(a: argparse.Namespace, root: Path, sizes: list[int]) -> list[dict[str, Any]]:
    envs = {n: env_for(n, root) for n in sizes}
    seeded = {n: helper(envs[n], n, a.mb * 1_000_000) for n in sizes}
    k = [0]

    def turn(n: int) -> Any:
        def run() -> tuple[float, float]:
            k[0] += 1
            helper(envs[n], n, a.mb * 1_000_000, first=900_000 + k[0])
            return holon(["turn"], envs[n])

        return run

    runs = bk.interleave({str(n): turn(n) for n in sizes}, a.turns, warmup=0)
    rows = []
    base = runs[str(sizes[0])]
    for n in sizes:
        got = runs[str(n)]
        walls, peaks = [w for w, _ in got], [p for _, p in got]
        home = Path(envs[n]["HOLON_HOME"])
        queued = sum(1 for _ in (home / "agents").glob("*/.holon/inbox/cur/*.json"))
        rows.append(
            {
                "n": n,
                "queued_after": queued,
                "seed_s": round(seeded[n], 1),
                "wall_ms_median": round(statistics.median(walls) * 1000, 1),
                "wall_ms_range": [round(min(walls) * 1000, 1), round(max(walls) * 1000, 1)],
                "peak_rss_mb": round(max(peaks), 1),
                "peak_rss_mb_each": [round(x, 1) for x in peaks],
                "wall_ratio": bk.spread_json(bk.ratios(walls, [w for w, _ in base])),
                "rss_ratio": bk.spread_json(bk.ratios(peaks, [p for _, p in base])),
            }
        )
        if not a.keep:
            shutil.rmtree(home.parent, ignore_errors=True)
    return rows


def main() -> int:
    if sys.argv[1:2] == ["--helper"]:
        n, size, model, first = sys.argv[2:6]
        seed(int(n), int(size), model, int(first))
        return 0
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--sizes", default="0,10,60", help="backlog sizes, comma separated")
    ap.add_argument("--turns", type=int, default=7, help="measured turns per size")
    ap.add_argument("--mb", type=int, default=1, help="body size in MB")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary homes")
    a = ap.parse_args()
    try:
        sizes = [int(x) for x in a.sizes.split(",")]
    except ValueError:
        ap.error("--sizes is a comma-separated list of backlog sizes, e.g. 0,10,60")
    if not sizes or sizes[0] != 0 or any(n < 0 for n in sizes) or a.turns < 1 or a.mb < 1:
        ap.error("--sizes must start with 0; --turns and --mb must be at least 1")
    if not bk.can_measure_rss():
        raise bk.broken("no /usr/bin/time to measure a turn's peak RSS")
    load = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run
    root = Path(tempfile.mkdtemp(prefix="holon-large-backlog-"))
    (root / "model.yaml").write_text('loop: true\nsteps:\n  - "noted."\n')
    try:
        rows = measure(a, root, sizes)
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    goals = bk.Goals()
    for r in rows[1:]:
        goals.check(
            f"N={r['n']} / N=0, turn wall (median of rounds)",
            r["wall_ratio"]["median"],
            "<=",
            TARGET,
            "x",
        )
        goals.check(
            f"N={r['n']} / N=0, peak RSS (median of rounds)",
            r["rss_ratio"]["median"],
            "<=",
            TARGET,
            "x",
        )
    if not a.json:
        print(f"one `holon turn` on a {a.mb} MB message; N processed + N queued {a.mb} MB messages")
        print(
            f"{'N':>4} {'wall ms (median)':>17} {'range':>17} {'peak RSS MB':>12} "
            "   per round / N=0: wall, RSS (median, min-max)"
        )
        for r in rows:
            lo, hi = r["wall_ms_range"]
            w, m = r["wall_ratio"], r["rss_ratio"]
            print(
                f"{r['n']:>4} {r['wall_ms_median']:>17.0f} {f'{lo:.0f}-{hi:.0f}':>17} "
                f"{r['peak_rss_mb']:>12.1f}    {w['median']:.2f}x ({w['min']:.2f}-{w['max']:.2f}), "
                f"{m['median']:.2f}x ({m['min']:.2f}-{m['max']:.2f})"
            )
    return bk.finish(goals, load, {"rows": rows, "target": TARGET}, as_json=a.json)


if __name__ == "__main__":
    raise SystemExit(main())
