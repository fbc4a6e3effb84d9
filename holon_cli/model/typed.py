"""One record vocabulary: check a value into its type, and a type's JSON schema.

A record that crosses a layer (a ledger line, a snapshot, the config file,
a tool call's arguments, an envelope) has a type, and is checked into it
once, where it enters: :func:`check` (or a :class:`Checker` kept for a hot
path) walks the value against the type and returns it *as that type*, or
raises :class:`CheckError` naming what is wrong and where (the key path
from the top: ``entries[3].status``). Each surface words the error its own
way (``store/records.py``, ``store/config_schema.py``, ``tools/base.py``);
the checker only says what, where, the type expected there and the value.

Type forms (``typing`` annotations, as the code already writes them):

- ``str``, ``int`` (never a ``bool``), ``float`` (an ``int`` too; finite),
  ``bool``, ``None``, ``Any``/``object`` (anything);
- ``Literal[...]`` (a ``True`` is never a ``1``);
- ``list[X]``, ``tuple[X, ...]``, ``tuple[X, Y]`` (a JSON list), ``dict[str, X]``
  and ``Mapping[str, X]``;
- ``X | Y``, ``Optional[X]``: ``None`` when allowed, else the member whose
  JSON kind the value has; members of one kind are tried in order, and
  TypedDicts that share a ``Literal`` key (``op``, ``kind``) are told apart by
  it (a member with that key typed ``str`` takes any other tag);
- a ``TypedDict`` (``total``, ``Required``/``NotRequired``): required keys
  must be there, present keys must fit; keys the type does not name are
  left alone (a newer writer's field is not damage); the dict itself is
  returned, not a copy;
- a dataclass: an object with exactly its fields (an unknown key is an
  error); a field is required when it has no default and is not optional,
  or its metadata says ``"required": True``; ``null`` for a field that is
  not optional but has a default means "not given"; the instance is built;
- ``Annotated[X, Rule(...)]`` (and a dataclass field's ``metadata`` keys
  ``min``, ``min_exclusive``, ``doc``): bounds, non-empty text, a test.

``coerce="numbers"`` (tool arguments) also takes an integral float for an
``int`` and returns numbers as the type names them (``5.0`` -> ``5``,
``3`` -> ``3.0``); ``coerce="floats"`` (the config) only turns an ``int``
given for a ``float`` into one. By default nothing is converted, so a
record read from disk is the very object parsed.

:func:`json_schema` gives the JSON Schema of a type (the tool schemas the
model is offered; ``strict=True``: every property required, optional ones
nullable, ``additionalProperties: false`` everywhere), agreeing with
:func:`check` on what is accepted.

Cost: a type is compiled once into a tree of small functions (cached per
type), so checking a record is one call per value, with no path strings
built unless the check fails. This module imports neither ``dataclasses``
nor ``inspect`` (start-up: the dataclass branch finds the module already
loaded by the class it is handed).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    Union,
    cast,
    get_args,
    get_origin,
    overload,
)

from holon_cli.model.typed_base import (
    _ALL as _ALL,
)
from holon_cli.model.typed_base import (
    _HINTS as _HINTS,
)
from holon_cli.model.typed_base import (
    _INF as _INF,
)
from holon_cli.model.typed_base import (
    _KIND_NAMES as _KIND_NAMES,
)
from holon_cli.model.typed_base import (
    _SCHEMA_TYPES as _SCHEMA_TYPES,
)
from holon_cli.model.typed_base import (
    CLOSED as CLOSED,
)
from holon_cli.model.typed_base import (
    NONEMPTY as NONEMPTY,
)
from holon_cli.model.typed_base import (
    NONNEGATIVE as NONNEGATIVE,
)
from holon_cli.model.typed_base import (
    CheckError as CheckError,
)
from holon_cli.model.typed_base import (
    Coerce as Coerce,
)
from holon_cli.model.typed_base import (
    Deferred as Deferred,
)
from holon_cli.model.typed_base import (
    Json as Json,
)
from holon_cli.model.typed_base import (
    JsonObject as JsonObject,
)
from holon_cli.model.typed_base import (
    PathPart as PathPart,
)
from holon_cli.model.typed_base import (
    Problem as Problem,
)
from holon_cli.model.typed_base import (
    Rule as Rule,
)
from holon_cli.model.typed_base import (
    T as T,
)
from holon_cli.model.typed_base import (
    _annotations as _annotations,
)
from holon_cli.model.typed_base import (
    _doc_of as _doc_of,
)
from holon_cli.model.typed_base import (
    _evaluate as _evaluate,
)
from holon_cli.model.typed_base import (
    _hints as _hints,
)
from holon_cli.model.typed_base import (
    _kind as _kind,
)
from holon_cli.model.typed_base import (
    _Names as _Names,
)
from holon_cli.model.typed_base import (
    _td_shape as _td_shape,
)
from holon_cli.model.typed_base import (
    closed as closed,
)
from holon_cli.model.typed_base import (
    describe as describe,
)
from holon_cli.model.typed_base import (
    dotted as dotted,
)
from holon_cli.model.typed_base import (
    is_dataclass_type as is_dataclass_type,
)
from holon_cli.model.typed_base import (
    is_typeddict as is_typeddict,
)
from holon_cli.model.typed_base import (
    json_kind as json_kind,
)
from holon_cli.model.typed_base import (
    members as members,
)
from holon_cli.model.typed_base import (
    optional_of as optional_of,
)
from holon_cli.model.typed_base import (
    rule_of as rule_of,
)
from holon_cli.model.typed_base import (
    strip as strip,
)
from holon_cli.model.typed_base import (
    type_name as type_name,
)
from holon_cli.model.typed_base import (
    typeddict_keys as typeddict_keys,
)
from holon_cli.model.typed_compile import (
    _CACHE as _CACHE,
)
from holon_cli.model.typed_compile import (
    _EVERY as _EVERY,
)
from holon_cli.model.typed_compile import (
    _EXACT as _EXACT,
)
from holon_cli.model.typed_compile import (
    _KINDS as _KINDS,
)
from holon_cli.model.typed_compile import (
    _bool as _bool,
)
from holon_cli.model.typed_compile import (
    _bounds as _bounds,
)
from holon_cli.model.typed_compile import (
    _build as _build,
)
from holon_cli.model.typed_compile import (
    _compile as _compile,
)
from holon_cli.model.typed_compile import (
    _dataclass as _dataclass,
)
from holon_cli.model.typed_compile import (
    _deferred as _deferred,
)
from holon_cli.model.typed_compile import (
    _dict as _dict,
)
from holon_cli.model.typed_compile import (
    _discriminated as _discriminated,
)
from holon_cli.model.typed_compile import (
    _fail as _fail,
)
from holon_cli.model.typed_compile import (
    _float as _float,
)
from holon_cli.model.typed_compile import (
    _float_coerce as _float_coerce,
)
from holon_cli.model.typed_compile import (
    _Fn as _Fn,
)
from holon_cli.model.typed_compile import (
    _int as _int,
)
from holon_cli.model.typed_compile import (
    _int_coerce as _int_coerce,
)
from holon_cli.model.typed_compile import (
    _kinds as _kinds,
)
from holon_cli.model.typed_compile import (
    _list as _list,
)
from holon_cli.model.typed_compile import (
    _literal as _literal,
)
from holon_cli.model.typed_compile import (
    _null as _null,
)
from holon_cli.model.typed_compile import (
    _ruled as _ruled,
)
from holon_cli.model.typed_compile import (
    _same as _same,
)
from holon_cli.model.typed_compile import (
    _str as _str,
)
from holon_cli.model.typed_compile import (
    _tagged as _tagged,
)
from holon_cli.model.typed_compile import (
    _tuple as _tuple,
)
from holon_cli.model.typed_compile import (
    _typeddict as _typeddict,
)
from holon_cli.model.typed_compile import (
    _union as _union,
)
from holon_cli.model.typed_compile import (
    kinds_of as kinds_of,
)


class Checker(Generic[T]):
    """A type compiled on first use (then kept): ``checker(value)`` returns
    the value as ``T`` or raises :class:`CheckError`; :meth:`problem` returns
    the error instead. Building one costs nothing: a module may keep its
    checkers as constants without paying for them at import."""

    __slots__ = ("tp", "coerce", "_fn")

    def __init__(self, tp: Any, *, coerce: Coerce = "none") -> None:
        self.tp = tp
        self.coerce: Coerce = coerce
        self._fn: _Fn | None = None

    def __call__(self, value: object) -> T:
        fn = self._fn
        if fn is None:
            fn = self._fn = _compile(self.tp, self.coerce)
        try:
            return cast(T, fn(value))
        except CheckError:
            raise
        except RecursionError:
            raise _fail("type", self.tp, value, detail="nested too deeply") from None

    def problem(self, value: object) -> CheckError | None:
        try:
            self(value)
        except CheckError as err:
            return err
        return None


@overload
def check(value: object, tp: type[T], *, coerce: Coerce = ...) -> T: ...


@overload
def check(value: object, tp: Any, *, coerce: Coerce = ...) -> Any: ...


def check(value: object, tp: Any, *, coerce: Coerce = "none") -> Any:
    """``value`` as ``tp``, or :class:`CheckError` (see the module docstring)."""
    return Checker[Any](tp, coerce=coerce)(value)


def json_schema(tp: Any, *, strict: bool = False) -> JsonObject:
    """The JSON Schema of a type form. A dataclass is a closed object whose
    required properties are its required fields and whose properties carry
    their ``doc`` metadata as ``description``; a TypedDict is an open one.
    ``strict``: the provider's strict form (every property required, the
    optional ones nullable, ``additionalProperties: false`` on every object)."""
    src = _schema(tp)
    return _strictify(src) if strict else src


def _schema(tp: Any) -> JsonObject:
    doc = None
    if get_origin(tp) is Annotated:
        doc = next((m.doc for m in get_args(tp)[1:] if isinstance(m, Rule) and m.doc), None)
    _, tp = optional_of(strip(tp))
    tp = strip(tp)
    origin = get_origin(tp)
    out: JsonObject
    if tp is str:
        out = {"type": "string"}
    elif tp is bool:
        out = {"type": "boolean"}
    elif tp is int:
        out = {"type": "integer"}
    elif tp is float:
        out = {"type": "number"}
    elif tp is Any or tp is object:
        out = {}
    elif origin is Literal:
        vals = list(get_args(tp))
        kinds = {_SCHEMA_KIND[_kind(v)] for v in vals}
        several = list[Json](sorted(kinds))
        out = {"type": kinds.pop() if len(kinds) == 1 else several, "enum": vals}
    elif origin in (list, tuple, Sequence, typing.Sequence):
        items = [a for a in get_args(tp) if a is not Ellipsis]
        out = {"type": "array", "items": _schema(items[0]) if len(items) == 1 else {}}
    elif origin in (dict, Mapping, typing.Mapping) or tp is dict:
        args = get_args(tp)
        out = {"type": "object"}
        if args and strip(args[1]) not in (Any, object):
            out["additionalProperties"] = _schema(args[1])
    elif origin in (Union, types.UnionType):
        out = {"anyOf": [_schema(a) for a in get_args(tp)]}
    elif is_dataclass_type(tp):
        out = _dataclass_schema(tp)
    elif is_typeddict(tp):
        hints, required = _td_shape(tp)
        out = {
            "type": "object",
            "properties": {k: _schema(h) for k, h in hints.items()},
            "required": [k for k in hints if k in required],
        }
    else:
        raise TypeError(f"typed.json_schema: unsupported type {tp!r}")
    if doc:
        out["description"] = doc
    return out


_SCHEMA_KIND = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "null": "null",
    "list": "array",
    "dict": "object",
    "other": "string",
}


def _dataclass_schema(tp: Any) -> JsonObject:
    import dataclasses

    hints = _hints(tp)
    props: JsonObject = {}
    required: list[Json] = []
    for f in dataclasses.fields(tp):
        htp = hints[f.name]
        sch = dict(_schema(htp))
        doc = f.metadata.get("doc")
        if doc:
            sch["description"] = doc
        props[str(f.metadata.get("key") or f.name)] = sch
        optional, _ = optional_of(htp)
        has_default = f.default is not dataclasses.MISSING or (
            f.default_factory is not dataclasses.MISSING
        )
        if f.metadata.get("required") or (not optional and not has_default):
            required.append(str(f.metadata.get("key") or f.name))
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _strictify(schema: JsonObject, nullable: bool = False) -> JsonObject:
    s = dict(schema)
    given, items, enum = s.get("properties"), s.get("items"), s.get("enum")
    if s.get("type") == "object" and isinstance(given, dict):
        required = s.get("required", [])
        req = set(required) if isinstance(required, list) else set()
        props: JsonObject = {}
        for name, sub in given.items():
            props[name] = (
                _strictify(sub, nullable=name not in req) if isinstance(sub, dict) else sub
            )
        s["properties"] = props
        s["required"] = list[Json](props)
        s["additionalProperties"] = False
    elif s.get("type") == "array" and isinstance(items, dict):
        s["items"] = _strictify(items)
    if nullable:
        t = s.get("type")
        if isinstance(t, str):
            s["type"] = [t, "null"]
        if isinstance(enum, list) and None not in enum:
            s["enum"] = [*enum, None]
    return s
