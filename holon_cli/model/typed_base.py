"""The record checker's vocabulary (``model/typed.py`` is the API): the JSON
type, ``Rule`` (bounds and documentation a type carries in ``Annotated``),
``CheckError`` with its field path, naming a type form in words, and
resolving a type's annotations (``Deferred`` names)."""

from __future__ import annotations

import builtins
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    TypeVar,
    Union,
    get_args,
    get_origin,
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


_HINTS: dict[object, dict[str, object]] = {}


def _hints(tp: Any) -> dict[str, object]:
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


def _annotations(tp: Any) -> dict[str, object]:
    if is_typeddict(tp):
        return dict(tp.__annotations__)  # the bases' keys merged in, in order
    out: dict[str, object] = {}
    for base in reversed(tp.__mro__):
        out.update(base.__dict__.get("__annotations__", {}))
    return out


def _evaluate(ann: object, module: str) -> object:
    if isinstance(ann, typing.ForwardRef):
        module = ann.__forward_module__ or module
        code = ann.__forward_code__
    elif isinstance(ann, str):
        code = compile(ann, "<annotation>", "eval")
    else:
        return ann
    mod = sys.modules[module]
    return eval(code, vars(mod), _Names(mod))  # noqa: S307 - the module's own annotation


class _Names(dict[str, object]):
    """Names an annotation uses that its module has not bound: a name its
    module ``__getattr__`` supplies (imported only for type checking) stands
    as a :class:`Deferred` until a value of that type is checked."""

    def __init__(self, module: Any) -> None:
        super().__init__()
        self.module = module

    def __missing__(self, name: str) -> object:
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


def _td_shape(tp: Any) -> tuple[dict[str, object], frozenset[str]]:
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


def typeddict_keys(tp: Any) -> tuple[dict[str, object], frozenset[str]]:
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
