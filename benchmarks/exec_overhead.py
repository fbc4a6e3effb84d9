#!/usr/bin/env python3
"""Cost of one short ``ExecCommand`` (``true``), through the real tool path.

Prints the median wall time per call and the CPU per call: this process's
own CPU plus that of the processes it started (the supervisor and the
command, counted through ``RUSAGE_CHILDREN`` once they are reaped: the
idle supervisor, which takes the next call, is let go and collected before
and after the timed calls). Also
says how the supervisor was started (the command's parent process name), and
the load average at the start and the end. No goal: a report (exit 0 unless
a call fails).

    python benchmarks/exec_overhead.py [--calls 40] [--sandbox auto|bwrap|none]
        [--network on|off] [--json]

``--sandbox`` (default: leave ``execution.sandbox`` unset, i.e. the default
``auto``) and ``--network`` write ``config.yaml``; the report says what the
command ran under. The execution root is a folder beside the home (never
inside it: the home cannot be a workspace).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402


def let_idle_supervisors_go() -> None:
    """End and collect the idle command supervisors of this process (one
    forked supervisor takes its caller's next command): ``RUSAGE_CHILDREN``
    counts a child's CPU only once it is collected."""
    try:
        from holon_cli.runtime.tasks import forked
    except ImportError:
        return
    retire = getattr(forked, "retire_idle", None)
    if retire is not None:
        retire(wait_s=2.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--sandbox", choices=("auto", "bwrap", "none"), default=None)
    ap.add_argument("--network", choices=("on", "off"), default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.calls < 1:
        ap.error("--calls must be at least 1")
    load = bk.Load()
    base = tempfile.mkdtemp(prefix="holon_exec_bench_")
    home = str(Path(base) / "home")
    os.environ["HOLON_HOME"] = home
    config: dict[str, object] = {}
    if a.sandbox or a.network:
        ex = {k: v for k, v in (("sandbox", a.sandbox), ("network", a.network)) if v}
        config = {"execution": ex}
    from holon_cli.providers.base import ToolCall
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.tools.base import ToolContext, execute
    from holon_cli.tools.catalog import registry

    store = open_agent(None)
    root = Path(base) / "root"
    root.mkdir()
    ctx = ToolContext(
        store=store,
        agent_id=store.agent_id,
        execution_root=root,
        cwd=root,
        workspace_anchor=root,
        turn_id="turn_bench",
        config=config,
    )
    try:
        from holon_cli.runtime.tasks.sandbox import policy

        pol = policy(config, store.agent_id)
        ran_under = f"{pol.backend} ({pol.setting}, network {'on' if pol.network else 'off'})"
    except ImportError:  # a build before execution.sandbox: auto
        ran_under = str(config.get("execution") or "none (default)")
    tool = registry()["ExecCommand"]

    def call(cmd: str) -> dict[str, object]:
        r = execute(tool, ctx, ToolCall(id="c", name="ExecCommand", arguments={"cmd": cmd}))
        assert r.ok and r.data["exit_status"] == 0, r.content
        return r.data

    parent = call("tr '\\0' ' ' < /proc/$PPID/cmdline")["stdout_preview"]
    started = "python -S (new interpreter)" if " -S " in str(parent) else "fork of the caller"
    for _ in range(3):
        call("true")
    let_idle_supervisors_go()  # the calls timed below fork theirs inside the window
    walls: list[float] = []
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(a.calls):
        t = time.perf_counter()
        call("true")
        walls.append((time.perf_counter() - t) * 1000)
    let_idle_supervisors_go()  # collected: their CPU and their commands' count
    time.sleep(0.2)  # let the last supervisor be reaped (a build without the pool)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1000 / a.calls
    kids = (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) * 1000 / a.calls
    label, tail = bk.tail(walls, 90)
    out = {
        "calls": a.calls,
        "supervisor_started_by": started,
        "sandbox": ran_under,
        "wall_ms_median": round(statistics.median(walls), 2),
        "wall_ms_p90": round(tail, 2),
        "wall_tail": label,
        "cpu_ms_per_call_caller": round(own, 2),
        "cpu_ms_per_call_children": round(kids, 2),
        "cpu_ms_per_call_total": round(own + kids, 2),
    }
    if not a.json:
        print(f"ExecCommand `true`, {a.calls} calls; supervisor: {started}; sandbox: {ran_under}")
        print(f"wall per call: median {out['wall_ms_median']} ms, {label} {out['wall_ms_p90']} ms")
        print(
            f"CPU per call: {out['cpu_ms_per_call_total']} ms "
            f"(caller {out['cpu_ms_per_call_caller']} ms + supervisor and command "
            f"{out['cpu_ms_per_call_children']} ms)"
        )
    return bk.finish(bk.Goals(), load, out, as_json=a.json)


if __name__ == "__main__":
    sys.exit(main())
