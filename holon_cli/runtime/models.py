"""Agent model selection (spec: Agent Model Selection).

Precedence: flag > agent override > ``HOLON_MODEL`` > config ``model``.
Fallbacks: flag > ``HOLON_FALLBACK_MODELS`` > config ``fallback_models``.
"""

from __future__ import annotations

import os
from typing import Any

from holon_cli.errors import ConfigError


def _config() -> dict[str, Any]:
    from holon_cli.store.config import load_config

    return load_config()


def runtime_default() -> tuple[str | None, list[str]]:
    cfg = _config()
    model = os.environ.get("HOLON_MODEL") or cfg.get("model")
    env_fb = os.environ.get("HOLON_FALLBACK_MODELS")
    if env_fb is not None:
        fallbacks = [m.strip() for m in env_fb.split(",") if m.strip()]
    else:
        fallbacks = list(cfg.get("fallback_models") or [])
    return model, fallbacks


def model_state(state: dict[str, Any]) -> dict[str, Any]:
    """The spec's ``AgentModelState`` for status surfaces."""
    try:
        default, fallbacks = runtime_default()
    except ConfigError as exc:
        return {"source": "runtime_default", "error": exc.message}
    override = state.get("model_override")
    return {
        "source": "agent_override" if override else "runtime_default",
        "runtime_default_model": default,
        "effective_model": override or default,
        "effective_fallback_models": fallbacks,
        "override_model": override,
    }


def candidates(state: dict[str, Any], *, cli_model: str | None = None, cli_fallbacks: list[str] | None = None) -> list[str]:
    """Ordered model refs to try for a turn; raises ConfigError when none is set."""
    from holon_cli.model.modelref import check_model_ref

    default, fallbacks = runtime_default()
    primary = cli_model or state.get("model_override") or default
    if not primary:
        raise ConfigError(
            "no model configured",
            hint="set HOLON_MODEL, pass --model, or add `model:` to $HOLON_HOME/config.yaml; try --model scripted:examples/hello.yaml offline",
        )
    chain = [primary] + list(cli_fallbacks if cli_fallbacks is not None else fallbacks)
    out: list[str] = []
    for ref in chain:
        check_model_ref(ref)
        if ref not in out:
            out.append(ref)
    return out
