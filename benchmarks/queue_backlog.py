#!/usr/bin/env python3
"""Memory and time of `turn`, `status` and `tick` with a large queued backlog.

Seeds one agent with N queued messages whose bodies are 200 B to 1 MB
(log-uniform, seeded), ingests them with `holon tick`, then runs `holon
status` and `holon turn` (a scripted model that answers at once) as real
processes and reports each one's wall time and peak RSS (from wait4).
The same commands on an empty agent are the baseline.

Target (issue 14 #8): `turn` and `status` peak RSS < 100 MB with 4,000
queued messages, and their time flat with backlog size.

    python benchmarks/queue_backlog.py [--messages 4000] [--seed 7] [--turns 3]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit code) of one `holon` process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "holon_cli", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if p.returncode not in (0,):
        print(f"  ! holon {' '.join(args)} exited {p.returncode}: {err.strip()[:300]}")
    return wall, usage.ru_maxrss / 1024.0, p.returncode  # ru_maxrss is KiB on Linux


def sizes(n: int, seed: int) -> list[int]:
    rnd = random.Random(seed)
    lo, hi = math.log(200), math.log(1_000_000)
    return [int(math.exp(rnd.uniform(lo, hi))) for _ in range(n)]


def measure(label: str, env: dict[str, str], turns: int) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for name, args in (("status", ["status", "--json"]), ("tick", ["tick"])):
        w, rss, _ = run(args, env)
        out[name] = (w, rss)
    walls, peaks = [], []
    for _ in range(turns):
        w, rss, _ = run(["turn"], env)
        walls.append(w)
        peaks.append(rss)
    out["turn"] = (max(walls), max(peaks))
    for name, (w, rss) in out.items():
        print(f"  {label:<8} {name:<7} {w * 1000:8.0f} ms   peak RSS {rss:7.1f} MB")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the temporary home")
    a = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="holon-backlog-"))
    home = root / "home"
    script = root / "model.yaml"
    script.write_text('loop: true\nsteps:\n  - "noted."\n')
    env = {
        **os.environ,
        "HOLON_HOME": str(home),
        "HOLON_MODEL": f"scripted:{script}",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    os.environ.update(HOLON_HOME=str(home))
    sys.path.insert(0, env["PYTHONPATH"])

    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit

    store = open_agent(None)
    admit("warm-up", store=store)
    print(f"home: {home}")
    print("empty agent (1 queued message per turn):")
    for _ in range(a.turns + 1):
        admit("one more", store=store)
    base = measure("empty", env, a.turns)

    sz = sizes(a.messages, a.seed)
    t0 = time.perf_counter()
    for i, n in enumerate(sz):
        admit(f"{i:05d} " + "x" * max(0, n - 6), store=store)
    seed_s = time.perf_counter() - t0
    total_mb = sum(sz) / 1e6
    print(
        f"seeded {a.messages} messages, {total_mb:.0f} MB of bodies "
        f"(min {min(sz)} B, median {sorted(sz)[len(sz) // 2]} B, max {max(sz)} B) in {seed_s:.1f} s"
    )
    w, rss, _ = run(["tick"], env)
    print(f"  ingest  tick    {w * 1000:8.0f} ms   peak RSS {rss:7.1f} MB  ({a.messages} messages)")
    snap = store.layout.queue_file.stat().st_size
    print(f"  state/queue.json: {snap / 1e6:.2f} MB for {a.messages} queued messages")
    print(f"backlog of {a.messages}:")
    big = measure("backlog", env, a.turns)

    print("summary:")
    ok = True
    for name in ("turn", "status"):
        rss = big[name][1]
        verdict = "OK" if rss < 100 else "OVER"
        ok = ok and rss < 100
        print(
            f"  {name:<7} peak RSS {rss:6.1f} MB (target < 100 MB: {verdict}); "
            f"time {big[name][0] * 1000:.0f} ms vs {base[name][0] * 1000:.0f} ms empty"
        )
    if not a.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
