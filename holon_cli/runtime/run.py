"""``holon run``: one-shot execution on a temporary private agent (removed
after a completed run unless kept; kept for inspection otherwise) or a
named one), looping turns until the closure settles or ``max_turns``.

``final_text`` prefers the newest completion report produced during the run
(spec: run_once.final_text); ``raw_final_text`` keeps the terminal
assistant text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NotRequired, ParamSpec, TypedDict, TypeVar

from holon_cli import clock
from holon_cli.errors import InterruptedError_, NotFoundError, UsageError
from holon_cli.runtime import turn as turn_mod
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.workitems import newest_completion_report_since
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.budget import BudgetHit
    from holon_cli.model.tool import Toolbox
    from holon_cli.model.turn import ProviderAttemptRecord, ProviderAttemptTimeline
    from holon_cli.runtime.outcome import OutcomeReader

P = ParamSpec("P")
R = TypeVar("R")


def _bind_workspace(
    store: AgentStore, root: str | None, cwd: str | None, *, temporary: bool
) -> None:
    """Bind the run's workspace; a refused binding removes a temporary agent
    made for this run."""
    from holon_cli.runtime.workspace.plane import bind_for_run

    try:
        bind_for_run(store, root, cwd, temporary=temporary)
    except UsageError:
        if temporary:
            _remove(store)
        raise


def _stop_mcp_servers(store: AgentStore) -> None:
    """The agent's MCP servers end with the run (only if the plane was used)."""
    import sys

    if "holon_cli.runtime.mcp.host" in sys.modules:
        from holon_cli.runtime.mcp.calls import close

        close(store.agent_id)


def _remove(store: AgentStore) -> None:
    import shutil

    shutil.rmtree(store.layout.home, ignore_errors=True)
    from holon_cli.store.wake import forget

    forget(store.layout.home)


def _preflight(store: AgentStore, model: str | None, *, remove: bool, catalog: Toolbox) -> None:
    """A model chain that cannot be served, or a context budget below the
    agent's fixed prompt, fails before anything is admitted (a temporary
    agent made for this run is removed again)."""
    from holon_cli.errors import HolonError
    from holon_cli.runtime.agents.models import candidates
    from holon_cli.runtime.turn.preflight import check_prompt_fits, resolve_chain
    from holon_cli.store.config import load_config

    try:
        resolve_chain(
            candidates(store.read_record()["state"], cli_model=model),
            consequence="nothing was run",
        )
        check_prompt_fits(store, catalog, load_config(), consequence="nothing was run")
    except HolonError:
        if remove:
            _remove(store)
        raise


def _stop_unsettled(store: AgentStore) -> list[str]:
    """Stop the run's unfinished tasks (the task plane's control code is
    loaded only when there is one: most runs start none)."""
    from holon_cli.runtime.tasks.recovery import unsettled_tasks

    if not unsettled_tasks(store):
        return []
    from holon_cli.runtime.tasks.control import stop_unsettled

    return stop_unsettled(store)


class TurnOptions(TypedDict):
    """What every turn of a run is run with (``run_turn``'s keywords)."""

    cli_model: str | None
    catalog: Toolbox
    sleep: NotRequired[Callable[[float], None]]


class RunResult(TypedDict):
    """``holon run``'s result (spec: run_once)."""

    final_status: str | None
    final_text: str
    raw_final_text: str
    agent_id: str
    agent_home: str
    message_id: str
    turns: int
    older_turns: int
    model_rounds: int
    token_usage: dict[str, int]
    provider_attempt_timeline: ProviderAttemptTimeline
    tasks_stopped: list[str]
    failure_artifact: NotRequired[Mapping[str, object] | None]  # the last turn's
    waiting_reason: NotRequired[str]  # a budget stopped the run: which, and why
    budget: NotRequired[BudgetHit]
    budget_reason: NotRequired[str]
    agent_kept: NotRequired[bool]


def _drive_children(store: AgentStore, kw: TurnOptions, max_turns: int) -> BudgetHit | None:
    """Run the turns of the children ``store`` spawned (nothing else would
    without `holon serve`); a child that rests or waits is left as it is.
    Returns the budget that stopped a child, if one did."""
    from holon_cli.model.task import is_child_task, is_terminal
    from holon_cli.runtime import turn as turn_mod
    from holon_cli.runtime.tasks.records import iter_records

    running = [
        str((rec.get("child") or {}).get("child_agent_id"))
        for _d, rec in iter_records(store)
        if is_child_task(rec) and not is_terminal(rec.get("status"))
    ]
    stopped: BudgetHit | None = None
    for cid in running:
        for _ in range(max_turns):
            res = turn_mod.run_turn(cid, **kw)
            if res.budget is not None:
                stopped = stopped or res.budget
                break
            if not res.ran:
                break
    return stopped


def _queued_ids(store: AgentStore) -> list[str]:
    """Ids of the messages queued or in flight, the inbox's included."""
    from holon_cli.runtime import queue as q

    ids = list(q.load(store).entries)
    ids += [p.stem for p in store.inbox.pending() if p.stem not in ids]
    return ids


def _unfinished(store: AgentStore) -> int:
    """Messages queued or in flight (the inbox's included) before the run's own."""
    from holon_cli.runtime import queue as q

    st = q.load(store)
    return q.pending_count(store, st) + len(st.in_flight())


def _durable_if_kept(fn: Callable[P, R]) -> Callable[P, R]:
    """A temporary agent made for the run is written without fsyncs
    (``create_agent(unsynced=True)``); whatever is left of it when the run
    returns or raises (kept: failed, waiting, interrupted) is made durable
    then, on every way out."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        from holon_cli.store.fsio import end_deferred_fsyncs

        try:
            return fn(*args, **kwargs)
        finally:
            end_deferred_fsyncs()

    return run


@_durable_if_kept
def run_once(
    text: str,
    *,
    agent_id: str | None = None,
    create: bool = False,
    model: str | None = None,
    max_turns: int = 8,
    workspace_root: str | None = None,
    cwd: str | None = None,
    sleep: Any = None,
    keep_agent: bool = False,
    wait_for_tasks: bool = True,
    catalog: Toolbox,
    max_tokens: int | None = None,
    max_cost_usd: float | None = None,
) -> dict[str, Any]:
    """Run ``text`` to its end (see the module); the result is a
    :class:`RunResult` as a plain dict (the command line reads its
    ``failure_artifact`` freely)."""
    _check_args(max_turns, model, max_tokens, max_cost_usd)
    store, new_agent = _run_agent(agent_id, create)
    temporary = not agent_id
    # a new agent is bound to the directory; an existing one keeps its active
    # workspace (AgentHome and an isolated worktree included) unless told
    # otherwise (runtime spec L740-742)
    if workspace_root or cwd or new_agent:
        _bind_workspace(store, workspace_root, cwd, temporary=temporary)
    _preflight(store, model, remove=temporary, catalog=catalog)
    bound = _bound(store, model, max_tokens, max_cost_usd, temporary=temporary)
    try:
        result = _run_bounded(
            store,
            text,
            temporary=temporary,
            model=model,
            max_turns=max_turns,
            sleep=sleep,
            keep_agent=keep_agent,
            wait_for_tasks=wait_for_tasks,
            catalog=catalog,
        )
        return dict(result)
    finally:
        if bound is not None:
            bound.release()


def _bound(
    store: AgentStore,
    model: str | None,
    max_tokens: int | None,
    max_cost_usd: float | None,
    *,
    temporary: bool,
) -> Any:
    """The run's ``--max-tokens`` / ``--max-cost`` bound, held while it runs
    (``runtime/budgets/runs.py``). ``--max-cost`` needs a price for every
    model of the chain (exit 2 otherwise; a temporary agent is removed)."""
    if max_tokens is None and max_cost_usd is None:
        return None
    from holon_cli.runtime.budgets import runs
    from holon_cli.runtime.budgets.spend import home_of

    if max_cost_usd is not None:
        from holon_cli.runtime.agents.models import candidates
        from holon_cli.store.config import load_config
        from holon_cli.store.config_schema import missing_price

        err = missing_price(
            load_config(),
            candidates(store.read_record()["state"], cli_model=model),
            "--max-cost",
        )
        if err is not None:
            if temporary:
                _remove(store)
            err.message += "; nothing was run"
            raise err
    return runs.set_bound(
        home_of(store),
        store.agent_id,
        max_tokens=max_tokens,
        max_cost_usd=max_cost_usd,
        temporary=temporary,
    )


def _run_bounded(
    store: AgentStore,
    text: str,
    *,
    temporary: bool,
    model: str | None,
    max_turns: int,
    sleep: Any,
    keep_agent: bool,
    wait_for_tasks: bool,
    catalog: Toolbox,
) -> RunResult:
    started_at = clock.now_iso()
    from holon_cli.runtime.outcome import OutcomeReader, marks

    # a named agent may hold older messages: they are turned first (queue
    # order), and the run reports from the turn that settles its own message
    older = 0 if temporary else _unfinished(store) + max_turns  # a bound, never reached
    older_ids = frozenset() if temporary else frozenset(_queued_ids(store))
    since = marks(store)
    env = admit(text, store=store, delivery_surface="run_once")
    kw: TurnOptions = {"cli_model": model, "catalog": catalog}
    if sleep is not None:
        kw["sleep"] = sleep
    run = _RunLoop(
        store,
        OutcomeReader(store, env["id"], since),
        kw,
        max_turns=max_turns,
        older=older,
        wait_for_tasks=wait_for_tasks,
        settled=temporary,  # a fresh agent's first turn is the run's message
        older_ids=older_ids,
    )
    try:
        run.loop()
    except KeyboardInterrupt:
        # Ctrl-C: nothing the run started outlives it, and the kept agent is named
        raise _interrupted(store, model) from None
    # nothing the run started outlives it: --no-wait-for-tasks, max turns, failure
    tasks_stopped = _stop_unsettled(store)
    _stop_mcp_servers(store)
    data = _run_result(store, run, env["id"], started_at, tasks_stopped)
    # a temporary agent that completed has nothing left to inspect or resume;
    # failed, waiting and unfinished runs keep it (its home is in the result)
    data["agent_kept"] = not (temporary and run.final_status == "completed" and not keep_agent)
    if not data["agent_kept"]:
        _remove(store)
    return data


def _check_args(
    max_turns: int, model: str | None, max_tokens: int | None, max_cost_usd: float | None
) -> None:
    import math

    if max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    if max_tokens is not None and max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1")
    if max_cost_usd is not None and not (math.isfinite(max_cost_usd) and max_cost_usd > 0):
        raise UsageError("--max-cost must be a positive amount of US dollars, e.g. 0.50")
    if model is not None:
        from holon_cli.model.modelref import check_model_ref

        check_model_ref(model)


def _run_agent(agent_id: str | None, create: bool) -> tuple[AgentStore, bool]:
    """The run's agent, and whether it was made for this run: the named one
    (made when ``create``), else a fresh temporary private child."""
    if agent_id:
        try:
            return open_agent(agent_id, create_default=False), False
        except NotFoundError:
            if not create:
                raise NotFoundError(
                    f"unknown agent {agent_id!r}",
                    hint=f"add --create-agent to create it, or `holon agent create {agent_id}`",
                ) from None
            return create_agent(agent_id, exist_ok=True), True
    # one coherent identity, the spec's private_child profile: private,
    # supervised by the `holon run` that made it (which settles and removes
    # it), no parent agent; no external ingress of its own
    store = create_agent(
        clock.new_id("run").replace("_", "-"),
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        unsynced=True,
    )
    return store, True


class _RunLoop:
    """The run's turns: older queued messages first (at most ``older`` turns),
    then the run's own message and what follows from it (continuations, self
    follow-ups, task results) until the closure settles, nothing is left, or
    ``max_turns`` of the run's own turns. ``final_status`` says which.

    A turn of a message queued before the run's own (``older_ids``) is never
    the run's, whatever its priority: an older background message turned
    after the run's own is not reported, and once the run's message has
    settled the older messages left are the agent's, not the run's."""

    def __init__(
        self,
        store: AgentStore,
        own: OutcomeReader,
        kw: TurnOptions,
        *,
        max_turns: int,
        older: int,
        wait_for_tasks: bool,
        settled: bool,
        older_ids: frozenset[str] = frozenset(),
    ) -> None:
        self.store = store
        self.own = own
        self.kw = kw
        self.max_turns = max_turns
        self.older = older
        self.older_ids = older_ids
        self.wait_for_tasks = wait_for_tasks
        self.settled = settled
        self.turns: list[turn_mod.TurnResult] = []
        self.older_turns = 0
        self.last: turn_mod.TurnResult | None = None
        self.final_status = "max_turns_exceeded"
        self.budget: BudgetHit | None = None  # the budget that stopped the run

    def loop(self) -> None:
        while len(self.turns) < self.max_turns:
            if not self._step(turn_mod.run_turn(store=self.store, **self.kw)):
                break
        if self.budget is not None and self.final_status != "failed":
            self.final_status = "waiting"  # the run (or a child of it) was stopped by a budget

    def _step(self, res: turn_mod.TurnResult) -> bool:
        """Take one turn's result; ``False`` ends the run."""
        if not res.ran and res.budget is not None:
            self.final_status = "waiting"  # a spent budget holds the agent: the message waits
            self.budget = res.budget
            return False
        if res.ran and not self.settled:
            self.settled = self.own.poll() is not None
            if not self.settled:
                self.older_turns += 1  # an older message's turn: not this run's
                return self.older_turns <= self.older  # more: something is stuck
        elif res.ran and res.message_id in self.older_ids:
            self.older_turns += 1  # settled already; an older message came next: not ours
            return self._more_of_ours()
        if not res.ran:
            if self._task_result_arrived():
                return True
            self.final_status = "completed"  # nothing (left) to do: the run has settled
            return False
        self.turns.append(res)
        self.last = res
        return self._after_own_turn(res)

    def _after_own_turn(self, res: turn_mod.TurnResult) -> bool:
        outcome = res.closure["outcome"] if res.closure else None
        if res.status == "aborted" or outcome == "failed":
            self.final_status = "failed"
            return False
        if outcome == "waiting":
            if res.budget is not None:
                self.budget = res.budget  # stopped before a request: nothing will come
                self.final_status = "waiting"
                return False
            if self._ours_arrived():
                return True
            self.final_status = "waiting"
            return False
        if outcome == "continuable":
            from holon_cli.runtime.tick import enqueue_continuation

            signal = res.closure.get("work_signal") if res.closure else None
            enqueue_continuation(self.store, dict(signal) if signal else {})
            return True
        # completed: keep going while messages of the run remain queued (self
        # follow-ups, task results), not the older ones it found queued
        return self._more_of_ours()

    def _more_of_ours(self) -> bool:
        if self._ours_queued() or self._ours_arrived():
            return True
        self.final_status = "completed"
        return False

    def _ours_queued(self) -> bool:
        """A message of the run's is queued (not one of the older ones)."""
        return bool(set(_queued_ids(self.store)) - self.older_ids)

    def _ours_arrived(self) -> bool:
        """Wait for the run's tasks; whether a message of the run's came of it."""
        return self._task_result_arrived() and self._ours_queued()

    def _task_result_arrived(self) -> bool:
        # the run's background tasks rejoin as task_result messages: wait for one
        # (children the run's agent spawned are run here first, to their closure)
        from holon_cli.runtime.tasks.recovery import wait_for_task_result

        hit = _drive_children(self.store, self.kw, self.max_turns)
        if hit is not None:
            self.budget = hit  # a child was stopped by a budget: its result will not come
            return False
        return self.wait_for_tasks and wait_for_task_result(self.store)


def _interrupted(store: AgentStore, model: str | None) -> InterruptedError_:
    """Stop what the run started; the error naming the kept agent."""
    _stop_unsettled(store)
    aid = store.agent_id
    import shlex  # the run's --model is not stored on the agent: the hint repeats it

    finish = f"holon turn --agent {aid}" + (f" --model {shlex.quote(model)}" if model else "")
    return InterruptedError_(
        f"interrupted; agent {aid} kept at {store.layout.home} "
        "(its message is replayed by its next turn)",
        hint=f"finish it: `{finish}`; remove it: `holon agent rm {aid}`",
    )


def _run_result(
    store: AgentStore, run: _RunLoop, message_id: str, started_at: str, tasks_stopped: list[str]
) -> RunResult:
    """The run's result (``agent_kept`` is added by the caller)."""
    turns, last = run.turns, run.last
    raw = last.final_text if last else ""
    report = newest_completion_report_since(store, started_at)
    usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    attempts: list[ProviderAttemptRecord] = []
    for t in turns:
        for k in usage:
            usage[k] += t.token_usage.get(k, 0)
        attempts.extend(t.provider_attempt_timeline["attempts"])
    requested = turns[0].provider_attempt_timeline.get("requested_model_ref") if turns else None
    reported = any("aggregated_token_usage" in t.provider_attempt_timeline for t in turns)
    timeline = turn_mod.attempt_timeline(attempts, requested, usage if reported else None)
    data: RunResult = {
        "final_status": run.final_status,
        "final_text": report if report else raw,
        "raw_final_text": raw,
        "agent_id": store.agent_id,
        "agent_home": str(store.layout.home),
        "message_id": message_id,
        "turns": len(turns),
        "older_turns": run.older_turns,
        "model_rounds": sum(t.model_rounds for t in turns),
        "token_usage": usage,
        "provider_attempt_timeline": timeline,
        "tasks_stopped": tasks_stopped,
    }
    if run.final_status == "failed" and last is not None:
        data["failure_artifact"] = last.failure_artifact
    if run.budget is not None:
        from holon_cli.runtime.budgets.check import WAITING_REASON, reason_text

        data["waiting_reason"] = WAITING_REASON
        data["budget"] = {**run.budget}
        data["budget_reason"] = reason_text(run.budget, store.agent_id)
    return data
