"""``holon run``: one-shot execution on a temporary private agent (removed
after a completed run unless kept; kept for inspection otherwise) or a
named one), looping turns until the closure settles or ``max_turns``.

``final_text`` prefers the newest completion report produced during the run
(spec: run_once.final_text); ``raw_final_text`` keeps the terminal
assistant text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from holon_cli import clock
from holon_cli.errors import InterruptedError_, NotFoundError, UsageError
from holon_cli.runtime import turn as turn_mod
from holon_cli.runtime.agents import create_agent, open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.workitems import newest_completion_report_since
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.tool import Toolbox
    from holon_cli.model.turn import ProviderAttemptRecord

P = ParamSpec("P")
R = TypeVar("R")


def _bind_workspace(
    store: AgentStore, root: str | None, cwd: str | None, *, temporary: bool
) -> None:
    from holon_cli.runtime.workspace.plane import bind_for_run

    bind_for_run(store, root, cwd, temporary=temporary)


def _preflight(store: AgentStore, model: str | None, *, remove: bool) -> None:
    """A model chain that cannot be served fails before anything is admitted
    (a temporary agent made for this run is removed again)."""
    from holon_cli.errors import HolonError
    from holon_cli.runtime.models import candidates
    from holon_cli.runtime.turn.preflight import resolve_chain

    try:
        resolve_chain(
            candidates(store.read_record()["state"], cli_model=model),
            consequence="nothing was run",
        )
    except HolonError:
        if remove:
            import shutil

            shutil.rmtree(store.layout.home, ignore_errors=True)
        raise


def _stop_unsettled(store: AgentStore) -> list[str]:
    """Stop the run's unfinished tasks (the task plane's control code is
    loaded only when there is one: most runs start none)."""
    from holon_cli.runtime.tasks.recovery import unsettled_tasks

    if not unsettled_tasks(store):
        return []
    from holon_cli.runtime.tasks.control import stop_unsettled

    return stop_unsettled(store)


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
) -> dict[str, Any]:
    if max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    if model is not None:
        from holon_cli.model.modelref import check_model_ref

        check_model_ref(model)
    new_agent = True
    if agent_id:
        try:
            store = open_agent(agent_id, create_default=False)
            new_agent = False
        except NotFoundError:
            if not create:
                raise NotFoundError(
                    f"unknown agent {agent_id!r}",
                    hint=f"add --create-agent to create it, or `holon agent create {agent_id}`",
                ) from None
            store = create_agent(agent_id, exist_ok=True)
    else:
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
    temporary = not agent_id
    # a new agent is bound to the directory; an existing one keeps its active
    # workspace (AgentHome and an isolated worktree included) unless told
    # otherwise (runtime spec L740-742)
    if workspace_root or cwd or new_agent:
        try:
            _bind_workspace(store, workspace_root, cwd, temporary=temporary)
        except UsageError:
            if temporary:
                import shutil

                shutil.rmtree(store.layout.home, ignore_errors=True)
            raise
    _preflight(store, model, remove=temporary)
    started_at = clock.now_iso()
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.outcome import OutcomeReader, marks

    # a named agent may hold older messages: they are turned first (queue
    # order), and the run reports from the turn that settles its own message
    older = 0 if temporary else _unfinished(store) + max_turns  # a bound, never reached
    older_turns = 0
    since = marks(store)
    env = admit(text, store=store, delivery_surface="run_once")
    own = OutcomeReader(store, env["id"], since)
    turns: list[turn_mod.TurnResult] = []
    kw: dict[str, Any] = {"cli_model": model, "catalog": catalog}
    if sleep is not None:
        kw["sleep"] = sleep
    final_status = "max_turns_exceeded"
    last: turn_mod.TurnResult | None = None
    settled = temporary  # a fresh agent's first turn is the run's message
    from holon_cli.runtime.tasks.recovery import wait_for_task_result

    def task_result_arrived() -> bool:
        # the run's background tasks rejoin as task_result messages: wait for one
        return wait_for_tasks and wait_for_task_result(store)

    try:
        while len(turns) < max_turns:
            res = turn_mod.run_turn(store=store, **kw)
            if not res.ran and res.budget is not None:
                final_status = "waiting"  # a spent budget holds the agent: the message waits
                break
            if res.ran and not settled:
                settled = own.poll() is not None
                if not settled:
                    older_turns += 1  # an older message's turn: not this run's
                    if older_turns > older:  # more than were queued: something is stuck
                        break
                    continue
            if not res.ran:
                if task_result_arrived():
                    continue
                final_status = "completed"  # nothing (left) to do: the run has settled
                break
            turns.append(res)
            last = res
            outcome = res.closure["outcome"] if res.closure else None
            if res.status == "aborted" or outcome == "failed":
                final_status = "failed"
                break
            if outcome == "waiting":
                if task_result_arrived():
                    continue
                final_status = "waiting"
                break
            if outcome == "continuable":
                from holon_cli.runtime.tick import enqueue_continuation

                signal = res.closure.get("work_signal") if res.closure else None
                enqueue_continuation(store, dict(signal) if signal else {})
                continue
            # completed: keep going while messages remain queued (self follow-ups,
            # task results)
            if q.pending_count(store) == 0 and not task_result_arrived():
                final_status = "completed"
                break
    except KeyboardInterrupt:
        # Ctrl-C: nothing the run started outlives it, and the kept agent is named
        _stop_unsettled(store)
        aid = store.agent_id
        import shlex  # the run's --model is not stored on the agent: the hint repeats it

        finish = f"holon turn --agent {aid}" + (f" --model {shlex.quote(model)}" if model else "")
        raise InterruptedError_(
            f"interrupted; agent {aid} kept at {store.layout.home} "
            "(its message is replayed by its next turn)",
            hint=f"finish it: `{finish}`; remove it: `holon agent rm {aid}`",
        ) from None
    # nothing the run started outlives it: --no-wait-for-tasks, max turns, failure
    tasks_stopped = _stop_unsettled(store)
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
    data: dict[str, Any] = {
        "final_status": final_status,
        "final_text": report if report else raw,
        "raw_final_text": raw,
        "agent_id": store.agent_id,
        "agent_home": str(store.layout.home),
        "message_id": env["id"],
        "turns": len(turns),
        "older_turns": older_turns,
        "model_rounds": sum(t.model_rounds for t in turns),
        "token_usage": usage,
        "provider_attempt_timeline": timeline,
        "tasks_stopped": tasks_stopped,
    }
    if final_status == "failed" and last is not None:
        data["failure_artifact"] = last.failure_artifact
    # a temporary agent that completed has nothing left to inspect or resume;
    # failed, waiting and unfinished runs keep it (its home is in the result)
    data["agent_kept"] = not (temporary and final_status == "completed" and not keep_agent)
    if not data["agent_kept"]:
        import shutil

        shutil.rmtree(store.layout.home, ignore_errors=True)
    return data
