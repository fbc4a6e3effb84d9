#!/usr/bin/env python3
"""Startup cost of the `holon` CLI, relative to the bare interpreter of the
same environment, measured in the same run.

    python benchmarks/cli_startup.py [--runs 30] [--writers 8] [--per-writer 50]

The baseline is ``python -c pass`` run by the interpreter named in the
``holon`` script's own shebang (the venv's interpreter, never a version-manager
shim), so both sides pay the same interpreter start-up, site-packages and
``.pth`` files. ``python -c pass``, ``holon --version``, ``holon enqueue
hello``, ``holon status`` and ``holon workitem list`` (on a fresh temporary
HOLON_HOME) run interleaved round-robin so machine noise hits every command
alike. For each: the median and p90 of wall time, the median CPU time
(user + system of the child, from ``wait4``; steadier than wall on a busy
machine), and both medians' ratio to the baseline's. Target (issues 8 and
12): ``enqueue``, ``status`` and ``workitem list`` each within 4x the bare
interpreter, on wall and on CPU.

Then enqueue throughput with concurrent writers (each runs ``holon enqueue``
back to back) and library admission throughput, each repeated ``--repeats``
times and reported as the median with the range (one burst is not a figure).

Bytecode: an installed package has its ``.pyc`` files (pip compiles them at
install time), so the runs use a temporary ``PYTHONPYCACHEPREFIX`` even when
the environment sets ``PYTHONDONTWRITEBYTECODE``.

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
from typing import Any

TARGET_RATIO = 4.0
TARGETED = ("holon enqueue hello", "holon status", "holon workitem list")


def find_holon() -> str:
    here = Path(sys.executable).parent / "holon"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("holon")
    if not found:
        sys.exit(
            "cli_startup: no `holon` script next to this interpreter or on PATH; "
            "run `pip install -e .` first"
        )
    return found


def shebang_interpreter(script: str) -> str:
    """The interpreter the console script runs under (its ``#!`` line)."""
    with open(script, "rb") as f:
        first = f.readline().decode(errors="replace").strip()
    if first.startswith("#!"):
        words = first[2:].split()
        if words and os.path.basename(words[0]) != "env" and os.access(words[0], os.X_OK):
            return words[0]
    return sys.executable


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run; the CPU figure is the child's
    own user + system time from ``wait4``."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        _, status, ru = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            out.seek(0)
            sys.exit(
                f"cli_startup: {' '.join(argv)} failed ({proc.returncode}): "
                + out.read().decode(errors="replace")
            )
    return dt, ru.ru_utime + ru.ru_stime


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
        for _, argv in commands:  # warm caches; the first enqueue creates the default agent
            timed(argv, env)
        wall: dict[str, list[float]] = {name: [] for name, _ in commands}
        cpu: dict[str, list[float]] = {name: [] for name, _ in commands}
        for _ in range(args.runs):
            for name, argv in commands:
                w, c = timed(argv, env)
                wall[name].append(w)
                cpu[name].append(c)

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

    bare_wall = statistics.median(wall["python -c pass"])
    bare_cpu = statistics.median(cpu["python -c pass"])
    print(
        f"holon CLI startup: {args.runs} runs each, baseline interpreter {python}, script {holon}"
    )
    print(f"{'command':<22}{'wall med':>10}{'p90':>9}{'ratio':>8}{'cpu med':>10}{'ratio':>8}")
    worst = 0.0
    for name, _ in commands:
        wm, cm = statistics.median(wall[name]), statistics.median(cpu[name])
        rw, rc = wm / bare_wall, cm / bare_cpu
        if name in TARGETED:
            worst = max(worst, rw, rc)
        print(
            f"{name:<22}{wm * 1000:>8.1f}ms{p90(wall[name]) * 1000:>7.1f}ms{rw:>7.2f}x"
            f"{cm * 1000:>8.1f}ms{rc:>7.2f}x"
        )
    verdict = "PASS" if worst <= TARGET_RATIO else "FAIL"
    print(
        f"{verdict}: worst of enqueue/status/workitem list is {worst:.2f}x the bare interpreter "
        f"(wall or CPU median; target <= {TARGET_RATIO:g}x)"
    )
    print(
        f"enqueue throughput: {n} messages from {args.writers} concurrent writers, "
        f"{args.repeats} bursts: median {statistics.median(cli_rates):.0f} messages/s "
        f"(range {min(cli_rates):.0f}-{max(cli_rates):.0f}; {os.cpu_count()} CPUs)"
    )
    print(
        f"admission throughput (library, no process start per message): {n2} messages from "
        f"{args.writers} concurrent writers, {args.repeats} bursts: median "
        f"{statistics.median(lib_rates):.0f} messages/s "
        f"(range {min(lib_rates):.0f}-{max(lib_rates):.0f})"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
