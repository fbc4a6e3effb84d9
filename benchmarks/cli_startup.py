#!/usr/bin/env python3
"""Startup cost of the `holon` CLI, relative to the bare interpreter.

    python benchmarks/cli_startup.py [--runs 30] [--writers 8] [--per-writer 50]

Measures the wall time of ``python -c pass`` (this interpreter, not a shim),
``holon --version``, ``holon enqueue hello`` and ``holon status`` (both on a
fresh temporary HOLON_HOME), interleaved round-robin so that machine noise
hits every command alike; prints median and p90 and the ratio of each median
to the bare interpreter's. Target: the ``holon enqueue`` median is within 4x
the bare interpreter (a cron line pays for what it uses). Then measures
enqueue throughput with concurrent writers, each running ``holon enqueue``
back to back.

Bytecode: an installed package has its ``.pyc`` files (pip compiles them at
install time), so the runs use a temporary ``PYTHONPYCACHEPREFIX`` even when
the environment sets ``PYTHONDONTWRITEBYTECODE``. The row "holon enqueue
(no .pyc)" shows the cold case, where every run recompiles ``holon_cli``
(an editable install without ``__pycache__``); the target must hold for both.

Exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TARGET_RATIO = 4.0


def find_holon() -> str:
    here = Path(sys.executable).parent / "holon"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("holon")
    if not found:
        sys.exit(
            "cli_startup: no `holon` script next to this interpreter or on PATH; run `pip install -e .` first"
        )
    return found


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(
            f"cli_startup: {' '.join(argv)} failed ({res.returncode}): {res.stderr.decode(errors='replace')}"
        )
    return dt


def p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(0.9 * len(s)) - 1))]


def throughput(holon: str, env: dict[str, str], writers: int, per_writer: int) -> tuple[int, float]:
    errors: list[str] = []

    def writer(w: int) -> None:
        for i in range(per_writer):
            res = subprocess.run(
                [holon, "enqueue", f"bench {w}-{i}"],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
            )
            if res.returncode != 0:
                errors.append(res.stderr.decode(errors="replace"))
                return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        sys.exit(f"cli_startup: concurrent enqueue failed: {errors[0]}")
    return writers * per_writer, wall


ADMIT_LOOP = """
import sys
from holon_cli.runtime.agents import open_agent
from holon_cli.runtime.enqueue import admit
store = open_agent(None)
for i in range(int(sys.argv[2])):
    admit(f"bench {sys.argv[1]}-{i}", store=store)
"""


def admission_throughput(env: dict[str, str], writers: int, per_writer: int) -> tuple[int, float]:
    """Concurrent writers admitting through the library (no process start per
    message): what the Maildir inbox itself sustains, fsyncs included."""
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", ADMIT_LOOP, str(w), str(per_writer)], env=env)
        for w in range(writers)
    ]
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - t0
    if any(codes):
        sys.exit("cli_startup: in-process admission failed")
    return writers * per_writer, wall


def main() -> int:
    ap = argparse.ArgumentParser(description="holon CLI startup benchmark")
    ap.add_argument("--runs", type=int, default=30, help="runs per command (default 30)")
    ap.add_argument(
        "--writers",
        type=int,
        default=8,
        help="concurrent writers for the throughput test (default 8)",
    )
    ap.add_argument("--per-writer", type=int, default=50, help="messages per writer (default 50)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    holon = find_holon()
    with tempfile.TemporaryDirectory(prefix="holon-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOLON_")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        env["HOLON_HOME"] = str(Path(tmp) / "home")
        env["HOME"] = str(Path(tmp))
        # the cold case: holon_cli recompiled each run (stdlib and click keep their .pyc)
        cold = {k: v for k, v in env.items() if k != "PYTHONPYCACHEPREFIX"}
        cold["PYTHONDONTWRITEBYTECODE"] = "1"
        commands: list[tuple[str, list[str], dict[str, str]]] = [
            ("python3 -c pass", [sys.executable, "-c", "pass"], env),
            ("holon --version", [holon, "--version"], env),
            ("holon enqueue hello", [holon, "enqueue", "hello"], env),
            ("holon enqueue (no .pyc)", [holon, "enqueue", "hello"], cold),
            ("holon status", [holon, "status"], env),
        ]
        for _, argv, e in commands:  # warm caches; the first enqueue creates the default agent
            timed(argv, e)
        samples: dict[str, list[float]] = {name: [] for name, _, _ in commands}
        for _ in range(args.runs):
            for name, argv, e in commands:
                samples[name].append(timed(argv, e))

        tp_env = {**env, "HOLON_HOME": str(Path(tmp) / "home-throughput")}
        timed([holon, "home", "init"], tp_env)
        n, wall = throughput(holon, tp_env, args.writers, args.per_writer)
        lib_env = {**env, "HOLON_HOME": str(Path(tmp) / "home-admit")}
        timed([holon, "home", "init"], lib_env)
        n2, wall2 = admission_throughput(lib_env, args.writers, 500)

    bare = statistics.median(samples["python3 -c pass"])
    print(f"holon CLI startup: {args.runs} runs each, interpreter {sys.executable}, script {holon}")
    print(f"{'command':<26}{'median':>10}{'p90':>10}{'ratio':>8}")
    for name, _, _ in commands:
        xs = samples[name]
        med = statistics.median(xs)
        print(f"{name:<26}{med * 1000:>8.1f}ms{p90(xs) * 1000:>8.1f}ms{med / bare:>7.2f}x")
    ratio = statistics.median(samples["holon enqueue hello"]) / bare
    cold_ratio = statistics.median(samples["holon enqueue (no .pyc)"]) / bare
    verdict = "PASS" if max(ratio, cold_ratio) <= TARGET_RATIO else "FAIL"
    print(
        f"{verdict}: holon enqueue median is {ratio:.2f}x the bare interpreter "
        f"({cold_ratio:.2f}x without .pyc files; target <= {TARGET_RATIO:g}x)"
    )
    print(
        f"enqueue throughput: {n} messages from {args.writers} concurrent writers in {wall:.2f}s = {n / wall:.0f} messages/s ({os.cpu_count()} CPUs)"
    )
    print(
        f"admission throughput (library, no process start per message): {n2} messages from {args.writers} concurrent writers in {wall2:.2f}s = {n2 / wall2:.0f} messages/s"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
