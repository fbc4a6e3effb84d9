#!/usr/bin/env python3
"""The turn benchmark on a slow disk: per-round overhead where one fsync
costs about 3 ms (a cloud volume), next to the same run on this machine's disk.

How the disk is slowed, best first (the output says which was used):

1. ``ldpreload``: a 30-line shim, compiled here with ``cc``, loaded with
   ``LD_PRELOAD`` into the benchmark process; it wraps libc's ``fsync`` and
   ``fdatasync``: the real call, then a sleep of ``--fsync-ms``. Every fsync
   of the process pays it (the home is the only thing the benchmark fsyncs).
2. ``python``: without a C compiler, ``turn_overhead.py --fsync-delay-ms``
   wraps ``os.fsync`` (all of holon's fsyncs go through it) the same way.

A ``dm-delay`` device would be the closest to a real slow volume, but needs
device-mapper in the kernel, which containers rarely have; a loop device alone
does not make fsync slower. Both runs use the same number of turns, the same
history and the same loopback provider; only the cost of fsync differs.

    python benchmarks/slow_disk.py [--fsync-ms 3] [--turns 10] [--history 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <errno.h>

static long delay_us(void) {
    const char *s = getenv("SLOW_FSYNC_US");
    return s ? atol(s) : 3000;
}

static void pause_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    int saved, rc = real(fd);
    saved = errno;
    pause_us(delay_us());
    errno = saved;
    return rc;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    int saved, rc = real(fd);
    saved = errno;
    pause_us(delay_us());
    errno = saved;
    return rc;
}
"""


def build_shim(workdir: Path) -> Path | None:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return None
    src = workdir / "slowfsync.c"
    lib = workdir / "libslowfsync.so"
    src.write_text(SHIM)
    res = subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(src), "-ldl"],
        capture_output=True,
        text=True,
    )
    return lib if res.returncode == 0 and lib.is_file() else None


def run(args: argparse.Namespace, env: dict[str, str], extra: list[str]) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(HERE / "turn_overhead.py"),
        "--json",
        "--turns",
        str(args.turns),
        "--history",
        str(args.history),
        "--work-items",
        str(args.work_items),
        *extra,
    ]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        sys.exit(f"slow_disk: turn_overhead.py failed ({res.returncode}):\n{res.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--fsync-ms", type=float, default=3.0, help="added cost of one fsync")
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--history", type=int, default=20_000)
    ap.add_argument("--work-items", type=int, default=100)
    ap.add_argument(
        "--mode",
        choices=("auto", "ldpreload", "python"),
        default="auto",
        help="how to slow fsync (auto: the LD_PRELOAD shim when cc can build it)",
    )
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="holon-slowdisk-") as tmp:
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("HOLON_")}
        lib = build_shim(Path(tmp)) if args.mode in ("auto", "ldpreload") else None
        if args.mode == "ldpreload" and lib is None:
            sys.exit("slow_disk: no C compiler could build the LD_PRELOAD shim; use --mode python")
        fast = run(args, base_env, [])
        if lib is not None:
            mode = "ldpreload"
            slow_env = {
                **base_env,
                "LD_PRELOAD": str(lib),
                "SLOW_FSYNC_US": str(int(args.fsync_ms * 1000)),
            }
            slow = run(args, slow_env, [])
        else:
            mode = "python"
            slow = run(args, base_env, ["--fsync-delay-ms", str(args.fsync_ms)])

    rounds = fast["rounds_per_turn"]
    print(
        f"slow-disk turn benchmark: {args.turns} turns x {rounds} provider rounds, "
        f"history {fast['history_events']:,} events; disk slowed by: {mode} "
        f"(+{args.fsync_ms:g} ms per fsync)"
    )
    print(
        f"{'disk':<10} {'fsync ms':>9} {'agent':<8} {'turn wall ms':>13} "
        f"{'overhead/round ms':>18} {'p90':>8} {'fsyncs/round':>13}"
    )
    for name, r in (("fast", fast), ("slow", slow)):
        for agent in ("fresh", "history"):
            a = r[agent]
            print(
                f"{name:<10} {r['fsync_ms']:>9.2f} {agent:<8} {a['turn_wall_ms_median']:>13.1f} "
                f"{a['overhead_per_round_ms_median']:>18.2f} "
                f"{a['overhead_per_round_ms_p90']:>8.2f} "
                f"{a['fsyncs_per_turn_median'] / rounds:>13.1f}"
            )
    f, s = fast["fresh"], slow["fresh"]
    extra = s["overhead_per_round_ms_median"] - f["overhead_per_round_ms_median"]
    print(
        f"slow/fast overhead per round (fresh agent): "
        f"{s['overhead_per_round_ms_median'] / f['overhead_per_round_ms_median']:.2f}x "
        f"(+{extra:.1f} ms per round; fsyncs alone explain "
        f"{s['fsyncs_per_turn_median'] / rounds * (slow['fsync_ms'] - fast['fsync_ms']):.1f} ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
