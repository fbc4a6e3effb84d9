"""The DBOS engine's decisions that need no database: which passes a change
enqueues (workflow ids per cause), the database URL rules, what status says."""

from __future__ import annotations

from typing import Any

import pytest

from holon_cli import clock
from holon_cli.errors import UsageError
from holon_cli.runtime.agents import create_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.serve import engine_dbos
from holon_cli.serve.engine_dbos import DbosScheduler, database_url, pending_message_ids


class Recorder(DbosScheduler):
    def __init__(self) -> None:
        super().__init__(database_url="postgresql://x@127.0.0.1/x", executor_id="h-1")
        self.calls: list[tuple[str, str, float]] = []

    def enqueue_pass(
        self, agent_id: str, key: str, *, delay: float = 0.0, backoff: float = 0.0
    ) -> bool:
        self.calls.append((agent_id, key, delay))
        return True


def test_a_pass_per_queued_message_named_by_its_id() -> None:
    create_agent("a1")
    ids = [admit(f"m{i}", agent_id="a1")["id"] for i in range(3)]
    assert pending_message_ids("a1") == sorted(ids)
    eng = Recorder()
    eng.wake("a1")
    assert sorted(k for _a, k, _d in eng.calls) == sorted(f"msg:{m}" for m in ids)
    assert all(a == "a1" and d == 0.0 for a, _k, d in eng.calls)


def test_a_deadline_is_one_delayed_pass_named_by_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create_agent("a2")
    at = clock.now() + 30.0
    monkeypatch.setattr("holon_cli.serve.loop.agent_deadline", lambda _aid: at)
    eng = Recorder()
    eng.wake("a2")
    ((agent, key, delay),) = eng.calls
    assert agent == "a2" and key == f"at:{int(at * 1000)}"
    assert 29.0 < delay <= 30.0
    other = Recorder()  # another worker computes the same id: DBOS keeps one
    other.wake("a2")
    assert other.calls[0][1] == key


def test_resume_and_sweep_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    create_agent("a3")
    mid = admit("held", agent_id="a3")["id"]
    eng = Recorder()
    monkeypatch.setattr(
        DbosScheduler.__mro__[1], "_resumed", lambda self, paths: {"a3"}, raising=True
    )
    assert eng._resumed(["x"]) == {"a3"}
    eng.wake("a3", sweep=7)
    keys = [k for _a, k, _d in eng.calls]
    assert f"msg:{mid}" in keys and "sweep:7" in keys
    assert any(k.startswith("resume:") for k in keys)
    eng.calls.clear()
    eng.wake("a3")  # the resume was consumed
    assert not any(k.startswith("resume:") for _a, k, _d in eng.calls)


def test_database_url_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOLON_DATABASE_URL", raising=False)
    with pytest.raises(UsageError, match="HOLON_DATABASE_URL") as e:
        database_url(None)
    assert e.value.exit_code == 2
    with pytest.raises(UsageError, match="postgresql://"):
        database_url("sqlite:///x.db")
    monkeypatch.setenv("HOLON_DATABASE_URL", "postgresql://env@h/db")
    assert database_url(None) == "postgresql://env@h/db"
    assert database_url("postgresql://flag@h/db") == "postgresql://flag@h/db"


def test_engine_dbos_cli_errors(monkeypatch: pytest.MonkeyPatch, script_runner: Any) -> None:
    monkeypatch.delenv("HOLON_DATABASE_URL", raising=False)
    res = script_runner.run(["holon", "serve", "--engine", "dbos"])
    assert res.returncode == 2
    assert "--database-url" in res.stderr and "HOLON_DATABASE_URL" in res.stderr
    res = script_runner.run(["holon", "serve", "--database-url", "postgresql://x/y"])
    assert res.returncode == 2 and "--engine dbos" in res.stderr
    res = script_runner.run(["holon", "serve", "--engine", "postgres"])
    assert res.returncode == 2 and "--engine" in res.stderr


def test_missing_extra_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "dbos" else real(n, *a)
    )
    with pytest.raises(UsageError, match="'dbos' package") as e:
        engine_dbos.require_dbos()
    assert e.value.hint == "pip install 'holon-cli[dbos]'"


def test_a_turn_step_reports_busy_and_failures_without_raising(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from holon_cli.errors import BusyError

    create_agent("a4")
    eng = Recorder()

    def busy(*_a: Any, **_k: Any) -> Any:
        raise BusyError("turn lock held")

    monkeypatch.setattr("holon_cli.runtime.turn.run_turn", busy)
    assert eng.run_one_turn("a4") == {"ran": False, "busy": True}
    assert eng.stats.busy_skips == 1

    def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("holon_cli.runtime.turn.run_turn", broken)
    res = eng.run_one_turn("a4")
    assert res["ran"] is False and "disk on fire" in res["error"]
    assert eng.stats.failures == 1
    assert eng.stats.last_failure is not None
    assert eng.stats.last_failure["summary"].startswith("a4: ")
    assert eng.run_one_turn("nobody") == {"ran": False}  # removed meanwhile
