"""Resolve and validate the model chain before a turn dequeues anything,
and check that the context budget holds the agent's fixed prompt.

A message must not be consumed by a turn that could never reach a model: an
unknown provider, a missing API key, a ``scripted:`` file that is missing or
not a valid script. Every ref of the chain is resolved once (no network);
when none can serve, the turn fails here and the queue is untouched. When at
least one can, the resolved transports (and the failures of the others) are
reused by every round of the turn, so fallback still records the refs that
could not be served.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from holon_cli.errors import ProviderError

if TYPE_CHECKING:
    from holon_cli.kinds import ProviderFailureKind
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.tool import Toolbox
    from holon_cli.providers.base import Transport
    from holon_cli.store.agent_store import AgentStore


def resolve_chain(
    models: list[str], *, consequence: str = "nothing was dequeued"
) -> Callable[[str], Any]:
    """Returns the ``resolve`` function for ``call_with_fallback``. Raises
    :class:`ProviderError` (exit 5) when no ref of ``models`` can be served."""
    from holon_cli.providers.base import ProviderFailure
    from holon_cli.providers.registry import resolve_transport

    resolved: dict[str, Transport] = {}
    failures: dict[str, ProviderFailure] = {}
    for ref in models:
        try:
            transport = resolve_transport(ref)
            _validate(transport)
        except ProviderFailure as f:
            f.model_ref = f.model_ref or ref
            failures[ref] = f
        else:
            resolved[ref] = transport
    if not resolved and failures:
        first = failures[models[0]]
        others = [f"{r}: {f.message}" for r, f in failures.items() if r != models[0]]
        message = first.message + (f" (fallbacks: {'; '.join(others)})" if others else "")
        raise ProviderError(
            f"{message}; {consequence}",
            kind=cast("ProviderFailureKind", first.kind),
            hint=first.hint or "fix the model configuration (--model, HOLON_MODEL or config.yaml)",
            details={"model_refs": list(models)},
        )

    def resolve(ref: str) -> Any:
        if ref in resolved:
            return resolved[ref]
        if ref in failures:
            raise failures[ref]
        return resolve_transport(ref)

    return resolve


def _validate(transport: Any) -> None:
    """Checks a transport can do at construction time only (no network): its
    optional ``preflight()`` (the scripted model loads its script there)."""
    check = getattr(transport, "preflight", None)
    if check is not None:
        check()


# the fixed part of a prompt is checked against runtime.context_budget_tokens
# before a dequeue only below this budget: a larger one holds any prompt but
# one of tens of thousands of tokens (a turn would still fail on it, naming
# both numbers), and the check costs a prompt build (~1 ms) per turn
CHECK_BUDGET_BELOW = 32_000


def fixed_prompt_tokens(store: AgentStore, catalog: Toolbox, cfg: HolonConfig) -> int:
    """The fixed part of the agent's prompt (instructions, AGENTS.md, the
    skill catalog, the tool schemas), as the turn's budget counts it: what
    ``runtime.context_budget_tokens`` must hold before anything else."""
    from holon_cli.runtime.memory.compaction import fixed_tokens
    from holon_cli.runtime.prompt import build_frame
    from holon_cli.runtime.tasks.sandbox import projection as execution_projection
    from holon_cli.runtime.workspace import workspace_for
    from holon_cli.store.layout import default_agent_id

    rec = store.read_record()
    built = build_frame(
        agent_id=store.agent_id,
        agent_home=store.layout.home,
        is_default_agent=rec["identity"]["kind"] == "default"
        or store.agent_id == default_agent_id(),
        ws=workspace_for(store.layout.home, rec["state"]),
        message=None,
        tools=catalog.specs,
        guidance=catalog.guidance,
        work_queue=None,
        recent=None,
        # as the turn builds it: `auto` resolved on this machine
        policy=execution_projection(cfg, store.agent_id),
    )
    return fixed_tokens(built.frame, catalog.specs)


def check_prompt_fits(
    store: AgentStore,
    catalog: Toolbox,
    cfg: HolonConfig,
    *,
    consequence: str = "nothing was dequeued",
) -> None:
    """Before a turn takes a message: a ``runtime.context_budget_tokens``
    below the agent's fixed prompt would fail every turn, so it is a
    :class:`ConfigError` (exit 2) and nothing is consumed."""
    from holon_cli.errors import ConfigError
    from holon_cli.runtime.memory.compaction import context_budget

    budget = context_budget(cfg)
    if budget >= CHECK_BUDGET_BELOW:
        return
    fixed = fixed_prompt_tokens(store, catalog, cfg)
    if fixed <= budget:
        return
    raise ConfigError(
        f"runtime.context_budget_tokens is {budget}, but the fixed part of agent "
        f"{store.agent_id}'s prompt (instructions, AGENTS.md, skills, tool schemas) needs "
        f"about {fixed} tokens, so every turn would fail; {consequence}",
        hint=f"raise runtime.context_budget_tokens in config.yaml above {fixed} "
        "(`holon debug prompt --json` shows fixed_tokens), or shorten AGENTS.md",
        details={"key": "runtime.context_budget_tokens", "fixed_tokens": fixed},
    )
