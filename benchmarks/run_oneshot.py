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

It prints the median and p90 wall time, the median CPU time (user + system of
the child) and the peak RSS of each, and the ratio to the bare interpreter.
Target (issue 22): the loopback run <= 0.5x ``codex exec``'s median, measured
side by side; without Codex CLI, issue 12's stand-in: <= 100 ms median.
Exits 1 when the target is missed, 2 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

# the shared fake provider sits next to this script (also when a test loads
# the script by path)
sys.path.insert(0, str(Path(__file__).resolve().parent))
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


def shebang_python(script: str) -> str:
    with open(script, "rb") as f:
        first = f.readline().decode().strip()
    if first.startswith("#!") and "python" in first:
        return first[2:].split()[0]
    return sys.executable


def run_child(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall ms and CPU ms (user + system) of one child process (started with
    posix_spawn, output to /dev/null, waited with wait4)."""
    devnull = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    old = os.getcwd()
    os.chdir(cwd)
    try:
        t0 = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, env, file_actions=devnull)
    finally:
        os.chdir(old)
    _, status, usage = os.wait4(pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    code = os.waitstatus_to_exitcode(status)
    if code != 0:  # exit 2: a broken run is not a missed target (exit 1)
        print(f"{' '.join(argv)} exited {code}", file=sys.stderr)
        raise SystemExit(2)
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def peak_rss_mib(argv: list[str], env: dict[str, str], cwd: str) -> float | None:
    """Peak RSS of one run, from ``/usr/bin/time`` (a child's own ``ru_maxrss``
    would include this benchmark's memory: the high-water mark survives exec)."""
    if not os.access("/usr/bin/time", os.X_OK):
        return None
    import subprocess

    res = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        return int(res.stderr.strip().splitlines()[-1]) / 1024
    except (ValueError, IndexError):
        return None


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

    holon = os.path.abspath(args.holon)
    python = shebang_python(holon)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"

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
        for name, argv in commands.items():  # warm caches, write .pyc files
            run_child(argv, envs[name], str(work))
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                samples[name].append(run_child(argv, envs[name], str(work)))
        rss = {name: peak_rss_mib(argv, envs[name], str(work)) for name, argv in commands.items()}
    server.shutdown()

    base = statistics.median(s[0] for s in samples["python -c pass"])
    rows: dict[str, dict[str, Any]] = {}
    for name, s in samples.items():
        peak = rss[name]
        walls = sorted(x[0] for x in s)
        rows[name] = {
            "wall_ms_median": round(statistics.median(walls), 1),
            "wall_ms_p90": round(walls[max(0, math.ceil(0.9 * len(walls)) - 1)], 1),
            "cpu_ms_median": round(statistics.median(x[1] for x in s), 1),
            "peak_rss_mib": None if peak is None else round(peak, 1),
            "ratio": round(statistics.median(walls) / base, 2),
        }
    loop = float(rows["holon run (loopback openai)"]["wall_ms_median"])
    codex = rows.get(CODEX_ROW)
    vs_codex = None if codex is None else round(loop / float(codex["wall_ms_median"]), 2)
    ok = loop <= TARGET_MS if vs_codex is None else vs_codex <= TARGET_CODEX_RATIO
    if args.json:
        report = {
            "rows": rows,
            "target_ms": TARGET_MS,
            "vs_codex": vs_codex,
            "target_vs_codex": TARGET_CODEX_RATIO,
            "ok": ok,
            "load": os.getloadavg(),
        }
        print(json.dumps(report))
    else:
        load = os.getloadavg()[0]
        print(f"one-round holon run: {args.runs} runs each, interpreter {python}, load {load:.2f}")
        print(
            f"{'command':<30}{'wall med':>10}{'p90':>9}{'ratio':>8}{'cpu med':>10}{'peak RSS':>10}"
        )
        for name, r in rows.items():
            print(
                f"{name[:29]:<30}{r['wall_ms_median']:>8.1f}ms{r['wall_ms_p90']:>7.1f}ms"
                f"{r['ratio']:>7.2f}x{r['cpu_ms_median']:>8.1f}ms{_mib(r['peak_rss_mib']):>10}"
            )
        verdict = "PASS" if ok else "MISS"
        if vs_codex is None:
            target = f"target <= {TARGET_MS:.0f} ms; no codex to compare with"
        else:
            target = f"{vs_codex:.2f}x codex exec, target <= {TARGET_CODEX_RATIO}x"
        print(f"{verdict}: loopback one-round run median {loop:.1f} ms ({target})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
