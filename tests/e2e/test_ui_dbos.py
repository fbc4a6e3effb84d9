"""The web console under ``holon serve --engine dbos`` (issue 41: both
engines): each worker serves ``/ui/``; a prompt sent through the control
route the console's Send button posts to runs once, and every worker's
agent page shows it and the reply (its live stream too)."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from pgcluster import PgCluster, postgres_missing
from serve_helpers import start_serve, stop, wait_for, wait_log

from holon_cli.runtime.agents.lifecycle import open_agent

needs_pg = pytest.mark.skipif(postgres_missing() is not None, reason=str(postgres_missing()))
needs_dbos = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("dbos") is None,
    reason="dbos is not installed (pip install 'holon-cli[dbos]')",
)


@pytest.fixture
def pg() -> Iterator[PgCluster]:
    with PgCluster() as cluster:
        yield cluster


def _get(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback
        assert r.status == 200
        return str(r.read().decode())


def _post(url: str, body: dict[str, str]) -> int:
    req = urllib.request.Request(  # noqa: S310 - loopback
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310
        return int(r.status)


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_dbos_workers_ui(tmp_path: Path, pg: PgCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """(A short name: the home's path holds the workers' Unix sockets.)"""
    script = tmp_path / "model.yaml"
    script.write_text(yaml.safe_dump({"loop": True, "steps": [{"text": "answered by dbos"}]}))
    monkeypatch.setenv("HOLON_MODEL", f"scripted:{script}")
    open_agent("main")
    procs = [
        start_serve(tmp_path, "--engine", "dbos", "--database-url", pg.url, name=f"w{i}")
        for i in range(2)
    ]
    try:
        urls = []
        for i in range(2):
            wait_log(tmp_path, "engine dbos: worker", timeout=60, name=f"w{i}")
            log = wait_log(tmp_path, "web console: http://", timeout=60, name=f"w{i}")
            urls.append(re.search(r"web console: (http://[0-9.:]+)/ui/", log).group(1))  # type: ignore[union-attr]
        for url in urls:
            assert 'id="agent-main"' in _get(url + "/ui/")
        # a live stream open on the second worker while the first takes the prompt
        streamed: list[str] = []

        def follow() -> None:
            req = urllib.request.Request(urls[1] + "/ui/agents/main/live?after=0")  # noqa: S310
            with urllib.request.urlopen(req, timeout=30) as r:  # noqa: S310
                for raw in r:
                    streamed.append(raw.decode())
                    if "answered by dbos" in "".join(streamed):
                        return

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        assert _post(urls[0] + "/control/agents/main/prompt", {"text": "from the console"}) == 202
        store = open_agent("main", create_default=False)

        def done() -> list[dict[str, object]]:
            return [
                e
                for e in store.events.records()
                if e["kind"] == "turn_terminal" and e["data"].get("status") == "completed"
            ]

        assert wait_for(lambda: len(done()) >= 1, timeout=60)
        for url in urls:
            page = _get(url + "/ui/agents/main")
            assert "from the console" in page and "answered by dbos" in page
        t.join(30)
        assert "answered by dbos" in "".join(streamed)
        assert len(done()) == 1
    finally:
        for p in procs:
            stop(p)
