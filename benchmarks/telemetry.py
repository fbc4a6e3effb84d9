#!/usr/bin/env python3
"""What tracing costs (issue 39), measured in one run, A and B interleaved.

1. Per turn, in one process (as ``holon serve`` runs turns): one-round turns
   against the fake OpenAI Responses server (loopback, answers at once),
   tracing off (A) and on (B: the real SDK, the OTLP/HTTP exporters and
   their batch processor and metric reader, exporting to a loopback OTLP
   receiver that decodes what it gets). Pairs of blocks, A B A B..., the
   order within a pair alternating; per block the median turn wall time;
   per pair the ratio B / A. Goal: the median ratio <= 1.05 (tracing adds
   at most 5 % to a one-round turn).
2. Whole ``holon turn`` processes (scripted one-step model), interleaved:
   tracing off, on with the receiver, on with the collector gone (a closed
   port), on with a collector that never answers. Goal: a collector gone or
   hanging adds at most 50 ms to the process over a working one (median of
   per-round differences). Also printed: what setting up tracing costs a
   process (on - off), paid once per process.

The load average is printed before and after: on a shared machine the
figures move with it.

    python benchmarks/telemetry.py [--pairs 10] [--turns 20] [--runs 10] [--json]

Exits 1 when a goal is missed. (Start-up with tracing off:
``benchmarks/cli_startup.py``; tracing off imports no OpenTelemetry module,
``tests/cli/test_startup_imports.py``.)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the tests' OTLP receiver
from fake_responses import ResponsesHandler, message  # noqa: E402

TURN_GOAL = 1.05
COLLECTOR_GOAL_MS = 50.0


class Handler(ResponsesHandler):
    def do_POST(self) -> None:  # noqa: N802
        self.read_json()
        self.reply(message("done"), 200, 5)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def block(store: Any, turns: int) -> float:
    """Median wall ms of ``turns`` one-round turns of ``store``."""
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    times = []
    for i in range(turns):
        admit(f"turn {i}", store=store)
        t0 = time.perf_counter()
        res = run_turn(store=store, cli_model="openai/bench", catalog=default_catalog())
        times.append((time.perf_counter() - t0) * 1000)
        assert res.status == "completed" and res.model_rounds == 1, res
    return statistics.median(times)


def in_process(pairs: int, turns: int, endpoint: str) -> dict[str, Any]:
    from holon_cli.runtime import telemetry
    from holon_cli.runtime.agents.lifecycle import create_agent
    from holon_cli.runtime.telemetry import sdk

    store = create_agent("bench")
    # export while the turns run (serve's case), not only at the end
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "200"
    os.environ["OTEL_METRIC_EXPORT_INTERVAL"] = "1000"
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    plane = sdk.build({})
    for k in ("OTEL_BSP_SCHEDULE_DELAY", "OTEL_METRIC_EXPORT_INTERVAL"):
        os.environ.pop(k)
    del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]

    def off() -> float:
        telemetry.use(None)
        return block(store, turns)

    def on() -> float:
        telemetry.use(plane)
        return block(store, turns)

    off()
    on()  # warm-up: first-use imports on both sides
    rows = []
    for i in range(pairs):
        if i % 2 == 0:
            a, b = off(), on()
        else:
            b, a = on(), off()
        rows.append({"off_ms": a, "on_ms": b, "ratio": b / a})
    telemetry.use(None)
    plane.shutdown(5.0)
    ratios = [r["ratio"] for r in rows]
    return {
        "pairs": rows,
        "ratio_min": min(ratios),
        "ratio_median": statistics.median(ratios),
        "ratio_max": max(ratios),
        "off_ms_median": statistics.median(r["off_ms"] for r in rows),
        "on_ms_median": statistics.median(r["on_ms"] for r in rows),
        "dropped": plane.unexported(),
    }


def closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def processes(runs: int, home: str, endpoints: dict[str, str | None]) -> dict[str, Any]:
    script = Path(home) / "model.yaml"
    script.write_text("loop: true\nsteps:\n  - text: done\n")
    holon = [sys.executable, "-m", "holon_cli"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    base["HOLON_HOME"] = home

    def one(endpoint: str | None) -> float:
        env = dict(base)
        if endpoint:
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        subprocess.run([*holon, "enqueue", "go"], env=base, check=True, capture_output=True)
        t0 = time.perf_counter()
        res = subprocess.run(
            [*holon, "turn", "--model", f"scripted:{script}"], env=env, capture_output=True
        )
        took = (time.perf_counter() - t0) * 1000
        if res.returncode != 0:
            raise SystemExit(f"holon turn failed: {res.stderr.decode()}")
        return took

    for endpoint in endpoints.values():
        one(endpoint)  # warm-up (bytecode, page cache)
    rounds = []
    for i in range(runs):
        names = list(endpoints) if i % 2 == 0 else list(reversed(endpoints))
        rounds.append({name: one(endpoints[name]) for name in names})
    med = {name: statistics.median(r[name] for r in rounds) for name in endpoints}
    extra = {
        name: statistics.median(r[name] - r["on"] for r in rounds) for name in ("gone", "hangs")
    }
    return {
        "median_ms": med,
        "setup_ms": statistics.median(r["on"] - r["off"] for r in rounds),
        "collector_down_extra_ms": extra,
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--turns", type=int, default=20, help="turns per block")
    ap.add_argument("--runs", type=int, default=10, help="rounds of `holon turn` processes")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        from otlp_receiver import Receiver
    except ImportError:
        sys.exit("telemetry: install the test extra (opentelemetry-proto, the otel extra)")

    home = tempfile.mkdtemp(prefix="holon-bench-otel-")
    os.environ["HOLON_HOME"] = home
    for k in [k for k in os.environ if k.startswith("OTEL_")] + ["TRACEPARENT"]:
        os.environ.pop(k, None)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OPENAI_BASE_URL"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    os.environ["OPENAI_API_KEY"] = "bench-key"
    load_before = load()
    with Receiver() as rx, Receiver(delay_s=60) as hung:
        turn = in_process(args.pairs, args.turns, rx.endpoint)
        received = len(rx.spans)
        procs = processes(
            args.runs,
            home,
            {"off": None, "on": rx.endpoint, "gone": closed_port(), "hangs": hung.endpoint},
        )
    load_after = load()
    server.shutdown()
    ok_turn = turn["ratio_median"] <= TURN_GOAL
    ok_down = all(v <= COLLECTOR_GOAL_MS for v in procs["collector_down_extra_ms"].values())
    out = {
        "load_before": load_before,
        "load_after": load_after,
        "per_turn": turn,
        "spans_received": received,
        "processes": procs,
        "goals_met": {"per_turn": ok_turn, "collector_down": ok_down},
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"load average before: {load_before}")
        print(
            f"per turn, in one process ({args.pairs} pairs of {args.turns} one-round turns, "
            "fake Responses server, OTLP/HTTP to a loopback receiver):"
        )
        print(
            f"  off median {turn['off_ms_median']:.2f} ms, on median {turn['on_ms_median']:.2f} ms;"
            f" ratio on/off per pair min {turn['ratio_min']:.3f} median "
            f"{turn['ratio_median']:.3f} max {turn['ratio_max']:.3f} "
            f"(goal <= {TURN_GOAL}: {'met' if ok_turn else 'MISSED'})"
        )
        print(f"  spans received {received}, lost {turn['dropped']}")
        med = procs["median_ms"]
        print(f"`holon turn` processes ({args.runs} rounds, interleaved), median wall:")
        print(
            "  "
            + ", ".join(f"{k} {v:.0f} ms" for k, v in med.items())
            + f"; setting up tracing costs a process {procs['setup_ms']:.0f} ms (once)"
        )
        extra = procs["collector_down_extra_ms"]
        print(
            f"  collector gone +{extra['gone']:.1f} ms, hanging +{extra['hangs']:.1f} ms over a "
            f"working one (goal <= {COLLECTOR_GOAL_MS:g} ms: {'met' if ok_down else 'MISSED'})"
        )
        print(f"load average after: {load_after}")
    return 0 if ok_turn and ok_down else 1


if __name__ == "__main__":
    sys.exit(main())
