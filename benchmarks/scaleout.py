#!/usr/bin/env python3
"""``holon serve --engine dbos``: does it scale out, what does it cost, how
fast does it recover (issue 30, "Figures").

A private PostgreSQL 15 cluster (``tests/pgcluster.py``: initdb + pg_ctl in
a temp dir, loopback port, stopped at the end), a loopback OpenAI Responses
server in this process that answers after ``--provider-ms`` (300 ms: I/O
bound, like a real model), and real ``holon serve`` processes on one temp
home (a fresh database per configuration).

- throughput: ``--agents`` agents, ``--per-agent`` messages each, admitted
  at once; turns per second from the first admission to the last answered
  request, for 1, 2 and 4 workers, each with ONE turn slot (``--concurrency
  1``): so N workers can only go faster than one by being N workers (with 4
  slots each, one worker with 16 slots matched four: that measured
  concurrency, not workers). The worker counts run in rotation for
  ``--rounds`` rounds on a fresh home and database each; per round, N
  workers' rate / one worker's rate. Goal: the median of that ratio >= 0.8 x
  N for N = 2, 4, with the provider I/O-bound (it answers after
  ``--provider-ms``; the machine's CPU use is printed beside each figure).
- overhead: one agent, a backlog of ``--backlog`` messages, a provider that
  answers at once (``--tool-rounds`` rounds with one tool call each before
  the answer; 0: a one-round turn): wall time per turn with ``--engine
  local`` and with ``--engine dbos`` (one worker), interleaved, median of
  ``--repeats``; the difference is the engine's cost per turn. Target <= 10
  ms. Beside it the worker's CPU time per turn (user + system, from
  ``/proc``), which other jobs on the machine move much less than wall time,
  and the wall time split in two: the wake (admission to the first answer:
  watcher, enqueue, DBOS's dequeue poll, the first turn) and each further
  turn of the pass (first answer to last, per turn).
- recovery: two workers, slow answers (2 s); SIGKILL the worker running a
  turn; time until a live worker starts that agent's turn again. Target
  <= 10 s.

Exit 1 on a missed goal; the load average is printed at the start and end.

    python benchmarks/scaleout.py [--agents 50] [--per-agent 2] [--workers 2,4]
        [--rounds 2] [--provider-ms 300] [--backlog 40] [--repeats 5]
        [--tool-rounds 0] [--parts throughput,overhead,recovery] [--json]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import benchkit as bk  # noqa: E402
import fake_responses as fake  # noqa: E402
from fake_responses import ResponsesHandler, message, this_turns_results  # noqa: E402
from pgcluster import PgCluster, postgres_missing  # noqa: E402

DELAY = [0.3]
DONE: list[float] = []
_LOCK = threading.Lock()


TOOL_ROUNDS = [0]


def _tool_call(n: int) -> list[dict[str, Any]]:
    """One cheap tool call (no process: the agent's own work item list)."""
    return fake.function_call(n, "ListWorkItems", {})


class Handler(ResponsesHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        time.sleep(DELAY[0])
        n = this_turns_results(body.get("input", []))
        if n < TOOL_ROUNDS[0]:
            self.reply(_tool_call(n + 1), 10, 1)
            return
        self.reply(message("done"), 10, 1)
        with _LOCK:
            DONE.append(time.time())


_cpu_s = bk.proc_cpu_s
_cpu_busy = bk.machine_busy


def _home(base: Path, name: str, agents: int) -> Path:
    home = base / name
    os.environ["HOLON_HOME"] = str(home)
    from holon_cli.runtime.agents.lifecycle import create_agent

    for i in range(agents):
        create_agent(f"a{i}", exist_ok=True)
    return home


def _start(home: Path, engine: str, url: str | None, name: str, conc: int) -> Any:
    args = ["--engine", engine, "--concurrency", str(conc)]
    if url:
        args += ["--database-url", url]
    needle = "engine dbos: worker" if engine == "dbos" else "watching "
    log = home.parent / f"{home.name}-{name}.log"
    return bk.start_serve(home, log, *args, needle=needle)


def _stop(procs: list[Any]) -> None:
    for p in procs:
        bk.stop(p)


def _admit_all(agents: list[str], per_agent: int) -> float:
    from holon_cli.runtime.enqueue import admit

    t0 = time.time()
    for k in range(per_agent):
        for a in agents:
            admit(f"message {k}", agent_id=a)
    return t0


def _wait_done(n: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with _LOCK:
            if len(DONE) >= n:
                return
        time.sleep(0.05)
    raise SystemExit(f"only {len(DONE)} of {n} turns answered in {timeout:g} s")


SLOTS = 1  # turn slots per worker when worker counts are compared
_RUNS = [0]


def throughput(pg: PgCluster, base: Path, workers: int, a: argparse.Namespace) -> dict[str, Any]:
    _RUNS[0] += 1
    db = f"tp{workers}_{_RUNS[0]}"
    pg.createdb(db)
    url = pg.url.rsplit("/", 1)[0] + "/" + db
    home = _home(base, db, a.agents)
    DELAY[0] = a.provider_ms / 1000
    procs = [_start(home, "dbos", url, f"w{i}", SLOTS) for i in range(workers)]
    try:
        time.sleep(2.0)  # start-up passes settle
        DONE.clear()
        n = a.agents * a.per_agent
        busy0, total0 = _cpu_busy()
        t0 = _admit_all([f"a{i}" for i in range(a.agents)], a.per_agent)
        _wait_done(n, timeout=600)
        busy1, total1 = _cpu_busy()
        wall = DONE[n - 1] - t0
    finally:
        _stop(procs)
    return {
        "workers": workers,
        "turns": n,
        "seconds": round(wall, 2),
        "turns_per_s": round(n / wall, 2),
        "cpu_busy_pct": round(100 * (busy1 - busy0) / max(1.0, total1 - total0), 1),
    }


def per_turn(
    pg: PgCluster, base: Path, engine: str, a: argparse.Namespace, run: int
) -> tuple[float, float, float, float, float]:
    """Wall ms per turn, the worker's CPU ms per turn, and that CPU net of
    what the worker burns idle (its rate over a second before the backlog,
    times the backlog's wall time: DBOS's queue polling and heartbeat are
    paid per second, not per turn)."""
    url = None
    if engine == "dbos":
        pg.createdb(f"overhead{run}")
        url = pg.url.rsplit("/", 1)[0] + f"/overhead{run}"
    home = _home(base, f"ov-{engine}-{run}", 1)
    DELAY[0] = 0.0
    procs = [_start(home, engine, url, "w0", 4)]
    try:
        time.sleep(1.0)
        idle0, t_idle = _cpu_s(procs[0].pid), time.monotonic()
        time.sleep(1.5)
        idle_rate = (_cpu_s(procs[0].pid) - idle0) / (time.monotonic() - t_idle)
        DONE.clear()
        cpu0 = _cpu_s(procs[0].pid)
        t0 = _admit_all(["a0"], a.backlog)
        _wait_done(a.backlog, timeout=300)
        cpu = _cpu_s(procs[0].pid) - cpu0
        wall = DONE[a.backlog - 1] - t0
        net = max(0.0, cpu - idle_rate * wall)
        # the same wall time in two parts: the wake (admission to the first
        # answer: watcher, dequeue, first turn) and the steady state (first
        # answer to last, per turn: what each further turn of a pass costs)
        first = (DONE[0] - t0) * 1000
        steady = (DONE[a.backlog - 1] - DONE[0]) / (a.backlog - 1) * 1000
        return (
            wall / a.backlog * 1000,
            cpu / a.backlog * 1000,
            net / a.backlog * 1000,
            first,
            steady,
        )
    finally:
        _stop(procs)


def recovery(pg: PgCluster, base: Path) -> float:
    pg.createdb("recovery")
    url = pg.url.rsplit("/", 1)[0] + "/recovery"
    home = _home(base, "recovery", 6)
    DELAY[0] = 2.0
    procs = [_start(home, "dbos", url, f"w{i}", 4) for i in range(2)]
    try:
        from holon_cli.runtime.agents.lifecycle import open_agent

        _admit_all([f"a{i}" for i in range(6)], 1)
        victim = procs[0]
        mine = f"-{victim.pid}"

        def started(after: float = 0.0) -> dict[str, tuple[float, str]]:
            out: dict[str, tuple[float, str]] = {}
            for i in range(6):
                from holon_cli import clock

                for e in open_agent(f"a{i}", create_default=False).events.records():
                    at = clock.parse_iso(e["at"])
                    if e["kind"] == "message_processing_started" and at > after:
                        out[f"a{i}"] = (at, e["data"].get("worker", ""))
            return out

        end = time.monotonic() + 60
        while not (mine_agents := [a for a, (_t, w) in started().items() if w.endswith(mine)]):
            if time.monotonic() > end:
                raise SystemExit("the victim never started a turn")
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed = time.time()
        end = time.monotonic() + 120
        while True:
            again = started(killed)
            if all(a in again for a in mine_agents):
                return max(again[a][0] for a in mine_agents) - killed
            if time.monotonic() > end:
                raise SystemExit("the killed worker's turns were not resumed in 120 s")
            time.sleep(0.05)
    finally:
        _stop(procs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--per-agent", type=int, default=2)
    ap.add_argument("--workers", default="2,4", help="worker counts compared with one worker")
    ap.add_argument("--rounds", type=int, default=2, help="throughput rounds (pairs)")
    ap.add_argument("--provider-ms", type=float, default=300)
    ap.add_argument("--backlog", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=5, help="overhead runs (median)")
    ap.add_argument(
        "--tool-rounds", type=int, default=0, help="overhead: tool rounds before each answer"
    )
    ap.add_argument("--parts", default="throughput,overhead,recovery")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        counts = [int(n) for n in a.workers.split(",") if n.strip()]
    except ValueError:
        ap.error("--workers is a comma-separated list of worker counts, e.g. 2,4")
    if not counts or any(n < 2 for n in counts) or a.rounds < 1:
        ap.error("--workers counts must be at least 2 and --rounds at least 1")
    if why := postgres_missing():
        raise bk.broken(why)
    load = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        os.environ.pop(k, None)
    srv = fake.start(Handler)
    fake.use(srv, model="openai/bench")
    out: dict[str, Any] = {}
    parts = set(a.parts.split(","))
    with tempfile.TemporaryDirectory(prefix="holon-scaleout-") as tmp, PgCluster() as pg:
        base = Path(tmp)
        if "throughput" in parts:
            sides = {str(n): (lambda n=n: throughput(pg, base, n, a)) for n in [1, *counts]}
            runs = bk.interleave(sides, a.rounds, warmup=0)
            rows = []
            for n in [1, *counts]:
                rates = [r["turns_per_s"] for r in runs[str(n)]]
                row: dict[str, Any] = {
                    "workers": n,
                    "slots_per_worker": SLOTS,
                    "turns_per_s": bk.spread_json(rates, 2),
                    "cpu_busy_pct": [r["cpu_busy_pct"] for r in runs[str(n)]],
                    "turns": runs[str(n)][0]["turns"],
                }
                if n > 1:
                    ones = [r["turns_per_s"] for r in runs["1"]]
                    row["vs_one_worker"] = bk.spread_json(bk.ratios(rates, ones), 2)
                rows.append(row)
            out["throughput"] = rows
        if "overhead" in parts:
            # paired, alternating order: other jobs on the machine move each figure a lot
            TOOL_ROUNDS[0] = a.tool_rounds
            n_run = [0]

            def one(engine: str) -> Any:
                def run() -> tuple[float, float, float, float, float]:
                    n_run[0] += 1
                    return per_turn(pg, base, engine, a, n_run[0])

                return run

            got = bk.interleave({"local": one("local"), "dbos": one("dbos")}, a.repeats, warmup=0)
            local, dbos = got["local"], got["dbos"]
            local_ms = statistics.median(r[0] for r in local)
            dbos_ms = statistics.median(r[0] for r in dbos)
            local_cpu = statistics.median(r[1] for r in local)
            dbos_cpu = statistics.median(r[1] for r in dbos)
            local_net = statistics.median(r[2] for r in local)
            dbos_net = statistics.median(r[2] for r in dbos)
            diffs = [d[0] - lo[0] for d, lo in zip(dbos, local, strict=True)]
            out["per_turn_ms"] = {
                "tool_rounds": a.tool_rounds,
                "local": round(local_ms, 1),
                "dbos": round(dbos_ms, 1),
                "overhead": round(dbos_ms - local_ms, 1),
                "overhead_per_pair": bk.spread_json(diffs, 1),
                "runs_local": [round(r[0], 1) for r in local],
                "runs_dbos": [round(r[0], 1) for r in dbos],
                # noise only adds: the fastest run of each is the quiet-machine figure
                "overhead_of_fastest": round(min(r[0] for r in dbos) - min(r[0] for r in local), 1),
                "first_answer_local": round(statistics.median(r[3] for r in local), 1),
                "first_answer_dbos": round(statistics.median(r[3] for r in dbos), 1),
                "steady_local": round(statistics.median(r[4] for r in local), 1),
                "steady_dbos": round(statistics.median(r[4] for r in dbos), 1),
                "cpu_local": round(local_cpu, 1),
                "cpu_dbos": round(dbos_cpu, 1),
                "cpu_overhead": round(dbos_cpu - local_cpu, 1),
                "cpu_net_local": round(local_net, 1),
                "cpu_net_dbos": round(dbos_net, 1),
                "cpu_net_overhead": round(dbos_net - local_net, 1),
            }
        if "recovery" in parts:
            out["recovery_s"] = round(recovery(pg, base), 2)
    srv.shutdown()
    goals = bk.Goals()
    for r in out.get("throughput", [])[1:]:
        goals.check(
            f"{r['workers']} workers / one worker, one slot each (median of rounds)",
            r["vs_one_worker"]["median"],
            ">=",
            round(0.8 * r["workers"], 2),
            "x",
        )
    if pt := out.get("per_turn_ms"):
        goals.check(
            "dbos - local wall per turn (median of pairs)",
            pt["overhead_per_pair"]["median"],
            "<=",
            10,
            " ms",
        )
    if "recovery_s" in out:
        goals.check("recovery after SIGKILL", out["recovery_s"], "<=", 10, " s")
    if not a.json:
        for r in out.get("throughput", []):
            tp = r["turns_per_s"]
            vs = r.get("vs_one_worker")
            print(
                f"{r['workers']} worker(s) x {r['slots_per_worker']} slot: median "
                f"{tp['median']:.2f} turns/s (min {tp['min']:.2f}, max {tp['max']:.2f}; "
                f"{tp['n']} rounds of {r['turns']} turns; CPU busy {r['cpu_busy_pct']} %)"
                + (
                    f"; vs one worker per round: median {vs['median']:.2f}x "
                    f"(min {vs['min']:.2f}x, max {vs['max']:.2f}x)"
                    if vs
                    else ""
                )
            )
        if pt := out.get("per_turn_ms"):
            d = pt["overhead_per_pair"]
            print(
                f"per turn (median of {len(pt['runs_local'])} pairs): local {pt['local']} ms, "
                f"dbos {pt['dbos']} ms; dbos - local per pair: median {d['median']} ms "
                f"(min {d['min']}, max {d['max']}); fastest against fastest: "
                f"+{pt['overhead_of_fastest']} ms; worker CPU per turn: local {pt['cpu_local']} "
                f"ms, dbos {pt['cpu_dbos']} ms: +{pt['cpu_overhead']} ms; net of idle CPU: "
                f"local {pt['cpu_net_local']} ms, dbos {pt['cpu_net_dbos']} ms: "
                f"+{pt['cpu_net_overhead']} ms ({pt['tool_rounds']} tool round(s) per turn)\n"
                f"  of which the wake (admission to first answer, median): local "
                f"{pt['first_answer_local']} ms, dbos {pt['first_answer_dbos']} ms; and each "
                f"further turn (first answer to last): local {pt['steady_local']} ms, dbos "
                f"{pt['steady_dbos']} ms: +{round(pt['steady_dbos'] - pt['steady_local'], 1)} ms"
            )
        if "recovery_s" in out:
            print(f"recovery after SIGKILL: {out['recovery_s']} s")
    return bk.finish(goals, load, out, as_json=a.json)


if __name__ == "__main__":
    raise SystemExit(main())
