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
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
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
            output = [
                {
                    "type": "function_call",
                    "id": f"fc_{done}",
                    "call_id": f"call_{done}",
                    "name": "ExecCommand",
                    "arguments": json.dumps({"cmd": OUTPUT_CMD}),
                    "status": "completed",
                }
            ]
        else:
            output = message(f"done after {done} tool rounds")
        self.reply(output, 1000 + 600 * done, 20)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def one_turn(agent: str, rounds: int) -> str:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    Handler.rounds = rounds
    store = open_agent(agent, create_default=False)
    admit(f"a {rounds}-round turn", store=store)
    res = run_turn(store=store, cli_model="openai/bench", catalog=default_catalog())
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


class NoCapture:
    """The observer when records are off (the paired run)."""

    def __init__(self, *a: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def record_cost(turns: int) -> dict[str, Any]:
    from holon_cli.runtime.agents.lifecycle import create_agent
    from holon_cli.runtime.turn import loop

    create_agent("cost-on")
    create_agent("cost-off")
    real = getattr(loop, "TurnCapture")  # noqa: B009 - swapped for the paired run
    walls: dict[str, list[float]] = {"on": [], "off": []}
    cpus: dict[str, list[float]] = {"on": [], "off": []}
    fsyncs: dict[str, list[int]] = {"on": [], "off": []}
    for i in range(turns + 1):
        for side in ("on", "off"):
            setattr(loop, "TurnCapture", real if side == "on" else NoCapture)  # noqa: B010
            before = TO.FSYNCS.calls
            t0, c0 = time.perf_counter(), time.process_time()
            one_turn(f"cost-{side}", 3)
            if i:  # the first turn of each: warm-up (first-use imports, files)
                walls[side].append((time.perf_counter() - t0) * 1000)
                cpus[side].append((time.process_time() - c0) * 1000)
                fsyncs[side].append(TO.FSYNCS.calls - before)
    setattr(loop, "TurnCapture", real)  # noqa: B010

    def med(d: dict[str, list[float]], side: str) -> float:
        return round(statistics.median(d[side]), 1)

    return {
        "turns": turns,
        "wall_ms_median_on": med(walls, "on"),
        "wall_ms_median_off": med(walls, "off"),
        # CPU of this process (the fake provider's thread too, alike on both sides)
        "cpu_ms_median_on": med(cpus, "on"),
        "cpu_ms_median_off": med(cpus, "off"),
        "fsyncs_per_turn_on": statistics.median(fsyncs["on"]),
        "fsyncs_per_turn_off": statistics.median(fsyncs["off"]),
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
    gnu_time = shutil.which("time", path="/usr/bin")

    def proc(*args: str) -> tuple[float, float, int]:
        """Wall ms, CPU ms (user + system) and peak RSS KB of one command (by
        /usr/bin/time: a forked child's own rusage counts the parent's pages
        before exec); without it, CPU by the children's rusage and no RSS."""
        import resource

        with tempfile.NamedTemporaryFile("r") as out:
            cmd = [holon, *args]
            if gnu_time:
                cmd = [gnu_time, "-f", "%U %S %M", "-o", out.name, *cmd]
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
            wall = (time.perf_counter() - t0) * 1000
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            assert p.returncode == 0, (args, p.stderr)
            if gnu_time:
                u, sy, kb = out.read().strip().splitlines()[-1].split()
                return wall, (float(u) + float(sy)) * 1000, int(kb)
        cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000
        return wall, cpu, 0

    proc("replay", turn_id, "--agent", agent)  # the bytecode cache filled
    proc("--version")
    cmd_walls, cmd_cpu, cmd_rss, base_walls, base_cpu, base_rss = [], [], [], [], [], []
    for _ in range(repeats):
        w, c, r = proc("replay", turn_id, "--agent", agent)
        cmd_walls.append(w)
        cmd_cpu.append(c)
        cmd_rss.append(r)
        w, c, r = proc("--version")
        base_walls.append(w)
        base_cpu.append(c)
        base_rss.append(r)
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
    without = {k: v for k, v in sample.items() if not k.startswith("turn_records")}
    on = storage.simulated_year(sample, args.turns, args)
    off = storage.simulated_year(without, args.turns, args)
    return {
        "bytes_per_turn": per_turn,
        "record_bytes_per_turn_in_sample": round(
            len(sample.get("turn_records.jsonl", b"")) / args.turns, 1
        ),
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
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OPENAI_BASE_URL"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    os.environ["OPENAI_API_KEY"] = "bench-key"
    for k in ("HOLON_MODEL", "HOLON_FALLBACK_MODELS"):
        os.environ.pop(k, None)
    from holon_cli.runtime.agents.lifecycle import create_agent

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
        server = ThreadingHTTPServer(("127.0.0.1", 0), TO.Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        os.environ["OPENAI_BASE_URL"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
        year = year_pair(args)
        server.shutdown()
    load2 = load()
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    ok_replay = rep["command_wall_ms_median"] < 500
    ok_year = year is None or year["with_records"]["peak_home_bytes_after_daily_gc"] <= (
        args.max_home_bytes
    )
    figures = {
        "load": [load0, load1, load2],
        "fsync_ms_median": round(fsync_ms, 2),
        "sizes": sizes,
        "cost": cost,
        "replay": rep,
    }
    if year is not None:
        figures["year"] = year
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
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
        print(f"target replay under 0.5 s: {'PASS' if ok_replay else 'FAIL'}")
        if year is not None:
            print(f"target year with records under max_home_bytes: {'PASS' if ok_year else 'FAIL'}")
    return 0 if ok_replay and ok_year else 1


if __name__ == "__main__":
    raise SystemExit(main())
