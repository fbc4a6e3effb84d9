"""The DBOS engine's step records: each provider round and each tool call
of a pass's turns, and each turn's end, as rows of DBOS's
``operation_outputs`` (issue 30; ``serve --engine dbos``).

:class:`DbosSteps` is the turn plane's ``TurnSteps`` hook for one pass
workflow (see :mod:`holon_cli.runtime.turn.steps`): DBOS's steps trail the
turn journal, never lead it; a replayed pass skips its finished turns and
re-walks the unfinished one's journal at the function ids DBOS recorded.
Imported by :mod:`holon_cli.serve.dbos.engine` only; DBOS's private names
it needs (the context's function id, the system tables) are reached through
:mod:`holon_cli.serve.dbos.compat`, which imports ``dbos`` when called.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from holon_cli.serve.dbos import compat

if TYPE_CHECKING:
    from holon_cli.runtime.turn.steps import StepRecord, TurnSteps
    from holon_cli.serve.passes import Log


class RunTurn(Protocol):
    """``DbosScheduler.run_one_turn``: tick, then one turn with these steps."""

    def __call__(self, agent_id: str, *, steps: TurnSteps | None = None) -> dict[str, Any]: ...


class DbosSteps:
    """The pass workflow's DBOS step records (``operation_outputs``), and the
    turn plane's ``TurnSteps`` hook over them: each turn of the pass leaves
    its ``holon.round`` and ``holon.tool`` steps, then one ``holon.turn``
    step with its result, at DBOS's next function ids.

    A replayed pass (recovered after its worker died) skips each turn whose
    ``holon.turn`` step is recorded (its result is the recorded one; nothing
    runs) and runs the first unfinished turn for real: ``run_turn`` replays
    it from its journal, re-walking the journal's rounds and tool results
    through this hook at the function ids DBOS recorded them at (compared;
    the ones missing are recorded), then goes on. A turn that ran nothing
    records nothing (the pass ends there; a replay decides again).

    Written through DBOS's system database directly: DBOS 3.4's step call is
    "replay the recorded output, else run and record", which can neither say
    "the journal ran it; record it only if missing" nor "no answer, no
    step", nor skip a finished turn's steps. The pass's steps are read once
    when it starts. New step rows are written in batches, one transaction
    each (fenced by the execution's ownership token, as DBOS's own step
    records are), once the journal holds them durably: when a round's
    answer is recorded (the round before it and its tool calls) and with the
    turn's ``holon.turn`` step (the rest). DBOS may trail the journal, never
    lead it, and a replay records from the journal whatever a crash kept
    from DBOS; so a one-round turn costs one transaction, as one plain DBOS
    step's record did, and no fsync is added to the turn."""

    # each round's records durable when its fn returns: the flush after it
    # writes the steps before it (turn/steps.py)
    durable_rounds = True

    def __init__(self, log: Log, run_turn: RunTurn) -> None:
        self.log = log
        self._run_turn = run_turn
        self._ctx = compat.current_context()
        self.workflow_id: str = compat.context_workflow_id(self._ctx)
        self.recorded: dict[int, tuple[str, Any]] = compat.workflow_steps(self.workflow_id)
        self.mismatches = 0
        self._pending: list[Any] = []  # step rows (DBOS's OperationResultInternal)
        self._owner: str | None = None

    # ------------------------------------------------------------ turns
    def turn(self, agent_id: str) -> dict[str, Any]:
        """The pass's next turn: its recorded result, or run it now."""
        done = self._recorded_turn()
        if done is not None:
            fid, result = done
            compat.set_context_function_id(self._ctx, fid)  # past the finished turn's steps
            return result
        t0 = _now_ms()
        res = self._run_turn(agent_id, steps=self)
        if res["ran"] or res.get("busy"):
            self._step("holon.turn", res, t0)
            self.flush()
        else:  # nothing ran, or it failed inside (its rows may not be durable): the pass ends
            self._pending = []
        return res

    def _recorded_turn(self) -> tuple[int, dict[str, Any]] | None:
        last = compat.context_function_id(self._ctx)
        for fid in sorted(f for f in self.recorded if f > last):
            name, output = self.recorded[fid]
            if name == "holon.turn":
                return fid, output
        return None

    # ------------------------------------------------------------ TurnSteps
    def replayed(self, record: StepRecord) -> None:
        self._step(f"holon.{record['kind']}", record, _now_ms())

    def round(self, n: int, fn: Callable[[], StepRecord | None]) -> None:
        t0 = _now_ms()
        rec = fn()
        if rec is None:  # no answer, no step (and nothing new is durable)
            return
        # the round's records are durable now, and with them the tool calls
        # before it: those are written to DBOS, this round waits for the next
        self.flush()
        self._step("holon.round", rec, t0)

    def tool(self, call_id: str, fn: Callable[[], StepRecord]) -> None:
        t0 = _now_ms()
        self._step("holon.tool", fn(), t0)

    # ------------------------------------------------------------ records
    def _step(self, name: str, rec: Any, started_ms: int) -> None:
        fid, owner = compat.next_step(self._ctx)  # the next function id, as a DBOS step takes
        prior = self.recorded.get(fid)
        if prior is not None:
            self._compare(fid, name, rec, prior)
            return
        output, serialization = compat.serialize_output(dict(rec))
        self._owner = owner
        self._pending.append(
            {
                "workflow_uuid": self.workflow_id,
                "function_id": fid,
                "function_name": name,
                "output": output,
                "error": None,
                "serialization": serialization,
                "started_at_epoch_ms": started_ms,
                "child_workflow_id": None,
            }
        )

    def flush(self) -> None:
        """Write the pending step rows (one transaction)."""
        if self._pending:
            rows, self._pending = self._pending, []
            self.record(rows, self._owner)

    def record(self, rows: list[Any], owner_xid: str | None) -> None:
        """Step rows in one transaction (:func:`compat.write_steps`: fenced
        by the execution's ownership token, retried through a database
        outage). The seam a crash test breaks."""
        compat.write_steps(self.workflow_id, rows, owner_xid, _now_ms())

    def _compare(self, fid: int, name: str, rec: StepRecord, prior: tuple[str, Any]) -> None:
        from holon_cli.runtime.turn.steps import differs

        pname, pout = prior
        bad = ["step name"] if pname != name else []
        if not bad:
            bad = differs(rec, cast("StepRecord", pout)) if isinstance(pout, dict) else ["output"]
        if bad:
            self.mismatches += 1
            self.log(
                f"error: pass workflow {self.workflow_id}: DBOS step {fid} ({pname}) disagrees "
                f"with the turn journal on {', '.join(bad)}; the journal wins "
                f"(journal {dict(rec)}, DBOS {pout})"
            )


def _now_ms() -> int:
    return int(time.time() * 1000)
