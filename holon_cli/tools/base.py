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

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin, get_type_hints

from holon_cli.model.provider import ToolCall, ToolSpec
from holon_cli.model.tool import SleepRequest as SleepRequest
from holon_cli.model.tool import ToolContext as ToolContext
from holon_cli.model.tool import ToolEffects as ToolEffects
from holon_cli.model.tool import ToolResult as ToolResult
from holon_cli.model.tool import render_error as render_error

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
        details: dict[str, Any] | None = None,
        recovery_hint: str | None = None,
        retryable: bool = False,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.details = dict(details or {})
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


Handler = Callable[[ToolContext, Any], "ToolResult | dict[str, Any] | str"]


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


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) != len(get_args(tp)):
            return True, args[0] if len(args) == 1 else Union[tuple(args)]  # noqa: UP007
    return False, tp


def _type_schema(tp: Any) -> dict[str, Any]:
    opt, inner = _is_optional(tp)
    if opt:
        return _type_schema(inner)
    origin = get_origin(tp)
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if origin is Literal:
        vals = list(get_args(tp))
        return {"type": "string", "enum": vals}
    if origin in (list, typing.List):  # noqa: UP006
        (item,) = get_args(tp)
        return {"type": "array", "items": _type_schema(item)}
    if origin in (dict, typing.Dict):  # noqa: UP006
        return {"type": "object"}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return source_schema(tp)
    if tp is Any:
        return {}
    raise TypeError(f"unsupported tool argument type: {tp!r}")


@functools.cache
def _arg_fields(args_type: type) -> tuple[dict[str, Any], frozenset[str]]:
    """An argument dataclass's resolved type hints and field names, once per
    class (``get_type_hints`` re-evaluates every annotation: ~0.6 ms a call)."""
    return get_type_hints(args_type), frozenset(f.name for f in dataclasses.fields(args_type))


def source_schema(args_type: type) -> dict[str, Any]:
    """The honest source schema of a dataclass: optional fields are not required."""
    hints = get_type_hints(args_type, include_extras=True)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(args_type):
        tp = hints[f.name]
        sch = dict(_type_schema(tp))
        doc = f.metadata.get("doc")
        if doc:
            sch["description"] = doc
        props[f.name] = sch
        opt, _ = _is_optional(tp)
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        if not opt and not has_default:
            required.append(f.name)
    out: dict[str, Any] = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
    return out


def _strictify(schema: dict[str, Any], nullable: bool = False) -> dict[str, Any]:
    s = dict(schema)
    if s.get("type") == "object" and "properties" in s:
        req = set(s.get("required", []))
        props = {}
        for name, sub in s["properties"].items():
            props[name] = _strictify(sub, nullable=name not in req)
        s["properties"] = props
        s["required"] = list(props)
        s["additionalProperties"] = False
    elif s.get("type") == "array" and "items" in s:
        s["items"] = _strictify(s["items"])
    if nullable:
        t = s.get("type")
        if isinstance(t, str):
            s["type"] = [t, "null"]
        if "enum" in s and None not in s["enum"]:
            s["enum"] = [*s["enum"], None]
    return s


def emit_schema(args_type: type, *, strict: bool = False) -> dict[str, Any]:
    """Provider emission: relaxed (source shape, additionalProperties false) or strict."""
    src = source_schema(args_type)
    return _strictify(src) if strict else src


def field_doc(doc: str, **kw: Any) -> Any:
    return field(metadata={"doc": doc}, **kw)


# ------------------------------------------------------------ arg parsing


def _coerce(value: Any, tp: Any, path: str) -> Any:
    opt, inner = _is_optional(tp)
    if value is None:
        if opt:
            return None
        raise ToolError(
            "invalid_arguments",
            f"`{path}` must not be null",
            field=path,
            recovery_hint=f"pass a value for `{path}`",
        )
    tp = inner
    origin = get_origin(tp)
    if tp is Any:
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ToolError("invalid_arguments", f"`{path}` must be a string", field=path)
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ToolError("invalid_arguments", f"`{path}` must be a boolean", field=path)
        return value
    if tp is int:
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        ):
            raise ToolError("invalid_arguments", f"`{path}` must be an integer", field=path)
        return int(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ToolError("invalid_arguments", f"`{path}` must be a number", field=path)
        return float(value)
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ToolError(
                "invalid_arguments",
                f"`{path}` must be one of {', '.join(map(str, allowed))}",
                field=path,
            )
        return value
    if origin in (list, typing.List):  # noqa: UP006
        if not isinstance(value, list):
            raise ToolError("invalid_arguments", f"`{path}` must be an array", field=path)
        (item,) = get_args(tp)
        return [_coerce(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, typing.Dict):  # noqa: UP006
        if not isinstance(value, dict):
            raise ToolError("invalid_arguments", f"`{path}` must be an object", field=path)
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return parse_args(tp, value, prefix=f"{path}.")
    return value


def parse_args(args_type: type, raw: Any, *, prefix: str = "") -> Any:
    """Validate a JSON object against the dataclass and build it.

    Unknown fields are rejected (the emitted schema forbids them), except that
    explicit ``null`` for an optional field is the same as omitting it.
    """
    if not isinstance(raw, dict):
        raise ToolError(
            "invalid_arguments",
            "tool arguments must be a JSON object",
            recovery_hint="send an object matching the tool's schema",
        )
    hints, names = _arg_fields(args_type)
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ToolError(
            "invalid_arguments",
            f"unknown argument(s): {', '.join(prefix + u for u in unknown)}",
            field=prefix + unknown[0],
            recovery_hint=f"allowed arguments: {', '.join(sorted(names))}",
        )
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(args_type):
        path = prefix + f.name
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        if f.name not in raw:
            opt, _ = _is_optional(hints[f.name])
            if not has_default and not opt:
                raise ToolError(
                    "invalid_arguments",
                    f"missing required argument `{path}`",
                    field=path,
                    recovery_hint=f"pass `{path}`",
                )
            continue
        value = raw[f.name]
        if value is None and has_default:
            opt, _ = _is_optional(hints[f.name])
            if not opt:
                continue  # treat null as omitted for defaulted fields
        kwargs[f.name] = _coerce(value, hints[f.name], path)
    return args_type(**kwargs)


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
