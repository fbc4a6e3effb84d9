#!/usr/bin/env python3
"""What one TAB press costs in bash, on a home with 100 agents.

    python benchmarks/completion.py [--runs 30] [--agents 100] [--work-items 50] [--json]

A temporary HOLON_HOME gets ``--agents`` agents (``alpha-742`` and
``agent-001``...), ``--work-items`` open work items and one timer on
``alpha-742``. One bash sources ``completions/holon.bash`` and, round after
round, calls ``_holon_completion`` as bash does on TAB (``COMP_WORDS``,
``COMP_CWORD``) for each line below, timing each call with
``$EPOCHREALTIME``; the same loop times ``python -c pass`` with the
interpreter of the ``holon`` script's shebang (the bare interpreter start-up
every TAB pays) and ``holon --version`` (the click-free fast path). Lines run
interleaved round-robin so machine noise hits all alike. For each: the
median and p90 of wall time and the median's ratio to the bare interpreter.
Each completion's reply is checked first (a fast wrong answer is no figure).

No target: a report. A TAB that answers within ~100 ms feels immediate.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

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


def find_holon() -> str:
    here = Path(sys.executable).parent / "holon"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("holon")
    if not found:
        sys.exit("completion: no `holon` next to this interpreter or on PATH; pip install -e .")
    return found


def shebang_interpreter(script: str) -> str:
    with open(script, "rb") as f:
        first = f.readline().decode(errors="replace").strip()
    if first.startswith("#!"):
        words = first[2:].split()
        if words and os.path.basename(words[0]) != "env" and os.access(words[0], os.X_OK):
            return words[0]
    return sys.executable


SETUP = r"""
import sys
from holon_cli.runtime.agents import create_agent
from holon_cli.runtime.agents import open_agent
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


def bash_loop(runs: int, interpreter: str, holon: str) -> str:
    """A bash script printing ``NAME<TAB>MICROSECONDS`` per call, round-robin."""
    lines = [
        f"source {shlex.quote(str(SCRIPT))}",
        't() { local s=${EPOCHREALTIME/./} e; "${@:2}" > /dev/null; e=${EPOCHREALTIME/./};'
        " printf '%s\\t%s\\n' \"$1\" $((e - s)); }",
        'tab() { COMP_WORDS=("${@:2}"); COMP_CWORD=$(( $# - 2 )); _holon_completion holon; }',
        f"for (( r = 0; r < {runs}; r++ )); do",
        f"  t 'python -c pass' {shlex.quote(interpreter)} -c pass",
        f"  t 'holon --version' {shlex.quote(holon)} --version",
    ]
    for name, words in LINES.items():
        lines.append(f"  t {shlex.quote(name)} tab {' '.join(shlex.quote(w) for w in words)}")
    lines.append("done")
    return "\n".join(lines)


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
    holon = find_holon()
    interpreter = shebang_interpreter(holon)
    with tempfile.TemporaryDirectory(prefix="holon-complete-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLON_", "_HOLON"))}
        env["HOLON_HOME"] = str(Path(tmp) / "home")
        env["PATH"] = f"{Path(holon).parent}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        make_home(Path(tmp), args.agents, args.work_items, env)
        check_replies(env, args.agents, args.work_items)
        out = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", bash_loop(args.runs, interpreter, holon)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=3600,
        ).stdout
    samples: dict[str, list[float]] = {}
    for line in out.splitlines():
        name, _, us = line.rpartition("\t")
        samples.setdefault(name, []).append(int(us) / 1000)
    base = statistics.median(samples["python -c pass"])
    rows = []
    for name, ms in samples.items():
        ms.sort()
        med = statistics.median(ms)
        p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
        rows.append({"line": name, "median_ms": med, "p90_ms": p90, "ratio": med / base})
    if args.json:
        print(json.dumps({"agents": args.agents, "runs": args.runs, "rows": rows}, indent=2))
        return 0
    load = os.getloadavg()[0]
    print(
        f"TAB in bash, {args.agents} agents, {args.work_items} work items on alpha-742; "
        f"{args.runs} rounds; load average {load:.2f}"
    )
    width = max(len(r["line"]) for r in rows)
    print(f"{'':{width}}  median ms    p90 ms   x python -c pass")
    for r in rows:
        print(f"{r['line']:{width}}  {r['median_ms']:9.1f} {r['p90_ms']:9.1f}   {r['ratio']:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
