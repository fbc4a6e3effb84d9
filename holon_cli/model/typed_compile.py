"""Compiling a type form into a checking function (``model/typed.py`` is the
API): one function per type, built once and kept by ``Checker``."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
)

from holon_cli.model.typed_base import (
    _ALL,
    CLOSED,
    CheckError,
    Coerce,
    Deferred,
    Json,
    Problem,
    Rule,
    _doc_of,
    _hints,
    _kind,
    _td_shape,
    is_dataclass_type,
    is_typeddict,
    optional_of,
    strip,
)

_Fn = Callable[[Any], Any]


_CACHE: dict[tuple[Any, str], _Fn] = {}
# how the recursive :data:`Json` alias names itself (``list["Json"]``, a plain
# string: ``list[...]`` keeps it as it is written)
JSON_SELF = "Json"


_KINDS: dict[Any, frozenset[str]] = {}


def kinds_of(tp: Any) -> frozenset[str]:
    """The JSON kinds a type form accepts: ``str``, ``int``, ``float``,
    ``bool``, ``null``, ``list``, ``dict`` (``other``: none of them)."""
    return _kinds(tp, "none")


def _kinds(tp: Any, coerce: Coerce) -> frozenset[str]:
    """The JSON kinds a type form accepts (a union picks its member by them;
    a deferred type takes any kind, and decides when it is imported)."""
    if isinstance(tp, Deferred) and tp._tp is None:
        return _ALL
    if tp == JSON_SELF:
        tp = Json
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
    if tp == JSON_SELF:  # ``list["Json"]`` inside the JSON alias: the alias itself
        return _compile(Json, coerce)
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
        out: dict[object, object] | None = None
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
        kwargs: dict[str, object] = {}
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
