"""One turn of an agent pass, and its failure recorded: the step both serve
engines call (the local scheduler's pass in :mod:`holon_cli.serve.loop`, the
DBOS pass workflow in :mod:`holon_cli.serve.dbos.engine`), so both count
passes, turns and busy skips, log each turn, and record a failure (a turn
that raised, or one aborted other than by the operator) the same way.

An engine decides only what follows: the local scheduler holds the agent's
next pass back; the DBOS workflow enqueues a delayed retry pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from holon_cli import clock

if TYPE_CHECKING:
    from holon_cli.model.tool import Toolbox
    from holon_cli.runtime.turn import TurnResult
    from holon_cli.runtime.turn.steps import TurnSteps

Log = Callable[[str], None]


class PassFailure(TypedDict):
    """The last failure of a pass (``GET /control/runtime/status``
    ``last_failure``; the shape of the daemon's lifecycle failures)."""

    occurred_at: str
    summary: str
    phase: str
    detail_hint: str


@dataclass
class Stats:
    started_at: str = field(default_factory=clock.now_iso)
    passes: int = 0
    turns: int = 0
    busy_skips: int = 0
    failures: int = 0
    last_failure: PassFailure | None = None


@dataclass
class PassTurn:
    """What one turn of a pass came to: ``result`` when a turn ran; ``busy``
    when the turn lock was held (retry soon); ``error`` when it raised (the
    failure is recorded); none of them when there was nothing to run (the
    agent stopped, paused or removed meanwhile, or an empty queue)."""

    result: TurnResult | None = None
    busy: bool = False
    error: str | None = None

    @property
    def failed(self) -> bool:
        """The turn ran and aborted, not by the operator: a failure."""
        res = self.result
        return (
            res is not None and res.status == "aborted" and (res.failure_kind != "operator_aborted")
        )


def run_pass_turn(
    agent_id: str,
    *,
    stats: Stats,
    catalog: Toolbox,
    log: Log,
    steps: TurnSteps | None = None,
    where: str = "",
) -> PassTurn:
    """``tick_agent`` then one ``run_turn`` for ``agent_id`` (its rounds and
    tool calls through ``steps`` when given), counted in ``stats`` and
    logged (``where`` is added to the turn's line). A failure is recorded
    (:func:`record_failure`); nothing raises, so one agent never stops the
    others."""
    from holon_cli.errors import BusyError, NotFoundError, RejectedError, as_holon_error
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.tick import tick_agent
    from holon_cli.runtime.turn import run_turn

    try:
        store = open_agent(agent_id, create_default=False)
        stats.passes += 1
        tick_agent(store)
        if steps is None:
            res = run_turn(agent_id, store=store, catalog=catalog)
        else:
            res = run_turn(agent_id, store=store, catalog=catalog, steps=steps)
    except BusyError:
        stats.busy_skips += 1
        return PassTurn(busy=True)
    except (RejectedError, NotFoundError):
        return PassTurn()  # stopped, paused or removed meanwhile: nothing to run
    except Exception as exc:  # noqa: BLE001 - one agent must not stop the others
        err = as_holon_error(exc)
        record_failure(stats, agent_id, err.message, hint=err.hint)
        log(f"{agent_id}: error: {err.message}")
        return PassTurn(error=err.message)
    out = PassTurn(result=res)
    if not res.ran:
        return out
    stats.turns += 1
    log(
        f"{agent_id}: turn {res.turn_id} {res.status} "
        f"(message {res.message_id}, {res.duration_ms} ms{where})"
    )
    if out.failed:
        summary = f"turn {res.turn_id} aborted ({res.failure_kind or 'failed'})"
        record_failure(stats, agent_id, summary)
    return out


def record_failure(stats: Stats, agent_id: str, summary: str, *, hint: str | None = None) -> None:
    """Count a failed pass and keep it as the last failure (``holon serve``
    status shows it)."""
    stats.failures += 1
    stats.last_failure = {
        "occurred_at": clock.now_iso(),
        "summary": f"{agent_id}: {summary}",
        "phase": "runtime_turn",
        "detail_hint": hint or f"see `holon tail --agent {agent_id}`",
    }
