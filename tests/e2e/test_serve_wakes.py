"""Every source of work wakes the right agent promptly under a real ``holon
serve`` (issue 44 item 2): an arrival, a timer, a task's exit, a change of
``config.yaml`` and an agent started again. One serve over a home of several
agents; each source targets one agent, and only that agent gets a turn.

serve sleeps in the kernel until a writer's marker (``run/wake/``), a new
agent, ``config.yaml`` or a deadline wakes it; a lost wake would show here as
a turn that never comes (or comes only with the 5-minute sweep)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from pgcluster import PgCluster, postgres_missing
from serve_helpers import HOLON, scripted_model, start_serve, stop, wait_for, wait_log

from holon_cli.runtime.agents.lifecycle import open_agent

AGENTS = ("arrive", "timed", "tasked", "budgeted", "resumed", "quiet")
PROMPT_S = 8.0  # generous: a loaded shared machine; serve's own reaction is ms


def _holon(*args: str) -> str:
    out = subprocess.run([*HOLON, *args], capture_output=True, text=True)
    assert out.returncode == 0, f"holon {' '.join(args)}: {out.stderr}"
    return out.stdout.strip()


def _settled(agent: str) -> list[str]:
    """The message ids of ``agent``'s settled turns, in order."""
    store = open_agent(agent, create_default=False)
    return [
        str(e.get("message_id")) for e in store.events.records() if e["kind"] == "turn_terminal"
    ]


def _turns(agent: str) -> int:
    return len(_settled(agent))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holon_home: Path) -> Path:
    monkeypatch.setenv("HOLON_MODEL", scripted_model(tmp_path))
    for agent in AGENTS:
        _holon("agent", "create", agent)
    return holon_home


def _write_config(home: Path, turns_per_hour: int) -> None:
    cfg = {"agents": {"budgeted": {"budgets": {"turns_per_hour": turns_per_hour}}}}
    tmp = home / "config.yaml.tmp"
    tmp.write_text(yaml.safe_dump(cfg))
    os.replace(tmp, home / "config.yaml")


def _dbos_missing() -> str | None:
    if importlib.util.find_spec("dbos") is None:
        return "dbos is not installed (pip install 'holon-cli[dbos]')"
    return postgres_missing()


@pytest.mark.slow
@pytest.mark.parametrize(
    "engine",
    [
        "local",
        pytest.param(
            "dbos",
            marks=pytest.mark.skipif(_dbos_missing() is not None, reason=str(_dbos_missing())),
        ),
    ],
)
def test_wakes(tmp_path: Path, home: Path, engine: str) -> None:
    """Each source of work wakes its agent, and no other (a short name: the
    home's path holds the dbos workers' Unix sockets)."""
    _write_config(home, turns_per_hour=1)
    with contextlib.ExitStack() as stack:
        if engine == "dbos":
            pg = stack.enter_context(PgCluster())
            proc = start_serve(tmp_path, "--engine", "dbos", "--database-url", pg.url)
            wait_log(tmp_path, "engine dbos: worker", timeout=60)
        else:
            proc = start_serve(tmp_path)
        _exercise(tmp_path, home, proc)


def _exercise(tmp_path: Path, home: Path, proc: subprocess.Popen[bytes]) -> None:
    log = tmp_path / "serve.log"
    try:
        wait_log(tmp_path, "watching", timeout=30)
        # the budgeted agent spends its one turn of the hour; the next message
        # is stopped before its request, and the one after waits, held
        _holon("enqueue", "--agent", "budgeted", "first")
        assert wait_for(lambda: _turns("budgeted") == 1, 20), log.read_text()
        _holon("enqueue", "--agent", "budgeted", "stopped by the budget")
        assert wait_for(lambda: _turns("budgeted") == 2, 20), log.read_text()
        held = _holon("enqueue", "--agent", "budgeted", "waits for a raised budget")
        # the resumed agent is paused with a message waiting
        _holon("agent", "pause", "resumed")
        waiting = _holon("enqueue", "--agent", "resumed", "waits for the operator")
        time.sleep(1.5)  # serve has seen both and left them alone
        assert _turns("resumed") == 0
        assert held not in _settled("budgeted")
        before = {a: _turns(a) for a in AGENTS}

        # an arrival
        t0 = time.monotonic()
        hello = _holon("enqueue", "--agent", "arrive", "hello")
        assert wait_for(lambda: hello in _settled("arrive"), PROMPT_S), log.read_text()
        arrival_s = time.monotonic() - t0

        # a timer: nothing arrives, its deadline alone wakes the agent
        _holon("timer", "add", "--agent", "timed", "--after", "2s", "--message", "tick")
        t0 = time.monotonic()
        assert wait_for(lambda: _turns("timed") == 1, 2 + PROMPT_S), log.read_text()
        assert time.monotonic() - t0 >= 1.5  # not before it was due

        # a task's exit: its supervisor delivers the result, which wakes the agent
        _holon("task", "run", "--agent", "tasked", "--workdir", str(tmp_path), "--", "sleep 1")
        assert wait_for(lambda: _turns("tasked") == 1, 1 + PROMPT_S), log.read_text()

        # a config change: the budget is raised, the held message runs
        _write_config(home, turns_per_hour=10)
        assert wait_for(lambda: held in _settled("budgeted"), PROMPT_S), log.read_text()

        # an agent started again: its waiting message runs
        _holon("agent", "start", "resumed")
        assert wait_for(lambda: waiting in _settled("resumed"), PROMPT_S), log.read_text()

        time.sleep(0.5)
        after = {a: _turns(a) for a in AGENTS}
        assert {a: after[a] - before[a] for a in AGENTS} == {
            "arrive": 1,
            "timed": 1,
            "tasked": 1,
            "budgeted": 1,
            "resumed": 1,
            "quiet": 0,
        }
        assert arrival_s < PROMPT_S
    finally:
        assert stop(proc) == 0
