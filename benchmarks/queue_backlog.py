#!/usr/bin/env python3
"""Memory and time of `turn`, `status` and `tick` with a large queued backlog.

Two homes, one agent each: ``empty`` and ``backlog`` (N queued messages
whose bodies are 200 B to 1 MB, log-uniform, seeded, ingested with `holon
tick`). Then `holon status`, `holon tick` and `holon turn` run as real
processes on both homes, paired (empty, backlog; backlog, empty; ...); each
turn processes one short message admitted just before it with priority
``next`` (ahead of the backlog), so both homes' turns do the same work.
Wall time and peak RSS (``/usr/bin/time``: a child started from this
process, which admitted the backlog, would carry this process's high-water
mark across exec) of each run; the per-pair ratio backlog / empty of wall
time as min / median / max; the load average at the start and the end.

Goals (issue 14 #8), exit 1 on a miss: `turn` and `status` peak RSS <
100 MB with 4,000 queued messages; their wall time flat with the backlog's
size: the median per-pair ratio <= 1.5 (a turn on a 4,000-message queue
may cost a little more, never a multiple).

    python benchmarks/queue_backlog.py [--messages 4000] [--seed 7] [--turns 3] [--keep]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402

RSS_GOAL_MB = 100.0
FLAT_GOAL = 1.5
COMMANDS = {"status": ["status", "--json"], "tick": ["tick"], "turn": ["turn"]}


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, peak RSS MB) of one `holon` process; a failure stops the benchmark."""
    got = bk.run_child([sys.executable, "-m", "holon_cli", *args], env, cwd="/", rss=True)
    return got.wall_ms, got.peak_rss_mib or float("nan")


def sizes(n: int, seed: int) -> list[int]:
    rnd = random.Random(seed)
    lo, hi = math.log(200), math.log(1_000_000)
    return [int(math.exp(rnd.uniform(lo, hi))) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--messages", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--turns", type=int, default=3, help="pairs of each command")
    ap.add_argument("--keep", action="store_true", help="keep the temporary homes")
    a = ap.parse_args()
    if a.messages < 1 or a.turns < 1:
        ap.error("--messages and --turns must be at least 1")
    if not bk.can_measure_rss():
        raise bk.broken("no /usr/bin/time to measure peak RSS")
    load = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run
    root = Path(tempfile.mkdtemp(prefix="holon-backlog-"))
    script = root / "model.yaml"
    script.write_text('loop: true\nsteps:\n  - "noted."\n')
    repo = str(Path(__file__).resolve().parents[1])
    sys.path.insert(0, repo)
    envs = {
        name: {
            **os.environ,
            "HOLON_HOME": str(root / name),
            "HOLON_MODEL": f"scripted:{script}",
            "PYTHONPATH": repo,
        }
        for name in ("empty", "backlog")
    }
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit

    stores = {}
    for name, env in envs.items():
        os.environ["HOLON_HOME"] = env["HOLON_HOME"]
        stores[name] = open_agent(None)
        admit("warm-up", store=stores[name])
    sz = sizes(a.messages, a.seed)
    os.environ["HOLON_HOME"] = envs["backlog"]["HOLON_HOME"]
    t0 = time.perf_counter()
    for i, n in enumerate(sz):
        admit(f"{i:05d} " + "x" * max(0, n - 6), store=stores["backlog"])
    seed_s = time.perf_counter() - t0
    ingest_ms, ingest_rss = run(["tick"], envs["backlog"])
    snap = stores["backlog"].layout.queue_file.stat().st_size

    def side(name: str, cmd: str) -> Any:
        def go() -> tuple[float, float]:
            if cmd == "turn":  # the same short message on both homes, ahead of any backlog
                os.environ["HOLON_HOME"] = envs[name]["HOLON_HOME"]
                admit("one more", store=stores[name], priority="next")
            return run(COMMANDS[cmd], envs[name])

        return go

    rows: dict[str, dict[str, Any]] = {}
    for cmd in COMMANDS:
        got = bk.interleave({"empty": side("empty", cmd), "backlog": side("backlog", cmd)}, a.turns)
        walls = {k: [w for w, _ in v] for k, v in got.items()}
        peaks = {k: [p for _, p in v] for k, v in got.items()}
        rows[cmd] = {
            "empty_ms": round(statistics.median(walls["empty"]), 1),
            "backlog_ms": round(statistics.median(walls["backlog"]), 1),
            "empty_peak_rss_mb": round(max(peaks["empty"]), 1),
            "backlog_peak_rss_mb": round(max(peaks["backlog"]), 1),
            "ratio": bk.spread_json(bk.ratios(walls["backlog"], walls["empty"])),
        }
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)
    goals = bk.Goals()
    for cmd in ("turn", "status"):
        goals.check(
            f"{cmd} peak RSS, {a.messages:,} queued",
            rows[cmd]["backlog_peak_rss_mb"],
            "<",
            RSS_GOAL_MB,
            " MB",
        )
        goals.check(
            f"{cmd} wall, backlog / empty (median of pairs)",
            rows[cmd]["ratio"]["median"],
            "<=",
            FLAT_GOAL,
            "x",
        )
    print(f"homes under {root}{'' if a.keep else ' (removed)'}")
    print(
        f"seeded {a.messages} messages, {sum(sz) / 1e6:.0f} MB of bodies (min {min(sz)} B, "
        f"median {sorted(sz)[len(sz) // 2]} B, max {max(sz)} B) in {seed_s:.1f} s; ingest "
        f"`holon tick` {ingest_ms:.0f} ms, peak RSS {ingest_rss:.1f} MB; state/queue.json "
        f"{snap / 1e6:.2f} MB"
    )
    for cmd, r in rows.items():
        q = r["ratio"]
        print(
            f"  {cmd:<7} empty {r['empty_ms']:7.0f} ms, {r['empty_peak_rss_mb']:6.1f} MB; backlog "
            f"{r['backlog_ms']:7.0f} ms, {r['backlog_peak_rss_mb']:6.1f} MB; backlog / empty "
            f"median {q['median']:.2f}x (min {q['min']:.2f}x, max {q['max']:.2f}x; {q['n']} pairs)"
        )
    return bk.finish(goals, load)


if __name__ == "__main__":
    raise SystemExit(main())
