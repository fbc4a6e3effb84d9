"""`holon serve --engine dbos` (issue 30): real serve workers sharing one home,
coordinated by DBOS on a private PostgreSQL 15 cluster (started and stopped
here), answering through a slow loopback OpenAI Responses server."""

from __future__ import annotations

import copy
import json
import signal
import subprocess
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
from holon_cli.runtime.agents import open_agent

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
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dbos', 'psycopg', 'sqlalchemy')))"
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
