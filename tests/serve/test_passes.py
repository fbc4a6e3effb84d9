"""``serve/passes.py``: one turn of an agent pass and its failure recorded,
the same for the local scheduler and the DBOS engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from holon_cli.errors import BusyError
from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime.turn import TurnResult
from holon_cli.serve.dbos.engine import DbosScheduler
from holon_cli.serve.passes import PassTurn, Stats, record_failure, run_pass_turn

if TYPE_CHECKING:
    from holon_cli.model.tool import Toolbox


NO_CATALOG = cast("Toolbox", object())  # run_turn is replaced: the catalog is never read


def _turns(monkeypatch: pytest.MonkeyPatch, result: Any) -> list[str]:
    calls: list[str] = []

    def run_turn(aid: str, **_kw: Any) -> TurnResult:
        calls.append(aid)
        if isinstance(result, BaseException):
            raise result
        return result

    monkeypatch.setattr("holon_cli.runtime.turn.run_turn", run_turn)
    monkeypatch.setattr("holon_cli.runtime.tick.tick_agent", lambda store, **_kw: None)
    return calls


def _run(aid: str, stats: Stats, logs: list[str], where: str = "") -> PassTurn:
    return run_pass_turn(aid, stats=stats, catalog=NO_CATALOG, log=logs.append, where=where)


def test_a_completed_turn_is_counted_and_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    create_agent("p1")
    _turns(monkeypatch, TurnResult("p1", True, turn_id="t1", status="completed"))
    stats, logs = Stats(), []
    turn = _run("p1", stats, logs, where=", worker w1")
    assert turn.result is not None and not turn.failed and not turn.busy
    assert (stats.passes, stats.turns, stats.failures) == (1, 1, 0)
    assert logs == ["p1: turn t1 completed (message None, 0 ms, worker w1)"]


def test_an_aborted_turn_is_a_failure_unless_the_operator_aborted_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create_agent("p2")
    stats, logs = Stats(), []
    _turns(monkeypatch, TurnResult("p2", True, turn_id="t1", status="aborted", failure_kind="x"))
    assert _run("p2", stats, logs).failed
    assert stats.failures == 1 and stats.last_failure is not None
    assert stats.last_failure["summary"] == "p2: turn t1 aborted (x)"
    assert stats.last_failure["detail_hint"] == "see `holon tail --agent p2`"
    _turns(
        monkeypatch,
        TurnResult("p2", True, turn_id="t2", status="aborted", failure_kind="operator_aborted"),
    )
    assert not _run("p2", stats, logs).failed
    assert stats.failures == 1


def test_busy_raised_and_removed_never_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    create_agent("p3")
    stats, logs = Stats(), []
    _turns(monkeypatch, BusyError("turn lock held"))
    assert _run("p3", stats, logs) == PassTurn(busy=True)
    assert stats.busy_skips == 1 and stats.failures == 0
    _turns(monkeypatch, RuntimeError("disk on fire"))
    turn = _run("p3", stats, logs)
    assert turn.error is not None and "disk on fire" in turn.error
    assert stats.failures == 1 and stats.last_failure is not None
    assert stats.last_failure["phase"] == "runtime_turn"
    assert logs[-1].startswith("p3: error: ")
    assert _run("nobody", stats, logs) == PassTurn()  # removed meanwhile: nothing to run
    assert stats.failures == 1


def test_the_dbos_engine_records_an_aborted_turn_as_the_local_one_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create_agent("p4")
    _turns(monkeypatch, TurnResult("p4", True, turn_id="t1", status="aborted", failure_kind="x"))
    eng = DbosScheduler(database_url="postgresql://x@127.0.0.1/x", executor_id="h-1")
    res = eng.run_one_turn("p4")
    assert res == {"ran": True, "status": "aborted", "turn_id": "t1", "failure_kind": "x"}
    assert eng.stats.failures == 1 and eng.stats.last_failure is not None
    assert eng.stats.last_failure["summary"] == "p4: turn t1 aborted (x)"


def test_record_failure_keeps_the_last() -> None:
    stats = Stats()
    record_failure(stats, "a", "one", hint="look here")
    record_failure(stats, "b", "two")
    assert stats.failures == 2 and stats.last_failure is not None
    assert stats.last_failure["summary"] == "b: two"
    assert stats.last_failure["detail_hint"] == "see `holon tail --agent b`"
