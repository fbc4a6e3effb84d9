"""Agent model selection for runtime steps (spec: Agent Model Selection).

The precedence rules live once, in ``providers.registry``; this module binds
them to an agent's state and validates the refs before a turn dequeues
anything, so a bad model never consumes a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from holon_cli.errors import ConfigError

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState


def model_state(state: AgentState) -> dict[str, Any]:
    """The spec's ``AgentModelState`` for status surfaces."""
    from holon_cli.providers.registry import model_state as registry_state

    try:
        return registry_state(state.get("model_override"))
    except ConfigError as exc:
        return {
            "source": "agent_override" if state.get("model_override") else "runtime_default",
            "error": exc.message,
        }


class ModelChoice(TypedDict):
    """What :func:`candidates` reads of an agent's state: its override."""

    model_override: str | None


def candidates(
    state: AgentState | ModelChoice,
    *,
    cli_model: str | None = None,
    cli_fallbacks: list[str] | None = None,
) -> list[str]:
    """Ordered model refs to try for a turn; raises ConfigError when none is set."""
    from holon_cli.model.modelref import check_model_ref
    from holon_cli.providers.registry import model_chain

    primary, fallbacks = model_chain(
        state.get("model_override"), cli_model, cli_fallbacks=cli_fallbacks
    )
    chain = [primary, *fallbacks]
    for ref in chain:
        check_model_ref(ref)
    return chain


def normalize_model_ref(text: str) -> str:
    """Validate a ref; a relative ``scripted:`` path becomes absolute (against
    the caller's cwd) so a stored override still works from ``holon serve`` or
    cron, whose working directory differs."""
    import os

    from holon_cli.model.modelref import check_model_ref

    ref = check_model_ref(text)
    if ref.provider == "scripted" and not os.path.isabs(os.path.expanduser(ref.model)):
        return f"scripted:{os.path.abspath(os.path.expanduser(ref.model))}"
    return str(ref)
