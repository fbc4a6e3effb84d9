"""The probes of issue 35 (items 5, 6, 7, 9), runnable against any build:
run it with a build's interpreter (``/path/to/venv/bin/python
benchmarks/hardening_probe.py``) and it drives that build's ``holon`` (as
``python -m holon_cli``) on throwaway homes. Nothing leaves the machine: the
model is the scripted one, the HTTP clients talk to 127.0.0.1.

Parts (``--parts``, default all):

- ``startup``: ``holon serve --listen 127.0.0.1:0`` from spawn to the first
  ``GET /healthz`` answer (median of ``--starts``).
- ``latency``: ``GET /status`` on fresh connections, p50 / p95 / max of
  ``--requests``; then public enqueue throughput (one keep-alive client,
  ``--requests`` POSTs, the rate limit raised out of the way, the agent
  paused so no turn runs) and serve's CPU per enqueue.
- ``xff``: ``ingress.rate_per_minute: 60``, 150 public enqueues each with a
  fresh ``X-Forwarded-For``: how many were accepted.
- ``webhook``: a GitHub secret; 150 replays of one signed body, each with a
  fresh ``X-GitHub-Delivery``: how many were admitted; and one delivery with
  ``webhook-timestamp: ²`` (Standard Webhooks): its status.
- ``dribble``: ``--dribblers`` connections sending a request head one byte
  at a time (re-opened when closed) for ``--seconds``, and ``GET /status`` on
  a fresh connection every 0.25 s: answered / tried, p50 and max latency.
- ``runs``: 8 ``holon run`` where 6 fit (600 tokens a day, 100 a request;
  ``budgets.home`` where the build has it, else ``budgets.tokens_per_day``):
  requests sent.
- ``children``: three processes turning three children of one parent at
  once (0.3 s a request, 6 turns each, started 0.1 s apart), the parent's
  budget (950 tokens, 100 a request) fits 9: requests sent.

Prints one line per figure; ``--json`` prints them as one object. Each
part's figure is checked against what issue 35 asks (exit 1 on a miss, so an
old build fails the probe it was written for): rotating ``X-Forwarded-For``
gets no more through than the limit (<= 61 of 150 at 60 a minute); at most
one of 150 replays of a signed body is admitted (the first, exactly); a GitHub delivery without
its id is refused (4xx) and a malformed ``webhook-timestamp`` too (401); every
``GET /status`` among the dribblers is answered; 8 runs send at most the 6
requests the home's budget fits; three children send at most the 9 their
parent's budget fits; and each of these parts measured something (a run
that sent nothing would meet a limit vacuously). Startup and latency
figures are a report. The load
average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402

HOLON = [sys.executable, "-m", "holon_cli"]
USAGE = {"input_tokens": 80, "output_tokens": 20}


# ------------------------------------------------------------------ helpers


class Home:
    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="holon-probe-"))
        self.root = self.tmp / "home"
        self.root.mkdir()
        # where commands run: `holon run` binds its folder as the workspace,
        # and a folder holding the home is refused (issue 35 item 4: run from
        # self.tmp, every probe run was refused and the runs part sent nothing)
        self.work = self.tmp / "work"
        self.work.mkdir()
        self.env = {**os.environ, "HOLON_HOME": str(self.root), "HOME": str(self.tmp)}
        for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HOLON_MODEL", "HOLON_CONTROL_TOKEN"):
            self.env.pop(k, None)
        model = self.tmp / "model.yaml"
        model.write_text(yaml.safe_dump({"loop": True, "steps": [{"text": "ok", "usage": USAGE}]}))
        self.model = f"scripted:{model}"
        self.env["HOLON_MODEL"] = self.model
        if cfg is not None:
            self.config(cfg)

    def config(self, cfg: dict[str, Any]) -> None:
        (self.root / "config.yaml").write_text(yaml.safe_dump(cfg))

    def holon(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [*HOLON, *args], env=self.env, capture_output=True, text=True, cwd=self.work
        )
        if check and res.returncode != 0:
            raise RuntimeError(f"holon {' '.join(args)}: {res.returncode}\n{res.stderr}")
        return res

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


class Serve:
    def __init__(self, home: Home) -> None:
        self.home = home
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [*HOLON, "serve", "--listen", "127.0.0.1:0"],
            env=home.env,
            cwd=home.tmp,  # `python -m` puts the working folder first on sys.path
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.host, self.port = "127.0.0.1", 0
        end = time.monotonic() + 30
        run = home.root / "run" / "serve.json"
        while time.monotonic() < end:
            try:
                addr = json.loads(run.read_text())["http_addr"]
                self.port = int(addr.rsplit(":", 1)[1])
                if status_of(self.host, self.port, "/healthz")[0] == 200:
                    break
            except (OSError, ValueError, KeyError, TypeError):
                pass
            time.sleep(0.01)
        else:
            self.stop()
            raise RuntimeError("serve did not start")
        self.ready_s = time.monotonic() - self.t0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def exchange(host: str, port: int, data: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                got = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not got:
                break
            out += got
        return out


def status_of(host: str, port: int, path: str, timeout: float = 5.0) -> tuple[int, float]:
    t0 = time.monotonic()
    try:
        raw = exchange(
            host,
            port,
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode(),
            timeout,
        )
    except OSError:
        return 0, time.monotonic() - t0
    parts = raw.split(b"\r\n", 1)[0].split()
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0), time.monotonic() - t0


def post(host: str, port: int, path: str, body: bytes, headers: dict[str, str]) -> int:
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode("latin-1")
    try:
        raw = exchange(host, port, head + body)
    except OSError:
        return 0
    parts = raw.split(b"\r\n", 1)[0].split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


ENQUEUE = json.dumps({"origin": "channel:probe", "text": "hi"}).encode()


# ------------------------------------------------------------------ parts


def part_startup(args: argparse.Namespace) -> dict[str, Any]:
    times = []
    for _ in range(args.starts):
        home = Home()
        try:
            home.holon("agent", "create", "main", check=False)
            srv = Serve(home)
            times.append(srv.ready_s)
            srv.stop()
        finally:
            home.close()
    return {"serve_startup_s_median": round(statistics.median(times), 3), "starts": len(times)}


def part_latency(args: argparse.Namespace) -> dict[str, Any]:
    import httpx2 as httpx

    home = Home({"ingress": {"rate_per_minute": 1_000_000}})
    try:
        home.holon("agent", "create", "main", check=False)
        # paused: the enqueues are admitted but no turn runs, so serve's CPU
        # below is the HTTP surface's own
        home.holon("agent", "pause", "main", check=False)
        srv = Serve(home)
        try:
            lat = []
            for _ in range(args.requests):
                st, took = status_of(srv.host, srv.port, "/status")
                assert st == 200, st
                lat.append(took * 1000)
            lat.sort()
            with httpx.Client(base_url=f"http://127.0.0.1:{srv.port}") as c:
                cpu0 = _cpu_s(srv.proc.pid)
                t0 = time.monotonic()
                for _ in range(args.requests):
                    r = c.post(
                        "/agents/main/enqueue",
                        content=ENQUEUE,
                        headers={"content-type": "application/json"},
                    )
                    assert r.status_code == 202, r.text
                rate = args.requests / (time.monotonic() - t0)
                cpu_ms = (_cpu_s(srv.proc.pid) - cpu0) * 1000 / args.requests
        finally:
            srv.stop()
    finally:
        home.close()
    return {
        "status_ms_p50": round(lat[len(lat) // 2], 2),
        "status_ms_p95": round(lat[int(len(lat) * 0.95)], 2),
        "status_ms_max": round(lat[-1], 2),
        "enqueue_per_s": round(rate, 1),
        "enqueue_serve_cpu_ms_per_request": round(cpu_ms, 2),
    }


_cpu_s = bk.proc_cpu_s


def part_xff(args: argparse.Namespace) -> dict[str, Any]:
    home = Home({"ingress": {"rate_per_minute": 60}})
    try:
        home.holon("agent", "create", "main", check=False)
        srv = Serve(home)
        try:
            codes = [
                post(
                    srv.host,
                    srv.port,
                    "/agents/main/enqueue",
                    ENQUEUE,
                    {
                        "Content-Type": "application/json",
                        "X-Forwarded-For": f"203.0.113.{i % 250 + 1}",
                    },
                )
                for i in range(150)
            ]
        finally:
            srv.stop()
    finally:
        home.close()
    return {"xff_rotating_accepted": codes.count(202), "xff_rotating_sent": len(codes)}


def part_webhook(args: argparse.Namespace) -> dict[str, Any]:
    import base64

    secret = "probe-secret"
    std_key = base64.b64encode(b"probe-standard-key").decode()
    hooks = {
        "github": {"secret_env": "PROBE_GH", "scheme": "github"},
        "std": {"secret_env": "PROBE_STD", "scheme": "standard"},
    }
    body = json.dumps({"ref": "refs/heads/main", "after": "abc"}).encode()

    def signed(b: bytes) -> str:
        return "sha256=" + hmac.new(secret.encode(), b, hashlib.sha256).hexdigest()

    out: dict[str, Any] = {}
    for rate in (60, 1_000_000):  # the replay probe at the default rate, then headers
        home = Home({"ingress": {"webhooks": hooks, "rate_per_minute": rate}})
        home.env["PROBE_GH"] = secret
        home.env["PROBE_STD"] = f"whsec_{std_key}"
        try:
            home.holon("agent", "create", "main", check=False)
            srv = Serve(home)
            try:
                if rate == 60:
                    codes = [
                        post(
                            srv.host,
                            srv.port,
                            "/webhooks/github/main",
                            body,
                            {
                                "Content-Type": "application/json",
                                "X-Hub-Signature-256": signed(body),
                                "X-GitHub-Delivery": f"fresh-{i}",
                            },
                        )
                        for i in range(150)
                    ]
                    out.update(
                        webhook_replays_sent=len(codes),
                        webhook_replays_admitted=codes.count(202),
                        webhook_replays_duplicate=codes.count(200),
                        webhook_replays_429=codes.count(429),
                    )
                    continue
                out["webhook_without_delivery_id_status"] = post(
                    srv.host,
                    srv.port,
                    "/webhooks/github/main",
                    b'{"x": 1}',
                    {
                        "Content-Type": "application/json",
                        "X-Hub-Signature-256": signed(b'{"x": 1}'),
                    },
                )
                out["webhook_timestamp_superscript_status"] = post(
                    srv.host,
                    srv.port,
                    "/webhooks/std/main",
                    b"{}",
                    {
                        "Content-Type": "application/json",
                        "webhook-id": "msg_1",
                        "webhook-timestamp": "\u00b2",
                        "webhook-signature": "v1,AAAA",
                    },
                )
            finally:
                srv.stop()
        finally:
            home.close()
    return out


HEAD = b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000


def part_dribble(args: argparse.Namespace) -> dict[str, Any]:
    home = Home()
    try:
        home.holon("agent", "create", "main", check=False)
        srv = Serve(home)
        sel = selectors.DefaultSelector()
        pos: dict[socket.socket, int] = {}

        def open_one() -> None:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((srv.host, srv.port))
            sel.register(s, selectors.EVENT_READ)
            pos[s] = 0

        def drop(s: socket.socket) -> None:
            sel.unregister(s)
            pos.pop(s, None)
            s.close()

        try:
            for _ in range(args.dribblers):
                open_one()
            tried, lat = 0, []
            end = time.monotonic() + args.seconds
            next_byte = 0.0
            while time.monotonic() < end:
                if time.monotonic() >= next_byte:
                    for key, _ev in sel.select(0):
                        drop(key.fileobj)  # type: ignore[arg-type]
                        open_one()
                    for s, i in list(pos.items()):
                        try:
                            s.send(HEAD[i : i + 1])
                            pos[s] = (i + 1) % len(HEAD)
                        except (BlockingIOError, InterruptedError):
                            pass
                        except OSError:
                            drop(s)
                            open_one()
                    next_byte = time.monotonic() + 0.5
                st, took = status_of(srv.host, srv.port, "/status", timeout=3.0)
                tried += 1
                if st == 200:
                    lat.append(took * 1000)
                time.sleep(0.25)
        finally:
            for s in list(pos):
                drop(s)
            sel.close()
            srv.stop()
    finally:
        home.close()
    lat.sort()
    return {
        "dribblers": args.dribblers,
        "dribble_status_answered": len(lat),
        "dribble_status_tried": tried,
        "dribble_status_ms_p50": round(lat[len(lat) // 2], 1) if lat else None,
        "dribble_status_ms_max": round(lat[-1], 1) if lat else None,
    }


def _has_home_budgets() -> bool:
    try:
        from holon_cli.store import config_schema
    except ImportError:
        return False
    return "budgets.home.tokens_per_day" in config_schema.known_keys()


def part_runs(args: argparse.Namespace) -> dict[str, Any]:
    key = {"home": {"tokens_per_day": 600}} if _has_home_budgets() else {"tokens_per_day": 600}
    home = Home({"budgets": key})
    try:
        rounds, codes = 0, []
        for i in range(8):
            res = home.holon("run", "--json", "--model", home.model, f"q{i}", check=False)
            codes.append(res.returncode)
            doc = json.loads(res.stdout)
            # a run the budget refused is an error envelope: it sent nothing
            # (this read `data` alone, and a refused run broke the probe)
            rounds += int((doc.get("data") or {}).get("model_rounds") or 0)
    finally:
        home.close()
    return {"runs_budget": json.dumps(key), "runs_requests": rounds, "runs_exit_codes": codes}


CHILD_TURNS = textwrap.dedent(
    """
    import sys
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog
    agent, n = sys.argv[1], int(sys.argv[2])
    cat = default_catalog()
    for i in range(n):
        admit(f"q{i}", agent_id=agent, kind="internal_followup", origin="system:delegation",
              delivery_surface="runtime_system", admission_context="runtime_owned")
        run_turn(agent, catalog=cat)
    """
)

MAKE_KIDS = textwrap.dedent(
    """
    try:
        from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
    except ImportError:
        from holon_cli.runtime.agents import create_agent, open_agent
    open_agent()
    for k in ("k1", "k2", "k3"):
        create_agent(k, kind="child", visibility="private", ownership="parent_supervised",
                     profile_preset="private_child", lineage_parent_agent_id="main")
    """
)


def part_children(args: argparse.Namespace) -> dict[str, Any]:
    home = Home()
    model = home.tmp / "slow.yaml"
    step = {"text": "ok", "usage": USAGE, "sleep_ms": 300}
    model.write_text(yaml.safe_dump({"loop": True, "steps": [step]}))
    home.env["HOLON_MODEL"] = f"scripted:{model}"
    try:
        subprocess.run([sys.executable, "-c", MAKE_KIDS], env=home.env, check=True, cwd=home.tmp)
        home.config({"agents": {"main": {"budgets": {"tokens_per_day": 950}}}})
        t0 = time.monotonic()
        procs = []
        for k in ("k1", "k2", "k3"):  # staggered: each checks while the others are in flight
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", CHILD_TURNS, k, "6"],
                    env=home.env,
                    stderr=subprocess.PIPE,
                    cwd=home.tmp,
                )
            )
            time.sleep(0.1)
        for p in procs:
            p.communicate(timeout=300)
        took = time.monotonic() - t0
        spend = home.root / "agents" / "main" / ".holon" / "ledger" / "spend.jsonl"
        recs = [json.loads(line) for line in spend.read_text().splitlines() if line.strip()]
    finally:
        home.close()
    return {
        "children_requests": len(recs),
        "children_tokens": sum(r["input_tokens"] + r["output_tokens"] for r in recs),
        "children_budget": 950,
        "children_s": round(took, 1),
    }


PARTS = {
    "startup": part_startup,
    "latency": part_latency,
    "xff": part_xff,
    "webhook": part_webhook,
    "dribble": part_dribble,
    "runs": part_runs,
    "children": part_children,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--dribblers", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    unknown = [p for p in args.parts.split(",") if p not in PARTS]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; use some of {', '.join(PARTS)}")
    load = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run
    import holon_cli

    out: dict[str, Any] = {"python": sys.executable, "build": os.path.dirname(holon_cli.__file__)}
    print("build:", out["build"], flush=True)
    for name in args.parts.split(","):
        got = PARTS[name](args)
        out.update(got)
        if not args.json:
            print(f"[{name}] load {os.getloadavg()[0]:.1f}", got, flush=True)
    goals = bk.Goals()
    if "xff_rotating_accepted" in out:
        goals.check(
            "rotating X-Forwarded-For, enqueues accepted of 150",
            out["xff_rotating_accepted"],
            "<=",
            61,
        )
        # none accepted at all would pass the limit vacuously
        goals.check(
            "rotating X-Forwarded-For, enqueues accepted (the probe measured)",
            out["xff_rotating_accepted"],
            ">=",
            1,
        )
    if "webhook_replays_admitted" in out:
        goals.check("replays of one signed body admitted", out["webhook_replays_admitted"], "==", 1)
        goals.check(
            "GitHub delivery without its id refused (a 4xx status: 1 = yes)",
            int(400 <= out["webhook_without_delivery_id_status"] < 500),
            "==",
            1,
        )
        goals.check(
            "webhook-timestamp '\u00b2': status",
            out["webhook_timestamp_superscript_status"],
            "==",
            401,
        )
    if "dribble_status_tried" in out:
        goals.check(
            "GET /status answered among dribblers (tried - answered)",
            out["dribble_status_tried"] - out["dribble_status_answered"],
            "==",
            0,
        )
    if "runs_requests" in out:
        goals.check("requests of 8 runs where 6 fit the budget", out["runs_requests"], "<=", 6)
        # a probe whose runs all failed sent nothing and proves nothing
        goals.check("runs that sent a request (the probe measured)", out["runs_requests"], ">=", 1)
    if "children_requests" in out:
        goals.check(
            "requests of three children where 9 fit the budget", out["children_requests"], "<=", 9
        )
        goals.check(
            "children requests sent (the probe measured)", out["children_requests"], ">=", 1
        )
    return bk.finish(goals, load, out, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
