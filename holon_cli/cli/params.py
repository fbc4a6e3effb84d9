"""click parameter types for the values the contract defines (DURATION, MODEL),
so a bad value gets click's standard message and exit 2 before any work."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # click >= 8.2 makes ParamType generic; 8.1 (still supported) does not
    _FloatParam = click.ParamType[float]
    _StrParam = click.ParamType[str]
else:
    _FloatParam = _StrParam = click.ParamType


class Duration(_FloatParam):
    """``500ms``, ``90s``, ``5m``, ``2h``, ``1d`` -> seconds (float)."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float):
            return float(value)
        from holon_cli.clock import parse_duration

        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


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


class ModelRefType(_StrParam):
    """``<provider>/<model>`` with a known provider, or ``scripted:<path>``."""

    name = "model"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from holon_cli.errors import UsageError

        try:
            return check_model_text(str(value))
        except UsageError as exc:
            self.fail(f"{exc.message} ({exc.hint})" if exc.hint else exc.message, param, ctx)


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


DURATION = Duration()
MODEL = ModelRefType()
