#!/usr/bin/env python3
"""Turn records and ``holon replay`` (issue 40), against a loopback provider.

1. Record bytes: turns of 1, 3 and ``--rounds`` provider rounds over the
   real OpenAI Responses transport (each round but the last runs one
   ``ExecCommand`` printing ~2 KB), the ``turn_records`` line per turn and
   per round, and what the packing saves: the same record with every
   request written out whole, with each turn's repeated prefix stored once
   (blobs), and as written (a segment's records also share one copy of
   what every turn repeats: instructions, tool specs).
2. What recording costs a turn: 3-round turns with the record on and off,
   interleaved (one each in turn), median wall per turn and fsyncs per turn.
3. Replay of the ``--rounds`` turn: the provider is shut down and every
   socket connect refused in-process (no network), then ``replay_turn``
   in-process (median of ``--repeats``, peak Python heap by tracemalloc) and
   ``holon replay TURN`` as its own process (wall median, peak RSS by
   ``/usr/bin/time``; bytecode cached as in an install), next to ``holon
   --version`` for the interpreter's own share.
4. ``benchmarks/storage.py``'s simulated year with the records' lines in
   the replayed sample and without them, side by side: the home must stay
   under ``max_home_bytes`` after every daily pass with them.

Goals: replay of the ``--rounds`` turn under 0.5 s (the command's wall
median) with no network; the year's peak with records under
``max_home_bytes``. Exit 1 on a missed goal. The load average is printed
with the figures (the machine is shared).

    python benchmarks/replay.py [--rounds 10] [--turns 15] [--repeats 7]
        [--days 365] [--turns-per-day 50] [--max-home-bytes N] [--json]
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402
import fake_responses as fake  # noqa: E402
import storage  # noqa: E402
import turn_overhead as TO  # noqa: E402
from fake_responses import ResponsesHandler, message, this_turns_results  # noqa: E402

OUTPUT_CMD = "printf '%02048d\\n' 0"  # ~2 KB of tool output a round


class Handler(ResponsesHandler):
    """Asks for ``ExecCommand`` until ``rounds - 1`` results came back, then answers."""

    rounds = 3

    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        done = this_turns_results(body.get("input", []))
        if done < Handler.rounds - 1:
            output = fake.function_call(done, "ExecCommand", {"cmd": OUTPUT_CMD})
        else:
            output = message(f"done after {done} tool rounds")
        self.reply(output, 1000 + 600 * done, 20)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def one_turn(agent: str, rounds: int, *, record: bool = True) -> str:
    """One turn; ``record=False``: the turn record is not kept (the paired
    run: the catalog's hooks without their ``record``)."""
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    Handler.rounds = rounds
    store = open_agent(agent, create_default=False)
    admit(f"a {rounds}-round turn", store=store)
    catalog = default_catalog()
    hooks = catalog.turn_hooks
    if not record and hooks is not None:
        hooks = hooks._replace(record=None)
    res = run_turn(store=store, cli_model="openai/bench", catalog=catalog, hooks=hooks)
    assert res.status == "completed" and res.model_rounds == rounds, res
    return str(res.turn_id)


def record_sizes(agent: str, turn_id: str) -> dict[str, Any]:
    """The stored line, and the same record packed less."""
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.replay import docs
    from holon_cli.runtime.replay import records as R

    store = open_agent(agent, create_default=False)
    found = R.find_line(store, turn_id)
    assert found is not None
    line, path = found
    doc = R.decode(line, path)  # blobs merged back in
    raw_line = len(json.dumps(line, separators=(",", ":")))
    blobs = doc["blobs"]
    whole = docs.unpack({k: v for k, v in doc.items() if k != "blobs"}, blobs)  # nothing shared

    def gz(d: dict[str, Any]) -> int:
        raw = json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode()
        return len(base64.b64encode(gzip.compress(raw, 6, mtime=0)))

    rounds = sum(1 for s in doc["steps"] if s.get("k") == "req")
    return {
        "rounds": rounds,
        "line_bytes": raw_line,
        "line_bytes_per_round": round(raw_line / rounds),
        "decoded_json_bytes": int(line.get("bytes") or 0),
        "if_requests_whole": gz(whole),
        "if_blobs_per_turn": gz(doc),
        "as_written": raw_line,
        "segment_base": "base"
        in json.loads(R.decompress(line["codec"], base64.b64decode(line["data"]))),
    }


def record_cost(turns: int) -> dict[str, Any]:
    """3-round turns with the record on and off, paired (on, off; off, on; ...)."""
    from holon_cli.runtime.agents.lifecycle import create_agent

    create_agent("cost-on")
    create_agent("cost-off")

    def side(on: bool) -> Any:
        def run() -> dict[str, float]:
            before = TO.FSYNCS.calls
            t0, c0 = time.perf_counter(), time.process_time()
            one_turn("cost-on" if on else "cost-off", 3, record=on)
            return {
                "wall": (time.perf_counter() - t0) * 1000,
                "cpu": (time.process_time() - c0) * 1000,
                "fsyncs": float(TO.FSYNCS.calls - before),
            }

        return run

    # the first round of each: warm-up (first-use imports, files)
    runs = bk.interleave({"on": side(True), "off": side(False)}, turns)

    def col(side: str, key: str) -> list[float]:
        return [r[key] for r in runs[side]]

    def med(side: str, key: str) -> float:
        return round(statistics.median(col(side, key)), 1)

    return {
        "turns": turns,
        "wall_ms_median_on": med("on", "wall"),
        "wall_ms_median_off": med("off", "wall"),
        # CPU of this process (the fake provider's thread too, alike on both sides)
        "cpu_ms_median_on": med("on", "cpu"),
        "cpu_ms_median_off": med("off", "cpu"),
        "fsyncs_per_turn_on": statistics.median(col("on", "fsyncs")),
        "fsyncs_per_turn_off": statistics.median(col("off", "fsyncs")),
        "wall_on_over_off": bk.spread_json(bk.ratios(col("on", "wall"), col("off", "wall"))),
        "cpu_on_over_off": bk.spread_json(bk.ratios(col("on", "cpu"), col("off", "cpu"))),
    }


def no_network() -> Any:
    real = socket.socket.connect

    def refuse(self: socket.socket, addr: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise OSError(f"replay benchmark: no network ({addr})")
        real(self, addr)

    setattr(socket.socket, "connect", refuse)  # noqa: B010
    return real


def replay_figures(agent: str, turn_id: str, repeats: int, holon: str) -> dict[str, Any]:
    from holon_cli.runtime.replay.replay import replay_turn
    from holon_cli.tools.catalog import default_catalog

    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        out = replay_turn(turn_id, agent_id=agent, catalog=default_catalog())
        dt = (time.perf_counter() - t0) * 1000
        assert out["match"], out["divergence"]
        if i:
            times.append(dt)
    tracemalloc.start()  # a run of its own: tracing slows Python down severalfold
    replay_turn(turn_id, agent_id=agent, catalog=default_catalog())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # as installed: bytecode cached (the environment may turn it off), in a
    # temporary prefix so the repository stays clean
    pycache = tempfile.mkdtemp(prefix="holon-pycache-")
    env = {**os.environ, "PYTHONPYCACHEPREFIX": pycache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    def proc(*args: str) -> tuple[float, float, int]:
        """Wall ms, CPU ms and peak RSS KB (0 without ``/usr/bin/time``) of one command."""
        got = bk.run_child([holon, *args], env, rss=True)
        return got.wall_ms, got.cpu_ms, int((got.peak_rss_mib or 0) * 1024)

    def proc_version() -> tuple[float, float, int]:
        return proc("--version")

    proc("replay", turn_id, "--agent", agent)  # the bytecode cache filled
    proc_version()
    got = bk.interleave(
        {"replay": lambda: proc("replay", turn_id, "--agent", agent), "version": proc_version},
        repeats,
        warmup=0,  # both ran once above
    )
    cmd_walls, cmd_cpu, cmd_rss = (list(x) for x in zip(*got["replay"], strict=True))
    base_walls, base_cpu, base_rss = (list(x) for x in zip(*got["version"], strict=True))
    shutil.rmtree(pycache, ignore_errors=True)
    return {
        "rounds": out["rounds"],
        "inprocess_ms_median": round(statistics.median(times), 1),
        "inprocess_ms_max": round(max(times), 1),
        "inprocess_peak_heap_mb": round(peak / 1e6, 1),
        "command_wall_ms_median": round(statistics.median(cmd_walls), 1),
        "command_wall_ms_min": round(min(cmd_walls), 1),
        "command_cpu_ms_median": round(statistics.median(cmd_cpu), 1),
        "command_peak_rss_mb": round(max(cmd_rss) / 1024, 1),
        "holon_version_wall_ms_median": round(statistics.median(base_walls), 1),
        "holon_version_cpu_ms_median": round(statistics.median(base_cpu), 1),
        "holon_version_peak_rss_mb": round(max(base_rss) / 1024, 1),
    }


def year_pair(args: argparse.Namespace) -> dict[str, Any]:
    """The simulated year with the records' lines in the sample and without."""
    per_turn = storage.bytes_per_turn(args.turns + 1)
    sample = per_turn.pop("sample_lines")
    n = per_turn["turns"]  # the sample holds this many turns' lines
    without = {k: v for k, v in sample.items() if not k.startswith("turn_records")}
    on = storage.simulated_year(sample, n, args)
    off = storage.simulated_year(without, n, args)
    return {
        "bytes_per_turn": per_turn,
        "record_bytes_per_turn_in_sample": round(len(sample.get("turn_records.jsonl", b"")) / n, 1),
        "with_records": on,
        "without_records": off,
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--turns", type=int, default=15, help="turns per side of the cost pair")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--turns-per-day", type=int, default=50)
    ap.add_argument("--events-days", type=float, default=30)
    ap.add_argument("--transcript-days", type=float, default=90)
    ap.add_argument("--max-home-bytes", type=int, default=256 * 1024 * 1024)
    ap.add_argument("--home-dir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip-year", action="store_true", help="leave out part 4 (slow)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.rounds < 2 or args.turns < 2:
        ap.error("--rounds and --turns must be at least 2")
    holon = shutil.which("holon", path=os.path.dirname(sys.executable)) or "holon"

    home = tempfile.mkdtemp(prefix="holon-bench-replay-", dir=args.home_dir)
    os.environ["HOLON_HOME"] = home
    server = fake.start(Handler)
    fake.use(server)
    from holon_cli.runtime.agents.lifecycle import create_agent

    loads = bk.Load()
    load0 = load()
    fsync_ms = TO.fsync_cost_ms(home)
    create_agent("rec")
    one_turn("rec", 1)  # the segment's first record (the one others share blobs with)
    sizes = {n: record_sizes("rec", one_turn("rec", n)) for n in (1, 3, args.rounds)}
    long_turn = one_turn("rec", args.rounds)
    cost = record_cost(args.turns)
    server.shutdown()
    server.server_close()
    real_connect = no_network()
    try:
        rep = replay_figures("rec", long_turn, args.repeats, holon)
    finally:
        setattr(socket.socket, "connect", real_connect)  # noqa: B010
    load1 = load()
    year = None
    if not args.skip_year:
        server = fake.start(TO.Handler)
        fake.use(server)
        year = year_pair(args)
        server.shutdown()
    load2 = load()
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    goals = bk.Goals()
    goals.check(
        f"`holon replay` of the {args.rounds}-round turn, no network (wall median)",
        rep["command_wall_ms_median"],
        "<",
        500,
        " ms",
    )
    if year is not None:
        goals.check(
            "simulated year with records: peak home bytes after a daily pass",
            year["with_records"]["peak_home_bytes_after_daily_gc"],
            "<=",
            args.max_home_bytes,
            " B",
        )
    figures = {
        "load_points": [load0, load1, load2],
        "fsync_ms_median": round(fsync_ms, 2),
        "sizes": sizes,
        "cost": cost,
        "replay": rep,
    }
    if year is not None:
        figures["year"] = year
    if not args.json:
        print(f"load average (1, 5, 15 min): start {load0}; after replay {load1}; end {load2}")
        print(f"one fsync in the home: {fsync_ms:.2f} ms median")
        for n, s in sizes.items():
            print(
                f"record of a {n}-round turn: {s['line_bytes']:,} B as written "
                f"({s['line_bytes_per_round']:,} B/round, {s['decoded_json_bytes']:,} B decoded); "
                f"{s['if_blobs_per_turn']:,} B if it shared nothing with its segment, "
                f"{s['if_requests_whole']:,} B with every request whole"
            )
        print(
            f"recording, 3-round turns, on vs off interleaved ({cost['turns']} each): wall "
            f"{cost['wall_ms_median_on']} vs {cost['wall_ms_median_off']} ms median, CPU "
            f"{cost['cpu_ms_median_on']} vs {cost['cpu_ms_median_off']} ms; fsyncs "
            f"{cost['fsyncs_per_turn_on']} vs {cost['fsyncs_per_turn_off']} a turn"
        )
        for key, what in (("wall_on_over_off", "wall"), ("cpu_on_over_off", "CPU")):
            r = cost[key]
            print(
                f"  on / off per pair, {what}: median {r['median']:.2f}x (min {r['min']:.2f}x, "
                f"max {r['max']:.2f}x; {r['n']} pairs; a report)"
            )
        print(
            f"replay of the {args.rounds}-round turn, no network: in-process "
            f"{rep['inprocess_ms_median']} ms median (max {rep['inprocess_ms_max']}), "
            f"peak heap {rep['inprocess_peak_heap_mb']} MB; `holon replay` wall "
            f"{rep['command_wall_ms_median']} ms median (min {rep['command_wall_ms_min']}), "
            f"CPU {rep['command_cpu_ms_median']} ms, peak RSS {rep['command_peak_rss_mb']} MB "
            f"(`holon --version`: {rep['holon_version_wall_ms_median']} ms, CPU "
            f"{rep['holon_version_cpu_ms_median']} ms, {rep['holon_version_peak_rss_mb']} MB)"
        )
        if year is not None:
            on, off = year["with_records"], year["without_records"]
            peak_on = on["peak_home_bytes_after_daily_gc"]
            print(
                f"simulated year ({on['days']} days x {on['turns_per_day']} turns, events "
                f"{on['events_days']:g} d): records {year['record_bytes_per_turn_in_sample']:,} "
                f"B/turn in the sample; peak after the daily pass {peak_on:,} B "
                f"with records, {off['peak_home_bytes_after_daily_gc']:,} B without; "
                f"max_home_bytes {args.max_home_bytes:,}"
            )
            print(f"  with records, final by kind: {on['final_by_kind']}")
    return bk.finish(goals, loads, figures, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
