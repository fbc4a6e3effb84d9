#!/usr/bin/env python3
"""Bounded storage figures (issue 29 item 4), against a loopback provider.

1. Bytes per turn: a typical tool-loop turn (three rounds over the real
   OpenAI Responses transport, two ``ExecCommand`` calls, as
   ``turn_overhead.py``), measured per kind of file as written, and after
   ``holon home gc`` closed and compressed the open segments.
2. A simulated year of one busy agent: the ledger lines those real turns
   wrote, replayed ``--turns-per-day`` times a day (renumbered, re-dated)
   for ``--days`` days, with serve's daily retention pass (``gc_home`` at
   each simulated midnight) under ``--events-days``, ``--transcript-days``
   and ``--max-home-bytes``: the home must stay under ``max_home_bytes``
   after every daily pass.
3. Per-turn cost flat at ``--history`` (default 1,000,000) events of history
   (as many transcript entries), in closed compressed segments: each measured
   turn is the first after the agent's open segments were closed (the moment
   right after serve's daily pass, when a turn's recent window must come from
   the closed history), on a fresh agent and on the one with history, paired
   (fresh, history; history, fresh; ...). Goal: the median of the per-pair
   ratio of runtime overhead per provider round <= 1.1.

Goals are checked and the script exits 1 on a miss: the home under
``max_home_bytes`` after every daily pass; the per-turn ratio. The load
average is printed at the start and the end.

    python benchmarks/storage.py [--turns 10] [--days 365] [--turns-per-day 50]
        [--history 1000000] [--max-home-bytes 268435456] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402
import fake_responses as fake  # noqa: E402
import turn_overhead as TO  # noqa: E402

DAY = 86400.0
SEQ = re.compile(rb'"event_seq":(\d+)')


def ledger_snapshot(agent_home: Path) -> dict[str, int]:
    d = agent_home / ".holon" / "ledger"
    return {p.name: p.stat().st_size for p in d.glob("*.jsonl")}


def appended(agent_home: Path, before: dict[str, int]) -> dict[str, bytes]:
    d = agent_home / ".holon" / "ledger"
    out = {}
    for p in d.glob("*.jsonl"):
        with open(p, "rb") as f:
            f.seek(before.get(p.name, 0))
            out[p.name] = f.read()
    return out


def bytes_per_turn(turns: int) -> dict[str, Any]:
    from holon_cli.runtime.agents.lifecycle import create_agent
    from holon_cli.runtime.home.gc import gc_home
    from holon_cli.store.retention import agent_usage

    store = create_agent("perturn")
    for _ in range(2):  # warm-up turns: first-use imports and files exist
        TO.one_turn("perturn")
    u0 = agent_usage(store.layout.home)
    led0 = ledger_snapshot(store.layout.home)
    for _ in range(turns):  # the turns whose bytes are counted
        TO.one_turn("perturn")
    u1 = agent_usage(store.layout.home)
    lines = appended(store.layout.home, led0)
    gc_home()
    u2 = agent_usage(store.layout.home)
    seg_dir = store.layout.ledger_dir / "segments"
    gz = {
        n: sum(p.stat().st_size for p in seg_dir.glob(f"{n}.*.jsonl.gz"))
        for n in ("events", "transcript")
    }
    raw = {n: len(lines.get(f"{n}.jsonl", b"")) for n in ("events", "transcript")}

    def per_kind(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
        kinds = set(a["by_kind"]) | set(b["by_kind"])
        return {
            k: round((b["by_kind"].get(k, 0) - a["by_kind"].get(k, 0)) / turns, 1)
            for k in sorted(kinds)
        }

    return {
        "turns": turns,
        "raw_bytes_per_turn": round((u1["bytes"] - u0["bytes"]) / turns, 1),
        "raw_by_kind": per_kind(u0, u1),
        "compressed_bytes_per_turn": round((u2["bytes"] - u0["bytes"]) / turns, 1),
        "compressed_by_kind": per_kind(u0, u2),
        # the closed segments alone: the constant sidecars (the newest segment's
        # copy of the last 256 records, the last record) are left out
        "segment_gz_bytes_per_turn": {n: round(v / turns, 1) for n, v in gz.items()},
        "segment_ratio": {n: round(raw[n] / gz[n], 2) if gz[n] else None for n in gz},
        "sample_lines": lines,
    }


def renumber(chunk: bytes, start: int) -> tuple[bytes, int]:
    seq = start

    def bump(_m: re.Match[bytes]) -> bytes:
        nonlocal seq
        seq += 1
        return b'"event_seq":%d' % seq

    return SEQ.sub(bump, chunk), seq


def simulated_year(
    sample: dict[str, bytes], turns: int, args: argparse.Namespace
) -> dict[str, Any]:
    from holon_cli.runtime.agents.lifecycle import create_agent
    from holon_cli.runtime.home.gc import gc_home
    from holon_cli.store.retention import agent_usage, tree_bytes

    home = Path(tempfile.mkdtemp(prefix="holon-year-", dir=args.home_dir))
    os.environ["HOLON_HOME"] = str(home)
    (home / "config.yaml").write_text(
        "retention:\n"
        f"  events_days: {args.events_days}\n"
        f"  transcript_days: {args.transcript_days}\n"
        f"  max_home_bytes: {args.max_home_bytes}\n"
    )
    store = create_agent("busy")
    led = store.layout.ledger_dir
    seq = store.events.last()["event_seq"]
    reps, extra = divmod(args.turns_per_day, turns)
    start = time.time() - args.days * DAY
    peak_after_gc = peak_before_gc = 0
    t0 = time.perf_counter()
    for day in range(args.days):
        day_t = start + day * DAY
        for name, chunk in sample.items():
            if not chunk:
                continue
            body = chunk * reps
            if extra:  # the remaining turns: the same share of the sample's lines
                lines = chunk.splitlines(keepends=True)
                body += b"".join(lines[: len(lines) * extra // turns])
            if name == "events.jsonl":
                body, seq = renumber(body, seq)
            with open(led / name, "ab") as f:
                f.write(body)
            os.utime(led / name, (day_t + DAY - 1, day_t + DAY - 1))
        peak_before_gc = max(peak_before_gc, tree_bytes(home))
        gc_home(now=day_t + DAY)
        peak_after_gc = max(peak_after_gc, tree_bytes(home))
    use = agent_usage(store.layout.home)
    out = {
        "days": args.days,
        "turns_per_day": args.turns_per_day,
        "events_days": args.events_days,
        "transcript_days": args.transcript_days,
        "max_home_bytes": args.max_home_bytes,
        "peak_home_bytes_before_daily_gc": peak_before_gc,
        "peak_home_bytes_after_daily_gc": peak_after_gc,
        "final_home_bytes": tree_bytes(home),
        "final_by_kind": use["by_kind"],
        "events_kept": len(store.events.records()),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    return out


def seed_segments(store: Any, n: int) -> None:
    """``n`` events and ``n`` transcript entries, closed into ~8 MiB segments."""
    from holon_cli.store import ledger as L

    seq = store.events.last()["event_seq"]
    for name in ("events", "transcript"):
        led = store.ledger(name)
        f = open(led.path, "ab")
        written = 0
        for i in range(n):
            if name == "events":
                seq += 1
                rec = TO.history_event(store.agent_id, i, seq, None)
            else:
                rec = TO.history_entry(i, None)
            line = (json.dumps(rec, separators=(",", ":")) + "\n").encode()
            f.write(line)
            written += len(line)
            if written >= L.SEGMENT_BYTES:
                f.close()
                led.close_segment()
                f = open(led.path, "ab")
                written = 0
        f.close()
        if name == "events":
            L.write_mark(led.mark_path, led.size(), seq)
        led.close_segment()


def after_daily_pass(agent_id: str) -> dict[str, float]:
    """One turn, the first after the agent's open segments were closed (what
    serve's daily pass does), so its recent window comes from closed history."""
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.store.agent_store import SEGMENTED

    store = open_agent(agent_id, create_default=False)
    for name in SEGMENTED:
        store.ledger(name).close_segment()
    return TO.one_turn(agent_id)


def flat_at_history(turns: int, history: int) -> dict[str, Any]:
    from holon_cli.runtime.agents.lifecycle import create_agent

    create_agent("fresh")
    big = create_agent("history")
    t0 = time.perf_counter()
    seed_segments(big, history)
    seed_s = time.perf_counter() - t0
    # paired, in alternating order, so machine load and warm caches hit both alike
    runs = bk.interleave(
        {
            "fresh": lambda: after_daily_pass("fresh"),
            "history": lambda: after_daily_pass("history"),
        },
        turns,
    )
    fresh, hist = TO.summarize(runs["fresh"]), TO.summarize(runs["history"])

    def col(name: str, key: str) -> list[float]:
        return [r[key] for r in runs[name]]

    ratio = bk.ratios(
        col("history", "overhead_per_round_ms"), col("fresh", "overhead_per_round_ms")
    )
    wall = bk.ratios(col("history", "wall_ms"), col("fresh", "wall_ms"))
    return {
        "history_events": history,
        "closed_segments": len(big.events.closed_segments()),
        "seed_seconds": round(seed_s, 1),
        "fresh": fresh,
        "history": hist,
        "overhead_ratio": bk.spread_json(ratio),
        "wall_ratio": bk.spread_json(wall),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--turns-per-day", type=int, default=50)
    ap.add_argument("--events-days", type=float, default=30)
    ap.add_argument("--transcript-days", type=float, default=90)
    ap.add_argument("--max-home-bytes", type=int, default=256 * 1024 * 1024)
    ap.add_argument("--history", type=int, default=1_000_000)
    ap.add_argument("--home-dir", default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary homes")
    args = ap.parse_args()
    if args.turns < 2:
        ap.error("--turns must be at least 2")
    load = bk.Load()

    home = tempfile.mkdtemp(prefix="holon-bench-", dir=args.home_dir)
    os.environ["HOLON_HOME"] = home
    server = fake.start(TO.Handler)
    fake.use(server)

    per_turn = bytes_per_turn(args.turns)
    flat = flat_at_history(args.turns, args.history)
    server.shutdown()
    sample = per_turn.pop("sample_lines")
    # the sample holds the lines of exactly per_turn["turns"] turns (this said
    # one fewer before: the year replayed turns / (turns - 1) times too many)
    year = simulated_year(sample, per_turn["turns"], args)
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    goals = bk.Goals()
    goals.check(
        "simulated year: peak home bytes after a daily pass",
        year["peak_home_bytes_after_daily_gc"],
        "<=",
        args.max_home_bytes,
        " B",
    )
    goals.check(
        f"per-turn overhead at {args.history:,} events / fresh (median of pairs)",
        flat["overhead_ratio"]["median"],
        "<=",
        1.1,
        "x",
    )
    if not args.json:
        print(
            "bytes per turn (3-round tool loop): "
            f"{per_turn['raw_bytes_per_turn']:,.0f} as written, "
            f"{per_turn['compressed_bytes_per_turn']:,.0f} after gc"
        )
        print(f"  as written by kind: {per_turn['raw_by_kind']}")
        print(f"  after gc by kind:   {per_turn['compressed_by_kind']}")
        print(
            f"  closed segments alone (gzip): {per_turn['segment_gz_bytes_per_turn']} bytes per "
            f"turn, ratio {per_turn['segment_ratio']}"
        )
        print(
            f"simulated year ({year['days']} days x {year['turns_per_day']} turns, events "
            f"{year['events_days']:g} d, transcript {year['transcript_days']:g} d): peak "
            f"{year['peak_home_bytes_after_daily_gc']:,} B after the daily pass "
            f"({year['peak_home_bytes_before_daily_gc']:,} B before), final "
            f"{year['final_home_bytes']:,} B, max_home_bytes {args.max_home_bytes:,} "
            f"({year['seconds']} s)"
        )
        print(f"  final by kind: {year['final_by_kind']}")
        o, w = flat["overhead_ratio"], flat["wall_ratio"]
        print(
            f"per-turn cost at {flat['history_events']:,} events ({flat['closed_segments']} closed "
            f"segments, seeded in {flat['seed_seconds']} s), each turn the first after its "
            f"open segments closed, {o['n']} pairs: overhead per round "
            f"{flat['fresh']['overhead_per_round_ms_median']:.1f} ms fresh, "
            f"{flat['history']['overhead_per_round_ms_median']:.1f} ms with history"
        )
        print(
            f"  history / fresh per pair: overhead median {o['median']:.2f}x (min {o['min']:.2f}x, "
            f"max {o['max']:.2f}x); turn wall median {w['median']:.2f}x (min {w['min']:.2f}x, "
            f"max {w['max']:.2f}x)"
        )
    report = {"bytes_per_turn": per_turn, "year": year, "flat": flat}
    return bk.finish(goals, load, report, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
