#!/usr/bin/env python3
"""How fast ``holon tui`` paints, and what an idle console costs.

A real ``holon serve`` on a temp home (scripted model; an agent with a few
settled turns of history) and the console in a real terminal: tmux, on a
private socket, 100x30.

First paint: from ``tmux new-session`` running ``holon tui`` until the
captured screen shows the composer (the whole layout drawn), and until it
shows ``connected`` (history loaded over the socket, event stream open).
The same start-up of ``sh -c 'echo ready'`` in tmux is reported as the
floor (what tmux and the capture polling cost).

Idle: one attached console left alone for ``--idle-seconds``; CPU time
(user + system, from /proc) of the console process over the window, and of
the serve while it feeds the console's event stream. Target: console
< 0.5 s CPU over 60 s.

    python benchmarks/tui.py [--runs 10] [--idle-seconds 60] [--json]
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

CPU_TARGET_S = 0.5
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


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
    paint, connected, floor = [], [], []
    for i in range(runs):
        t0 = time.monotonic()
        tmux.start(f"floor{i}", "sh -c 'echo ready; sleep 30'")
        floor.append(tmux.wait(f"floor{i}", "ready") - t0)
        tmux.kill(f"floor{i}")
        t0 = time.monotonic()
        tmux.start(f"tui{i}", tui)
        paint.append(tmux.wait(f"tui{i}", "press Enter") - t0)
        connected.append(tmux.wait(f"tui{i}", "connected") - t0)
        tmux.run("send-keys", "-t", f"tui{i}", "C-q")
        time.sleep(0.3)
        tmux.kill(f"tui{i}")
    return {
        "first_paint_s": statistics.median(paint),
        "first_paint_range_s": [min(paint), max(paint)],
        "connected_s": statistics.median(connected),
        "tmux_floor_s": statistics.median(floor),
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
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed")
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
    res["load_average"] = os.getloadavg()[0]
    res["target_met"] = res["console_cpu_s"] < CPU_TARGET_S * args.idle_seconds / 60
    if args.json:
        print(json.dumps(res))
    else:
        print(f"first paint (composer drawn) {res['first_paint_s'] * 1000:.0f} ms median")
        print(f"  range {[round(x * 1000) for x in res['first_paint_range_s']]} ms")
        print(f"connected (history shown)    {res['connected_s'] * 1000:.0f} ms median")
        print(f"tmux floor (sh echo)         {res['tmux_floor_s'] * 1000:.0f} ms median")
        print(
            f"idle console CPU over {args.idle_seconds:g} s: {res['console_cpu_s']:.3f} s "
            f"(target < {CPU_TARGET_S} s per 60 s); serve {res['serve_cpu_s']:.3f} s"
        )
        print(f"load average {res['load_average']:.2f}")
    return 0 if res["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
