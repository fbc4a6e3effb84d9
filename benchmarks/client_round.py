"""The HTTP client's cost per model round: ``http_common.post_json`` in a
tight loop over one keep-alive loopback connection.

    python benchmarks/client_round.py [--requests 400] [--compare PYTHON]
        [--rounds 5] [--json]

The server (``fake_responses.py``) runs in a child process, so the CPU time
measured here is the client's alone (request building, the send, reading and
decoding the answer). Each measurement is a child process of a build's
interpreter running the loop (``--child``); the script imports whichever
``holon_cli`` that interpreter has installed. With ``--compare PYTHON``
(another build's interpreter) the two builds' loops are paired, ``--rounds``
times (this, other; other, this; ...), and the per-round ratio this / other
of wall and CPU per request is printed as min / median / max, with the load
average at the start and the end. A report, no goal: issue 22 asks the
per-round overhead to stay within 1 ms of the old client's (the difference
per request is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import benchkit as bk  # noqa: E402

SERVER = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from http.server import ThreadingHTTPServer
from fake_responses import ResponsesHandler, message
class H(ResponsesHandler):
    def do_POST(self):
        self.read_json()
        self.reply(message("done"), 1, 1)
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def child(requests: int) -> dict[str, Any]:
    """The loop itself, in the process of the build under test."""
    from holon_cli.providers.http_common import HttpTarget, post_json

    srv = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout is not None
        port = int(srv.stdout.readline())
        target = HttpTarget("p", "p/m", f"http://127.0.0.1:{port}/v1/responses", timeout_s=30)
        body = {"model": "m", "input": [{"role": "user", "content": "x" * 2000}]}
        for _ in range(20):  # warm: imports, the connection
            post_json(target, body, lambda obj: obj)
        walls, cpus = [], []
        for _ in range(requests):
            w0, c0 = time.perf_counter(), time.process_time()
            post_json(target, body, lambda obj: obj)
            walls.append((time.perf_counter() - w0) * 1000)
            cpus.append((time.process_time() - c0) * 1000)
    finally:
        srv.kill()
        srv.wait()
    import holon_cli

    return {
        "holon_cli": str(Path(holon_cli.__file__).parent),
        "requests": requests,
        "wall_ms_median": round(statistics.median(walls), 3),
        "cpu_ms_median": round(statistics.median(cpus), 3),
    }


def measure(python: str, requests: int) -> dict[str, Any]:
    # cwd: never a checkout (``-c`` and the script's folder would shadow the build)
    res = subprocess.run(
        [python, str(Path(__file__).resolve()), "--child", "--requests", str(requests)],
        capture_output=True,
        text=True,
        cwd="/",
    )
    if res.returncode != 0:
        raise bk.broken(f"{python}: {res.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--compare", default=None, help="another build's python, paired with this one")
    ap.add_argument("--rounds", type=int, default=5, help="pairs with --compare")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.requests < 1 or args.rounds < 1:
        ap.error("--requests and --rounds must be at least 1")
    if args.child:
        print(json.dumps(child(args.requests)))
        return 0
    load = bk.Load()
    sides = {"this": lambda: measure(sys.executable, args.requests)}
    if args.compare:
        sides["other"] = lambda: measure(os.path.abspath(args.compare), args.requests)
    runs = bk.interleave(sides, args.rounds if args.compare else 1, warmup=0)
    report: dict[str, Any] = {"requests": args.requests}
    for name, got in runs.items():
        report[name] = {
            "holon_cli": got[0]["holon_cli"],
            "wall_ms_median": statistics.median(g["wall_ms_median"] for g in got),
            "cpu_ms_median": statistics.median(g["cpu_ms_median"] for g in got),
        }
    if args.compare:
        for key in ("wall_ms_median", "cpu_ms_median"):
            mine = [g[key] for g in runs["this"]]
            other = [g[key] for g in runs["other"]]
            report[f"{key}_this_over_other"] = bk.spread_json(bk.ratios(mine, other))
            report[f"{key}_this_minus_other"] = bk.spread_json(
                [a - b for a, b in zip(mine, other, strict=True)]
            )
    if not args.json:
        for name in runs:
            r = report[name]
            print(
                f"{name}: {r['holon_cli']}: {args.requests} requests, per request wall "
                f"{r['wall_ms_median']:.3f} ms, CPU {r['cpu_ms_median']:.3f} ms (medians)"
            )
        if args.compare:
            for key, what in (("wall_ms_median", "wall"), ("cpu_ms_median", "CPU")):
                mine = [g[key] for g in runs["this"]]
                other = [g[key] for g in runs["other"]]
                d = report[f"{key}_this_minus_other"]
                print(
                    bk.ratio_line(f"this / other, {what} per request", bk.ratios(mine, other))
                    + f"; difference median {d['median']:+.3f} ms"
                )
    return bk.finish(bk.Goals(), load, report, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
