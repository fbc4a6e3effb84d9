#!/usr/bin/env python3
"""The turn benchmark on a slow disk: per-round overhead where one fsync
costs about 3 ms more (a cloud volume), paired with the same turns on this
machine's disk, in one run.

It runs ``turn_overhead.py --slow-fsync-ms`` once: every turn of the fresh
and the history agent is run on the disk as it is and again with each fsync
slower, interleaved (A B, B A, ...), and the slow / fast ratio of the
overhead per round is printed per agent as min / median / max of the pairs.
How the disk is slowed, best first (the output says which was used):

1. ``ldpreload``: a 30-line shim, compiled here with ``cc``, loaded with
   ``LD_PRELOAD`` into the benchmark process; it wraps libc's ``fsync`` and
   ``fdatasync``: the real call, then a sleep of ``SLOW_FSYNC_US``
   microseconds, read at each call (so the benchmark switches it per turn).
2. ``python``: without a C compiler, ``turn_overhead.py`` wraps ``os.fsync``
   (all of holon's fsyncs go through it) the same way.

A ``dm-delay`` device would be the closest to a real slow volume, but needs
device-mapper in the kernel, which containers rarely have; a loop device alone
does not make fsync slower.

Goals: those of ``turn_overhead.py`` on the fast disk (its exit code is this
one's); the slow-disk figures are a report (what a slow volume costs a turn:
fsyncs per round times the extra cost of one).

    python benchmarks/slow_disk.py [--fsync-ms 3] [--turns 10] [--history 20000]
        [--mode auto|ldpreload|python]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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
    if args.fsync_ms <= 0 or args.turns < 1:
        ap.error("--fsync-ms must be positive and --turns at least 1")

    with tempfile.TemporaryDirectory(prefix="holon-slowdisk-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOLON_")}
        lib = build_shim(Path(tmp)) if args.mode in ("auto", "ldpreload") else None
        if args.mode == "ldpreload" and lib is None:
            sys.exit("slow_disk: no C compiler could build the LD_PRELOAD shim; use --mode python")
        if lib is not None:
            env.update(LD_PRELOAD=str(lib), SLOW_FSYNC_US="0")
        cmd = [
            sys.executable,
            str(HERE / "turn_overhead.py"),
            "--turns",
            str(args.turns),
            "--history",
            str(args.history),
            "--work-items",
            str(args.work_items),
            "--slow-fsync-ms",
            str(args.fsync_ms),
        ]
        res = subprocess.run(cmd, env=env)
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
