#!/usr/bin/env python3
"""What one TAB press costs in bash, on a home with 100 agents.

    python benchmarks/completion.py [--runs 30] [--agents 100] [--work-items 50] [--json]

A temporary HOLON_HOME gets ``--agents`` agents (``alpha-742`` and
``agent-001``...), ``--work-items`` open work items and one timer on
``alpha-742``. Each measurement is one bash that sources
``completions/holon.bash`` and calls ``_holon_completion`` as bash does on
TAB (``COMP_WORDS``, ``COMP_CWORD``) for one line below; the same kind of
bash runs ``python -c pass`` with the interpreter of the ``holon`` script's
shebang (the bare interpreter start-up every TAB pays) and ``holon
--version`` (the click-free fast path), so all pay the same bash. Lines run
interleaved, round r starting at line r, so machine noise and order hit all
alike. For each: the median and the tail (p90, or the max with fewer than
10 rounds) of wall time, the median CPU time (user + system of bash and
what it ran, from ``wait4``; steadier than wall on a busy machine), and the
per-round ratio to the bare interpreter's run of the same round (median,
min-max). Each completion's reply is checked first (a fast wrong answer is
no figure). The load average is printed at the start and the end.

No goal: a report (exit 0 unless a reply is wrong or a run fails). A TAB
that answers within ~100 ms feels immediate.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "completions" / "holon.bash"

# name -> (words, the cursor's word last; a check of COMPREPLY)
LINES: dict[str, list[str]] = {
    "holon <TAB>": ["holon", ""],
    "holon agent st<TAB>": ["holon", "agent", "st"],
    "holon enqueue --priority <TAB>": ["holon", "enqueue", "--priority", ""],
    "holon agent status al<TAB>": ["holon", "agent", "status", "al"],
    "holon agent status <TAB> (all agents)": ["holon", "agent", "status", ""],
    "holon workitem pick -a alpha-742 <TAB>": ["holon", "workitem", "pick", "-a", "alpha-742", ""],
    "holon timer cancel -a alpha-742 <TAB>": ["holon", "timer", "cancel", "-a", "alpha-742", ""],
}


find_holon = bk.find_holon
shebang_interpreter = bk.shebang_interpreter


SETUP = r"""
import sys
from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.workitems import create_work_item
from holon_cli.runtime.waiting.timers import add_timer
agents, items = int(sys.argv[1]), int(sys.argv[2])
create_agent("alpha-742")
for i in range(1, agents):
    create_agent(f"agent-{i:03d}")
store = open_agent("alpha-742")
for i in range(items):
    create_work_item(store, f"work item number {i}")
add_timer(store, after_ms=3_600_000, message="check CI")
"""


def make_home(root: Path, agents: int, items: int, env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-c", SETUP, str(agents), str(items)], env=env, check=True, timeout=600
    )


def bash_line(words: list[str] | None, argv: list[str] | None = None) -> str:
    """One bash run: source the script, then one TAB on ``words`` (or run ``argv``)."""
    src = f"source {shlex.quote(str(SCRIPT))}; "
    if words is None:
        return src + " ".join(shlex.quote(a) for a in argv or [])
    quoted = " ".join(shlex.quote(w) for w in words)
    return src + f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _holon_completion holon"


def timed(script: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one bash run; CPU is user + system of bash and
    everything it ran (``wait4`` counts the children it reaped)."""
    got = bk.run_child(["bash", "--norc", "--noprofile", "-c", script], env)
    return got.wall_ms, got.cpu_ms


def check_replies(env: dict[str, str], agents: int, items: int) -> None:
    expect = {
        "holon agent status al<TAB>": 1,
        "holon agent status <TAB> (all agents)": agents,
        "holon workitem pick -a alpha-742 <TAB>": items,
        "holon timer cancel -a alpha-742 <TAB>": 1,
        "holon agent st<TAB>": 3,
    }
    for name, n in expect.items():
        words = LINES[name]
        src = (
            f"source {shlex.quote(str(SCRIPT))}; "
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
            f"COMP_CWORD={len(words) - 1}; _holon_completion holon; echo ${{#COMPREPLY[@]}}"
        )
        out = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", src],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        ).stdout.strip()
        if out != str(n):
            sys.exit(f"completion: {name!r} offered {out} values, expected {n}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--agents", type=int, default=100)
    ap.add_argument("--work-items", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.runs < 1 or args.agents < 1 or args.work_items < 1:
        ap.error("--runs, --agents and --work-items must be at least 1")
    load = bk.Load()
    holon = find_holon()
    interpreter = shebang_interpreter(holon)
    with tempfile.TemporaryDirectory(prefix="holon-complete-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLON_", "_HOLON"))}
        env["HOLON_HOME"] = str(Path(tmp) / "home")
        env["PATH"] = f"{Path(holon).parent}{os.pathsep}{env.get('PATH', '')}"
        # bytecode as an installed package has it, even when the environment
        # says not to write any (else every TAB compiles holon_cli again)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        make_home(Path(tmp), args.agents, args.work_items, env)
        check_replies(env, args.agents, args.work_items)
        scripts = {
            "python -c pass": bash_line(None, [interpreter, "-c", "pass"]),
            "holon --version": bash_line(None, [holon, "--version"]),
            **{name: bash_line(words) for name, words in LINES.items()},
        }
        # round r starts at line r; the first round warms caches and is not counted
        runs = bk.interleave(
            {name: (lambda script=script: timed(script, env)) for name, script in scripts.items()},
            args.runs,
        )
    walls = {name: [w for w, _ in got] for name, got in runs.items()}
    cpus = {name: [c for _, c in got] for name, got in runs.items()}
    base_wall = statistics.median(walls["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    rows = []
    for name in scripts:
        label, tail = bk.tail(walls[name], 90)
        med, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        rows.append(
            {
                "line": name,
                "median_ms": med,
                "p90_ms": tail,
                "tail": label,
                "ratio": med / base_wall,
                "cpu_ms": cpu,
                "cpu_ratio": cpu / base_cpu,
                "ratio_per_round": bk.spread_json(bk.ratios(walls[name], walls["python -c pass"])),
            }
        )
    goals = bk.Goals()  # a report: no goal
    report = {"agents": args.agents, "runs": args.runs, "rows": rows}
    if not args.json:
        print(
            f"TAB in bash, {args.agents} agents, {args.work_items} work items on alpha-742; "
            f"{args.runs} rounds; each line is one bash that sources completions/holon.bash first"
        )
        width = max(len(r["line"]) for r in rows)
        print(f"{'':{width}}  wall med        tail   cpu med   per-round ratio (median, min-max)")
        for r in rows:
            rr = r["ratio_per_round"]
            print(
                f"{r['line']:{width}}  {r['median_ms']:6.1f}ms {r['tail']:>4} "
                f"{r['p90_ms']:6.1f}ms  {r['cpu_ms']:6.1f}ms   {rr['median']:.2f}x "
                f"({rr['min']:.2f}-{rr['max']:.2f})"
            )
    return bk.finish(goals, load, report, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
