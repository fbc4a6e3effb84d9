"""The MCP client's costs (issue 38), measured side by side in one run.

    python benchmarks/mcp.py [--pairs 8] [--holon PATH] [--codex PATH]
        [--server fake|time] [--parts overhead,serve,startup,first-call] [--json]

Every comparison is paired in alternating order (A B, B A, ...:
``benchkit.interleave``); each pair gives a ratio B/A and the min, median
and max of those ratios are printed with the medians of A and B and the
machine's load average at the start and the end. A loopback
OpenAI Responses server in this process plays the model (``fake_responses.py``):
it answers the first request of a turn with one tool call chosen by the
message (``exec``: ``ExecCommand`` running ``echo hi``; ``mcp``: the MCP tool
``echo`` with ``{"text": "hi"}``), then "done".

Parts:

* ``overhead``: a whole ``holon turn`` (a fresh process; the server's tool
  list cached, as for a cron turn) whose one tool call is A: ``ExecCommand``
  ``echo hi``, B: the MCP server's ``echo``: the MCP call starts the server
  and imports the SDK in that turn (cold).
* ``serve``: the same two turns under ``holon serve`` (two agents, the MCP
  server kept warm after a first turn); the turn's duration from serve's log.
* ``startup``: ``holon enqueue`` and ``holon status`` on a home without
  ``mcp_servers`` (A) and with three servers configured and listed (B).
  Goal: unchanged, median ratio <= 1.10 (no MCP code on enqueue; status
  reads the servers' records, no SDK).
* ``first-call``: time from starting the process to the MCP server receiving
  ``tools/call``: ``holon turn`` (A, cached tool list: the server starts at
  the call) against ``codex exec`` (B, Codex CLI with the same server in its
  ``config.toml``; ``--dangerously-bypass-approvals-and-sandbox``, since
  ``codex exec`` refuses an MCP call that needs approval). Goal: holon <=
  0.5x Codex (median of per-pair ratios A/B).

``--server``: ``fake`` (tests/mcp_fake_server.py, standard library, starts
in ~20 ms) or ``time`` (PyPI mcp-server-time, which imports the SDK itself).
Exits 1 when a goal is missed, 2 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402
import fake_responses as fake  # noqa: E402
from fake_responses import ResponsesHandler, message, this_turn  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "mcp_fake_server.py"
STARTUP_GOAL = 1.10
CODEX_GOAL = 0.5
CODEX_DEFAULT = "/tmp/codex/node_modules/.bin/codex"


class Handler(ResponsesHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        items = this_turn([i for i in body.get("input") or [] if isinstance(i, dict)])
        if any(i.get("type") == "function_call_output" for i in items):
            self.reply(message("done"), 100, 2)
            return
        users = [i for i in items if i.get("role") == "user"]
        text = json.dumps(users[-1] if users else items)  # this turn's message only
        codex = any(t.get("type") == "namespace" for t in body.get("tools") or [])
        if codex:
            call = {"name": "echo", "namespace": "mcp__bench"}
            args: dict[str, Any] = {"text": "hi"}
        elif "exec-please" in text:
            call, args = {"name": "ExecCommand"}, {"cmd": "echo hi"}
        else:
            call, args = {"name": "mcp__bench__echo"}, {"text": "hi"}
        item = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "arguments": json.dumps(args),
            "status": "completed",
            **call,
        }
        self.reply([item], 100, 2)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in bk.loadavg())


def stats(a: list[float], b: list[float]) -> dict[str, float]:
    r = bk.spread(bk.ratios(b, a))
    return {
        "a_median_ms": round(statistics.median(a), 1),
        "b_median_ms": round(statistics.median(b), 1),
        "ratio_min": round(r.min, 2),
        "ratio_median": round(r.median, 2),
        "ratio_max": round(r.max, 2),
        "delta_median_ms": round(statistics.median(y - x for x, y in zip(a, b, strict=True)), 1),
    }


def paired(a: Any, b: Any, pairs: int) -> dict[str, float]:
    """A and B paired in alternating order, after one warm-up round."""
    got = bk.interleave({"a": a, "b": b}, pairs)
    return stats(got["a"], got["b"])


def run(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t = time.perf_counter()
    res = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    wall = (time.perf_counter() - t) * 1000
    if res.returncode != 0:
        raise bk.broken(f"{' '.join(argv)} exited {res.returncode}: {res.stderr[-800:]}")
    return wall


def server_entry(kind: str, log: Path | None) -> dict[str, Any]:
    if kind == "time":
        return {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
    args = [str(FAKE)] + (["--log", str(log)] if log else [])
    return {"command": sys.executable, "args": args}


def write_home(home: Path, servers: dict[str, Any] | None, url: str) -> None:
    import yaml

    home.mkdir(parents=True, exist_ok=True)
    # the servers run unconfined, as Codex's do under
    # --dangerously-bypass-approvals-and-sandbox (and the fake server's log
    # under /tmp must be the host's: a sandbox gives commands their own /tmp)
    cfg: dict[str, Any] = {"execution": {"sandbox": "none"}}
    if servers:
        cfg["mcp_servers"] = servers
    (home / "config.yaml").write_text(yaml.safe_dump(cfg))


def base_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLON_", "OPENAI_"))}
    env.update(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-bench", NO_PROXY="127.0.0.1")
    return env


def part_overhead(holon: str, url: str, tmp: Path, pairs: int, server: str) -> dict[str, Any]:
    home = tmp / "overhead"
    write_home(home, {"bench": server_entry(server, None)}, url)
    env = {**base_env(url), "HOLON_HOME": str(home)}
    run([holon, "mcp", "refresh"], env, tmp)  # a cron turn finds the list cached
    turn = [holon, "turn", "--model", "openai/bench"]

    def one(msg: str) -> float:
        run([holon, "enqueue", msg], env, tmp)
        return run(turn, env, tmp)

    # the warm-up round fills caches and .pyc files
    return paired(lambda: one("exec-please"), lambda: one("mcp-please"), pairs)


def part_serve(holon: str, url: str, tmp: Path, pairs: int, server: str) -> dict[str, Any]:
    home = tmp / "serve"
    write_home(home, {"bench": server_entry(server, None)}, url)
    env = {**base_env(url), "HOLON_HOME": str(home), "HOLON_MODEL": "openai/bench"}
    for agent in ("ex", "mc"):
        run([holon, "agent", "create", agent], env, tmp)
    log = tmp / "serve.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            [holon, "serve", "--listen", "127.0.0.1:0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=f,
        )
    done_re = re.compile(r"(\w+): turn \S+ completed \(message (\S+), (\d+) ms\)")

    def one(agent: str, msg: str) -> float:
        out = subprocess.run(
            [holon, "enqueue", "--agent", agent, msg],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        mid = out.stdout.strip()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            for m in done_re.finditer(log.read_text()):
                if m.group(2) == mid:
                    return float(m.group(3))
            time.sleep(0.02)
        raise SystemExit(f"serve did not finish {mid}:\n{log.read_text()[-2000:]}")

    try:
        end = time.monotonic() + 30
        while "watching" not in log.read_text():
            if time.monotonic() > end or proc.poll() is not None:
                raise SystemExit(f"serve did not start:\n{log.read_text()}")
            time.sleep(0.05)
        # the warm-up round starts the MCP server, which then stays
        got = paired(lambda: one("ex", "exec-please"), lambda: one("mc", "mcp-please"), pairs)
    finally:
        bk.stop(proc)
    return got


def part_startup(holon: str, url: str, tmp: Path, pairs: int, server: str) -> dict[str, Any]:
    plain, with_mcp = tmp / "plain", tmp / "with-mcp"
    write_home(plain, None, url)
    servers = {n: server_entry("fake", None) for n in ("one", "two", "three")}
    write_home(with_mcp, servers, url)
    envs = [{**base_env(url), "HOLON_HOME": str(h)} for h in (plain, with_mcp)]
    run([holon, "mcp", "refresh"], envs[1], tmp)
    out: dict[str, Any] = {}
    for cmd in (["enqueue", "hi"], ["status"]):
        out[cmd[0]] = paired(
            lambda cmd=cmd: run([holon, *cmd], envs[0], tmp),
            lambda cmd=cmd: run([holon, *cmd], envs[1], tmp),
            pairs * 2,
        )
    return out


def first_call_s(log: Path, t0: float) -> float:
    for line in log.read_text().splitlines():
        rec = json.loads(line)
        if rec["method"] == "tools/call":
            return (rec["t"] - t0) * 1000
    raise SystemExit(f"no tools/call in {log}")


def part_first_call(
    holon: str, codex: str | None, url: str, tmp: Path, pairs: int, server: str
) -> dict[str, Any] | None:
    if server != "fake":
        print("first-call: timed with the fake server (it logs the call's time)", file=sys.stderr)
    if codex is None or not os.access(codex, os.X_OK):
        print(f"first-call: no Codex CLI at {codex}; skipped", file=sys.stderr)
        return None
    home = tmp / "first"
    log = tmp / "first.log"
    write_home(home, {"bench": server_entry("fake", log)}, url)
    env = {**base_env(url), "HOLON_HOME": str(home)}
    run([holon, "mcp", "refresh"], env, tmp)
    chome = tmp / "codex-home"
    chome.mkdir()
    (chome / "config.toml").write_text(
        f'[mcp_servers.bench]\ncommand = "{sys.executable}"\nargs = ["{FAKE}", "--log", "{log}"]\n'
    )
    cenv = {k: v for k, v in base_env(url).items() if not k.startswith("CODEX_")}
    cenv.update(CODEX_HOME=str(chome), BENCH_API_KEY="sk-bench")
    provider = (
        f'model_providers.bench={{name="bench", base_url="{url}", '
        'wire_api="responses", env_key="BENCH_API_KEY"}'
    )
    codex_argv = [
        codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
        "-m", "bench", "-c", 'model_provider="bench"', "-c", provider, "mcp-please",
    ]  # fmt: skip

    def holon_once() -> float:
        run([holon, "enqueue", "mcp-please"], env, tmp)
        log.unlink(missing_ok=True)
        t0 = time.time()
        run([holon, "turn", "--model", "openai/bench"], env, tmp)
        return first_call_s(log, t0)

    def codex_once() -> float:
        log.unlink(missing_ok=True)
        t0 = time.time()
        run(codex_argv, cenv, tmp)
        return first_call_s(log, t0)

    # the goal reads holon / codex: ratios of A over B
    s = paired(codex_once, holon_once, pairs)
    return {
        "holon_median_ms": s["b_median_ms"],
        "codex_median_ms": s["a_median_ms"],
        "ratio_min": s["ratio_min"],
        "ratio_median": s["ratio_median"],
        "ratio_max": s["ratio_max"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--holon", default=shutil.which("holon") or "holon")
    ap.add_argument("--codex", default=shutil.which("codex") or CODEX_DEFAULT)
    ap.add_argument("--server", choices=("fake", "time"), default="fake")
    ap.add_argument("--parts", default="overhead,serve,startup,first-call")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    known = ("overhead", "serve", "startup", "first-call")
    parts = args.parts.split(",")
    if args.pairs < 1 or any(p not in known for p in parts):
        ap.error(f"--pairs must be at least 1; --parts some of {','.join(known)}")
    holon = os.path.abspath(args.holon)
    loads = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run
    srv = fake.start(Handler)
    url = fake.base_url(srv)
    results: dict[str, Any] = {"server": args.server, "pairs": args.pairs}
    goals = bk.Goals()
    say = (lambda *_: None) if args.json else print
    with tempfile.TemporaryDirectory(prefix="holon-mcp-bench-") as d:
        tmp = Path(d)
        if "overhead" in parts:
            r = part_overhead(holon, url, tmp, args.pairs, args.server)
            results["overhead_cold_turn"] = r
            say(
                f"holon turn, one tool call (cold; load {load()}): ExecCommand "
                f"{r['a_median_ms']} ms, MCP {r['b_median_ms']} ms; MCP/Exec "
                f"min/median/max {r['ratio_min']}/{r['ratio_median']}/{r['ratio_max']}, "
                f"{r['delta_median_ms']:+} ms (a report)"
            )
        if "serve" in parts:
            r = part_serve(holon, url, tmp, args.pairs, args.server)
            results["overhead_warm_serve"] = r
            say(
                f"holon serve turn, one tool call (warm; load {load()}): ExecCommand "
                f"{r['a_median_ms']} ms, MCP {r['b_median_ms']} ms; MCP/Exec "
                f"min/median/max {r['ratio_min']}/{r['ratio_median']}/{r['ratio_max']}, "
                f"{r['delta_median_ms']:+} ms (a report)"
            )
        if "startup" in parts:
            r = part_startup(holon, url, tmp, args.pairs, args.server)
            results["startup"] = r
            for cmd, s in r.items():
                goals.check(
                    f"holon {cmd}, three servers / none (median of pairs)",
                    s["ratio_median"],
                    "<=",
                    STARTUP_GOAL,
                    "x",
                )
                say(
                    f"holon {cmd} (load {load()}): no mcp_servers {s['a_median_ms']} ms, three "
                    f"servers {s['b_median_ms']} ms; ratio min/median/max "
                    f"{s['ratio_min']}/{s['ratio_median']}/{s['ratio_max']}"
                )
        if "first-call" in parts:
            r2 = part_first_call(holon, args.codex, url, tmp, args.pairs, args.server)
            if r2 is not None:
                results["first_call"] = r2
                goals.check(
                    "first MCP call, holon turn / codex exec (median of pairs)",
                    r2["ratio_median"],
                    "<=",
                    CODEX_GOAL,
                    "x",
                )
                say(
                    f"first MCP tools/call after start (load {load()}): holon turn "
                    f"{r2['holon_median_ms']} ms, codex exec {r2['codex_median_ms']} ms; "
                    f"holon/codex min/median/max {r2['ratio_min']}/{r2['ratio_median']}/"
                    f"{r2['ratio_max']}"
                )
    srv.shutdown()
    return bk.finish(goals, loads, results, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
