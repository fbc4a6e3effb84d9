"""The tool framework: typed definitions, generated schemas, argument
validation, execution with the spec's Tool Error Envelope.

The values a call shares with the turn loop (``ToolContext``, ``ToolResult``,
``ToolEffects``, ``SleepRequest``, ``render_error``) are defined in
:mod:`holon_cli.model.tool` and importable from here.

A tool is a frozen dataclass of arguments plus a handler. The source schema
is derived from the dataclass type hints (optional fields stay optional);
``emit_schema(strict=True)`` produces the strict provider form (every field
required, optional ones nullable, ``additionalProperties: false``
everywhere). A failing tool returns an error *result* to the model; it never
raises out of :func:`execute`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from holon_cli.model.provider import ToolCall, ToolSpec
from holon_cli.model.tool import SleepRequest as SleepRequest
from holon_cli.model.tool import ToolContext as ToolContext
from holon_cli.model.tool import ToolEffects as ToolEffects
from holon_cli.model.tool import ToolResult as ToolResult
from holon_cli.model.tool import render_error as render_error
from holon_cli.model.typed import (
    Checker,
    CheckError,
    JsonObject,
    dotted,
    json_schema,
    kinds_of,
    strip,
    type_name,
)

if TYPE_CHECKING:
    from holon_cli.model.events import ToolErrorEnvelope, ToolErrorKind

# ------------------------------------------------------------------ errors


class ToolError(Exception):
    """Raised by handlers; becomes the model-visible error envelope."""

    def __init__(
        self,
        kind: ToolErrorKind,
        message: str,
        *,
        details: Mapping[str, object] | None = None,
        recovery_hint: str | None = None,
        retryable: bool = False,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.details: dict[str, object] = dict(details or {})
        if field:
            self.details["field"] = field
        self.recovery_hint = recovery_hint
        self.retryable = retryable

    def envelope(self) -> ToolErrorEnvelope:
        return {
            "kind": self.kind,
            "message": self.message,
            "details": self.details or None,
            "recovery_hint": self.recovery_hint,
            "retryable": self.retryable,
        }


Handler = Callable[[ToolContext, Any], "ToolResult | Mapping[str, object] | str"]


@dataclass
class ToolDef:
    name: str
    description: str
    args: type
    handler: Handler
    guidance: str = ""

    def spec(self, *, strict: bool = False) -> ToolSpec:
        return ToolSpec(self.name, self.description, emit_schema(self.args, strict=strict))


# ------------------------------------------------------------------ schemas


def source_schema(args_type: type) -> JsonObject:
    """The honest source schema of a dataclass: optional fields are not required."""
    return json_schema(args_type)


def emit_schema(args_type: type, *, strict: bool = False) -> JsonObject:
    """Provider emission: relaxed (source shape, additionalProperties false) or strict."""
    return json_schema(args_type, strict=strict)


def field_doc(doc: str, **kw: Any) -> Any:
    return field(metadata={"doc": doc}, **kw)


# ------------------------------------------------------------ arg parsing

_WORDS = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
}


@functools.cache
def _checker(args_type: type) -> Checker[Any]:
    return Checker(args_type, coerce="numbers")


def parse_args(args_type: type, raw: Any) -> Any:
    """Validate a JSON object against the argument dataclass and build it
    (``model/typed.py``, numbers coerced as the fields name them).

    Unknown fields are rejected (the emitted schema forbids them), except that
    explicit ``null`` for an optional field is the same as omitting it.
    """
    if not isinstance(raw, dict):
        raise ToolError(
            "invalid_arguments",
            "tool arguments must be a JSON object",
            recovery_hint="send an object matching the tool's schema",
        )
    try:
        return _checker(args_type)(raw)
    except CheckError as err:
        raise _argument_error(err) from None


def _argument_error(err: CheckError) -> ToolError:
    """The checker's finding in the words the model has always been given."""
    path = err.where
    if err.problem == "unknown":
        names = sorted(getattr(err.expected, "__dataclass_fields__", {}))
        prefix = dotted(err.path[:-1])
        prefix = f"{prefix}." if prefix else ""
        unknown = sorted(prefix + k for k in err.keys)
        return ToolError(
            "invalid_arguments",
            f"unknown argument(s): {', '.join(unknown)}",
            field=unknown[0],
            recovery_hint=f"allowed arguments: {', '.join(names)}",
        )
    if err.problem == "missing":
        return ToolError(
            "invalid_arguments",
            f"missing required argument `{path}`",
            field=path,
            recovery_hint=f"pass `{path}`",
        )
    if err.value is None:
        return ToolError(
            "invalid_arguments",
            f"`{path}` must not be null",
            field=path,
            recovery_hint=f"pass a value for `{path}`",
        )
    tp = strip(err.expected)
    if get_origin(tp) is Literal:
        want = f"one of {', '.join(map(str, get_args(tp)))}"
    elif kinds_of(tp) == {"list"}:
        want = "an array"
    elif kinds_of(tp) == {"dict"}:
        want = "an object"
    else:
        want = _WORDS.get(tp, type_name(tp))
    return ToolError("invalid_arguments", f"`{path}` must be {want}", field=path)


# --------------------------------------------------------------- registry

_REGISTRY: dict[str, ToolDef] = {}


def register(tool: ToolDef) -> ToolDef:
    _REGISTRY[tool.name] = tool
    return tool


def tool(
    name: str, args: type, *, description: str, guidance: str = ""
) -> Callable[[Handler], Handler]:
    """Decorator: ``@tool("Sleep", SleepArgs, description=...)`` on a handler."""

    def deco(fn: Handler) -> Handler:
        register(ToolDef(name, description, args, fn, guidance))
        return fn

    return deco


def registered(name: str) -> ToolDef | None:
    """The tool registered under ``name`` so far (imports nothing)."""
    return _REGISTRY.get(name)


def registrations() -> dict[str, ToolDef]:
    """Every tool registered so far (imports nothing; ``catalog.registry``
    imports the built-in tool modules first)."""
    return dict(_REGISTRY)


# -------------------------------------------------------------- execution


def _to_result(out: Any) -> ToolResult:
    if isinstance(out, ToolResult):
        return out
    if isinstance(out, str):
        return ToolResult(True, out)
    if isinstance(out, dict):
        content = json.dumps({"ok": True, **out}, ensure_ascii=False, default=str)
        return ToolResult(True, content, data=out, warnings=list(out.get("warnings", []) or []))
    raise TypeError(f"tool handler returned {type(out).__name__}")


def execute(tool_def: ToolDef | None, ctx: ToolContext, call: ToolCall) -> ToolResult:
    """Run one tool call; every failure becomes an error result (never raises).

    A successful result carries the call's :class:`ToolEffects` (what the
    handler reported through ``ctx.report``, unless it returned a result with
    its own); a failed one carries none."""
    ctx.report = ToolEffects()
    res = _execute(tool_def, ctx, call)
    if not res.ok:
        res.effects = ToolEffects()
        return res
    if res.effects == ToolEffects():
        res.effects = ctx.report
    if res.effects.work_item_id is None and isinstance(res.data.get("work_item_id"), str):
        res.effects.work_item_id = res.data["work_item_id"]
    return res


def _execute(tool_def: ToolDef | None, ctx: ToolContext, call: ToolCall) -> ToolResult:
    name = call.name
    try:
        if tool_def is None:
            raise ToolError(
                "unknown_tool",
                f"no tool named {name!r} is available",
                recovery_hint="call one of the tools listed in this request",
            )
        if call.arguments_error:
            raise ToolError(
                "invalid_arguments",
                f"arguments are not valid JSON: {call.arguments_error}",
                recovery_hint="send the arguments as one JSON object",
                details={"raw_preview": (call.raw_arguments or "")[:200]},
            )
        args = parse_args(tool_def.args, call.arguments)
        return _to_result(tool_def.handler(ctx, args))
    except ToolError as err:
        env = err.envelope()
        return ToolResult(False, render_error(name, env), error=env)
    except Exception as exc:  # noqa: BLE001 - a tool bug must not end the turn
        env = ToolError(
            "tool_internal_error",
            f"{type(exc).__name__}: {exc}",
            retryable=False,
            recovery_hint="try a different approach; this failure was recorded",
        ).envelope()
        return ToolResult(False, render_error(name, env), error=env)
