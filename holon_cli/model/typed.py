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

import builtins
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    NotRequired,
    Required,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    overload,
)

T = TypeVar("T")

# A JSON value, for what is JSON and nothing more precise (a message body's
# ``value``, a tool's free-form ``details``): no ``Any``, so a reader narrows it.
Json = Union[None, bool, int, float, str, list["Json"], dict[str, "Json"]]  # noqa: UP007
JsonObject = dict[str, Json]

# what check converts: nothing (records as read), ints to floats where a
# float is named (config), and integral floats to ints as well (tool arguments)
Coerce = Literal["none", "floats", "numbers"]
Problem = Literal["type", "missing", "unknown", "value", "bound", "key", "rule"]
PathPart = str | int

_INF = float("inf")


class Rule:
    """Constraints carried by ``Annotated[X, Rule(...)]``: ``min`` (>=),
    ``more_than`` (>), ``nonempty`` (text, list or mapping), ``test`` (a
    function returning ``None`` or what is wrong, worded to follow the key:
    ``"is empty"``; ``": <why>"`` follows it directly), ``hint`` (what to
    do, for the error), ``doc`` (a description for the JSON schema);
    ``default`` (text: what holds when the key is not set) and ``example`` (a
    value the key accepts) only document it (the config reference prints
    them; neither is checked nor put in a JSON schema)."""

    __slots__ = ("min", "more_than", "nonempty", "test", "hint", "doc", "default", "example")

    def __init__(
        self,
        *,
        min: float | None = None,  # noqa: A002 - the word the schema uses
        more_than: float | None = None,
        nonempty: bool = False,
        test: Callable[[Any], str | None] | None = None,
        hint: str | None = None,
        doc: str | None = None,
        default: str | None = None,
        example: Any = None,
    ) -> None:
        self.min = min
        self.more_than = more_than
        self.nonempty = nonempty
        self.test = test
        self.hint = hint
        self.doc = doc
        self.default = default
        self.example = example

    def __repr__(self) -> str:
        shown = [(k, getattr(self, k)) for k in self.__slots__]
        parts = [f"{k}={v!r}" for k, v in shown if v or (k == "example" and v is not None)]
        return f"Rule({', '.join(parts)})"


NONEMPTY = Rule(nonempty=True)
NONNEGATIVE = Rule(min=0)


class CheckError(ValueError):
    """A value that does not fit its type.

    ``problem``: ``type`` (wrong JSON kind), ``missing`` (a required key),
    ``unknown`` (keys a dataclass does not have: ``keys``, the path names the
    first), ``value`` (right kind, not one of a ``Literal``'s values),
    ``bound`` (``limit``: ``("min", n)`` or ``("more_than", n)``), ``key`` (a
    mapping's key that is not a fitting name; ``value`` is the key), ``rule``
    (``detail`` says what, ``hint`` what to do). ``path``: the keys and list
    indexes from the top; ``expected``: the type form at that place."""

    def __init__(
        self,
        problem: Problem,
        expected: Any,
        value: Any,
        *,
        detail: str = "",
        hint: str | None = None,
        keys: Sequence[str] = (),
        limit: tuple[str, float] | None = None,
        doc: str | None = None,
    ) -> None:
        super().__init__(problem)
        self.problem: Problem = problem
        self.expected = expected
        self.value = value
        self.detail = detail
        self.hint = hint
        self.keys = tuple(keys)
        self.limit = limit
        self.doc = doc  # a missing dataclass field's description
        self._rpath: list[PathPart] = []

    @property
    def path(self) -> tuple[PathPart, ...]:
        return tuple(reversed(self._rpath))

    @property
    def where(self) -> str:
        """The path as text: ``runtime.max_provider_rounds``, ``entries[0].seq``."""
        return dotted(self.path)

    def __str__(self) -> str:
        where = self.where or "value"
        if self.problem == "missing":
            return f"{where} is required"
        if self.problem == "unknown":
            return f"unknown key {where!r}"
        if self.problem == "rule":
            return f"{where}{self.detail}" if self.detail[:1] == ":" else f"{where} {self.detail}"
        if self.problem == "bound" and self.limit:
            op = "or more" if self.limit[0] == "min" else "(exclusive minimum)"
            return f"{where} must be {self.limit[1]} {op}, got {self.value!r}"
        return f"{where} must be {type_name(self.expected)}, got {json_kind(self.value)}"


def dotted(path: Sequence[PathPart]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


# ----------------------------------------------------------------- naming


def json_kind(value: Any) -> str:
    """The JSON kind of a value: null, boolean, integer, number, string, array, object."""
    if value is None:
        return "null"
    name = _KIND_NAMES.get(type(value))
    if name is None:
        k = _kind(value)
        name = _KIND_NAMES.get(_SCHEMA_TYPES.get(k, type(value)), type(value).__name__)
    return name


_SCHEMA_TYPES: dict[str, type] = {
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "list": list,
    "dict": dict,
}
_KIND_NAMES: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    tuple: "array",
    dict: "object",
}


def describe(value: Any) -> str:
    """A value for a person: ``'30' (a string)``, ``nothing (null)`` (long ones cut)."""
    if value is None:
        return "nothing (null)"
    kind = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), f"a {type(value).__name__}")
    text = repr(value)
    return f"{text[:60]}… ({kind})" if len(text) > 60 else f"{text} ({kind})"


def strip(tp: Any) -> Any:
    """``Annotated[X, ...]``, ``Required[X]``, ``NotRequired[X]`` -> ``X`` (a
    deferred type imported)."""
    while True:
        if isinstance(tp, Deferred):
            tp = tp.resolve()
        origin = get_origin(tp)
        if origin is Annotated or origin is Required or origin is NotRequired:
            tp = get_args(tp)[0]
        else:
            return tp


def members(tp: Any) -> tuple[Any, ...]:
    """A union's members (a non-union type is its own only member)."""
    tp = strip(tp)
    if get_origin(tp) in (Union, types.UnionType):
        return get_args(tp)
    return (tp,)


def optional_of(tp: Any) -> tuple[bool, Any]:
    """``(True, X)`` for ``X | None`` (``X`` itself a union of the rest)."""
    args = members(tp)
    rest = [a for a in args if a is not type(None)]
    if len(rest) == len(args):
        return False, tp
    if len(rest) == 1:
        return True, rest[0]
    return True, Union[tuple(rest)]  # noqa: UP007


def type_name(tp: Any) -> str:
    """A short Python-style name of a type form (``str``, ``list[int]``, ``a | b``)."""
    tp = strip(tp)
    origin = get_origin(tp)
    if tp is type(None) or tp is None:
        return "null"
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in get_args(tp))
    if origin is not None:
        args = ", ".join("..." if a is Ellipsis else type_name(a) for a in get_args(tp))
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{args}]" if args else name
    return getattr(tp, "__name__", str(tp))


def is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "__dataclass_fields__")


# ------------------------------------------------------------ compiling

_Fn = Callable[[Any], Any]
_CACHE: dict[tuple[Any, str], _Fn] = {}
_KINDS: dict[Any, frozenset[str]] = {}
_ALL = frozenset({"null", "bool", "int", "float", "str", "list", "dict", "other"})


def _kind(value: Any) -> str:
    t = type(value)
    if t is str:
        return "str"
    if t is dict:
        return "dict"
    if t is int:
        return "int"
    if t is list:
        return "list"
    if value is None:
        return "null"
    if t is bool:
        return "bool"
    if t is float:
        return "float"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, Mapping):
        return "dict"
    return "other"


def kinds_of(tp: Any) -> frozenset[str]:
    """The JSON kinds a type form accepts: ``str``, ``int``, ``float``,
    ``bool``, ``null``, ``list``, ``dict`` (``other``: none of them)."""
    return _kinds(tp, "none")


def _kinds(tp: Any, coerce: Coerce) -> frozenset[str]:
    """The JSON kinds a type form accepts (a union picks its member by them;
    a deferred type takes any kind, and decides when it is imported)."""
    if isinstance(tp, Deferred) and tp._tp is None:
        return _ALL
    tp = strip(tp)
    origin = get_origin(tp)
    if tp is Any or tp is object:
        return _ALL
    if tp is type(None) or tp is None:
        return frozenset({"null"})
    if tp is str:
        return frozenset({"str"})
    if tp is bool:
        return frozenset({"bool"})
    if tp is int:
        return frozenset({"int", "float"}) if coerce == "numbers" else frozenset({"int"})
    if tp is float:
        return frozenset({"int", "float"})
    if origin is Literal:
        return frozenset(_kind(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        out: frozenset[str] = frozenset()
        for a in get_args(tp):
            out |= _kinds(a, coerce)
        return out
    if origin in (list, tuple, Sequence, typing.Sequence) or tp in (list, tuple):
        return frozenset({"list"})
    if origin in (dict, Mapping, typing.Mapping) or tp is dict or is_typeddict(tp):
        return frozenset({"dict"})
    if is_dataclass_type(tp):
        return frozenset({"dict"})
    return frozenset({"other"})


def _fail(problem: Problem, expected: Any, value: Any, **kw: Any) -> CheckError:
    return CheckError(problem, expected, value, **kw)


def _compile(tp: Any, coerce: Coerce) -> _Fn:
    key = (tp, coerce)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    # a recursive type reaches itself while compiling: a trampoline until done
    box: list[_Fn] = []

    def later(value: Any) -> Any:
        return box[0](value)

    _CACHE[key] = later
    try:
        fn = _build(tp, coerce)
    except BaseException:
        del _CACHE[key]
        raise
    box.append(fn)
    _CACHE[key] = fn
    return fn


def _build(tp: Any, coerce: Coerce) -> _Fn:
    if isinstance(tp, Deferred):
        return _deferred(tp, coerce)
    origin = get_origin(tp)
    if origin is Annotated:
        inner, *meta = get_args(tp)
        fn = _compile(inner, coerce)
        for m in meta:
            if isinstance(m, Rule):
                fn = _ruled(fn, m, tp)
        return fn
    if origin is Required or origin is NotRequired:
        return _compile(get_args(tp)[0], coerce)
    if tp is Any or tp is object:
        return _same
    if tp is type(None) or tp is None:
        return _null
    if tp is str:
        return _str
    if tp is bool:
        return _bool
    if tp is int:
        return _int_coerce if coerce == "numbers" else _int
    if tp is float:
        return _float if coerce == "none" else _float_coerce
    if origin is Literal:
        return _literal(tp)
    if origin in (Union, types.UnionType):
        return _union(tp, coerce)
    if origin in (list, Sequence, typing.Sequence) or tp is list:
        args = get_args(tp)
        return _list(_compile(args[0] if args else Any, coerce), tp)
    if origin is tuple or tp is tuple:
        return _tuple(tp, coerce)
    if origin in (dict, Mapping, typing.Mapping) or tp is dict:
        args = get_args(tp) or (str, Any)
        return _dict(_compile(args[0], coerce), _compile(args[1], coerce), tp)
    if is_typeddict(tp):
        return _typeddict(tp, coerce)
    if is_dataclass_type(tp):
        return _dataclass(tp, coerce)
    raise TypeError(f"typed.check: unsupported type {tp!r}")


def _deferred(tp: Deferred, coerce: Coerce) -> _Fn:
    box: list[_Fn] = []

    def check_deferred(value: Any) -> Any:
        if not box:
            box.append(_compile(tp.resolve(), coerce))
        return box[0](value)

    return check_deferred


def _same(value: Any) -> Any:
    return value


def _null(value: Any) -> Any:
    if value is not None:
        raise _fail("type", None, value)
    return None


def _str(value: Any) -> Any:
    if not isinstance(value, str):
        raise _fail("type", str, value)
    return value


def _bool(value: Any) -> Any:
    if value is not True and value is not False:
        raise _fail("type", bool, value)
    return value


def _int(value: Any) -> Any:
    if type(value) is not int and (not isinstance(value, int) or isinstance(value, bool)):
        raise _fail("type", int, value)
    return value


def _int_coerce(value: Any) -> Any:
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return _int(value)


def _float(value: Any) -> Any:
    t = type(value)
    if t is float:
        if value - value != 0:  # NaN or an infinity
            raise _fail("type", float, value)
        return value
    if t is int:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail("type", float, value)
    if isinstance(value, float) and value - value != 0:
        raise _fail("type", float, value)
    return value


def _float_coerce(value: Any) -> Any:
    return float(_float(value))


_EVERY: frozenset[type] = frozenset({object})  # Any: every value passes
# checks that pass a value whose exact type is one of these without a call
# (a subclass, or anything else, goes through the check: it decides)
_EXACT: dict[Any, frozenset[type]] = {
    _str: frozenset({str}),
    _int: frozenset({int}),
    _bool: frozenset({bool}),
    _null: frozenset({type(None)}),
}


def _literal(tp: Any) -> _Fn:
    allowed = get_args(tp)
    table = {(type(a), a) for a in allowed}
    kinds = frozenset(_kind(a) for a in allowed)

    def check_literal(value: Any) -> Any:
        try:
            if (type(value), value) in table:
                return value
        except TypeError:  # unhashable: a list or a mapping
            pass
        raise _fail("value" if _kind(value) in kinds else "type", tp, value)

    return check_literal


def _ruled(fn: _Fn, rule: Rule, tp: Any) -> _Fn:
    def check_rule(value: Any) -> Any:
        out = fn(value)
        if out is None:
            return out
        if rule.nonempty and not out and isinstance(out, (str, list, dict, tuple)):
            raise _fail("rule", tp, value, detail="is empty", hint=rule.hint)
        _bounds(value, tp, rule.min, rule.more_than)
        if rule.test is not None:
            why = rule.test(out)
            if why:
                raise _fail("rule", tp, value, detail=why, hint=rule.hint)
        return out

    return check_rule


def _bounds(value: Any, tp: Any, low: float | None, above: float | None) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if low is not None and value < low:
        raise _fail("bound", tp, value, limit=("min", low))
    if above is not None and value <= above:
        raise _fail("bound", tp, value, limit=("more_than", above))


def _union(tp: Any, coerce: Coerce) -> _Fn:
    args = get_args(tp)
    nullable = type(None) in args
    rest = [a for a in args if a is not type(None)]
    branches = [(_kinds(a, coerce), _compile(a, coerce), a) for a in rest]
    by_kind: dict[str, list[_Fn]] = {}
    for kinds, fn, _ in branches:
        for k in kinds:
            by_kind.setdefault(k, []).append(fn)
    tagged = _discriminated(rest, coerce)
    if tagged is not None:
        by_kind["dict"] = [tagged]
    only = {k: fns[0] for k, fns in by_kind.items() if len(fns) == 1}
    plain = [_EXACT.get(fn) for _, fn, _ in branches]

    def check_union(value: Any) -> Any:
        if value is None and nullable:
            return None
        k = _kind(value)
        fn = only.get(k)
        if fn is not None:
            try:
                return fn(value)
            except CheckError as err:
                # deeper down, or a rule or bound: that member's own finding;
                # the wrong kind or value right here: the union's
                if err._rpath or err.problem not in ("type", "value"):
                    raise
                raise _fail("type", tp, value) from None
        for fn in by_kind.get(k, ()):  # several of this kind: the first that fits
            try:
                return fn(value)
            except CheckError:
                continue
        raise _fail("type", tp, value)

    if all(p is not None for p in plain):  # X | None of plain types: one set test
        exact = frozenset().union(*(p for p in plain if p is not None))
        _EXACT[check_union] = exact | ({type(None)} if nullable else frozenset())
    return check_union


def _discriminated(rest: list[Any], coerce: Coerce) -> _Fn | None:
    """TypedDict members told apart by a shared Literal key (``op``, ``kind``);
    one member may type that key ``str`` (required or not): it takes any
    other tag, and a record without one."""
    if len(rest) < 2 or any(isinstance(a, Deferred) for a in rest):
        return None  # one member (X | None), or one not imported yet: no tags to read
    dicts = [strip(a) for a in rest if "dict" in _kinds(a, coerce)]
    if len(dicts) < 2 or not all(is_typeddict(d) for d in dicts):
        return None
    shapes = [_td_shape(d) for d in dicts]
    common = set(shapes[0][0]).intersection(*(s[0] for s in shapes[1:]))
    for key in sorted(common):
        table: dict[Any, _Fn] = {}
        fallback: _Fn | None = None
        ok = True
        for d, (hints, required) in zip(dicts, shapes, strict=True):
            ktp = strip(hints[key])
            if get_origin(ktp) is Literal and key in required:
                for v in get_args(ktp):
                    table.setdefault(v, _compile(d, coerce))
            elif ktp is str and fallback is None:
                fallback = _compile(d, coerce)
            else:
                ok = False
        if not ok or not table:
            continue
        tag_type = getattr(typing, "Literal")[tuple(table)]  # noqa: B009 - a runtime form
        return _tagged(key, table, fallback, tag_type)
    return None


def _tagged(key: str, table: dict[Any, _Fn], fallback: _Fn | None, tag_type: Any) -> _Fn:
    def check_tagged(value: Any) -> Any:
        tag = value.get(key)
        fn = table.get(tag) if isinstance(tag, str) else None
        if fn is not None:
            return fn(value)
        if fallback is not None and (tag is None and key not in value or isinstance(tag, str)):
            return fallback(value)
        if key not in value:
            err = _fail("missing", tag_type, None)
        else:
            err = _fail("value" if isinstance(tag, str) else "type", tag_type, tag)
        err._rpath.append(key)
        raise err

    return check_tagged


def _list(item: _Fn, tp: Any) -> _Fn:
    def check_list(value: Any) -> Any:
        if type(value) is not list:
            if isinstance(value, tuple):
                value = list(value)
            elif not isinstance(value, list):
                raise _fail("type", tp, value)
        if item is _same:
            return value
        out: list[Any] | None = None
        for i, v in enumerate(value):
            try:
                w = item(v)
            except CheckError as err:
                err._rpath.append(i)
                raise
            if w is not v:
                if out is None:
                    out = list(value)
                out[i] = w
        return value if out is None else out

    return check_list


def _tuple(tp: Any, coerce: Coerce) -> _Fn:
    args = get_args(tp)
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        each = _list(_compile(args[0] if args else Any, coerce), tp)
        return lambda value: tuple(each(value))
    fns = [_compile(a, coerce) for a in args]

    def check_tuple(value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or len(value) != len(fns):
            raise _fail("type", tp, value)
        out = []
        for i, (fn, v) in enumerate(zip(fns, value, strict=True)):
            try:
                out.append(fn(v))
            except CheckError as err:
                err._rpath.append(i)
                raise
        return tuple(out)

    return check_tuple


def _dict(key: _Fn, val: _Fn, tp: Any) -> _Fn:
    def check_dict(value: Any) -> Any:
        if type(value) is not dict and not isinstance(value, Mapping):
            raise _fail("type", tp, value)
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            try:
                key(k)
            except CheckError:
                raise _fail("key", get_args(tp)[0] if get_args(tp) else str, k) from None
            try:
                w = val(v)
            except CheckError as err:
                err._rpath.append(k)
                raise
            if w is not v:
                if out is None:
                    out = dict(value)
                out[k] = w
        return value if out is None else out

    return check_dict


def _td_shape(tp: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's annotations and its required keys (``Required``/
    ``NotRequired`` read from the annotations themselves: under ``from
    __future__ import annotations`` Python 3.11 misses them)."""
    hints = _hints(tp)
    required = set(tp.__required_keys__)
    for name, h in hints.items():
        origin = get_origin(h)
        if origin is Annotated:
            origin = get_origin(get_args(h)[0])
        if origin is NotRequired:
            required.discard(name)
        elif origin is Required:
            required.add(name)
    return hints, frozenset(required)


_HINTS: dict[Any, dict[str, Any]] = {}


def _hints(tp: Any) -> dict[str, Any]:
    """A class's annotations evaluated (``Annotated``, ``Required`` kept), once.

    Evaluated here rather than by ``typing.get_type_hints`` (four times the
    cost, paid by the first record each command reads): each annotation in
    the namespace of the module that wrote it (a TypedDict's inherited keys
    keep theirs), where a name that module imports only for type checking is
    looked up through its module ``__getattr__`` (imported when first checked)."""
    hit = _HINTS.get(tp)
    if hit is None:
        hit = {}
        own = getattr(tp, "__module__", "")
        for name, ann in _annotations(tp).items():
            hit[name] = _evaluate(ann, own)
        _HINTS[tp] = hit
    return hit


def _annotations(tp: Any) -> dict[str, Any]:
    if is_typeddict(tp):
        return dict(tp.__annotations__)  # the bases' keys merged in, in order
    out: dict[str, Any] = {}
    for base in reversed(tp.__mro__):
        out.update(base.__dict__.get("__annotations__", {}))
    return out


def _evaluate(ann: Any, module: str) -> Any:
    if isinstance(ann, typing.ForwardRef):
        module = ann.__forward_module__ or module
        code = ann.__forward_code__
    elif isinstance(ann, str):
        code = compile(ann, "<annotation>", "eval")
    else:
        return ann
    mod = sys.modules[module]
    return eval(code, vars(mod), _Names(mod))  # noqa: S307 - the module's own annotation


class _Names(dict[str, Any]):
    """Names an annotation uses that its module has not bound: a name its
    module ``__getattr__`` supplies (imported only for type checking) stands
    as a :class:`Deferred` until a value of that type is checked."""

    def __init__(self, module: Any) -> None:
        super().__init__()
        self.module = module

    def __missing__(self, name: str) -> Any:
        lazy = vars(self.module).get("__getattr__")
        if lazy is None or name in vars(self.module) or hasattr(builtins, name):
            raise KeyError(name)  # the module's globals, then the builtins, answer
        return Deferred(lazy, name)


class Deferred:
    """A type named in an annotation and imported when a value of it is first
    checked: ``ClosureDecision | None`` checks a ``None`` without loading the
    module that defines ``ClosureDecision`` (``holon enqueue`` reads an agent
    record; the record's parts load when the record has them)."""

    __slots__ = ("_lazy", "name", "_tp")

    def __init__(self, lazy: Callable[[str], Any], name: str) -> None:
        self._lazy = lazy
        self.name = name
        self._tp: Any = None

    def resolve(self) -> Any:
        if self._tp is None:
            self._tp = self._lazy(self.name)
        return self._tp

    def __call__(self, *args: Any) -> Any:  # typing's forms take callables
        raise TypeError(f"{self.name} is a type, not a value")

    def __or__(self, other: Any) -> Any:
        return Union[self, other]  # noqa: UP007 - a runtime form

    def __ror__(self, other: Any) -> Any:
        return Union[other, self]  # noqa: UP007 - a runtime form

    def __repr__(self) -> str:
        return self.name


def _typeddict(tp: Any, coerce: Coerce) -> _Fn:
    hints, required = _td_shape(tp)
    fns = {name: _compile(h, coerce) for name, h in hints.items()}
    # per key: the exact types that pass without a call (most of a record), and its check
    table = {name: (_EVERY if fn is _same else _EXACT.get(fn), fn) for name, fn in fns.items()}
    must = [name for name in hints if name in required]
    docs = {name: _doc_of(h) for name, h in hints.items()}
    closed = tp in CLOSED

    def check_typeddict(value: Any) -> Any:
        if type(value) is not dict and not isinstance(value, Mapping):
            raise _fail("type", tp, value)
        out: dict[str, Any] | None = None
        for name, v in value.items():  # the keys the record has, in its order
            spec = table.get(name)
            if spec is None:
                if closed:
                    unknown = [str(k) for k in value if k not in fns]
                    err = _fail("unknown", tp, value, keys=unknown)
                    err._rpath.append(unknown[0])
                    raise err
                continue  # a key the type does not name: a newer writer's field
            exact, fn = spec
            if exact is not None and (exact is _EVERY or type(v) in exact):
                continue
            try:
                w = fn(v)
            except CheckError as err:
                err._rpath.append(name)
                raise
            if w is not v:
                if out is None:
                    out = dict(value)
                out[name] = w
        for name in must:  # a field of the wrong kind says more: reported first
            if name not in value:
                gap = _fail("missing", strip(hints[name]), None, doc=docs[name])
                gap._rpath.append(name)
                raise gap
        return value if out is None else out

    return check_typeddict


def _doc_of(tp: Any) -> str | None:
    """The ``doc`` of a field's ``Annotated[..., Rule(doc=...)]`` (under ``Required``)."""
    rule = rule_of(tp)
    return rule.doc if rule is not None else None


def rule_of(tp: Any) -> Rule | None:
    """A field's documenting ``Rule`` (the one with a ``doc``; under ``Required``)."""
    while True:
        origin = get_origin(tp)
        if origin is Required or origin is NotRequired:
            tp = get_args(tp)[0]
        elif origin is Annotated:
            return next((m for m in get_args(tp)[1:] if isinstance(m, Rule) and m.doc), None)
        else:
            return None


def typeddict_keys(tp: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's keys with their annotations (evaluated; ``Annotated``
    and ``Required`` kept), and the required ones."""
    return _td_shape(tp)


# TypedDicts whose every key is named by the type (the config file): any
# other key is an error, not a newer writer's field
CLOSED: set[Any] = set()


def closed(*types_: Any) -> None:
    """Mark TypedDicts closed: :func:`check` refuses a key they do not name
    and :func:`json_schema` says ``additionalProperties: false``."""
    CLOSED.update(types_)


def _dataclass(tp: Any, coerce: Coerce) -> _Fn:
    import dataclasses  # loaded already: ``tp`` is a dataclass

    hints = _hints(tp)
    specs = []
    for f in dataclasses.fields(tp):
        htp = hints[f.name]
        optional, _ = optional_of(htp)
        has_default = f.default is not dataclasses.MISSING or (
            f.default_factory is not dataclasses.MISSING
        )
        meta = f.metadata
        required = bool(meta.get("required")) or (not has_default and not optional)
        fn = _compile(htp, coerce)
        low, above = meta.get("min"), meta.get("min_exclusive")
        key = str(meta.get("key") or f.name)  # the mapping's key when it is no identifier
        specs.append(
            (key, f.name, fn, required, optional, has_default, low, above, meta.get("doc"))
        )
    names = frozenset(s[0] for s in specs)

    def check_dataclass(value: Any) -> Any:
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise _fail("type", tp, value)
        unknown = [k for k in value if k not in names]
        if unknown:
            err = _fail("unknown", tp, value, keys=[str(k) for k in unknown])
            err._rpath.append(str(unknown[0]))
            raise err
        kwargs: dict[str, Any] = {}
        for key, name, fn, required, optional, has_default, low, above, doc in specs:
            if key not in value:
                if required:
                    err = _fail("missing", hints[name], None, doc=doc)
                    err._rpath.append(key)
                    raise err
                if not has_default:
                    kwargs[name] = None
                continue
            v = value[key]
            if v is None and not optional and has_default and not required:
                continue  # null for a defaulted field: not given
            try:
                w = fn(v)
                if low is not None or above is not None:
                    _bounds(v, hints[name], low, above)
            except CheckError as err:
                err._rpath.append(key)
                raise
            kwargs[name] = w
        return tp(**kwargs)

    return check_dataclass


# ------------------------------------------------------------- the API


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


# --------------------------------------------------------------- schema


def json_schema(tp: Any, *, strict: bool = False) -> dict[str, Any]:
    """The JSON Schema of a type form. A dataclass is a closed object whose
    required properties are its required fields and whose properties carry
    their ``doc`` metadata as ``description``; a TypedDict is an open one.
    ``strict``: the provider's strict form (every property required, the
    optional ones nullable, ``additionalProperties: false`` on every object)."""
    src = _schema(tp)
    return _strictify(src) if strict else src


def _schema(tp: Any) -> dict[str, Any]:
    doc = None
    if get_origin(tp) is Annotated:
        doc = next((m.doc for m in get_args(tp)[1:] if isinstance(m, Rule) and m.doc), None)
    _, tp = optional_of(strip(tp))
    tp = strip(tp)
    origin = get_origin(tp)
    out: dict[str, Any]
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
        out = {"type": kinds.pop() if len(kinds) == 1 else sorted(kinds), "enum": vals}
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


def _dataclass_schema(tp: Any) -> dict[str, Any]:
    import dataclasses

    hints = _hints(tp)
    props: dict[str, Any] = {}
    required: list[str] = []
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
