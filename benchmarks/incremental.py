"""Bytes sent per provider round of a 10-round turn, with and without
incremental Responses requests (``runtime.openai_incremental``).

A real turn (``run_once``: the real prompt frame, the built-in tool catalog,
real ``ExecCommand`` calls) against a loopback OpenAI Responses server in
this process. The fake model calls ``ExecCommand`` for rounds 1..N-1 (each
command prints ``--output-bytes`` bytes) and answers in round N. The same
turn runs twice, in two fresh homes: full requests (the default) and
incremental ones. Per round it reports the request body's bytes and the bytes
of its ``input`` items (the conversation; instructions and tools are sent in
both modes, the API does not carry them over), and the incremental/full
ratio of each.

Goal (issue 28): from round 3 on, the incremental turn sends <= 20 % of
the full turn's ``input`` bytes (byte counts: the machine's load moves
nothing here, it is printed all the same). Exit 1 when missed.

    python benchmarks/incremental.py [--rounds 10] [--output-bytes 2000]
        [--prompt-bytes 0] [--json]

Round n of a full turn sends the first message plus n-1 tool rounds; the
incremental one sends the newest round only, so its share is about
1/(n-1) of the conversation when the first message is small: <= 20 % from
round 3 needs a first message (or frame context) of about twice a round's
output or more (``--prompt-bytes``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402
import fake_responses as fake  # noqa: E402
from fake_responses import ResponsesHandler, message  # noqa: E402

TARGET = 0.20


def make_handler(rounds: int, output_bytes: int, sizes: list[dict[str, int]]) -> type:
    class Handler(ResponsesHandler):
        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            raw = self.rfile.read(int(self.headers["content-length"]))
            body = json.loads(raw)
            n = len(sizes) + 1
            sizes.append(
                {
                    "round": n,
                    "body_bytes": len(raw),
                    "input_bytes": len(json.dumps(body.get("input") or []).encode()),
                    "input_items": len(body.get("input") or []),
                    "incremental": int("previous_response_id" in body),
                }
            )
            if n < rounds:
                cmd = f"{sys.executable} -c \"print('r{n}-' + 'x' * {output_bytes})\""
                output = fake.function_call(n, "ExecCommand", {"cmd": cmd})
            else:
                output = message("done")
            self.reply(output, input_tokens=len(raw) // 4, output_tokens=10, resp_id=f"resp_{n}")

    return Handler


def run_turn(
    incremental: bool, rounds: int, output_bytes: int, prompt_bytes: int
) -> list[dict[str, int]]:
    sizes: list[dict[str, int]] = []
    srv = fake.start(make_handler(rounds, output_bytes, sizes))
    with tempfile.TemporaryDirectory(prefix="holon-bench-inc-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        work = Path(tmp) / "work"  # beside the home: the home is never a workspace
        work.mkdir()
        flag = "true" if incremental else "false"
        (home / "config.yaml").write_text(
            f"runtime:\n  openai_incremental: {flag}\n  max_provider_rounds: {rounds + 5}\n"
        )
        env = {
            "HOLON_HOME": str(home),
            "OPENAI_BASE_URL": fake.base_url(srv),
            "OPENAI_API_KEY": "sk-bench",
            "NO_PROXY": "127.0.0.1",
        }
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            from holon_cli.providers import incremental as inc
            from holon_cli.runtime.run import run_once
            from holon_cli.tools.catalog import default_catalog

            inc.STATE._links.clear()
            prompt = "run the checks" + (
                "\n" + "spec " * (prompt_bytes // 5) if prompt_bytes else ""
            )
            data = run_once(
                prompt,
                model="openai/bench",
                workspace_root=str(work),
                sleep=lambda _s: None,
                catalog=default_catalog(),
            )
            assert data["final_text"] == "done", data
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            srv.shutdown()
    return sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--output-bytes", type=int, default=2000)
    ap.add_argument(
        "--prompt-bytes",
        type=int,
        default=0,
        help="extra bytes in the operator message (a pasted spec or log)",
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.rounds < 3 or a.output_bytes < 0 or a.prompt_bytes < 0:
        ap.error("--rounds must be at least 3; byte counts must not be negative")
    load = bk.Load()
    full = run_turn(False, a.rounds, a.output_bytes, a.prompt_bytes)
    inc = run_turn(True, a.rounds, a.output_bytes, a.prompt_bytes)
    rows = []
    for f, i in zip(full, inc, strict=True):
        rows.append(
            {
                "round": f["round"],
                "full_body": f["body_bytes"],
                "incremental_body": i["body_bytes"],
                "body_ratio": round(i["body_bytes"] / f["body_bytes"], 3),
                "full_input": f["input_bytes"],
                "incremental_input": i["input_bytes"],
                "input_ratio": round(i["input_bytes"] / f["input_bytes"], 3),
                "sent_incrementally": bool(i["incremental"]),
            }
        )
    late = [r for r in rows if r["round"] >= 3]
    goals = bk.Goals()
    goals.check(
        "incremental / full input bytes, worst round from 3 on",
        max(r["input_ratio"] for r in late),
        "<=",
        TARGET,
    )
    goals.check(
        "rounds from 3 on sent incrementally",
        sum(r["sent_incrementally"] for r in late),
        "==",
        len(late),
    )
    if not a.json:
        print(
            f"{a.rounds}-round turn, ExecCommand output {a.output_bytes} B per round, "
            f"operator message +{a.prompt_bytes} B, loopback OpenAI Responses"
        )
        head = ("round", "full body", "incr body", "ratio", "full input", "incr input", "ratio")
        print("{:>5} {:>10} {:>10} {:>6} {:>11} {:>11} {:>6}".format(*head))
        for r in rows:
            print(
                f"{r['round']:>5} {r['full_body']:>10} {r['incremental_body']:>10} "
                f"{r['body_ratio']:>6.3f} {r['full_input']:>11} {r['incremental_input']:>11} "
                f"{r['input_ratio']:>6.3f}"
            )
        tot_f = sum(r["full_body"] for r in rows)
        tot_i = sum(r["incremental_body"] for r in rows)
        print(f"whole turn: {tot_f} B full, {tot_i} B incremental ({tot_i / tot_f:.1%})")
    report = {"rounds": rows, "target_input_ratio": TARGET}
    return bk.finish(goals, load, report, as_json=a.json)


if __name__ == "__main__":
    sys.exit(main())
