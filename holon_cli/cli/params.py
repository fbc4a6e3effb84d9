"""click parameter types for the values the contract defines (DURATION, MODEL),
so a bad value gets click's standard message and exit 2 before any work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from holon_cli.cli.refs import check_env_model, check_model_text

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


class ModelRefType(_StrParam):
    """``<provider>/<model>`` with a known provider, or ``scripted:<path>``."""

    name = "model"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from holon_cli.errors import UsageError

        try:
            return check_model_text(str(value))
        except UsageError as exc:
            self.fail(f"{exc.message} ({exc.hint})" if exc.hint else exc.message, param, ctx)


__all__ = ["DURATION", "MODEL", "Duration", "ModelRefType", "check_env_model", "check_model_text"]

DURATION = Duration()
MODEL = ModelRefType()
