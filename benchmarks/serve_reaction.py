#!/usr/bin/env python3
"""How fast ``holon serve`` reacts, and what it costs when idle.

Reaction: a real ``holon serve`` process on a temp home; a loopback provider
(OpenAI Responses API on 127.0.0.1, answers at once) records when each model
request arrives. Each sample admits one message exactly as ``holon enqueue``
does (``admit`` returns = the message is durable and acknowledged) and
measures the time until the provider sees the turn's request. Targets:
p50 <= 50 ms, p99 <= 200 ms on an idle machine.

Keep-alive: the same serve answers ``GET /healthz`` again and again on one
kept-alive connection, over TCP and over its Unix socket (the median is what
a client such as the console pays per request on top of the work; a TCP
request took 44 ms before serve set ``TCP_NODELAY``: Nagle's algorithm held
the response's second write until the client's delayed ACK). Target: TCP
p50 <= 5 ms.

Idle: a fresh serve over a home with 100 agents, nothing queued; CPU time
(user + system, from /proc) over the window, RSS at its end and how often
its threads woke (voluntary context switches). Targets: < 0.3 s CPU over
60 s, RSS < 80 MB. The machine's load average is printed with the figures.

    python benchmarks/serve_reaction.py [--samples 50] [--agents 100]
        [--idle-seconds 60] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

# the shared fake provider sits next to this script (also when a test loads
# the script by path)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_responses import ResponsesHandler, message  # noqa: E402

ARRIVALS: list[float] = []
_ARRIVED = threading.Condition()


class Handler(ResponsesHandler):
    def do_POST(self) -> None:  # noqa: N802
        now = time.time()
        with _ARRIVED:
            ARRIVALS.append(now)
            _ARRIVED.notify_all()
        self.read_json()
        self.reply(message("done"), 10, 1)


def _start_serve(home: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "holon_cli", "serve", "--listen", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL,
            stderr=f,
            env={**os.environ, "HOLON_HOME": str(home)},
        )
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if "watching" in (log.read_text() if log.exists() else ""):
            return proc
        if proc.poll() is not None:
            raise SystemExit(f"serve exited: {log.read_text()}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("serve did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def wakeups(pid: int) -> int:
    """Voluntary context switches of every thread: how often the process slept and woke."""
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


def _wait_settled(home: Path, agents: int, timeout: float = 120.0) -> None:
    import httpx2

    sock = str(home / "run" / "holon.sock")
    end = time.monotonic() + timeout
    with httpx2.Client(transport=httpx2.HTTPTransport(uds=sock), timeout=5) as c:
        while time.monotonic() < end:
            st = c.get("http://serve/control/runtime/status").json()
            if st["passes"] >= agents and not st["running_agents"]:
                time.sleep(1.0)
                return
            time.sleep(0.2)
    raise SystemExit("serve did not settle after its start-up pass")


def keepalive(home: Path, requests: int = 50) -> dict[str, Any]:
    """Median and p99 ms of ``GET /healthz`` on one kept-alive connection."""
    import httpx2 as httpx

    addr = json.loads((home / "run" / "serve.json").read_text())["http_addr"]
    sock = str(home / "run" / "holon.sock")
    out: dict[str, Any] = {"requests": requests}
    for name, client in (
        ("tcp", httpx.Client(base_url=f"http://{addr}", timeout=5)),
        ("unix", httpx.Client(transport=httpx.HTTPTransport(uds=sock), timeout=5)),
    ):
        lat: list[float] = []
        with client as c:
            c.get("http://serve/healthz" if name == "unix" else "/healthz")  # connect
            for _ in range(requests):
                t0 = time.perf_counter()
                r = c.get("http://serve/healthz" if name == "unix" else "/healthz")
                lat.append((time.perf_counter() - t0) * 1000)
                assert r.status_code == 200
        lat.sort()
        out[f"{name}_p50_ms"] = round(statistics.median(lat), 2)
        out[f"{name}_p99_ms"] = round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2)
    return out


def reaction(base: Path, samples: int) -> dict[str, Any]:
    home = base / "reaction"
    os.environ["HOLON_HOME"] = str(home)
    from holon_cli.runtime.agents.lifecycle import create_agent
    from holon_cli.runtime.enqueue import admit

    store = create_agent("main")
    proc = _start_serve(home, base / "reaction.log")
    lat: list[float] = []
    try:
        time.sleep(1.0)
        for i in range(samples):
            with _ARRIVED:
                n = len(ARRIVALS)
            admit(f"sample {i}", store=store)
            t0 = time.time()
            with _ARRIVED:
                ok = _ARRIVED.wait_for(lambda n=n: len(ARRIVALS) > n, timeout=10)
                arrived = ARRIVALS[n] if ok else None
            if arrived is None:
                raise SystemExit(f"sample {i}: no provider request within 10 s")
            lat.append((arrived - t0) * 1000)
            time.sleep(0.15)  # let the turn settle: one message at a time
        kept = keepalive(home)
    finally:
        _stop(proc)
    lat.sort()
    return {
        "samples": len(lat),
        "p50_ms": round(statistics.median(lat), 1),
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 1),
        "max_ms": round(lat[-1], 1),
        "keepalive": kept,
    }


def idle(base: Path, agents: int, seconds: float) -> dict[str, Any]:
    home = base / "idle"
    os.environ["HOLON_HOME"] = str(home)
    from holon_cli.runtime.agents.lifecycle import create_agent

    for i in range(agents):
        create_agent(f"a{i:03d}")
    proc = _start_serve(home, base / "idle.log")
    try:
        _wait_settled(home, agents)  # the start-up pass over every agent is not idle time
        c0, w0 = _cpu_s(proc.pid), wakeups(proc.pid)
        time.sleep(seconds)
        c1, w1 = _cpu_s(proc.pid), wakeups(proc.pid)
        rss = _rss_mb(proc.pid)
    finally:
        _stop(proc)
    return {
        "agents": agents,
        "seconds": seconds,
        "cpu_s": round(c1 - c0, 3),
        "rss_mb": round(rss, 1),
        "wakeups_per_s": round((w1 - w0) / seconds, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--agents", type=int, default=100)
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OPENAI_BASE_URL"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    os.environ["OPENAI_API_KEY"] = "bench-key"
    os.environ["HOLON_MODEL"] = "openai/bench"
    os.environ.pop("HOLON_FALLBACK_MODELS", None)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="holon-serve-bench-") as tmp:
        base = Path(tmp)
        r = reaction(base, args.samples)
        i = idle(base, args.agents, args.idle_seconds)
    server.shutdown()
    load = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    out = {"reaction": r, "idle": i, "load_1min": load}
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"reaction (enqueue -> provider request, {r['samples']} samples): "
            f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, max {r['max_ms']} ms "
            "(target p50 <= 50, p99 <= 200)"
        )
        k = r["keepalive"]
        print(
            f"keep-alive GET /healthz ({k['requests']} requests on one connection): "
            f"TCP p50 {k['tcp_p50_ms']} ms, p99 {k['tcp_p99_ms']} ms; "
            f"Unix socket p50 {k['unix_p50_ms']} ms, p99 {k['unix_p99_ms']} ms "
            "(target TCP p50 <= 5)"
        )
        print(
            f"idle ({i['agents']} agents, {i['seconds']:g} s): CPU {i['cpu_s']} s, "
            f"RSS {i['rss_mb']} MB, {i['wakeups_per_s']} wake-ups/s (target < 0.3 s, < 80 MB)"
        )
        print(
            f"machine load (1 min average): {load['before']} before, {load['after']} after "
            f"({os.cpu_count()} CPUs; quote figures from a quiet machine)"
        )
    missed = []
    if r["p50_ms"] > 50 or r["p99_ms"] > 200:
        missed.append("reaction")
    if r["keepalive"]["tcp_p50_ms"] > 5:
        missed.append("keep-alive")
    if i["cpu_s"] * 60 / i["seconds"] >= 0.3 or i["rss_mb"] >= 80:
        missed.append("idle")
    if missed:
        print(f"FAIL: target missed: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
