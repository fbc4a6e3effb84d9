#!/usr/bin/env python3
"""How fast ``holon tui`` paints, and what an idle console costs.

A real ``holon serve`` on a temp home (scripted model; an agent with a few
settled turns of history) and the console in a real terminal: tmux, on a
private socket, 100x30.

First paint: from ``tmux new-session`` running ``holon tui`` until the
captured screen shows the composer (the whole layout drawn), and until it
shows ``connected`` (history loaded over the socket, event stream open).
The same start-up of ``sh -c 'echo ready'`` in tmux is the floor (what
tmux and the capture polling cost); floor and console runs are paired
(floor, console; console, floor; ...) and the per-pair difference (the
console's own first paint) is printed as min / median / max.

Idle: one attached console left alone for ``--idle-seconds``; CPU time
(user + system, from /proc) of the console process over the window, and of
the serve while it feeds the console's event stream. Goal: console
< 0.5 s CPU per 60 s (exit 1 on a miss; the load average is printed at
the start and the end).

    python benchmarks/tui.py [--runs 10] [--idle-seconds 60] [--json]
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

CPU_TARGET_S = 0.5
_cpu = bk.proc_cpu_s


class Tmux:
    def __init__(self, sock: Path, env: dict[str, str]) -> None:
        self.base = ["tmux", "-S", str(sock)]
        self.env = env

    def run(self, *args: str) -> str:
        res = subprocess.run([*self.base, *args], capture_output=True, text=True, env=self.env)
        return res.stdout

    def start(self, name: str, command: str) -> None:
        self.run("new-session", "-d", "-s", name, "-x", "100", "-y", "30", command)

    def wait(self, name: str, needle: str, timeout: float = 30.0) -> float:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.run("capture-pane", "-p", "-t", name):
                return time.monotonic()
            time.sleep(0.01)
        raise SystemExit(f"{needle!r} did not appear in {name}:\n{self.run('capture-pane', '-p')}")

    def kill(self, name: str) -> None:
        self.run("kill-session", "-t", name)


def _serve(home: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    holon = [sys.executable, "-m", "holon_cli"]

    def sh(*args: str) -> None:
        subprocess.run([*holon, *args], env=env, check=True, capture_output=True)

    sh("agent", "create", "main")
    for i in range(5):
        sh("enqueue", f"history {i}")
    sh("turn", "--all")
    proc = subprocess.Popen(
        [*holon, "serve", "--listen", "127.0.0.1:0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sock = home / "run" / "holon.sock"
    end = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < end:
        time.sleep(0.05)
    return proc


def first_paint(tmux: Tmux, runs: int) -> dict[str, Any]:
    tui = f"{sys.executable} -m holon_cli tui"
    n = [0]

    def floor() -> float:
        n[0] += 1
        t0 = time.monotonic()
        tmux.start(f"floor{n[0]}", "sh -c 'echo ready; sleep 30'")
        took = tmux.wait(f"floor{n[0]}", "ready") - t0
        tmux.kill(f"floor{n[0]}")
        return took

    def console() -> tuple[float, float]:
        n[0] += 1
        name = f"tui{n[0]}"
        t0 = time.monotonic()
        tmux.start(name, tui)
        paint = tmux.wait(name, "press Enter") - t0
        connected = tmux.wait(name, "connected") - t0
        tmux.run("send-keys", "-t", name, "C-q")
        time.sleep(0.3)
        tmux.kill(name)
        return paint, connected

    got = bk.interleave({"floor": floor, "console": console}, runs, warmup=0)
    paint = [p for p, _ in got["console"]]
    connected = [c for _, c in got["console"]]
    return {
        "first_paint_s": statistics.median(paint),
        "first_paint_range_s": [min(paint), max(paint)],
        "connected_s": statistics.median(connected),
        "tmux_floor_s": statistics.median(got["floor"]),
        "paint_minus_floor_s": bk.spread_json(
            [p - f for p, f in zip(paint, got["floor"], strict=True)]
        ),
        "runs": runs,
    }


def idle(tmux: Tmux, serve_pid: int, seconds: float) -> dict[str, Any]:
    tmux.start("idle", f"exec {sys.executable} -m holon_cli tui")
    tmux.wait("idle", "connected")
    pid = int(tmux.run("display-message", "-p", "-t", "idle", "#{pane_pid}").strip())
    time.sleep(2)  # past start-up
    c0, s0 = _cpu(pid), _cpu(serve_pid)
    time.sleep(seconds)
    c1, s1 = _cpu(pid), _cpu(serve_pid)
    tmux.run("send-keys", "-t", "idle", "C-q")
    time.sleep(0.5)
    tmux.kill("idle")
    return {
        "idle_seconds": seconds,
        "console_cpu_s": round(c1 - c0, 3),
        "serve_cpu_s": round(s1 - s0, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.runs < 1 or args.idle_seconds <= 0:
        ap.error("--runs must be at least 1 and --idle-seconds positive")
    if shutil.which("tmux") is None:
        raise bk.broken("tmux is not installed")
    load = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run
    with tempfile.TemporaryDirectory(prefix="holon-tui-bench-") as tmp:
        home = Path(tmp) / "home"
        script = Path(tmp) / "model.yaml"
        script.write_text('loop: true\nsteps:\n  - text: "done"\n')
        env = {
            **os.environ,
            "HOLON_HOME": str(home),
            "HOLON_MODEL": f"scripted:{script}",
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
        }
        serve = _serve(home, env)
        tmux = Tmux(Path(tmp) / "tmux.sock", env)
        # a session that outlives the measured ones: a tmux server exits with
        # its last session, and a new-session racing that exit is lost
        tmux.start("keep", "sleep 3600")
        try:
            res = first_paint(tmux, args.runs) | idle(tmux, serve.pid, args.idle_seconds)
        finally:
            tmux.run("kill-server")
            serve.terminate()
            serve.wait(30)
    per_min = res["console_cpu_s"] * 60 / args.idle_seconds
    res["target_met"] = per_min < CPU_TARGET_S
    goals = bk.Goals()
    goals.check("idle console CPU per 60 s", round(per_min, 3), "<", CPU_TARGET_S, " s")
    if not args.json:
        d = res["paint_minus_floor_s"]
        print(f"first paint (composer drawn) {res['first_paint_s'] * 1000:.0f} ms median")
        print(f"  range {[round(x * 1000) for x in res['first_paint_range_s']]} ms")
        print(f"connected (history shown)    {res['connected_s'] * 1000:.0f} ms median")
        print(f"tmux floor (sh echo)         {res['tmux_floor_s'] * 1000:.0f} ms median")
        print(
            f"first paint - floor per pair: median {d['median'] * 1000:.0f} ms (min "
            f"{d['min'] * 1000:.0f}, max {d['max'] * 1000:.0f}; {d['n']} pairs)"
        )
        print(
            f"idle console CPU over {args.idle_seconds:g} s: {res['console_cpu_s']:.3f} s; "
            f"serve {res['serve_cpu_s']:.3f} s"
        )
    return bk.finish(goals, load, res, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
