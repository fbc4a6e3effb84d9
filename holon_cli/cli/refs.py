"""Model refs typed on the command line, checked before any work (click-free:
the ``MODEL`` click type and the fast path share them)."""

from __future__ import annotations

import os


def check_model_text(text: str) -> str:
    """Validate a model ref now: syntax, and a provider this home knows.

    Returns the ref unchanged (the runtime normalizes it, e.g. makes a
    ``scripted:`` path absolute). Raises ``UsageError`` (exit 2).
    """
    from holon_cli.errors import UsageError
    from holon_cli.model.modelref import BUILTIN_PROVIDERS, check_model_ref

    ref = check_model_ref(text)
    if ref.provider == "scripted" or ref.provider in BUILTIN_PROVIDERS:
        return text
    from holon_cli.store.config import load_config

    declared = sorted((load_config().get("providers") or {}).keys())
    if ref.provider in declared:
        return text
    known = ", ".join([*BUILTIN_PROVIDERS, *declared, "scripted:<path>"])
    raise UsageError(
        f"unknown provider {ref.provider!r} in model ref {text!r}",
        hint=f"known providers: {known}; declare others under `providers:` in config.yaml",
    )


def check_env_model(var: str = "HOLON_MODEL") -> None:
    """``HOLON_MODEL`` (or another env ref) checked as if it were a flag."""
    from holon_cli.errors import UsageError

    value = os.environ.get(var, "").strip()
    if not value:
        return
    try:
        check_model_text(value)
    except UsageError as exc:
        raise UsageError(f"${var}: {exc.message}", hint=exc.hint) from None
