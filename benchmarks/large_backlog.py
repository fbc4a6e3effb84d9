#!/usr/bin/env python3
"""Time and peak RSS of one `holon turn` with a backlog of 1 MB messages.

For each N (default 0, 10, 60), on a fresh home: N messages of 1 MB are
taken through real turns first (the history a turn's recent conversation
and work-item trace look at), then N more are queued and ingested (the
backlog whose bodies a turn must not read). Each measured `holon turn` is a
real process (scripted model that answers at once) processing one more 1 MB
message admitted and ingested just before it, so every N does the same work
on its own message; wall time and peak RSS (wait4) per turn, the median
wall and the highest peak over `--turns` turns, and each N's ratio to N=0.

Target (issue 31 item 27): a turn's cost flat in the backlog's size: wall
and peak RSS within 1.2x of N=0 (exit 1 otherwise).

    python benchmarks/large_backlog.py [--sizes 0,10,60] [--turns 7] [--mb 1] [--json]
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

TARGET = 1.2
REPO = Path(__file__).resolve().parents[1]


def holon(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one `holon` process; fails loudly."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "holon_cli", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"holon {' '.join(args)} failed: {err.strip()[:400]}")
    return wall, usage.ru_maxrss / 1024.0  # KiB on Linux


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


def measure(n: int, a: argparse.Namespace, root: Path) -> dict[str, Any]:
    home = root / f"n{n}" / "home"
    script = root / "model.yaml"
    model = f"scripted:{script}"
    env = {
        **os.environ,
        "HOLON_HOME": str(home),
        "HOLON_MODEL": model,
        # this checkout first (an A/B of two builds runs each one's copy)
        "PYTHONPATH": os.pathsep.join(
            [
                str(Path(__file__).resolve().parents[1]),
                *filter(None, [os.environ.get("PYTHONPATH")]),
            ]
        ),
    }
    secs = helper(env, n, a.mb * 1_000_000)
    walls, peaks = [], []
    for k in range(a.turns):
        helper(env, n, a.mb * 1_000_000, first=900_000 + k)
        w, rss = holon(["turn"], env)
        walls.append(w)
        peaks.append(rss)
    queued = sum(1 for _ in (home / "agents").glob("*/.holon/inbox/cur/*.json"))
    row = {
        "n": n,
        "queued_after": queued,
        "seed_s": round(secs, 1),
        "wall_ms_median": round(statistics.median(walls) * 1000, 1),
        "wall_ms_range": [round(min(walls) * 1000, 1), round(max(walls) * 1000, 1)],
        "peak_rss_mb": round(max(peaks), 1),
        "peak_rss_mb_each": [round(x, 1) for x in peaks],
    }
    if not a.keep:
        shutil.rmtree(home.parent, ignore_errors=True)
    return row


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
    sizes = [int(x) for x in a.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="holon-large-backlog-"))
    (root / "model.yaml").write_text('loop: true\nsteps:\n  - "noted."\n')
    rows = [measure(n, a, root) for n in sizes]
    base = rows[0]
    ok = True
    for r in rows:
        r["wall_ratio"] = round(r["wall_ms_median"] / base["wall_ms_median"], 2)
        r["rss_ratio"] = round(r["peak_rss_mb"] / base["peak_rss_mb"], 2)
        ok = ok and r["wall_ratio"] <= TARGET and r["rss_ratio"] <= TARGET
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)
    if a.json:
        print(json.dumps({"rows": rows, "target": TARGET, "ok": ok}, indent=2))
        return 0 if ok else 1
    print(f"one `holon turn` on a {a.mb} MB message; N processed + N queued {a.mb} MB messages")
    print(f"{'N':>4} {'wall ms (median)':>17} {'range':>17} {'peak RSS MB':>12} {'x N=0':>12}")
    for r in rows:
        lo, hi = r["wall_ms_range"]
        print(
            f"{r['n']:>4} {r['wall_ms_median']:>17.0f} {f'{lo:.0f}-{hi:.0f}':>17} "
            f"{r['peak_rss_mb']:>12.1f} {r['wall_ratio']:>5.2f} {r['rss_ratio']:>5.2f}"
        )
    print(f"target: wall and peak RSS <= {TARGET}x N=0: {'OK' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
