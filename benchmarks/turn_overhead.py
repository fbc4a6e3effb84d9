#!/usr/bin/env python3
"""Runtime overhead per turn, against a loopback provider that answers instantly.

Each turn is a three-round tool loop over the real OpenAI Responses transport
(HTTP on 127.0.0.1): round 1 and 2 call ExecCommand, round 3 answers. The
runtime's own time is the turn's wall time minus the provider round time the
runtime measured and minus tool execution time. Measured on a fresh agent and
on one whose ledgers hold 100,000 prior events (and as many transcript
entries, briefs and queue records) and 500 completed work items with reports.
Both agents have the same present work (25 queued and 25 blocked items and
one current, runnable item the prompt projects every round), so the
comparison isolates history.

Targets: < 30 ms of runtime overhead per provider round; the large-history
figure within 1.2x of the fresh one. Also printed: the median cost of one
fsync in the home, and fsyncs per round (every ``os.fsync`` is counted).
``benchmarks/slow_disk.py`` runs this on a home whose fsync costs ~3 ms.

    python benchmarks/turn_overhead.py [--turns 20] [--history 100000] [--json]
        [--home-dir DIR] [--fsync-delay-ms MS]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
from fake_responses import ResponsesHandler, message, this_turns_results  # noqa: E402

ROUNDS = 3


class Handler(ResponsesHandler):
    """Asks for ``ExecCommand`` (``true``) until ``ROUNDS - 1`` results came
    back, then answers; records its own time per request."""

    server_ms: list[float] = []

    def do_POST(self) -> None:  # noqa: N802
        t0 = time.perf_counter()
        body = self.read_json()
        outputs = this_turns_results(body.get("input", []))
        if outputs < ROUNDS - 1:
            output = [
                {
                    "type": "function_call",
                    "id": f"fc_{outputs}",
                    "call_id": f"call_{outputs}",
                    "name": "ExecCommand",
                    "arguments": json.dumps({"cmd": "true"}),
                    "status": "completed",
                }
            ]
        else:
            output = message("done")
        self.reply(output, 100, 10)
        Handler.server_ms.append((time.perf_counter() - t0) * 1000)


def seed_history(agent_home: Path, n: int, work_items: int) -> None:
    """Append n synthetic records to each ledger, as a long-lived agent would have."""
    from holon_cli.runtime import queue as q
    from holon_cli.store.agent_store import AgentStore
    from holon_cli.store.layout import AgentLayout

    store = AgentStore(AgentLayout(agent_home, agent_home.name))
    led = store.layout.ledger_dir
    last = store.events.last()
    seq = int(last["event_seq"]) if last else 0
    with (
        open(led / "events.jsonl", "a") as ev,
        open(led / "transcript.jsonl", "a") as tr,
        open(led / "briefs.jsonl", "a") as br,
        open(led / "queue.jsonl", "a") as qu,
    ):
        for i in range(n):
            seq += 1
            mid = f"msg_hist{i:08d}"
            ev.write(
                json.dumps(
                    {
                        "v": 1,
                        "event_seq": seq,
                        "id": f"evt_h{i}",
                        "at": "2026-01-01T00:00:00.000Z",
                        "kind": "tool_executed",
                        "agent_id": store.agent_id,
                        "message_id": mid,
                        "data": {
                            "turn_id": f"turn_h{i // 10}",
                            "tool_name": "ExecCommand",
                            "ok": True,
                            "duration_ms": 3.0,
                        },
                    }
                )
                + "\n"
            )
            tr.write(
                json.dumps(
                    {
                        "v": 1,
                        "id": f"trn_h{i}",
                        "at": "2026-01-01T00:00:00.000Z",
                        "kind": "assistant_round" if i % 2 else "message",
                        "message_id": mid,
                        "text": f"historical entry {i} " + "x" * 80,
                    }
                )
                + "\n"
            )
            if i % 10 == 0:
                br.write(
                    json.dumps(
                        {
                            "v": 1,
                            "id": f"brf_h{i}",
                            "agentId": store.agent_id,
                            "at": "2026-01-01T00:00:00.000Z",
                            "kind": "result",
                            "visibility": "turn_result",
                            "text": f"result {i}",
                        }
                    )
                    + "\n"
                )
                env = {
                    "id": mid,
                    "agentId": store.agent_id,
                    "createdAt": "2026-01-01T00:00:00.000Z",
                    "kind": "operator_prompt",
                    "origin": {"kind": "operator"},
                    "trust": "trusted_operator",
                    "authorityClass": "operator_instruction",
                    "priority": "normal",
                    "triggerKind": "operator_input",
                    "body": {"type": "text", "text": "old"},
                }
                qu.write(
                    json.dumps(
                        {
                            "v": 1,
                            "op": "admitted",
                            "seq": 10_000_000 + i,
                            "at": env["createdAt"],
                            "message": env,
                        }
                    )
                    + "\n"
                )
                qu.write(
                    json.dumps(
                        {
                            "v": 1,
                            "op": "status",
                            "message_id": mid,
                            "status": "processed",
                            "at": env["createdAt"],
                        }
                    )
                    + "\n"
                )
    with store.lock():  # fold the seeded queue records into the snapshot once
        st = q.load(store)
        q._save(store, st)
    # a work queue with history: completed items (with reports), blocked and
    # queued ones, and a runnable current item the prompt projects every round
    from holon_cli.runtime import workitems as wi

    for i in range(work_items):  # the past: completed work with reports
        w = wi.create_work_item(
            store,
            f"historical objective {i}",
            plan=f"plan {i}\n" * 20,
            todo_list=[{"text": "step", "state": "completed"}],
        )
        wi.complete_work_item(store, w["work_item"]["id"], report=f"report {i}", source="operator")
    seed_present(store)


def seed_present(store: Any) -> None:
    """The same present work on both agents: 25 queued and 25 blocked items and
    one current, runnable item the prompt projects every round."""
    from holon_cli.runtime import workitems as wi

    for i in range(50):
        w = wi.create_work_item(store, f"open objective {i}", plan=f"plan {i}\n" * 20)
        if i % 2:
            wi.update_work_item(store, w["work_item"]["id"], blocked_by=f"waiting on thing {i}")
    cur = wi.create_work_item(
        store,
        "the current objective",
        plan_status="ready",
        todo_list=[{"text": "keep going", "state": "in_progress"}],
    )
    wi.pick_work_item(store, cur["work_item"]["id"], source="operator")


class FsyncCounter:
    """Counts ``os.fsync`` calls (every fsync in holon goes through it), and
    optionally adds a delay to each: the Python-level slow disk, for machines
    where the LD_PRELOAD shim of ``slow_disk.py`` cannot be built."""

    def __init__(self, delay_ms: float = 0.0) -> None:
        self.calls = 0
        self.delay_s = delay_ms / 1000.0
        self._real = os.fsync
        os.fsync = self._fsync

    def _fsync(self, fd: Any) -> None:
        self.calls += 1
        self._real(fd)
        if self.delay_s:
            time.sleep(self.delay_s)


FSYNCS = FsyncCounter()


def fsync_cost_ms(directory: str, n: int = 20) -> float:
    """Median wall time of one write + fsync of a small file in ``directory``."""
    path = os.path.join(directory, ".fsync-probe")
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for i in range(n):
            os.write(fd, b"x" * 64)
            t0 = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    return statistics.median(times)


def measure(agent_id: str, turns: int) -> dict[str, float]:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    store = open_agent(agent_id, create_default=False)
    per_round: list[float] = []
    rounds_ms: list[float] = []
    totals: list[float] = []
    fsyncs: list[int] = []
    for i in range(turns + 1):
        admit(f"benchmark turn {i}", store=store)
        before = store.events.last()["event_seq"]
        calls_before = FSYNCS.calls
        t0 = time.perf_counter()
        res = run_turn(store=store, cli_model="openai/bench", catalog=default_catalog())
        wall = (time.perf_counter() - t0) * 1000
        turn_fsyncs = FSYNCS.calls - calls_before
        assert res.status == "completed" and res.model_rounds == ROUNDS, res
        evs = [e for e in store.events.tail(200) if e["event_seq"] > before]
        round_ms = [
            e["data"]["provider_round_ms"] for e in evs if e["kind"] == "provider_round_completed"
        ]
        provider = sum(round_ms)
        tools = sum(e["data"]["duration_ms"] for e in evs if e["kind"] == "tool_executed")
        if i == 0:
            continue  # warm-up: first-use imports
        totals.append(wall)
        per_round.append((wall - provider - tools) / ROUNDS)
        rounds_ms.extend(round_ms)
        fsyncs.append(turn_fsyncs)
    return {
        "turn_wall_ms_median": statistics.median(totals),
        "overhead_per_round_ms_median": statistics.median(per_round),
        "overhead_per_round_ms_p90": sorted(per_round)[max(0, int(len(per_round) * 0.9) - 1)],
        "fsyncs_per_turn_median": statistics.median(fsyncs),
        # the provider round as the runtime timed it: the HTTP client's share
        # of a round is this minus the server's own time
        "provider_round_ms_median": statistics.median(rounds_ms),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--history", type=int, default=100_000)
    ap.add_argument(
        "--work-items",
        type=int,
        default=500,
        help="completed work items seeded into the history agent",
    )
    ap.add_argument(
        "--home-dir",
        default=None,
        help="where to create the temporary HOLON_HOME (default: the system temp dir)",
    )
    ap.add_argument(
        "--fsync-delay-ms",
        type=float,
        default=0.0,
        help="add this delay to every os.fsync (a Python-level slow disk)",
    )
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args()
    if args.turns < 1:
        ap.error("--turns must be at least 1")
    FSYNCS.delay_s = args.fsync_delay_ms / 1000.0

    home = tempfile.mkdtemp(prefix="holon-bench-", dir=args.home_dir)
    fsync_ms = fsync_cost_ms(home)
    os.environ["HOLON_HOME"] = home
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OPENAI_BASE_URL"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    os.environ["OPENAI_API_KEY"] = "bench-key"
    for k in ("HOLON_MODEL", "HOLON_FALLBACK_MODELS"):
        os.environ.pop(k, None)

    from holon_cli.runtime.agents.lifecycle import create_agent

    # both agents have the same present work (open items, one current), so
    # the comparison isolates history: only one has the accumulated past
    seed_present(create_agent("fresh"))
    big = create_agent("history")
    t0 = time.perf_counter()
    seed_history(big.layout.home, args.history, args.work_items)
    seed_s = time.perf_counter() - t0

    fresh = measure("fresh", args.turns)
    hist = measure("history", args.turns)
    server.shutdown()
    ratio = hist["overhead_per_round_ms_median"] / fresh["overhead_per_round_ms_median"]
    ev_lines = sum(1 for _ in open(big.layout.ledger_path("events")))
    ok1 = fresh["overhead_per_round_ms_median"] < 30 and hist["overhead_per_round_ms_median"] < 30
    ok2 = ratio <= 1.2
    if args.json:
        print(
            json.dumps(
                {
                    "turns": args.turns,
                    "rounds_per_turn": ROUNDS,
                    "fsync_ms": round(fsync_ms, 3),
                    "server_ms_median": statistics.median(Handler.server_ms),
                    "fresh": fresh,
                    "history": hist,
                    "history_events": ev_lines,
                    "history_over_fresh": ratio,
                }
            )
        )
        import shutil

        shutil.rmtree(home, ignore_errors=True)
        return 0 if ok1 and ok2 else 1
    print(
        f"turn overhead benchmark: {args.turns} turns x {ROUNDS} provider rounds "
        "(ExecCommand, ExecCommand, answer), loopback OpenAI Responses"
    )
    print(f"loopback server time per request: median {statistics.median(Handler.server_ms):.2f} ms")
    print(f"fsync of a small file in the home: median {fsync_ms:.2f} ms")
    print(
        f"{'agent':<28} {'turn wall ms':>14} {'overhead/round ms':>18} {'p90':>8} "
        f"{'fsyncs/round':>13} {'provider round ms':>18}"
    )
    rows = [
        ("fresh", fresh),
        (f"history ({ev_lines:,} events, {args.work_items} done items)", hist),
    ]
    for name, r in rows:
        print(
            f"{name:<28} {r['turn_wall_ms_median']:>14.1f} "
            f"{r['overhead_per_round_ms_median']:>18.2f} {r['overhead_per_round_ms_p90']:>8.2f} "
            f"{r['fsyncs_per_turn_median'] / ROUNDS:>13.1f} {r['provider_round_ms_median']:>18.2f}"
        )
    print(f"(history seeded in {seed_s:.1f} s)")
    print(f"target overhead/round < 30 ms: {'PASS' if ok1 else 'FAIL'}")
    print(f"target history/fresh <= 1.2x: {ratio:.2f}x {'PASS' if ok2 else 'FAIL'}")
    import shutil

    shutil.rmtree(home, ignore_errors=True)
    return 0 if ok1 and ok2 else 1


if __name__ == "__main__":
    sys.exit(main())
