"""What a turn's DBOS step records cost, written two ways, in one workflow.

    python benchmarks/dbos_step_write.py [--turns 200] [--rows 2]

``serve --engine dbos`` writes each turn's step rows itself
(``serve/dbos/compat.write_steps``: one statement, fenced by the workflow's
owner, for all the rows a round makes durable). DBOS 3.4's public API can
write the same rows too: ``DBOS.reserve_step()`` draws each step's function
id when the journal has the record, and ``StepReservation.run`` records it
once it is durable (DBOS's own "return the recorded output, else run and
record": a read and a transaction per step). This runs both, interleaved,
``--rows`` rows a turn (2: a one-round turn's round and its ``holon.turn``
step), inside one DBOS workflow on a private Postgres 15 cluster (fsync off,
as in ``benchmarks/scaleout.py``), and prints the median and p90 wall time
and the median thread CPU time per turn of each.

Needs the dbos extra and the postgresql package (``tests/pgcluster.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pgcluster import PgCluster, postgres_missing  # noqa: E402


def _rec(i: int) -> dict[str, Any]:
    return {"kind": "round", "n": i, "call_ids": [], "text_digest": "0" * 16, "ok": True}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--rows", type=int, default=2, help="step rows a turn")
    args = ap.parse_args()
    if args.turns < 1 or args.rows < 1:
        ap.error("--turns and --rows must be at least 1")
    missing = postgres_missing()
    if missing:
        print(f"dbos_step_write: {missing}", file=sys.stderr)
        return 2
    from dbos import DBOS

    from holon_cli.serve.dbos import compat

    times: dict[str, list[tuple[float, float]]] = {"one statement (compat)": [], "public": []}

    def by_compat(wf: str, n: int) -> None:
        ctx = compat.current_context()
        rows, owner = [], None
        for i in range(n):
            fid, owner = compat.next_step(ctx)
            out, ser = compat.serialize_output(_rec(i))
            rows.append(
                {
                    "function_id": fid,
                    "function_name": "holon.round",
                    "output": out,
                    "serialization": ser,
                    "started_at_epoch_ms": int(time.time() * 1000),
                }
            )
        compat.write_steps(wf, rows, owner, int(time.time() * 1000))

    def by_public(wf: str, n: int) -> None:
        reserved = [(DBOS.reserve_step(), _rec(i)) for i in range(n)]
        for r, rec in reserved:
            r.run({"name": "holon.round"}, lambda rec=rec: rec)

    with PgCluster() as pg:
        DBOS(config={"name": "step-write-bench", "system_database_url": pg.url})

        @DBOS.workflow(name="bench.steps")
        def bench() -> None:
            wf = DBOS.workflow_id or ""
            ways = [("one statement (compat)", by_compat), ("public", by_public)]
            for t in range(args.turns):
                for name, fn in ways if t % 2 else ways[::-1]:
                    w0, c0 = time.perf_counter(), time.thread_time()
                    fn(wf, args.rows)
                    times[name].append((time.perf_counter() - w0, time.thread_time() - c0))

        DBOS.launch()
        try:
            bench()
        finally:
            DBOS.destroy(workflow_completion_timeout_sec=0)
    print(f"{args.turns} turns of {args.rows} step rows each, interleaved, one workflow")
    for name, pairs in times.items():
        walls = sorted(w for w, _ in pairs)
        cpus = [c for _, c in pairs]
        p90 = walls[int(0.9 * (len(walls) - 1))]
        print(
            f"{name:24s} wall median {statistics.median(walls) * 1000:6.2f} ms"
            f"  p90 {p90 * 1000:6.2f} ms  CPU median {statistics.median(cpus) * 1000:6.2f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
