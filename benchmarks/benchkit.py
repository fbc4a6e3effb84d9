"""What every benchmark under ``benchmarks/`` shares: the one helper module.

A figure is only worth printing when it could fail and says what it
measured. So every script:

- runs its two sides interleaved in one process (:func:`interleave`: round
  ``r`` runs the sides rotated by ``r``, so with two sides A B, B A, A B, ...:
  machine noise and warm caches hit both alike, and neither always goes
  first) and reports the per-round ratio as min / median / max
  (:func:`spread`, :func:`ratio_line`);
- names a tail percentile honestly (:func:`tail`: with too few samples for
  it, the figure is the maximum and is called that);
- prints the machine's load average at its start and its end (:class:`Load`;
  the machine is shared, a figure without its load is no figure);
- checks each goal and exits 1 when one is missed (:class:`Goals`); a
  broken run (a command that failed, a server that did not start) exits 2
  (:func:`broken`), so a missed goal and a broken benchmark are told apart.

Also here, because several scripts need them alike: one child process timed
from outside (:func:`run_child`: wall, CPU from ``wait4``, peak RSS through
``/usr/bin/time``), the ``holon`` script and its interpreter, a ``holon
serve`` started and stopped, and a process's CPU, RSS and wake-ups from
``/proc``.

Standard library only: a script that imports this runs under any build's
interpreter (an A/B of two builds runs the same script with each).
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")

EXIT_MISSED = 1  # a goal was missed
EXIT_BROKEN = 2  # the benchmark itself failed: no figure


# ------------------------------------------------------------------ pairing


def rotation(names: Sequence[str], r: int) -> list[str]:
    """The order of round ``r``: ``names`` rotated left by ``r``."""
    if not names:
        return []
    k = r % len(names)
    return [*names[k:], *names[:k]]


def interleave(
    sides: Mapping[str, Callable[[], T]], rounds: int, *, warmup: int = 1
) -> dict[str, list[T]]:
    """Run every side once per round, ``warmup + rounds`` rounds; keep the
    last ``rounds``. Round ``r`` runs the sides in :func:`rotation` order, so
    two sides go A B, B A, A B, ... and the i-th values of two sides are a
    pair measured back to back."""
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    names = list(sides)
    out: dict[str, list[T]] = {n: [] for n in names}
    for r in range(warmup + rounds):
        for name in rotation(names, r):
            value = sides[name]()
            if r >= warmup:
                out[name].append(value)
    return out


class Spread(NamedTuple):
    n: int
    min: float
    median: float
    max: float


def spread(values: Iterable[float]) -> Spread:
    vals = sorted(values)
    if not vals:
        raise ValueError("no values")
    return Spread(len(vals), vals[0], statistics.median(vals), vals[-1])


def ratios(num: Sequence[float], den: Sequence[float]) -> list[float]:
    """Per-pair ratios ``num[i] / den[i]`` (pairs measured back to back)."""
    if len(num) != len(den):
        raise ValueError(f"unpaired sides: {len(num)} and {len(den)} values")
    return [a / b if b else math.inf for a, b in zip(num, den, strict=True)]


def ratio_line(label: str, values: Sequence[float]) -> str:
    s = spread(values)
    return (
        f"{label}: median {s.median:.2f}x (min {s.min:.2f}x, max {s.max:.2f}x; "
        f"{s.n} pair{'s' if s.n != 1 else ''})"
    )


def spread_json(values: Sequence[float], nd: int = 3) -> dict[str, float | int]:
    s = spread(values)
    return {
        "n": s.n,
        "min": round(s.min, nd),
        "median": round(s.median, nd),
        "max": round(s.max, nd),
    }


def tail(values: Sequence[float], p: float) -> tuple[str, float]:
    """``(name, value)`` of the ``p``-th percentile (nearest rank). With fewer
    samples than it needs (p99 needs 100), the rank is the last sample: the
    name is then ``max``, never a percentile it is not."""
    vals = sorted(values)
    if not vals:
        raise ValueError("no values")
    rank = max(1, math.ceil(p / 100 * len(vals)))
    if rank >= len(vals):
        return "max", vals[-1]
    return f"p{p:g}", vals[rank - 1]


def samples_for(p: float) -> int:
    """The fewest samples whose ``p``-th percentile is not their maximum."""
    # the nearest rank ceil(p/100 * n) must fall short of n
    return math.ceil(100 / (100 - p) - 1e-9) if p < 100 else 1 << 30


# ------------------------------------------------------------------ load


def loadavg() -> tuple[float, float, float]:
    return os.getloadavg()


class Load:
    """The machine's load average at the start of a benchmark and at its end."""

    def __init__(self) -> None:
        self.start = loadavg()
        self.stop: tuple[float, float, float] | None = None

    def end(self) -> Load:
        self.stop = loadavg()
        return self

    def line(self) -> str:
        if self.stop is None:
            self.end()
        assert self.stop is not None
        return (
            f"load average (1/5/15 min): start {_three(self.start)}, end {_three(self.stop)} "
            f"({os.cpu_count()} CPUs)"
        )

    def as_json(self) -> dict[str, Any]:
        if self.stop is None:
            self.end()
        return {
            "start": [round(x, 2) for x in self.start],
            "end": [round(x, 2) for x in self.stop or ()],
        }


def _three(t: Sequence[float]) -> str:
    return " ".join(f"{x:.2f}" for x in t)


# ------------------------------------------------------------------ goals

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": lambda v, lim: v <= lim,
    "<": lambda v, lim: v < lim,
    ">=": lambda v, lim: v >= lim,
    ">": lambda v, lim: v > lim,
    "==": lambda v, lim: v == lim,
}


class Goal(NamedTuple):
    name: str
    value: float
    op: str
    limit: float
    unit: str
    met: bool


class Goals:
    """Each goal checked once; printed PASS/MISS; exit code 1 on any miss."""

    def __init__(self) -> None:
        self.rows: list[Goal] = []

    def check(self, name: str, value: float, op: str, limit: float, unit: str = "") -> bool:
        if op not in _OPS:
            raise ValueError(f"unknown comparison {op!r}")
        met = bool(value == value and _OPS[op](value, limit))  # NaN never meets a goal
        self.rows.append(Goal(name, float(value), op, float(limit), unit, met))
        return met

    @property
    def missed(self) -> list[Goal]:
        return [g for g in self.rows if not g.met]

    def lines(self) -> list[str]:
        return [
            f"{'PASS' if g.met else 'MISS'}: {g.name} {_num(g.value)}{g.unit} "
            f"(goal {g.op} {_num(g.limit)}{g.unit})"
            for g in self.rows
        ]

    def print(self, file: Any = None) -> None:
        for line in self.lines():
            print(line, file=file or sys.stdout)
        if not self.rows:
            print("no goal: a report", file=file or sys.stdout)

    def exit_code(self) -> int:
        return EXIT_MISSED if self.missed else 0

    def as_json(self) -> list[dict[str, Any]]:
        return [g._asdict() for g in self.rows]


def _num(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.3g}" if abs(x) < 1 else f"{x:.2f}"


def finish(
    goals: Goals, load: Load, report: dict[str, Any] | None = None, *, as_json: bool = False
) -> int:
    """The end of every benchmark: the load line and the goals (or, with
    ``as_json``, one JSON object holding ``report``, ``load`` and
    ``goals``); returns the exit code."""
    load.end()
    if as_json:
        out = dict(report or {})
        out["load"] = load.as_json()
        out["goals"] = goals.as_json()
        out["ok"] = not goals.missed
        print(json.dumps(out, indent=2, default=str))
    else:
        print(load.line())
        goals.print()
    return goals.exit_code()


def broken(message: str) -> SystemExit:
    """What a script raises when it cannot measure (exit 2, not a missed goal)."""
    print(f"benchmark broken: {message}", file=sys.stderr)
    return SystemExit(EXIT_BROKEN)


# ------------------------------------------------------------------ processes


class Child(NamedTuple):
    wall_ms: float
    cpu_ms: float  # user + system of the command (and what it waited for)
    peak_rss_mib: float | None  # None when not asked or /usr/bin/time is missing
    code: int


GNU_TIME = "/usr/bin/time"


def can_measure_rss() -> bool:
    return os.access(GNU_TIME, os.X_OK)


def run_child(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    *,
    rss: bool = False,
    check: bool = True,
) -> Child:
    """One command as its own process, output to /dev/null: wall time, CPU
    time (``wait4``) and, with ``rss``, its peak RSS.

    The peak comes from ``/usr/bin/time -f %M`` (a small C program that
    forks the command): a child this Python process starts with vfork or
    fork carries this process's high-water mark across ``exec``, so its own
    ``ru_maxrss`` would count the benchmark's memory. With ``rss`` every run
    goes through ``/usr/bin/time`` (about a millisecond more wall time,
    alike for every row)."""
    cmd = list(argv)
    out_file = None
    if rss and can_measure_rss():
        fd, out_file = tempfile.mkstemp(prefix="bench-rss-")
        os.close(fd)
        cmd = [GNU_TIME, "-f", "%M", "-o", out_file, *cmd]
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = (time.perf_counter() - t0) * 1000
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        peak = None
        if out_file is not None:
            try:
                peak = int(Path(out_file).read_text().split()[-1]) / 1024
            except (ValueError, IndexError):
                peak = None
    finally:
        if out_file is not None:
            os.unlink(out_file)
    if check and code != 0:
        raise broken(f"{' '.join(argv)} exited {code}")
    return Child(wall, (usage.ru_utime + usage.ru_stime) * 1000, peak, code)


def find_holon() -> str:
    """The ``holon`` script beside this interpreter, else the one on PATH."""
    here = Path(sys.executable).parent / "holon"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("holon")
    if not found:
        raise broken("no `holon` script beside this interpreter or on PATH; pip install -e .")
    return found


def shebang_interpreter(script: str) -> str:
    """The interpreter a console script runs under (its ``#!`` line; never
    ``env`` or a version-manager shim), else this one."""
    try:
        with open(script, "rb") as f:
            first = f.readline().decode(errors="replace").strip()
    except OSError:
        return sys.executable
    if first.startswith("#!"):
        words = first[2:].split()
        if words and os.path.basename(words[0]) != "env" and os.access(words[0], os.X_OK):
            return words[0]
    return sys.executable


def cache_bytecode() -> str:
    """From now on, Python children of this benchmark cache their bytecode
    (in a temporary prefix, removed at exit), as an installed package has
    it: where the environment sets ``PYTHONDONTWRITEBYTECODE``, every run of
    a child would compile every module it imports, hundreds of milliseconds
    of a figure that is not the command's. Returns the prefix."""
    where = tempfile.mkdtemp(prefix="bench-pycache-")
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = where
    return where


def bytecode_env(env: Mapping[str, str], where: str | os.PathLike[str]) -> dict[str, str]:
    """``env`` with bytecode cached in ``where``, as an installed package has
    it, even when the environment says not to write any."""
    out = dict(env)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    out["PYTHONPYCACHEPREFIX"] = str(where)
    return out


def start_serve(
    home: Path,
    log: Path,
    *extra: str,
    env: Mapping[str, str] | None = None,
    needle: str = "watching",
    timeout: float = 60.0,
    python: str | None = None,
) -> subprocess.Popen[bytes]:
    """``holon serve --listen 127.0.0.1:0 EXTRA...`` on ``home``, its stderr
    in ``log``; returns once ``needle`` is in the log."""
    argv = [python or sys.executable, "-m", "holon_cli", "serve", "--listen", "127.0.0.1:0"]
    with open(log, "ab") as f:
        proc = subprocess.Popen(
            [*argv, *extra],
            stdout=subprocess.DEVNULL,
            stderr=f,
            env={**(os.environ if env is None else env), "HOLON_HOME": str(home)},
        )
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if needle in (log.read_text(errors="replace") if log.exists() else ""):
            return proc
        if proc.poll() is not None:
            raise broken(f"serve exited: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.05)
    stop(proc)
    raise broken(f"serve did not start in {timeout:g} s: {log.read_text(errors='replace')[-2000:]}")


def stop(proc: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; always reaped."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (all its threads)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def proc_wakeups(pid: int) -> int:
    """Voluntary context switches of every thread: how often it slept and woke."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine so far (``/proc/stat``)."""
    with open("/proc/stat") as f:
        vals = [float(v) for v in f.readline().split()[1:]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)
