"""The model-visible output budget of command output, in estimated tokens
(also used by other tools that reinject command output)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.events import ToolWarning

CHARS_PER_TOKEN = 4
DEFAULT_OUTPUT_TOKENS = 8_000
HARD_MAX_OUTPUT_TOKENS = 64_000


def _int_setting(raw: Any, source: str, warnings: list[ToolWarning]) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if value <= 0:
        warnings.append(
            {
                "kind": "invalid_setting",
                "message": f"{source}={raw!r} is not a positive integer; ignored",
            }
        )
        return None
    return value


def output_budget_tokens(
    config: HolonConfig | None,
    requested: int | None = None,
    *,
    warnings: list[ToolWarning] | None = None,
) -> int:
    """The model-visible output budget in estimated tokens.

    Precedence: the call's ``max_output_tokens`` (clamped to the maximum) >
    ``HOLON_DEFAULT_TOOL_OUTPUT_TOKENS`` > ``runtime.default_tool_output_tokens``
    > 8,000. The maximum is ``HOLON_MAX_TOOL_OUTPUT_TOKENS`` >
    ``runtime.max_tool_output_tokens`` > 64,000, and never above 64,000.
    """
    warns = warnings if warnings is not None else []
    rt = (config or {}).get("runtime") or {}
    maximum = (
        _int_setting(
            os.environ.get("HOLON_MAX_TOOL_OUTPUT_TOKENS"), "HOLON_MAX_TOOL_OUTPUT_TOKENS", warns
        )
        or _int_setting(rt.get("max_tool_output_tokens"), "runtime.max_tool_output_tokens", warns)
        or HARD_MAX_OUTPUT_TOKENS
    )
    maximum = min(maximum, HARD_MAX_OUTPUT_TOKENS)
    if requested is not None:
        return max(1, min(requested, maximum))
    default = (
        _int_setting(
            os.environ.get("HOLON_DEFAULT_TOOL_OUTPUT_TOKENS"),
            "HOLON_DEFAULT_TOOL_OUTPUT_TOKENS",
            warns,
        )
        or _int_setting(
            rt.get("default_tool_output_tokens"), "runtime.default_tool_output_tokens", warns
        )
        or DEFAULT_OUTPUT_TOKENS
    )
    return min(default, maximum)
