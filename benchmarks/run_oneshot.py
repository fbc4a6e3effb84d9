"""One-round ``holon run`` from outside: the whole process, as a user (or a
script calling it in a loop) pays for it.

    python benchmarks/run_oneshot.py [--runs 20] [--holon PATH] [--codex PATH]
        [--compare PATH] [--json]

The commands run interleaved round-robin, each as a fresh process:

* ``python -c pass`` with the interpreter of the ``holon`` script's shebang
  (the floor every Python CLI pays);
* ``holon run --model openai/bench "hi"`` against a loopback OpenAI Responses
  server in this process (127.0.0.1, keep-alive, ``TCP_NODELAY``, one write
  per response) that answers one text message: one provider round, no tools.
  This is the issue's "one-round ``holon run`` on the same fake";
* ``holon run --model scripted:<one step>.yaml "hi"``: the same turn with the
  offline scripted model (no HTTP stack, PyYAML instead);
* the loopback run again on a slow disk: every ``fsync`` made ``--fsync-ms``
  slower by the ``LD_PRELOAD`` shim of ``slow_disk.py`` (skipped when no C
  compiler can build it). A completed temporary run should make no fsync, so
  this row should match the first one;
* ``codex exec`` (Codex CLI, ``--codex PATH`` or ``codex`` on ``PATH``;
  the row is left out when there is none) with a custom model provider on
  the same loopback server (``wire_api = "responses"``; it asks for an
  event stream, which the fake answers in one write as it answers holon's
  JSON), a fresh ``CODEX_HOME``, stdin from ``/dev/null``. Codex CLI
  0.169.0 from npm: ``npm install --prefix DIR @openai/codex@0.169.0``.

``--compare PATH`` adds the two ``holon run`` rows again for another
``holon`` script (an A/B of two builds in one interleaved run; rows marked
``@compare``).

The rows run in rotation (round r starts at row r), every run through
``/usr/bin/time`` (a millisecond more for every row alike) so each run's
peak RSS is known: the figure is the highest over all runs, the median
beside it. It prints the median and the tail (p90, or the max with fewer
than 10 runs) of wall time, the median CPU time (user + system of the
child), the peak RSS and the ratio to the bare interpreter; then the
per-round ratio of the loopback run to ``codex exec`` (and, with
``--compare``, this build's runs to the other's) as min / median / max, and
the load average at the start and the end.
Goal (issues 22, 44): the median per-round ratio loopback run / ``codex
exec`` <= 0.5; without Codex CLI, issue 12's stand-in: the loopback run's
median <= 100 ms. Exits 1 when the goal is missed, 2 when a run fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

# the shared fake provider sits next to this script (also when a test loads
# the script by path)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchkit as bk  # noqa: E402
import fake_responses as fake  # noqa: E402
from fake_responses import ResponsesHandler, message  # noqa: E402
from slow_disk import build_shim  # noqa: E402

TARGET_MS = 100.0
TARGET_CODEX_RATIO = 0.5
CODEX_ROW = "codex exec (loopback)"


class Handler(ResponsesHandler):
    """A Responses server that always answers one assistant message."""

    def do_POST(self) -> None:  # noqa: N802
        self.read_json()
        self.reply(message("done"), 100, 10)


shebang_python = bk.shebang_interpreter


def codex_command(
    codex: str, url: str, home: Path, env: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """``codex exec`` against the loopback server as a custom Responses provider."""
    provider = (
        f'model_providers.bench={{name="bench", base_url="{url}", '
        'wire_api="responses", env_key="BENCH_API_KEY"}'
    )
    argv = [
        codex, "exec", "--skip-git-repo-check", "-m", "bench",
        "-c", 'model_provider="bench"', "-c", provider, "hi",
    ]  # fmt: skip
    home.mkdir()
    codex_env = {k: v for k, v in env.items() if not k.startswith("CODEX_")}
    codex_env.update(CODEX_HOME=str(home), BENCH_API_KEY="sk-bench")
    return argv, codex_env


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}MiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--holon", default=shutil.which("holon") or "holon")
    ap.add_argument("--codex", default=shutil.which("codex"), help="Codex CLI to compare with")
    ap.add_argument("--compare", default=None, help="another holon script, measured alongside")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fsync-ms", type=float, default=3.0, help="the slow disk's extra fsync cost")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    load = bk.Load()
    bk.cache_bytecode()  # children as installed: no compile per run

    holon = os.path.abspath(args.holon)
    python = shebang_python(holon)
    server = fake.start(Handler)
    url = fake.base_url(server)

    with tempfile.TemporaryDirectory(prefix="holon-run-bench-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        (work / "one.yaml").write_text('steps:\n  - text: "done"\n')
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HOLON_", "OPENAI_", "ANTHROPIC_"))
        }
        env.update(
            HOLON_HOME=str(Path(tmp) / "home"), OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-bench"
        )
        loopback = [holon, "run", "--model", "openai/bench", "hi"]
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "holon run (loopback openai)": loopback,
            "holon run (scripted)": [holon, "run", "--model", "scripted:one.yaml", "hi"],
        }
        envs = {name: env for name in commands}
        if args.compare:
            other = os.path.abspath(args.compare)
            commands["holon run (loopback) @compare"] = [other, *loopback[1:]]
            commands["holon run (scripted) @compare"] = [
                other, "run", "--model", "scripted:one.yaml", "hi"
            ]  # fmt: skip
            envs.update({name: env for name in commands if name.endswith("@compare")})
        if args.codex:
            codex_argv, codex_env = codex_command(
                os.path.abspath(args.codex), url, Path(tmp) / "codex-home", env
            )
            commands[CODEX_ROW], envs[CODEX_ROW] = codex_argv, codex_env
        shim = build_shim(Path(tmp))
        slow = f"loopback, fsync +{args.fsync_ms:g} ms"
        if shim is not None:
            commands[slow] = loopback
            envs[slow] = {
                **env,
                "LD_PRELOAD": str(shim),
                "SLOW_FSYNC_US": str(int(args.fsync_ms * 1000)),
            }

        def side(name: str, argv: list[str]) -> Any:
            return lambda: bk.run_child(argv, envs[name], str(work), rss=True)

        # the first round warms caches and writes .pyc files; not counted
        samples = bk.interleave(
            {name: side(name, argv) for name, argv in commands.items()}, args.runs
        )
    server.shutdown()

    base = statistics.median(c.wall_ms for c in samples["python -c pass"])
    rows: dict[str, dict[str, Any]] = {}
    for name, got in samples.items():
        walls = [c.wall_ms for c in got]
        peaks = [c.peak_rss_mib for c in got if c.peak_rss_mib is not None]
        tail_name, tail_ms = bk.tail(walls, 90)
        rows[name] = {
            "wall_ms_median": round(statistics.median(walls), 1),
            "wall_ms_p90": round(tail_ms, 1),
            "wall_tail": tail_name,
            "cpu_ms_median": round(statistics.median(c.cpu_ms for c in got), 1),
            # the highest peak over every run (one run's figure was a sample of one)
            "peak_rss_mib": round(max(peaks), 1) if peaks else None,
            "peak_rss_mib_median": round(statistics.median(peaks), 1) if peaks else None,
            "ratio": round(statistics.median(walls) / base, 2),
        }

    def per_round(num: str, den: str) -> list[float]:
        return bk.ratios([c.wall_ms for c in samples[num]], [c.wall_ms for c in samples[den]])

    loop_row = "holon run (loopback openai)"
    loop = float(rows[loop_row]["wall_ms_median"])
    pairs: dict[str, list[float]] = {}
    if CODEX_ROW in samples:
        pairs["holon run (loopback) / codex exec"] = per_round(loop_row, CODEX_ROW)
    if args.compare:
        pairs["loopback run, this / compare build"] = per_round(
            loop_row, "holon run (loopback) @compare"
        )
        pairs["scripted run, this / compare build"] = per_round(
            "holon run (scripted)", "holon run (scripted) @compare"
        )
    vs_codex = (
        round(bk.spread(pairs["holon run (loopback) / codex exec"]).median, 2)
        if CODEX_ROW in samples
        else None
    )
    goals = bk.Goals()
    if vs_codex is None:
        goals.check(
            "loopback one-round run, wall median (no codex to pair with)",
            loop,
            "<=",
            TARGET_MS,
            " ms",
        )
    else:
        goals.check(
            "loopback one-round run / codex exec (median of per-round ratios)",
            vs_codex,
            "<=",
            TARGET_CODEX_RATIO,
            "x",
        )
    report = {
        "rows": rows,
        "pairs": {k: bk.spread_json(v) for k, v in pairs.items()},
        "target_ms": TARGET_MS,
        "vs_codex": vs_codex,
        "target_vs_codex": TARGET_CODEX_RATIO,
    }
    if not args.json:
        print(f"one-round holon run: {args.runs} rounds, interpreter {python}")
        print(
            f"{'command':<30}{'wall med':>10}{'tail':>11}{'ratio':>8}{'cpu med':>10}"
            f"{'peak RSS':>10}{'(median)':>10}"
        )
        for name, r in rows.items():
            tail = f"{r['wall_tail']} {r['wall_ms_p90']:.1f}"
            print(
                f"{name[:29]:<30}{r['wall_ms_median']:>8.1f}ms{tail:>11}"
                f"{r['ratio']:>7.2f}x{r['cpu_ms_median']:>8.1f}ms{_mib(r['peak_rss_mib']):>10}"
                f"{_mib(r['peak_rss_mib_median']):>10}"
            )
        for label, vals in pairs.items():
            print(bk.ratio_line(label, vals))
    return bk.finish(goals, load, report, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
