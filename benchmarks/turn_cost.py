#!/usr/bin/env python3
"""The turn's own cost (issue 44 item 4): what a turn spends that is not the
model's time, counted and compared with ``codex exec`` doing the same rounds.

    python benchmarks/turn_cost.py [--parts fsyncs,cpu,codex] [--rounds 10]
        [--turns 10] [--pairs 8] [--holon PATH] [--codex PATH] [--compare PATH]
        [--judge cpu|wall] [--json]

Three parts, each against a loopback OpenAI Responses server in this process
(``fake_responses.py``) that asks for ``rounds - 1`` tool calls (a shell
``true``) and then answers; the number of rounds travels in the message
(``rounds=N``), so one server serves every side:

* ``fsyncs``: a NAMED agent's turn in this process (``admit`` then
  ``run_turn``, the real Responses transport and ``ExecCommand``), with one
  round and with ``--rounds`` rounds. Every ``os.fsync`` and
  ``os.fdatasync`` of the turn's process is counted, by file. Goals: a
  one-round turn <= 12 fsyncs, <= 3 per extra round. (The forked command
  supervisor is another process and fsyncs nothing for a foreground call.)
* ``cpu``: the same turns, one-round and ``--rounds``-round alternated
  (``--turns`` of each): CPU time of the turn's thread and of the whole
  process (the fake server's threads included alike) per turn, and per
  extra round; and the CPU of each call a forked command supervisor
  serves, from its fork or its previous call's end (``supervisor.run``
  wrapped in this process, so every fork inherits the wrapper), min /
  median / max over the calls. A report, no goal.
* ``codex``: whole processes, as a user pays for them: ``holon run`` (a
  temporary agent) with one round and with ``--rounds`` rounds, and ``codex
  exec`` (Codex CLI 0.169.0, ``--codex``) with the same rounds on the same
  server (its ``exec_command`` tool, ``login: false``; holon's
  ``ExecCommand``). Neither side is sandboxed (holon's home says
  ``execution.sandbox: none``; codex runs with
  ``--dangerously-bypass-approvals-and-sandbox``). The four commands run in
  rotation (round r starts at command r; ``benchkit.interleave``), ``--pairs``
  rounds after a warm-up, so each round is one paired set; each process is
  timed by ``benchkit.run_child``. Per set: the one-turn ratio
  holon / codex (one round each) and the per-round ratio ``(holon_R -
  holon_1) / (codex_R - codex_1)``, on wall time and on CPU time (user +
  system of the process and its children, from ``wait4``). Printed as
  min / median / max over the sets, with the load average at the start and
  the end. Goals: one turn <= 0.5x, per tool round <= 0.25x, judged on the
  median of the CPU ratios (``--judge wall`` judges wall time instead: on
  this shared machine the wall ratio moves with the load, see
  benchmarks/README.md). ``--compare PATH`` adds another build's two
  ``holon run`` rows to the same rotation (an A/B of two builds against
  the same codex runs; rows ``compare``).

Exit 1 when a goal is missed, 2 when a run fails. Bytecode is written for
the child processes (``PYTHONDONTWRITEBYTECODE`` is dropped from their
environment): a user's installed holon has it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402
from fake_responses import ResponsesHandler, message  # noqa: E402

GOAL_FSYNCS_ONE_ROUND = 12
GOAL_FSYNCS_PER_ROUND = 3
GOAL_ONE_TURN = 0.5
GOAL_PER_ROUND = 0.25
CODEX_DEFAULT = "/tmp/codex/node_modules/.bin/codex"
EXIT_MISSED, EXIT_BROKEN = bk.EXIT_MISSED, bk.EXIT_BROKEN
_ROUNDS = re.compile(r"rounds=(\d+)")


class Handler(ResponsesHandler):
    """Asks for a shell ``true`` until the turn's message has ``rounds - 1``
    results, then answers. The message is the last user item naming
    ``rounds=N`` (holon's input may carry earlier turns; codex's starts with
    its environment context); codex is told by its ``exec_command`` tool."""

    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        at, rounds = -1, 1
        for n, item in enumerate(items):
            if item.get("role") == "user":
                m = _ROUNDS.findall(json.dumps(item.get("content")))
                if m:
                    at, rounds = n, int(m[-1])
        done = sum(1 for i in items[at + 1 :] if i.get("type") == "function_call_output")
        codex = any(t.get("name") == "exec_command" for t in body.get("tools") or [])
        if done < rounds - 1:
            name, args = ("exec_command", {"cmd": "true", "login": False}) if codex else (
                "ExecCommand", {"cmd": "true"})  # fmt: skip
            output = [
                {
                    "type": "function_call",
                    "id": f"fc_{done}",
                    "call_id": f"call_{done}",
                    "name": name,
                    "arguments": json.dumps(args),
                    "status": "completed",
                }
            ]
        else:
            output = message("done")
        self.reply(output, 100, 10)


def serve() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


# ------------------------------------------------------------------ pairing


def load() -> str:
    return " ".join(f"{x:.2f}" for x in bk.loadavg())


def spread(values: Sequence[float]) -> dict[str, float]:
    s = bk.spread(values)
    return {"min": s.min, "median": s.median, "max": s.max, "n": s.n}


def fmt(s: dict[str, float], unit: str = "x") -> str:
    return f"{s['median']:.2f}{unit} (min {s['min']:.2f}, max {s['max']:.2f}; {int(s['n'])} sets)"


# ------------------------------------------------------------------ fsyncs


class FsyncLog:
    """Every ``os.fsync``/``os.fdatasync`` of this process, with its file."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self._fsync, self._fdatasync = os.fsync, os.fdatasync
        os.fsync = self._wrap(self._fsync)  # type: ignore[assignment]
        os.fdatasync = self._wrap(self._fdatasync)  # type: ignore[assignment]

    def _wrap(self, real: Callable[[Any], None]) -> Callable[[Any], None]:
        def counted(fd: Any) -> None:
            try:
                path = os.readlink(f"/proc/self/fd/{fd if isinstance(fd, int) else fd.fileno()}")
            except OSError:
                path = "?"
            self.files.append(path)
            real(fd)

        return counted


def _kind(path: str, home: str) -> str:
    rel = path.replace(home, "$HOME")
    rel = re.sub(r"/\.[^/]+\.[0-9a-f]{12}\.tmp$", "/<snapshot tmp>", rel)
    rel = re.sub(r"msg_[0-9a-z]+", "msg_*", rel)
    return rel.replace("$HOME/agents/named/.holon/", "")


def _time_supervisors(into: Path) -> None:
    """Each call a forked supervisor serves writes the CPU it cost to a file
    of its own in ``into``: from the fork (a forked child's counters start at
    zero) for its first call, from the end of its previous call for the next
    ones (a supervisor takes its caller's next call while idle)."""
    from holon_cli.runtime.tasks import supervisor

    real = supervisor.run
    last: dict[str, Any] = {"pid": None, "ms": 0.0, "calls": 0}

    def timed(sup: Any) -> int:
        try:
            return real(sup)
        finally:
            if sup.forked:
                now = time.process_time() * 1000
                if last["pid"] != os.getpid():  # a fresh fork (it inherited the parent's dict)
                    last.update(pid=os.getpid(), ms=0.0, calls=0)
                last["calls"] += 1
                (into / f"{os.getpid()}-{last['calls']}").write_text(str(now - last["ms"]))
                last["ms"] = now

    supervisor.run = timed


def named_agent_turns(url: str, rounds: int, turns: int, parts: set[str]) -> dict[str, Any]:
    """The in-process parts: fsyncs and CPU of a named agent's turns."""
    home = tempfile.mkdtemp(prefix="holon-turn-cost-")
    os.environ["HOLON_HOME"] = home
    os.environ.update(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-bench")
    for k in ("HOLON_MODEL", "HOLON_FALLBACK_MODELS"):
        os.environ.pop(k, None)
    Path(home, "config.yaml").write_text("execution:\n  sandbox: none\n")
    log = FsyncLog()
    supervisors = Path(tempfile.mkdtemp(prefix="holon-turn-cost-sup-"))
    _time_supervisors(supervisors)
    from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    create_agent("named")
    store = open_agent("named", create_default=False)
    catalog = default_catalog()

    def turn(n: int) -> tuple[list[str], float, float]:
        admit(f"do it, rounds={n}", store=store)
        del log.files[:]
        t0, p0 = time.thread_time(), time.process_time()
        res = run_turn(store=store, cli_model="openai/bench", catalog=catalog)
        cpu = ((time.thread_time() - t0) * 1000, (time.process_time() - p0) * 1000)
        if res.status != "completed" or res.model_rounds != n:
            print(f"turn failed: {res.to_dict()}", file=sys.stderr)
            raise SystemExit(EXIT_BROKEN)
        return list(log.files), *cpu

    out: dict[str, Any] = {"load_start": load()}
    try:
        for _ in range(2):  # warm-up: first-use imports, the first turn's files
            turn(1), turn(rounds)
        if "fsyncs" in parts:
            one, _, _ = turn(1)
            many, _, _ = turn(rounds)
            out["fsyncs_one_round"] = len(one)
            out["fsyncs_per_extra_round"] = (len(many) - len(one)) / (rounds - 1)
            out["fsyncs_by_file_one_round"] = dict(Counter(_kind(p, home) for p in one))
        if "cpu" in parts:
            for f in supervisors.iterdir():
                f.unlink()  # the warm-up's
            a: list[tuple[float, float]] = []
            b: list[tuple[float, float]] = []
            for i in range(turns):
                for n in (1, rounds) if i % 2 == 0 else (rounds, 1):
                    _, thread, proc = turn(n)
                    (a if n == 1 else b).append((thread, proc))
            out["cpu_ms"] = {
                "thread_one_round": statistics.median(x[0] for x in a),
                "process_one_round": statistics.median(x[1] for x in a),
                "thread_per_extra_round": statistics.median(
                    (y[0] - x[0]) / (rounds - 1) for x, y in zip(a, b, strict=True)
                ),
                "process_per_extra_round": statistics.median(
                    (y[1] - x[1]) / (rounds - 1) for x, y in zip(a, b, strict=True)
                ),
            }
            spent = [float(f.read_text()) for f in supervisors.iterdir()]
            if len(spent) < turns * (rounds - 1):
                print(f"only {len(spent)} supervisors reported their CPU", file=sys.stderr)
                raise SystemExit(EXIT_BROKEN)
            out["supervisor_cpu_ms"] = spread(spent)
    finally:
        os.fsync, os.fdatasync = log._fsync, log._fdatasync
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(supervisors, ignore_errors=True)
    out["load_end"] = load()
    return out


# ------------------------------------------------------------------ vs codex


def run_child(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall ms and CPU ms (user + system of the child and its reaped children)."""
    child = bk.run_child(argv, env, cwd)  # exits 2 (broken) when the command fails
    return child.wall_ms, child.cpu_ms


def versus_codex(
    url: str, holon: str, codex: str, rounds: int, pairs: int, compare: str | None = None
) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="holon-turn-cost-codex-"))
    try:
        work = tmp / "work"
        work.mkdir()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HOLON_", "OPENAI_", "ANTHROPIC_", "CODEX_"))
            and k != "PYTHONDONTWRITEBYTECODE"
        }
        hhome = tmp / "home"
        hhome.mkdir()
        (hhome / "config.yaml").write_text("execution:\n  sandbox: none\n")
        henv = {**env, "HOLON_HOME": str(hhome), "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk"}
        chome = tmp / "codex-home"
        chome.mkdir()
        cenv = {**env, "CODEX_HOME": str(chome), "BENCH_API_KEY": "sk-bench"}
        provider = (
            f'model_providers.bench={{name="bench", base_url="{url}", '
            'wire_api="responses", env_key="BENCH_API_KEY"}'
        )
        codex_argv = [
            codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
            "-m", "bench", "-c", 'model_provider="bench"', "-c", provider,
        ]  # fmt: skip

        def holon_run(n: int, script: str = holon) -> list[str]:
            return [script, "run", "--model", "openai/bench", f"go, rounds={n}"]

        sides: dict[str, tuple[list[str], dict[str, str]]] = {
            "holon 1": (holon_run(1), henv),
            f"holon {rounds}": (holon_run(rounds), henv),
            "codex 1": ([*codex_argv, "go, rounds=1"], cenv),
            f"codex {rounds}": ([*codex_argv, f"go, rounds={rounds}"], cenv),
        }
        if compare:  # another build, in the same rotation
            sides["compare 1"] = (holon_run(1, compare), henv)
            sides[f"compare {rounds}"] = (holon_run(rounds, compare), henv)
        names = list(sides)
        start = load()

        def side(name: str) -> Callable[[], tuple[float, float]]:
            return lambda: run_child(*sides[name], str(work))

        # round r runs the sides rotated by r; a first round warms caches and
        # writes bytecode (benchkit's pairing)
        got = bk.interleave({n: side(n) for n in names}, pairs)
        h1, hn, c1, cn = (got[n] for n in names[:4])
        out: dict[str, Any] = {"load_start": start, "load_end": load(), "rounds": rounds}

        def per_round(i: int, one: list[Any], many: list[Any]) -> float:
            return float(
                statistics.median(
                    (b[i] - a[i]) / (rounds - 1) for a, b in zip(one, many, strict=True)
                )
            )

        for metric, i in (("wall", 0), ("cpu", 1)):
            out[metric] = {
                "medians_ms": {n: statistics.median(v[i] for v in got[n]) for n in names},
                "one_turn": spread([a[i] / b[i] for a, b in zip(h1, c1, strict=True)]),
                "per_round": spread(
                    [
                        (hb[i] - ha[i]) / (cb[i] - ca[i])
                        for ha, hb, ca, cb in zip(h1, hn, c1, cn, strict=True)
                    ]
                ),
                "per_round_ms": {"holon": per_round(i, h1, hn), "codex": per_round(i, c1, cn)},
            }
            if compare:
                k1, kn = got["compare 1"], got[f"compare {rounds}"]
                out[metric]["compare_one_turn"] = spread(
                    [a[i] / b[i] for a, b in zip(k1, c1, strict=True)]
                )
                out[metric]["compare_per_round"] = spread(
                    [
                        (kb[i] - ka[i]) / (cb[i] - ca[i])
                        for ka, kb, ca, cb in zip(k1, kn, c1, cn, strict=True)
                    ]
                )
                out[metric]["per_round_ms"]["compare"] = per_round(i, k1, kn)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ main


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--parts", default="fsyncs,cpu,codex")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--turns", type=int, default=10, help="cpu: turns of each kind")
    ap.add_argument("--pairs", type=int, default=8, help="codex: paired sets")
    ap.add_argument("--holon", default=shutil.which("holon") or "holon")
    ap.add_argument("--codex", default=shutil.which("codex") or CODEX_DEFAULT)
    ap.add_argument("--judge", choices=("cpu", "wall"), default="cpu")
    ap.add_argument(
        "--compare", default=None, help="codex: another holon script, measured alongside"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if args.rounds < 2 or not parts <= {"fsyncs", "cpu", "codex"}:
        ap.error("--rounds must be at least 2; --parts names fsyncs, cpu, codex")
    server, url = serve()
    report: dict[str, Any] = {}
    missed: list[str] = []
    try:
        if parts & {"fsyncs", "cpu"}:
            report["named_agent"] = named_agent_turns(url, args.rounds, args.turns, parts)
        if "codex" in parts:
            if not os.access(args.codex, os.X_OK):
                print(f"no Codex CLI at {args.codex}", file=sys.stderr)
                return EXIT_BROKEN
            holon = os.path.abspath(args.holon)
            compare = os.path.abspath(args.compare) if args.compare else None
            report["codex"] = versus_codex(url, holon, args.codex, args.rounds, args.pairs, compare)
    finally:
        server.shutdown()
    named = report.get("named_agent", {})
    if "fsyncs_one_round" in named:
        if named["fsyncs_one_round"] > GOAL_FSYNCS_ONE_ROUND:
            missed.append("fsyncs of a one-round turn")
        if named["fsyncs_per_extra_round"] > GOAL_FSYNCS_PER_ROUND:
            missed.append("fsyncs per extra round")
    cx = report.get("codex")
    if cx is not None:
        judged = cx[args.judge]
        if judged["one_turn"]["median"] > GOAL_ONE_TURN:
            missed.append(f"one turn vs codex ({args.judge})")
        if judged["per_round"]["median"] > GOAL_PER_ROUND:
            missed.append(f"per round vs codex ({args.judge})")
    report["missed"] = missed
    if args.json:
        print(json.dumps(report))
        return EXIT_MISSED if missed else 0
    if named:
        print(f"named agent, in process (load {named['load_start']} -> {named['load_end']})")
    if "fsyncs_one_round" in named:
        print(
            f"fsyncs: one-round turn {named['fsyncs_one_round']} (goal <= "
            f"{GOAL_FSYNCS_ONE_ROUND}); per extra round {named['fsyncs_per_extra_round']:.1f} "
            f"(goal <= {GOAL_FSYNCS_PER_ROUND}; {args.rounds}-round turn vs one-round)"
        )
        for path, n in sorted(named["fsyncs_by_file_one_round"].items(), key=lambda x: -x[1]):
            print(f"  {n:3d}  {path}")
    if "cpu_ms" in named:
        c = named["cpu_ms"]
        print(
            f"cpu per turn ({args.turns} of each, alternated): one round "
            f"{c['thread_one_round']:.1f} ms on the turn's thread "
            f"({c['process_one_round']:.1f} ms the process); per extra round "
            f"{c['thread_per_extra_round']:.2f} ms ({c['process_per_extra_round']:.2f} ms)"
        )
        sup = named["supervisor_cpu_ms"]
        print(
            f"forked command supervisor, CPU per call (from its fork, or from its "
            f"previous call's end; {int(sup['n'])} calls): median {sup['median']:.2f} ms "
            f"(min {sup['min']:.2f}, max {sup['max']:.2f})"
        )
    if cx is not None:
        print(
            f"holon run vs codex exec, {args.pairs} rotated sets of 4 processes "
            f"(load {cx['load_start']} -> {cx['load_end']})"
        )
        for metric in ("wall", "cpu"):
            m = cx[metric]
            meds = "  ".join(f"{n} {v:.0f}" for n, v in m["medians_ms"].items())
            print(f"  {metric} medians ms: {meds}")
            print(
                f"  {metric}: one turn {fmt(m['one_turn'])}; per tool round "
                f"{fmt(m['per_round'])}: {m['per_round_ms']['holon']:.1f} vs "
                f"{m['per_round_ms']['codex']:.1f} ms"
            )
            if "compare_one_turn" in m:
                print(
                    f"  {metric} @compare: one turn {fmt(m['compare_one_turn'])}; per tool "
                    f"round {fmt(m['compare_per_round'])}: {m['per_round_ms']['compare']:.1f} ms"
                )
        print(
            f"goals (judged on {args.judge}): one turn <= {GOAL_ONE_TURN}x, "
            f"per tool round <= {GOAL_PER_ROUND}x"
        )
    print("PASS" if not missed else "MISS: " + "; ".join(missed))
    return EXIT_MISSED if missed else 0


if __name__ == "__main__":
    sys.exit(main())
