"""`holon serve --engine dbos` (issue 30): real serve workers sharing one home,
coordinated by DBOS on a private PostgreSQL 15 cluster (started and stopped
here), answering through a slow loopback OpenAI Responses server."""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, RecordedRequest, Reply
from pgcluster import PgCluster, postgres_missing
from serve_helpers import HOLON, start_serve, stop, wait_for, wait_log

from holon_cli import clock
from holon_cli.runtime.agents.lifecycle import open_agent

MODEL = "openai/gpt-test"
SLOW_S = 0.4

needs_pg = pytest.mark.skipif(postgres_missing() is not None, reason=str(postgres_missing()))
needs_dbos = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("dbos") is None,
    reason="dbos is not installed (pip install 'holon-cli[dbos]')",
)


def sh(*args: str) -> Any:
    res = subprocess.run([*HOLON, *args, "--json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"holon {' '.join(args)} -> {res.returncode}\n{res.stderr}"
    return json.loads(res.stdout)["data"]


@pytest.fixture
def slow_provider(monkeypatch: pytest.MonkeyPatch, fixtures_dir: Path) -> Iterator[LoopbackServer]:
    """Every request answered with a text reply after SLOW_S seconds."""
    rec = json.loads((fixtures_dir / "openai_responses" / "text_nonstream.json").read_text())
    body = rec["response"]["body"]
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)

    def answer(_req: RecordedRequest) -> Reply:
        reply = Reply.json_body(copy.deepcopy(body))
        reply.delay_s = SLOW_S
        return reply

    with LoopbackServer() as s:
        s.check = answer
        monkeypatch.setenv("OPENAI_BASE_URL", s.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        monkeypatch.setenv("HOLON_MODEL", MODEL)
        yield s


@pytest.fixture
def pg() -> Iterator[PgCluster]:
    with PgCluster() as cluster:
        yield cluster


def start_workers(tmp_path: Path, url: str, n: int) -> list[subprocess.Popen[bytes]]:
    procs = [
        start_serve(tmp_path, "--engine", "dbos", "--database-url", url, name=f"w{i}")
        for i in range(n)
    ]
    for i in range(n):
        wait_log(tmp_path, "engine dbos: worker", timeout=60, name=f"w{i}")
    return procs


def events(agent: str, kind: str) -> list[dict[str, Any]]:
    store = open_agent(agent, create_default=False)
    return [e for e in store.events.records() if e["kind"] == kind]


def completed(agents: list[str]) -> list[dict[str, Any]]:
    return [
        e for a in agents for e in events(a, "turn_terminal") if e["data"]["status"] == "completed"
    ]


def assert_exactly_once_no_overlap(agents: list[str], sent: list[str]) -> set[str]:
    """Each message: one completed turn_terminal; per agent no two turns
    overlapping in time; returns the workers that ran turns."""
    done = Counter(e.get("message_id") for e in completed(agents))
    assert sorted(done) == sorted(sent), (sorted(done), sorted(sent))
    assert set(done.values()) == {1}, done
    workers: set[str] = set()
    for a in agents:
        for e in events(a, "agent_state_changed"):  # the turn_started change names it too
            if e["data"]["reason"] == "turn_started":
                assert e.get("worker"), e
        spans: dict[str, list[float]] = defaultdict(list)
        for e in events(a, "message_processing_started"):
            workers.add(e["data"].get("worker", "?"))
            spans[e["turn_id"]].append(clock.parse_iso(e["at"]))
        for e in events(a, "turn_terminal"):
            spans[e["turn_id"]].append(clock.parse_iso(e["at"]))
        ivs = sorted((min(v), max(v)) for v in spans.values() if len(v) >= 2)
        for (_s1, e1), (s2, _e2) in zip(ivs, ivs[1:], strict=False):
            assert s2 >= e1, f"{a}: overlapping turns {ivs}"
    return workers


def test_engine_dbos_without_database_url_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HOLON_DATABASE_URL", raising=False)
    for argv in (["serve", "--engine", "dbos"], ["daemon", "start", "--engine", "dbos"]):
        res = subprocess.run([*HOLON, *argv], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, res.stderr
        assert "HOLON_DATABASE_URL" in res.stderr and "--database-url" in res.stderr
    res = subprocess.run(
        [*HOLON, "serve", "--engine", "dbos", "--database-url", "mysql://x/y"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "postgresql://" in res.stderr, res.stderr
    res = subprocess.run(
        [*HOLON, "serve", "--database-url", "postgresql://x/y"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "--engine dbos" in res.stderr, res.stderr


def test_base_install_does_not_import_dbos() -> None:
    code = (
        "import sys; from holon_cli.cli import main\n"
        "try:\n    main(['serve', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in ('dbos', 'psycopg', 'sqlalchemy')))"
    )
    res = subprocess.run(["python", "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout


def make_agents(n: int) -> list[str]:
    agents = [f"a{i}" for i in range(n)]
    for a in agents:
        sh("agent", "create", a)
    return agents


def send(agents: list[str], per_agent: int) -> list[str]:
    sent = []
    for k in range(per_agent):
        for a in agents:
            sent.append(sh("enqueue", "--agent", a, f"message {k} for {a}")["id"])
    return sent


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_three_workers_run_each_message_once(
    tmp_path: Path, pg: PgCluster, slow_provider: LoopbackServer
) -> None:
    agents = make_agents(10)
    procs = start_workers(tmp_path, pg.url, 3)
    try:
        sent = send(agents, 3)
        assert wait_for(lambda: len(completed(agents)) >= 30, timeout=120), len(completed(agents))
        time.sleep(1.0)  # a doubled turn would show up now
        workers = assert_exactly_once_no_overlap(agents, sent)
        assert len(workers - {"?"}) > 1, workers
    finally:
        for p in procs:
            stop(p)


def in_flight(agents: list[str]) -> dict[str, str]:
    """turn id -> worker of the turns started and not yet settled."""
    out: dict[str, str] = {}
    for a in agents:
        ended = {e["turn_id"] for e in events(a, "turn_terminal")}
        for e in events(a, "message_processing_started"):
            if e["turn_id"] not in ended:
                out[e["turn_id"]] = e["data"].get("worker", "?")
    return out


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_sigkill_of_a_worker_mid_turn_loses_and_doubles_nothing(
    tmp_path: Path, pg: PgCluster, slow_provider: LoopbackServer
) -> None:
    agents = make_agents(10)
    procs = start_workers(tmp_path, pg.url, 3)
    try:
        sent = send(agents, 3)
        # the victim: whichever worker is first seen mid-turn (which one the
        # queue gives the first passes to is DBOS's choice)
        by_pid = {f"-{p.pid}": p for p in procs}
        busy: list[str] = []

        def someone_mid_turn() -> bool:
            busy[:] = [m for w in in_flight(agents).values() for m in by_pid if w.endswith(m)]
            return bool(busy)

        assert wait_for(someone_mid_turn, timeout=60), "no worker started a turn"
        mine = busy[0]
        victim = by_pid[mine]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed_at = time.monotonic()
        assert wait_for(lambda: len(completed(agents)) >= 30, timeout=120), len(completed(agents))
        time.sleep(1.0)
        assert_exactly_once_no_overlap(agents, sent)
        live = [i for i, p in enumerate(procs) if p is not victim]
        said = f"dead worker(s) {socket.gethostname()}{mine}"

        def logs() -> str:
            return "".join((tmp_path / f"w{i}.log").read_text() for i in live)

        # a victim killed just after its turn ended left nothing pending: the
        # others may finish every message before its heartbeat ages out
        # (DEAD_AFTER_S), and only then say it is dead
        assert wait_for(lambda: said in logs(), timeout=60), logs()[-3000:]
        assert time.monotonic() - killed_at < 120
    finally:
        for p in procs:
            stop(p)


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_postgres_restart_mid_run_loses_nothing(
    tmp_path: Path, pg: PgCluster, slow_provider: LoopbackServer
) -> None:
    agents = make_agents(6)
    procs = start_workers(tmp_path, pg.url, 2)
    try:
        sent = send(agents, 2)
        assert wait_for(lambda: len(in_flight(agents)) > 0, timeout=60)
        pg.stop()  # workers lose the database mid-turn, and for a while
        time.sleep(3.0)
        pg.start()
        sent += send(agents, 2)
        assert wait_for(lambda: len(completed(agents)) >= 24, timeout=150), len(completed(agents))
        time.sleep(1.0)
        assert_exactly_once_no_overlap(agents, sent)
        assert all(p.poll() is None for p in procs)
    finally:
        for p in procs:
            stop(p)


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_repeating_timer_fires_once_per_period_with_three_workers(
    tmp_path: Path, pg: PgCluster, slow_provider: LoopbackServer
) -> None:
    (agent,) = make_agents(1)
    procs = start_workers(tmp_path, pg.url, 3)
    try:
        tmr = sh(
            "timer", "add", "--agent", agent, "--after", "2s", "--every", "3s", "--message", "tick"
        )
        due = clock.parse_iso(tmr["next_fire_at"])  # the first fire's; then every 3 s
        assert wait_for(lambda: len(completed([agent])) >= 4, timeout=90)
        sh("timer", "cancel", tmr["id"], "--agent", agent)
        ended = time.time()  # no fire after this

        def timer_turns() -> list[dict[str, Any]]:
            return [
                e
                for e in events(agent, "message_processing_started")
                if (e.get("origin") or {}).get("kind") == "timer"
            ]

        # every turn a fire started has ended (polled: on a loaded machine the
        # last one was still running a fixed second after the fourth ended)
        assert wait_for(lambda: len(completed([agent])) >= len(timer_turns()), timeout=60)
        turns = timer_turns()
        assert turns and len(turns) == len(events(agent, "message_processing_started"))
        done = completed([agent])
        # one turn per fire: never two turns of one fire's message
        assert len(done) == len(turns)
        assert sorted(e.get("message_id") for e in done) == sorted(
            e.get("message_id") for e in turns
        )
        fired = {
            e["data"]["message_id"]: clock.parse_iso(e["at"])
            for e in events(agent, "timer_fired")
            if e["data"].get("message_id")
        }
        assert sorted(fired) == sorted(e.get("message_id") for e in turns)
        assert len(done) <= 1 + int((ended - due) // 3.0), (len(done), ended - due)
        # one fire per period, never before it is due; each turn starts once
        # its fire has admitted its message (the start itself may lag a fire
        # by a period on a loaded machine: a pass is dequeued, a worker busy;
        # its period is the fire's)
        periods = [int((t - due) // 3.0) for t in sorted(fired.values())]
        assert min(periods) >= 0 and len(set(periods)) == len(periods), (periods, fired)
        for e in turns:
            assert clock.parse_iso(e["at"]) >= fired[e["message_id"]], (e, fired)
    finally:
        for p in procs:
            stop(p)


@pytest.fixture(autouse=True)
def short_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home with a short path: each worker's socket (``run/holon-<executor
    id>.sock``, the id carrying the host name) must fit AF_UNIX's 108 bytes
    wherever the temp root is (a pytest-xdist worker adds a folder)."""
    d = Path(tempfile.mkdtemp(prefix="h"))
    monkeypatch.setenv("HOLON_HOME", str(d / "home"))
    yield d / "home"
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_daemon_start_engine_dbos_and_status_show_the_cluster(
    tmp_path: Path,
    pg: PgCluster,
    slow_provider: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HOLON_DATABASE_URL", raising=False)
    monkeypatch.delenv("HOLON_EXECUTOR_ID", raising=False)
    (other,) = start_workers(tmp_path, pg.url, 1)
    daemon_pid = None
    try:
        args = ["--engine", "dbos", "--database-url", pg.url, "--listen", "127.0.0.1:0"]
        res = subprocess.run(
            [*HOLON, "daemon", "start", *args, "--json"], capture_output=True, text=True, timeout=90
        )
        assert res.returncode == 0, res.stderr
        started = json.loads(res.stdout)["data"]
        daemon_pid = started["pid"]
        me = started["executor_id"]
        assert me.startswith(f"{socket.gethostname()}-daemon-")
        assert started["socket_path"].endswith(f"run/holon-{me}.sock")
        # the URL went to the child by environment, never on its command line
        cmdline = Path(f"/proc/{daemon_pid}/cmdline").read_bytes().decode()
        assert pg.url not in cmdline and "dbos" in cmdline

        def cluster() -> set[str]:
            st = sh("daemon", "status")
            return {w["executor_id"] for w in st.get("workers", []) if w["alive"]}

        assert wait_for(lambda: cluster() == {me, f"{socket.gethostname()}-{other.pid}"}, 20)
        text = subprocess.run(
            [*HOLON, "daemon", "status"], capture_output=True, text=True, timeout=60
        ).stdout
        assert f"dbos, worker {me}" in text and f"-{other.pid} (pid {other.pid}" in text
        again = subprocess.run(
            [*HOLON, "daemon", "start", *args, "--json"], capture_output=True, text=True, timeout=90
        )
        assert json.loads(again.stdout)["data"]["already_running"] is True, again.stderr
        assert subprocess.run([*HOLON, "daemon", "stop"], timeout=90).returncode == 0
        daemon_pid = None
    finally:
        if daemon_pid is not None:
            os.kill(daemon_pid, signal.SIGKILL)
        stop(other)


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_a_message_held_by_a_pause_runs_once_after_start(
    tmp_path: Path, pg: PgCluster, slow_provider: LoopbackServer
) -> None:
    (agent,) = make_agents(1)
    procs = start_workers(tmp_path, pg.url, 2)
    try:
        sh("agent", "pause", agent)
        sent = send([agent], 1)
        time.sleep(3.0)  # both workers saw it; its pass found the agent paused
        assert completed([agent]) == []
        sh("agent", "start", agent)
        assert wait_for(lambda: len(completed([agent])) >= 1, timeout=30)
        time.sleep(1.0)
        assert_exactly_once_no_overlap([agent], sent)
    finally:
        for p in procs:
            stop(p)
