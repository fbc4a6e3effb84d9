"""The HTTP client's cost per model round: ``http_common.post_json`` in a
tight loop over one keep-alive loopback connection.

    python benchmarks/client_round.py [--requests 400] [--json]

The server (``fake_responses.py``) runs in a child process, so the CPU time
measured here is the client's alone (request building, the send, reading and
decoding the answer). Run it with two builds' interpreters for an A/B (the
script imports whichever ``holon_cli`` the interpreter has installed; run it
by path from outside the other checkout). A report, no target: issue 22
asks the per-round overhead to stay within 1 ms of the old client's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
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
        for _ in range(args.requests):
            w0, c0 = time.perf_counter(), time.process_time()
            post_json(target, body, lambda obj: obj)
            walls.append((time.perf_counter() - w0) * 1000)
            cpus.append((time.process_time() - c0) * 1000)
    finally:
        srv.kill()
        srv.wait()
    import holon_cli

    report = {
        "holon_cli": str(Path(holon_cli.__file__).parent),
        "requests": args.requests,
        "wall_ms_median": round(statistics.median(walls), 3),
        "cpu_ms_median": round(statistics.median(cpus), 3),
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"{report['holon_cli']}: {args.requests} requests, per request "
            f"wall {report['wall_ms_median']:.3f} ms, "
            f"CPU {report['cpu_ms_median']:.3f} ms (medians)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
