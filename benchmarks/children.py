#!/usr/bin/env python3
"""What child agents cost.

Spawn latency: a real ``holon serve`` (``--concurrency 4``) on a temp home,
the scripted model for parent and child (one script, per-agent sections).
Each sample admits one message to the parent; its turn calls ``SpawnAgent``;
serve notices the new child and runs its turn. The figure is the time from
the parent's ``child_agent_spawned`` event to the start of the child's first
provider request (``provider_round_completed.provider_started_at``), both
stamped by the runtime's clock. Target: p50 <= 100 ms.

Idle children: one parent with 100 live children that each rested after
their first turn (``Sleep``: handle running, nothing queued), against a home
of 101 plain agents. The figure is one ``tick_all`` pass (what ``holon tick
--all`` and serve's sweep run) over each home, the two homes' passes paired
(plain, family; family, plain; ...): the per-pair ratio family / plain as
min / median / max. A report (no goal).

The load average is printed at the start and the end; exit 1 when the spawn
goal is missed.

    python benchmarks/children.py [--samples 30] [--children 100] [--passes 5] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402

SPAWN = {
    "tool_calls": [
        {"name": "SpawnAgent", "arguments": {"initial_message": "Do a small part and report."}}
    ]
}


def _script(path: Path, child_steps: list[Any], parent_steps: list[Any]) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "loop": True,
                "agents": {"child-*": {"steps": child_steps, "loop": True}},
                "steps": parent_steps,
            }
        )
    )
    return f"scripted:{path}"


def _start_serve(home: Path, log: Path) -> subprocess.Popen[bytes]:
    return bk.start_serve(home, log, "--concurrency", "4")


_stop = bk.stop


def _first_request_at(child_id: str) -> float | None:
    from holon_cli import clock
    from holon_cli.runtime.agents.lifecycle import open_agent

    for e in open_agent(child_id, create_default=False).events.records():
        if e["kind"] == "provider_round_completed":
            return clock.parse_iso(e["data"]["provider_started_at"])
    return None


def spawn_latency(base: Path, samples: int) -> dict[str, Any]:
    home = base / "spawn"
    os.environ["HOLON_HOME"] = str(home)
    from holon_cli import clock
    from holon_cli.runtime.agents.lifecycle import create_agent, set_model_override
    from holon_cli.runtime.enqueue import admit

    model = _script(base / "spawn.yaml", ["done"], [SPAWN, "spawned", "ack"])
    parent = create_agent("main")
    set_model_override("main", model)
    proc = _start_serve(home, base / "spawn.log")
    lat: list[float] = []
    try:
        time.sleep(1.0)
        for i in range(samples):
            admit(f"sample {i}", store=parent)
            end = time.monotonic() + 20
            done = None
            while time.monotonic() < end and done is None:
                recs = parent.ledger("delegations").records()
                if sum(1 for r in recs if r["event"] == "completed") > i:
                    done = [r for r in recs if r["event"] == "started"][i]
                time.sleep(0.02)
            if done is None:
                raise SystemExit(f"sample {i}: no child result within 20 s")
            spawned = next(
                clock.parse_iso(e["at"])
                for e in parent.events.records()
                if e["kind"] == "child_agent_spawned"
                and e["data"]["child_agent_id"] == done["child_agent_id"]
            )
            first = _first_request_at(done["child_agent_id"])
            assert first is not None
            lat.append((first - spawned) * 1000)
            time.sleep(0.2)  # the parent's ack turn
    finally:
        _stop(proc)
    label, tail = bk.tail(lat, 90)
    return {
        "samples": len(lat),
        "p50_ms": round(statistics.median(lat), 1),
        "p90_ms": round(tail, 1),
        "tail": label,
        "max_ms": round(max(lat), 1),
    }


def _tick_ms(home: Path) -> float:
    """One ``tick_all`` pass over ``home``, in ms."""
    from holon_cli.runtime.tick import tick_all

    os.environ["HOLON_HOME"] = str(home)
    t0 = time.perf_counter()
    tick_all()
    return (time.perf_counter() - t0) * 1000


def idle_children(base: Path, children: int, passes: int) -> dict[str, Any]:
    from holon_cli.runtime.agents.lifecycle import create_agent, set_model_override

    plain = base / "plain"
    os.environ["HOLON_HOME"] = str(plain)
    for i in range(children + 1):
        create_agent(f"a{i:03d}")

    family = base / "family"
    os.environ["HOLON_HOME"] = str(family)
    from holon_cli.runtime.children.spawn import spawn_private_child
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    rest = {"tool_calls": [{"name": "Sleep", "arguments": {"reason": "idle"}}]}
    model = _script(base / "idle.yaml", [rest], ["x"])
    parent = create_agent("main")
    set_model_override("main", model)
    ids = [spawn_private_child(parent, f"part {i}")["agent_id"] for i in range(children)]
    catalog = default_catalog()
    for cid in ids:
        run_turn(cid, catalog=catalog)
    # the first pair warms up (first-use imports, caches); the homes' passes alternate
    runs = bk.interleave(
        {"plain": lambda: _tick_ms(plain), "family": lambda: _tick_ms(family)}, passes
    )
    os.environ["HOLON_HOME"] = str(family)
    baseline = round(statistics.median(runs["plain"]), 1)
    with_children = round(statistics.median(runs["family"]), 1)
    return {
        "children": children,
        "passes": passes,
        "plain_agents_pass_ms": baseline,
        "parent_with_idle_children_pass_ms": with_children,
        "per_child_ms": round(with_children / children, 2),
        "extra_vs_plain_ms": round(with_children - baseline, 1),
        "family_over_plain": bk.spread_json(bk.ratios(runs["family"], runs["plain"])),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--children", type=int, default=100)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.samples < 1 or args.children < 1 or args.passes < 1:
        ap.error("--samples, --children and --passes must be at least 1")
    load = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run
    with tempfile.TemporaryDirectory(prefix="holon-children-bench-") as tmp:
        base = Path(tmp)
        s = spawn_latency(base, args.samples)
        i = idle_children(base, args.children, args.passes)
    goals = bk.Goals()
    goals.check(
        f"spawn -> first child request p50 ({s['samples']} samples)", s["p50_ms"], "<=", 100, " ms"
    )
    if not args.json:
        print(
            f"spawn -> first child request under serve ({s['samples']} samples): "
            f"p50 {s['p50_ms']} ms, {s['tail']} {s['p90_ms']} ms"
            + (f", max {s['max_ms']} ms" if s["tail"] != "max" else "")
        )
        r = i["family_over_plain"]
        print(
            f"tick pass, parent + {i['children']} idle children: "
            f"{i['parent_with_idle_children_pass_ms']} ms ({i['per_child_ms']} ms a child); "
            f"{i['children'] + 1} plain agents: {i['plain_agents_pass_ms']} ms; per pair "
            f"family / plain median {r['median']:.2f}x (min {r['min']:.2f}x, max {r['max']:.2f}x; "
            f"{r['n']} pairs; a report)"
        )
    return bk.finish(goals, load, {"spawn": s, "idle": i}, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
