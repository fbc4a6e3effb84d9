#!/usr/bin/env python3
"""Runtime overhead per turn, against a loopback provider that answers instantly.

Each turn is a three-round tool loop over the real OpenAI Responses transport
(HTTP on 127.0.0.1): round 1 and 2 call ExecCommand, round 3 answers. The
runtime's own time is the turn's wall time minus the provider round time the
runtime measured and minus tool execution time. Measured on a fresh agent and
on one whose ledgers hold ``--history`` prior events (100,000 by default: most
of them in closed segments, counted across all of them, and as many
transcript entries, briefs and queue records) and ``--work-items`` completed
work items with reports. Both agents have the same present work (25 queued
and 25 blocked items and one current, runnable item the prompt projects
every round), so the comparison isolates history.

The two agents' turns are paired (fresh, history; then history, fresh; ...)
in one process: the per-pair ratio history / fresh of the overhead per round
is printed as min / median / max, with the machine's load at start and end.

Goals: the median overhead per round < 30 ms on each agent; the median of
the per-pair ratio <= 1.2. Exit 1 on a missed goal. Also printed: the median
cost of one fsync in the home, and fsyncs per round (every ``os.fsync`` is
counted).

With ``--slow-fsync-ms MS`` every turn of each agent is run twice more, on a
slower disk (each fsync ``MS`` slower: the ``LD_PRELOAD`` shim of
``slow_disk.py`` when the process was started with it, else a Python wrapper
of ``os.fsync``), interleaved with the others; the slow / fast ratio is
printed per agent (a report). ``benchmarks/slow_disk.py`` runs it so.

    python benchmarks/turn_overhead.py [--turns 20] [--history 100000] [--json]
        [--home-dir DIR] [--slow-fsync-ms MS]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# the shared fake provider sits next to this script (also when a test loads
# the script by path)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402
import fake_responses as fake  # noqa: E402
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
            output = fake.function_call(outputs, "ExecCommand", {"cmd": "true"})
        else:
            output = message("done")
        self.reply(output, 100, 10)
        Handler.server_ms.append((time.perf_counter() - t0) * 1000)


def history_event(agent_id: str, i: int, seq: int, message_id: str | None) -> dict[str, Any]:
    """The ``i``-th synthetic past event (a tool call of a past turn)."""
    rec: dict[str, Any] = {
        "v": 1,
        "event_seq": seq,
        "id": f"evt_h{i}",
        "at": "2026-01-01T00:00:00.000Z",
        "kind": "tool_executed",
        "agent_id": agent_id,
        "data": {
            "turn_id": f"turn_h{i // 10}",
            "tool_name": "ExecCommand",
            "ok": True,
            "duration_ms": 3.0,
        },
    }
    if message_id is not None:
        rec["message_id"] = message_id
    return rec


def history_entry(i: int, message_id: str | None) -> dict[str, Any]:
    """The ``i``-th synthetic past transcript entry."""
    rec: dict[str, Any] = {
        "v": 1,
        "id": f"trn_h{i}",
        "at": "2026-01-01T00:00:00.000Z",
        "kind": "assistant_round" if i % 2 else "message",
        "text": f"historical entry {i} " + "x" * 80,
    }
    if message_id is not None:
        rec["message_id"] = message_id
    return rec


def seed_history(agent_home: Path, n: int, work_items: int) -> None:
    """Append n synthetic records to each ledger, as a long-lived agent would have."""
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.waiting.intents import cancel_for_work_item
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
            ev.write(json.dumps(history_event(store.agent_id, i, seq, mid)) + "\n")
            tr.write(json.dumps(history_entry(i, mid)) + "\n")
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
        wi.complete_work_item(
            store,
            w["work_item"]["id"],
            report=f"report {i}",
            source="operator",
            cancel_waits=cancel_for_work_item,
        )
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
    optionally makes each slower: by the ``LD_PRELOAD`` shim of
    ``slow_disk.py`` when this process was started with it (its delay is read
    from ``SLOW_FSYNC_US`` at each call, so it can be switched per turn), else
    by a sleep after the real call (the Python-level slow disk)."""

    def __init__(self) -> None:
        self.calls = 0
        self.delay_s = 0.0
        self.shim = "SLOW_FSYNC_US" in os.environ and "slowfsync" in os.environ.get(
            "LD_PRELOAD", ""
        )
        self._real = os.fsync
        os.fsync = self._fsync
        self.slow(0.0)

    def slow(self, ms: float) -> None:
        """Make every fsync ``ms`` slower from now on (0: the disk as it is)."""
        if self.shim:
            os.environ["SLOW_FSYNC_US"] = str(int(ms * 1000))
            self.delay_s = 0.0
        else:
            self.delay_s = ms / 1000.0

    @property
    def mode(self) -> str:
        return "ldpreload" if self.shim else "python"

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
        for _ in range(n):
            os.write(fd, b"x" * 64)
            t0 = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    return statistics.median(times)


def one_turn(agent_id: str) -> dict[str, float]:
    """One measured turn of ``agent_id``: its wall time, the runtime's own
    time per provider round, the provider rounds as the runtime timed them
    (median) and its fsyncs."""
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    store = open_agent(agent_id, create_default=False)
    admit("benchmark turn", store=store)
    before = store.events.last()["event_seq"]
    calls_before = FSYNCS.calls
    t0 = time.perf_counter()
    res = run_turn(store=store, cli_model="openai/bench", catalog=default_catalog())
    wall = (time.perf_counter() - t0) * 1000
    fsyncs = FSYNCS.calls - calls_before
    assert res.status == "completed" and res.model_rounds == ROUNDS, res
    evs = [e for e in store.events.tail(200) if e["event_seq"] > before]
    round_ms = [
        e["data"]["provider_round_ms"] for e in evs if e["kind"] == "provider_round_completed"
    ]
    tools = sum(e["data"]["duration_ms"] for e in evs if e["kind"] == "tool_executed")
    return {
        "wall_ms": wall,
        "overhead_per_round_ms": (wall - sum(round_ms) - tools) / ROUNDS,
        # the HTTP client's share of a round is this minus the server's own time
        "provider_round_ms": statistics.median(round_ms),
        "fsyncs": float(fsyncs),
    }


def summarize(rows: list[dict[str, float]]) -> dict[str, Any]:
    per_round = [r["overhead_per_round_ms"] for r in rows]
    label, tail = bk.tail(per_round, 90)
    return {
        "turns": len(rows),
        "turn_wall_ms_median": statistics.median(r["wall_ms"] for r in rows),
        "overhead_per_round_ms_median": statistics.median(per_round),
        # the 90th percentile when there are enough turns for one, else the max
        "overhead_per_round_ms_p90": tail,
        "p90_label": label,
        "fsyncs_per_turn_median": statistics.median(r["fsyncs"] for r in rows),
        "provider_round_ms_median": statistics.median(r["provider_round_ms"] for r in rows),
    }


def measure(agent_id: str, turns: int, *, warmup: int = 1) -> dict[str, Any]:
    """``turns`` turns of one agent after ``warmup`` unmeasured ones (first-use
    imports and files), summarized."""
    for _ in range(warmup):
        one_turn(agent_id)
    return summarize([one_turn(agent_id) for _ in range(turns)])


def history_size(store: Any) -> tuple[int, int]:
    """(events in the agent's whole history, closed segments holding part of it):
    the events are numbered from 1, so the newest ``event_seq`` counts them
    all, closed segments included (the open file alone holds only the last
    few megabytes)."""
    last = store.events.last()
    return int(last["event_seq"]) if last else 0, len(store.events.closed_segments())


def sides(slow_ms: float) -> dict[str, Any]:
    """The turns to interleave: each agent's, and with ``slow_ms`` each again
    on the slower disk."""

    def turn(agent: str, ms: float) -> Any:
        def run() -> dict[str, float]:
            FSYNCS.slow(ms)
            try:
                return one_turn(agent)
            finally:
                FSYNCS.slow(0.0)

        return run

    out = {"fresh": turn("fresh", 0.0), "history": turn("history", 0.0)}
    if slow_ms:
        out["fresh slow disk"] = turn("fresh", slow_ms)
        out["history slow disk"] = turn("history", slow_ms)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--turns", type=int, default=20, help="measured turns per agent (pairs)")
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
        "--slow-fsync-ms",
        type=float,
        default=0.0,
        help="also run every turn on a disk whose fsync is this much slower (interleaved)",
    )
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args()
    if args.turns < 1:
        ap.error("--turns must be at least 1")
    if args.history < 0 or args.work_items < 0 or args.slow_fsync_ms < 0:
        ap.error("--history, --work-items and --slow-fsync-ms must not be negative")
    load = bk.Load()

    home = tempfile.mkdtemp(prefix="holon-bench-", dir=args.home_dir)
    fsync_ms = fsync_cost_ms(home)
    slow_fsync_ms = 0.0
    if args.slow_fsync_ms:
        FSYNCS.slow(args.slow_fsync_ms)
        slow_fsync_ms = fsync_cost_ms(home)
        FSYNCS.slow(0.0)
    os.environ["HOLON_HOME"] = home
    server = fake.start(Handler)
    fake.use(server)

    from holon_cli.runtime.agents.lifecycle import create_agent

    # both agents have the same present work (open items, one current), so
    # the comparison isolates history: only one has the accumulated past
    seed_present(create_agent("fresh"))
    big = create_agent("history")
    t0 = time.perf_counter()
    seed_history(big.layout.home, args.history, args.work_items)
    seed_s = time.perf_counter() - t0
    events, segments = history_size(big)

    try:
        runs = bk.interleave(sides(args.slow_fsync_ms), args.turns)
    finally:
        server.shutdown()
        import shutil

        shutil.rmtree(home, ignore_errors=True)
    rows = {name: summarize(r) for name, r in runs.items()}
    fresh, hist = rows["fresh"], rows["history"]

    def per_round(name: str) -> list[float]:
        return [r["overhead_per_round_ms"] for r in runs[name]]

    ratio = bk.ratios(per_round("history"), per_round("fresh"))
    slow_ratios = {
        agent: bk.ratios(per_round(f"{agent} slow disk"), per_round(agent))
        for agent in ("fresh", "history")
        if f"{agent} slow disk" in runs
    }
    goals = bk.Goals()
    goals.check(
        "overhead per round, fresh agent (median)",
        round(fresh["overhead_per_round_ms_median"], 2),
        "<",
        30,
        " ms",
    )
    goals.check(
        "overhead per round, history agent (median)",
        round(hist["overhead_per_round_ms_median"], 2),
        "<",
        30,
        " ms",
    )
    goals.check(
        "history / fresh overhead per round (median of pairs)",
        round(bk.spread(ratio).median, 3),
        "<=",
        1.2,
        "x",
    )
    report: dict[str, Any] = {
        "turns": args.turns,
        "rounds_per_turn": ROUNDS,
        "fsync_ms": round(fsync_ms, 3),
        "server_ms_median": statistics.median(Handler.server_ms),
        "fresh": fresh,
        "history": hist,
        "history_events": events,
        "history_closed_segments": segments,
        "history_work_items": args.work_items,
        "history_over_fresh": bk.spread_json(ratio),
    }
    if args.slow_fsync_ms:
        report.update(
            slow_fsync_ms=round(slow_fsync_ms, 3),
            slow_disk_mode=FSYNCS.mode,
            fresh_slow=rows["fresh slow disk"],
            history_slow=rows["history slow disk"],
            slow_over_fast={k: bk.spread_json(v) for k, v in slow_ratios.items()},
        )
    if not args.json:
        print(
            f"turn overhead benchmark: {args.turns} pairs of turns x {ROUNDS} provider rounds "
            "(ExecCommand, ExecCommand, answer), loopback OpenAI Responses"
        )
        print(
            f"history agent: {events:,} events ({segments} closed segments), "
            f"{args.work_items} done work items; seeded in {seed_s:.1f} s"
        )
        print(f"loopback server time per request: median {report['server_ms_median']:.2f} ms")
        print(f"fsync of a small file in the home: median {fsync_ms:.2f} ms")
        if args.slow_fsync_ms:
            print(f"  on the slow disk ({FSYNCS.mode}): median {slow_fsync_ms:.2f} ms")
        print(
            f"{'agent':<20} {'turn wall ms':>13} {'overhead/round ms':>18} "
            f"{fresh['p90_label']:>8} "
            f"{'fsyncs/round':>13} {'provider round ms':>18}"
        )
        for name, r in rows.items():
            print(
                f"{name:<20} {r['turn_wall_ms_median']:>13.1f} "
                f"{r['overhead_per_round_ms_median']:>18.2f} "
                f"{r['overhead_per_round_ms_p90']:>8.2f} "
                f"{r['fsyncs_per_turn_median'] / ROUNDS:>13.1f} "
                f"{r['provider_round_ms_median']:>18.2f}"
            )
        print(bk.ratio_line("history / fresh, overhead per round", ratio))
        for agent, vals in slow_ratios.items():
            print(bk.ratio_line(f"slow / fast disk, {agent}, overhead per round (a report)", vals))
    return bk.finish(goals, load, report, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
