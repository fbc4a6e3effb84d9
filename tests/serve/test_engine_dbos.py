"""The DBOS engine's decisions that need no database: which passes a change
enqueues (workflow ids per cause), the database URL rules, what status says."""

from __future__ import annotations

from typing import Any

import pytest

from holon_cli import clock
from holon_cli.errors import UsageError
from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.serve.dbos import database as dbos_database
from holon_cli.serve.dbos.database import database_url
from holon_cli.serve.dbos.engine import DbosScheduler, pending_message_ids


class Recorder(DbosScheduler):
    def __init__(self) -> None:
        super().__init__(database_url="postgresql://x@127.0.0.1/x", executor_id="h-1")
        self.calls: list[tuple[str, str, float]] = []
        self.waiting = False  # what the database says: a pass of the agent waits to start
        self.db_up = True

    def enqueue_pass(
        self, agent_id: str, key: str, *, delay: float = 0.0, backoff: float = 0.0
    ) -> bool:
        if not self.db_up:
            return False
        self.calls.append((agent_id, key, delay))
        return True

    def _pass_waiting(self, agent_id: str) -> bool:
        return self.waiting


def test_one_pass_for_a_backlog_named_by_its_first_message() -> None:
    """A pass runs turns until no message is left: 3 queued messages need
    one pass, not three (each spare pass was a dequeue, a tick and two
    workflow writes for nothing)."""
    create_agent("a1")
    ids = [admit(f"m{i}", agent_id="a1")["id"] for i in range(3)]
    assert pending_message_ids("a1") == sorted(ids)
    eng = Recorder()
    eng.wake("a1")
    assert eng.calls == [("a1", f"msg:{sorted(ids)[0]}", 0.0)]
    eng.wake("a1")  # the same messages: already covered
    assert len(eng.calls) == 1
    new = admit("m3", agent_id="a1")["id"]  # a new arrival: a new pass (the first may be running)
    eng.wake("a1")
    assert eng.calls[1:] == [("a1", f"msg:{new}", 0.0)]


def test_no_pass_while_one_waits_to_start() -> None:
    """A pass enqueued and not started yet (by any worker) will see the
    arrival: nothing more is enqueued, so one waiting pass per agent."""
    create_agent("a4")
    admit("x", agent_id="a4")
    eng = Recorder()
    eng.waiting = True
    eng.wake("a4")
    assert eng.calls == []
    eng.waiting = False
    eng.wake("a4")  # covered by the waiting pass: remembered
    assert eng.calls == []


def test_a_failed_enqueue_is_tried_again_at_the_next_wake() -> None:
    create_agent("a5")
    mid = admit("x", agent_id="a5")["id"]
    eng = Recorder()
    eng.db_up = False
    eng.wake("a5")
    assert eng.calls == []
    eng.db_up = True
    eng.wake("a5")
    assert eng.calls == [("a5", f"msg:{mid}", 0.0)]


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
        DbosScheduler.__mro__[1], "_resumed", lambda self, ids: {"a3"}, raising=True
    )
    eng._news({"a3"})  # the watcher saw the agent's marker: its record left `paused`
    eng.wake("a3", sweep=7)
    keys = [k for _a, k, _d in eng.calls]
    assert f"msg:{mid}" in keys and "sweep:7" in keys
    assert any(k.startswith("resume:") for k in keys)
    eng.calls.clear()
    eng.wake("a3")  # the resume was consumed
    assert not any(k.startswith("resume:") for _a, k, _d in eng.calls)


def test_a_config_change_passes_held_messages_once_per_change(holon_home: Any) -> None:
    """A message whose own pass found it held (a spent budget) is not new at
    the next wake; a change of config.yaml (the budget raised) gives the
    agent one pass named by the file's identity, like the sweep's, so every
    worker enqueues the same one; an agent with nothing queued gets none."""
    create_agent("a6")
    create_agent("a7")
    mid = admit("held", agent_id="a6")["id"]
    eng = Recorder()
    eng.wake("a6")
    eng.wake("a7")
    assert eng.calls == [("a6", f"msg:{mid}", 0.0)]
    eng.calls.clear()
    eng.wake("a6")  # its pass ran and found it held: nothing new
    assert eng.calls == []
    (holon_home / "config.yaml").write_text("budgets:\n  turns_per_hour: 10\n")
    eng._reconfigured()
    eng.wake("a6")
    eng.wake("a7")
    [(agent, key, _delay)] = eng.calls
    assert agent == "a6" and key.startswith("config:")
    eng.calls.clear()
    eng.wake("a6")  # consumed
    assert eng.calls == []
    (holon_home / "config.yaml").write_text("budgets:\n  turns_per_hour: 20\n")
    eng._reconfigured()
    eng.wake("a6")
    [(_agent, key2, _delay)] = eng.calls
    assert key2.startswith("config:") and key2 != key


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
        dbos_database.require_dbos()
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


def test_shown_url_never_holds_the_password() -> None:
    shown = dbos_database.shown_url
    assert shown("postgresql://holon:s3cret@db.example:5433/holon") == (
        "postgresql://holon@db.example:5433/holon"
    )
    assert shown("postgresql://h@[::1]/x?sslmode=require&password=s3cret") == (
        "postgresql://h@[::1]/x?sslmode=require"
    )
    assert shown("postgresql:///holon") == "postgresql:///holon"


@pytest.mark.script_launch_mode("subprocess")
def test_an_unreachable_database_is_one_line_and_nothing_listens(
    script_runner: Any, holon_home: Any
) -> None:
    """Issue 36 §5: `serve --engine dbos` against a database nobody answers
    for: one error line naming it (not its password), exit 1, no
    "listening" first, no traceback, no socket left."""
    import socket

    pytest.importorskip("dbos")
    pytest.importorskip("psycopg")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connection refused
    url = f"postgresql://holon:pa55word@127.0.0.1:{port}/holon"
    res = script_runner.run(
        ["holon", "serve", "--engine", "dbos", "--database-url", url, "--listen", "127.0.0.1:0"]
    )
    assert res.returncode == 1, res.stderr
    assert "pa55word" not in res.stderr + res.stdout
    assert "Traceback" not in res.stderr and "listening" not in res.stderr
    (error,) = [ln for ln in res.stderr.splitlines() if ln.startswith("Error:")]
    assert f"cannot use the database postgresql://holon@127.0.0.1:{port}/holon" in error
    assert not list((holon_home / "run").glob("*.sock"))
