#!/usr/bin/env python3
"""Startup cost of the `holon` CLI, relative to the bare interpreter of the
same environment, measured in the same run.

    python benchmarks/cli_startup.py [--runs 30] [--writers 8] [--per-writer 50]

The baseline is ``python -c pass`` run by the interpreter named in the
``holon`` script's own shebang (the venv's interpreter, never a version-manager
shim), so both sides pay the same interpreter start-up, site-packages and
``.pth`` files. ``python -c pass``, ``holon --version``, ``holon enqueue
hello``, ``holon status`` and ``holon workitem list`` (on a fresh temporary
HOLON_HOME) run interleaved, round r starting at command r, so machine noise
and order hit every command alike. For each: the median and the tail (p90,
or the max with fewer than 10 runs) of wall time, the median CPU time (user
+ system of the child, from ``wait4``; steadier than wall on a busy
machine), and the per-round ratio to the bare interpreter's run of the same
round, as min / median / max. Goal (issues 8 and 12): the median per-round
ratio of ``enqueue``, ``status`` and ``workitem list`` each within 4x the
bare interpreter, on wall and on CPU. The load average is printed at the
start and the end.

Then enqueue throughput with concurrent writers (each runs ``holon enqueue``
back to back) and library admission throughput, each repeated ``--repeats``
times and reported as the median with the range (one burst is not a figure).

Bytecode: an installed package has its ``.pyc`` files (pip compiles them at
install time), so the runs use a temporary ``PYTHONPYCACHEPREFIX`` even when
the environment sets ``PYTHONDONTWRITEBYTECODE``.

Exits 1 when a goal is missed, 2 when a command fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402

TARGET_RATIO = 4.0
TARGETED = ("holon enqueue hello", "holon status", "holon workitem list")


find_holon = bk.find_holon
shebang_interpreter = bk.shebang_interpreter


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run; the CPU figure is the child's
    own user + system time from ``wait4``."""
    got = bk.run_child(argv, env)
    return got.wall_ms / 1000, got.cpu_ms / 1000


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
from holon_cli.runtime.agents.lifecycle import open_agent
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


def repeated(fn: Any, repeats: int) -> tuple[int, list[float]]:
    """Run a throughput burst ``repeats`` times; (messages per burst, rates)."""
    rates: list[float] = []
    n = 0
    for _ in range(repeats):
        n, wall = fn()
        rates.append(n / wall)
    return n, rates


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
    ap.add_argument(
        "--repeats", type=int, default=5, help="throughput bursts; the median is reported"
    )
    args = ap.parse_args()
    if args.runs < 1 or args.repeats < 1:
        ap.error("--runs and --repeats must be at least 1")
    load = bk.Load()

    holon = find_holon()
    python = shebang_interpreter(holon)
    with tempfile.TemporaryDirectory(prefix="holon-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOLON_")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        env["HOLON_HOME"] = str(Path(tmp) / "home")
        env["HOME"] = str(Path(tmp))
        commands: list[tuple[str, list[str]]] = [
            ("python -c pass", [python, "-c", "pass"]),
            ("holon --version", [holon, "--version"]),
            ("holon enqueue hello", [holon, "enqueue", "hello"]),
            ("holon status", [holon, "status"]),
            ("holon workitem list", [holon, "workitem", "list"]),
        ]
        # the first round warms caches; the first enqueue creates the default agent
        runs = bk.interleave(
            {name: (lambda argv=argv: timed(argv, env)) for name, argv in commands}, args.runs
        )
        wall = {name: [w for w, _ in got] for name, got in runs.items()}
        cpu = {name: [c for _, c in got] for name, got in runs.items()}

        def cli_burst() -> tuple[int, float]:
            tp_env = {**env, "HOLON_HOME": tempfile.mkdtemp(dir=tmp, prefix="home-tp-")}
            timed([holon, "home", "init"], tp_env)
            return throughput(holon, tp_env, args.writers, args.per_writer)

        def lib_burst() -> tuple[int, float]:
            lib_env = {**env, "HOLON_HOME": tempfile.mkdtemp(dir=tmp, prefix="home-admit-")}
            timed([holon, "home", "init"], lib_env)
            return admission_throughput(lib_env, args.writers, 500)

        n, cli_rates = repeated(cli_burst, args.repeats)
        n2, lib_rates = repeated(lib_burst, args.repeats)

    goals = bk.Goals()
    print(f"holon CLI startup: {args.runs} rounds, baseline interpreter {python}, script {holon}")
    print(
        f"{'command':<22}{'wall med':>10}{'tail':>11}{'cpu med':>10}"
        "   per-round ratio to python -c pass: wall / CPU (median, min-max)"
    )
    for name, _ in commands:
        rw = bk.ratios(wall[name], wall["python -c pass"])
        rc = bk.ratios(cpu[name], cpu["python -c pass"])
        sw, sc = bk.spread(rw), bk.spread(rc)
        label, tail = bk.tail(wall[name], 90)
        print(
            f"{name:<22}{statistics.median(wall[name]) * 1000:>8.1f}ms"
            f"{f'{label} {tail * 1000:.1f}':>11}{statistics.median(cpu[name]) * 1000:>8.1f}ms"
            f"   {sw.median:.2f}x ({sw.min:.2f}-{sw.max:.2f}) / "
            f"{sc.median:.2f}x ({sc.min:.2f}-{sc.max:.2f})"
        )
        if name in TARGETED:
            goals.check(
                f"{name}, wall / bare interpreter", round(sw.median, 2), "<=", TARGET_RATIO, "x"
            )
            goals.check(
                f"{name}, CPU / bare interpreter", round(sc.median, 2), "<=", TARGET_RATIO, "x"
            )
    print(
        f"enqueue throughput: {n} messages from {args.writers} concurrent writers, "
        f"{args.repeats} bursts: median {statistics.median(cli_rates):.0f} messages/s "
        f"(range {min(cli_rates):.0f}-{max(cli_rates):.0f}; {os.cpu_count()} CPUs; a report)"
    )
    print(
        f"admission throughput (library, no process start per message): {n2} messages from "
        f"{args.writers} concurrent writers, {args.repeats} bursts: median "
        f"{statistics.median(lib_rates):.0f} messages/s "
        f"(range {min(lib_rates):.0f}-{max(lib_rates):.0f}; a report)"
    )
    return bk.finish(goals, load)


if __name__ == "__main__":
    sys.exit(main())
