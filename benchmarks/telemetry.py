#!/usr/bin/env python3
"""What tracing costs (issue 39), measured in one run, A and B interleaved.

1. Per turn, in one process (as ``holon serve`` runs turns): one-round turns
   against the fake OpenAI Responses server (loopback, answers at once),
   tracing off (A) and on (B: the real SDK, the OTLP/HTTP exporters, their
   batch processor and metric reader with the SDK's default intervals,
   exporting to a loopback OTLP receiver in another process that decodes
   what it gets). Pairs of blocks, A B A
   B..., the order within a pair alternating. Per block: the median turn
   wall time, and the median CPU time of the turn's thread (B's block ends
   with a flush, on that thread, of what it queued: its CPU is shared out
   over the block's turns). Per pair the ratio B / A of each. Goal: the
   median CPU ratio <= 1.05 (tracing adds at most 5 % to a one-round turn);
   the wall ratio is printed beside it (on a loaded machine it moves with
   the load more than with tracing), and so is the tracer's own CPU per
   turn timed alone (steady where the pairs spread).
2. The collector's state, in one process: a traced turn and then the
   plane's shutdown (what a ``holon turn`` process does at its end) with a
   working receiver, a collector gone (a closed port) and one that never
   answers. Goal: gone or hanging adds at most 50 ms over working (median
   of per-round differences).
3. Whole ``holon turn`` processes (scripted one-step model), interleaved:
   tracing off, on, gone, hanging; medians, and what setting tracing up
   costs a process (on - off), paid once per process. A report.

The load average is printed at the start and the end: on a shared machine
the figures move with it. Every comparison runs its sides interleaved in
alternating order (``benchkit.interleave``), one warm-up round first.

    python benchmarks/telemetry.py [--pairs 20] [--turns 25] [--rounds 10] [--runs 10] [--json]

Exits 1 when a goal is missed. (Start-up with tracing off:
``benchmarks/cli_startup.py``; tracing off imports no OpenTelemetry module,
``tests/cli/test_startup_imports.py``.)
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"  # the tests' OTLP receiver
sys.path.insert(0, str(HERE))
import benchkit as bk  # noqa: E402
import fake_responses as fake  # noqa: E402
from fake_responses import ResponsesHandler, message  # noqa: E402

TURN_GOAL = 1.05
COLLECTOR_GOAL_MS = 50.0


class Handler(ResponsesHandler):
    def do_POST(self) -> None:  # noqa: N802
        self.read_json()
        self.reply(message("done"), 200, 5)


class ReceiverProcess:
    """``tests/otlp_receiver.py`` in a child process (its protobuf decoding
    is not this process's CPU); ``spans()`` asks it how many it decoded."""

    CODE = (
        "import sys; sys.path.insert(0, sys.argv[1]); from otlp_receiver import Receiver\n"
        "r = Receiver(float(sys.argv[2])); r.thread.start(); print(r.endpoint, flush=True)\n"
        "for _ in sys.stdin: print(len(r.spans), flush=True)\n"
    )

    def __init__(self, delay_s: float = 0.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.CODE, str(TESTS), str(delay_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.endpoint = self.proc.stdout.readline().strip()
        if not self.endpoint.startswith("http://"):
            raise bk.broken("the OTLP receiver did not start (opentelemetry-proto?)")

    def spans(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("?\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


def block(store: Any, turns: int, plane: Any = None) -> tuple[float, float]:
    """(median wall ms, median CPU ms) per turn of ``turns`` one-round turns.
    CPU: the turn's own thread (where the turn and the tracer's work run;
    the fake server's thread is not counted); with a plane, what the block
    queued is then exported on this thread (a flush) and its CPU is shared
    out over the block's turns."""
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    walls, cpus = [], []
    for i in range(turns):
        admit(f"turn {i}", store=store)
        c0, t0 = time.thread_time(), time.perf_counter()
        res = run_turn(store=store, cli_model="openai/bench", catalog=default_catalog())
        walls.append((time.perf_counter() - t0) * 1000)
        cpus.append((time.thread_time() - c0) * 1000)
        assert res.status == "completed" and res.model_rounds == 1, res
    flush = 0.0
    if plane is not None:
        c0 = time.thread_time()
        plane.tracer_provider.force_flush()
        plane.meter_provider.force_flush()
        flush = (time.thread_time() - c0) * 1000 / turns
    return statistics.median(walls), statistics.median(cpus) + flush


def tracer_work_ms(store: Any, n: int = 2000) -> float:
    """The tracer's own CPU per one-round turn (its spans and metrics, no
    export), timed over ``n`` turns' worth of calls: a steady cross-check of
    the paired figure, which a loaded machine spreads."""
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from holon_cli import clock
    from holon_cli.model.provider import ModelResponse, TokenUsage
    from holon_cli.runtime.telemetry.sdk import Plane
    from holon_cli.runtime.telemetry.spans import OtelTurn

    class Null(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    plane = Plane(Null(), InMemoryMetricReader())
    msg: Any = {"id": "msg_1", "body": {"type": "text", "text": "hi"}}
    resp = ModelResponse([{"type": "text", "text": "ok"}], "end_turn", TokenUsage(10, 2, 12))
    attempt = {
        "model_ref": "openai/bench",
        "provider": "openai",
        "attempt": 1,
        "started_at": clock.now_iso(),
        "duration_ms": 5,
        "outcome": "succeeded",
        "token_usage": {"input_tokens": 10, "output_tokens": 2},
    }

    class Result:
        status = "completed"
        closure = {"outcome": "completed"}
        final_text = "ok"
        failure_kind = None

    c0 = time.process_time()
    for _ in range(n):
        turn = OtelTurn(plane, store, msg)
        turn.start("turn_1")
        turn.chat({"attempts": [attempt]}, resp, None)
        turn.finish(Result())
        plane.queue_depth(store.agent_id, 0)
    took = (time.process_time() - c0) * 1000 / n
    plane.shutdown(1.0)
    return took


def plane_to(endpoint: str, **env: str) -> Any:
    from holon_cli.runtime.telemetry import sdk

    os.environ.update({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, **env})
    try:
        return sdk.build({})
    finally:
        for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", *env):
            os.environ.pop(k, None)


def per_turn(store: Any, pairs: int, turns: int, endpoint: str) -> dict[str, Any]:
    from holon_cli.runtime import telemetry

    # the SDK's defaults (spans every 5 s, metrics every 60 s); each traced
    # block ends with a flush, so every block of --turns turns pays one export
    # of each: at ~30 ms a turn, 50 turns are 1.5 s, more often than the
    # defaults would export (a conservative figure)
    plane = plane_to(endpoint)

    def off() -> tuple[float, float]:
        telemetry.use(None)
        return block(store, turns)

    def on() -> tuple[float, float]:
        telemetry.use(plane)
        return block(store, turns, plane)

    # the warm-up round: first-use imports on both sides
    got = bk.interleave({"off": off, "on": on}, pairs)
    rows = [
        {
            "off_ms": a[0],
            "on_ms": b[0],
            "off_cpu_ms": a[1],
            "on_cpu_ms": b[1],
            "wall_ratio": b[0] / a[0],
            "cpu_ratio": b[1] / a[1],
        }
        for a, b in zip(got["off"], got["on"], strict=True)
    ]
    telemetry.use(None)
    plane.shutdown(5.0)

    def stats(key: str) -> dict[str, float]:
        s = bk.spread(r[key] for r in rows)
        return {"min": s.min, "median": s.median, "max": s.max}

    return {
        "pairs": rows,
        "tracer_work_ms": tracer_work_ms(store),
        "cpu_ratio": stats("cpu_ratio"),
        "wall_ratio": stats("wall_ratio"),
        "off_ms_median": statistics.median(r["off_ms"] for r in rows),
        "on_ms_median": statistics.median(r["on_ms"] for r in rows),
        "off_cpu_ms_median": statistics.median(r["off_cpu_ms"] for r in rows),
        "on_cpu_ms_median": statistics.median(r["on_cpu_ms"] for r in rows),
        "lost": plane.unexported(),
    }


def closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def collector_states(store: Any, rounds: int, endpoints: dict[str, str]) -> dict[str, Any]:
    """A traced turn, then the plane's shutdown (a process's end), per state."""
    from holon_cli.runtime import telemetry

    def one(endpoint: str) -> float:
        plane = plane_to(endpoint)
        telemetry.use(plane)
        try:
            t0 = time.perf_counter()
            block(store, 1)
            plane.shutdown()  # the default budget, as at a process's end
            return (time.perf_counter() - t0) * 1000
        finally:
            telemetry.use(None)

    # rotation: round r starts at state r; one warm-up round
    got = bk.interleave({n: (lambda e=e: one(e)) for n, e in endpoints.items()}, rounds)
    return {
        "median_ms": {n: statistics.median(v) for n, v in got.items()},
        "extra_ms": {
            n: statistics.median(x - w for x, w in zip(got[n], got["working"], strict=True))
            for n in ("gone", "hangs")
        },
    }


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
            raise bk.broken(f"holon turn failed: {res.stderr.decode()}")
        return took

    # rotation, one warm-up round (bytecode, page cache)
    got = bk.interleave({n: (lambda e=e: one(e)) for n, e in endpoints.items()}, runs)
    return {
        "median_ms": {name: statistics.median(v) for name, v in got.items()},
        "setup_ms": statistics.median(b - a for a, b in zip(got["off"], got["on"], strict=True)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--turns", type=int, default=25, help="turns per block")
    ap.add_argument("--rounds", type=int, default=10, help="rounds of the collector states")
    ap.add_argument("--runs", type=int, default=10, help="rounds of `holon turn` processes")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if min(args.pairs, args.turns, args.rounds, args.runs) < 1:
        ap.error("--pairs, --turns, --rounds and --runs must be at least 1")
    loads = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run

    home = tempfile.mkdtemp(prefix="holon-bench-otel-")
    os.environ["HOLON_HOME"] = home
    for k in [k for k in os.environ if k.startswith("OTEL_")] + ["TRACEPARENT"]:
        os.environ.pop(k, None)
    server = fake.start(Handler)
    fake.use(server)
    from holon_cli.runtime.agents.lifecycle import create_agent

    store = create_agent("bench")
    rx, hung = ReceiverProcess(), ReceiverProcess(delay_s=60)
    try:
        turn = per_turn(store, args.pairs, args.turns, rx.endpoint)
        received = rx.spans()
        endpoints = {"working": rx.endpoint, "gone": closed_port(), "hangs": hung.endpoint}
        states = collector_states(store, args.rounds, endpoints)
        procs = processes(
            args.runs,
            home,
            {"off": None, "on": rx.endpoint, "gone": endpoints["gone"], "hangs": hung.endpoint},
        )
    finally:
        rx.close()
        hung.proc.kill()
        hung.proc.wait()
    server.shutdown()
    import shutil

    shutil.rmtree(home, ignore_errors=True)
    goals = bk.Goals()
    goals.check(
        "per turn, tracing on / off, CPU (median of pairs)",
        round(turn["cpu_ratio"]["median"], 3),
        "<=",
        TURN_GOAL,
        "x",
    )
    for name, extra in states["extra_ms"].items():
        goals.check(
            f"collector {name}: traced turn + exit flush over a working one (median)",
            round(extra, 1),
            "<=",
            COLLECTOR_GOAL_MS,
            " ms",
        )
    out = {
        "per_turn": turn,
        "spans_received": received,
        "collector_states": states,
        "processes": procs,
    }
    if not args.json:
        cpu, wall = turn["cpu_ratio"], turn["wall_ratio"]
        print(
            f"per turn, in one process ({args.pairs} pairs of {args.turns} one-round turns, "
            "fake Responses server, OTLP/HTTP to a loopback receiver):"
        )
        print(
            f"  CPU per turn off {turn['off_cpu_ms_median']:.2f} ms, on "
            f"{turn['on_cpu_ms_median']:.2f} ms; ratio on/off per pair min {cpu['min']:.3f} "
            f"median {cpu['median']:.3f} max {cpu['max']:.3f}"
        )
        print(
            f"  wall per turn off {turn['off_ms_median']:.2f} ms, on {turn['on_ms_median']:.2f} ms;"
            f" ratio min {wall['min']:.3f} median {wall['median']:.3f} max {wall['max']:.3f}"
        )
        print(
            f"  the tracer's own work per turn {turn['tracer_work_ms']:.3f} ms CPU "
            f"({turn['tracer_work_ms'] / turn['off_cpu_ms_median'] * 100:.1f} % of a turn's CPU); "
            f"spans received {received}, lost {turn['lost']}"
        )
        med, extra = states["median_ms"], states["extra_ms"]
        print(
            f"a traced turn and the exit flush ({args.rounds} rounds): "
            + ", ".join(f"{k} {v:.1f} ms" for k, v in med.items())
        )
        print(
            f"  collector gone +{extra['gone']:.1f} ms, hanging +{extra['hangs']:.1f} ms over a "
            "working one"
        )
        pm = procs["median_ms"]
        print(
            f"`holon turn` processes ({args.runs} rounds, in rotation), median wall: "
            + ", ".join(f"{k} {v:.0f} ms" for k, v in pm.items())
            + f"; setting tracing up costs a process {procs['setup_ms']:.0f} ms (once; a report)"
        )
    return bk.finish(goals, loads, out, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
