"""The one checker (``model/typed.py``): every type form, the path of a
finding, what is converted and what is not, the JSON schema, and (with
hypothesis) that ``check`` and ``json_schema`` agree on what they accept."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Optional, Required, TypedDict

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon_cli.model.typed import (
    NONEMPTY,
    Checker,
    CheckError,
    Json,
    Rule,
    check,
    closed,
    describe,
    dotted,
    json_kind,
    json_schema,
    rule_of,
    typeddict_keys,
)

# ------------------------------------------------------------ scalars


@pytest.mark.parametrize(
    ("tp", "good", "bad"),
    [
        (str, ["", "x"], [1, None, b"x", ["x"]]),
        (int, [0, -3, 10**30], [True, False, 1.0, "1", None]),
        (float, [0, 1.5, -2, 10**30], [True, "1.5", None, math.nan, math.inf]),
        (bool, [True, False], [0, 1, "true", None]),
        (type(None), [None], [0, "", False]),
        (Any, [None, 1, "x", [1], {"a": 1}], []),
        (object, [None, 1, {"a": 1}], []),
    ],
)
def test_scalars(tp: Any, good: list[Any], bad: list[Any]) -> None:
    for v in good:
        assert check(v, tp) is v
    for v in bad:
        with pytest.raises(CheckError) as ei:
            check(v, tp)
        assert ei.value.problem == "type" and ei.value.path == ()


def test_no_bool_where_an_int_is_asked_and_no_number_conversion_by_default() -> None:
    with pytest.raises(CheckError):
        check(True, int)
    assert check(3, float) == 3 and type(check(3, float)) is int  # the object read
    assert type(check(3, float, coerce="floats")) is float
    with pytest.raises(CheckError):
        check(3.0, int, coerce="floats")
    assert type(check(3.0, int, coerce="numbers")) is int
    with pytest.raises(CheckError):
        check(3.5, int, coerce="numbers")
    with pytest.raises(CheckError):
        check(True, float, coerce="numbers")


def test_literal() -> None:
    tp = Literal["a", "b", 1]
    assert check("a", tp) == "a" and check(1, tp) == 1
    with pytest.raises(CheckError) as ei:
        check("c", tp)
    assert ei.value.problem == "value"  # the right kind, not one of the values
    with pytest.raises(CheckError) as ei:
        check(True, tp)  # True == 1, but a bool is not the literal 1
    assert ei.value.problem == "type"
    with pytest.raises(CheckError) as ei:
        check(["a"], tp)  # unhashable
    assert ei.value.problem == "type"


# --------------------------------------------------------- containers


def test_lists_tuples_dicts_and_paths() -> None:
    assert check([1, 2], list[int]) == [1, 2]
    assert check((1, 2), list[int]) == [1, 2]
    assert check([1, "x"], tuple[int, str]) == (1, "x")
    assert check([1, 2, 3], tuple[int, ...]) == (1, 2, 3)
    with pytest.raises(CheckError) as ei:
        check([1, "x"], tuple[int, int])
    assert ei.value.path == (1,)
    with pytest.raises(CheckError) as ei:
        check([[1], [2, "x"]], list[list[int]])
    assert ei.value.path == (1, 1) and ei.value.where == "[1][1]"
    assert check({"a": 1}, dict[str, int]) == {"a": 1}
    with pytest.raises(CheckError) as ei:
        check({"a": {"b": "x"}}, dict[str, dict[str, int]])
    assert ei.value.where == "a.b"
    with pytest.raises(CheckError) as ei:
        check({1: 1}, dict[str, int])
    assert ei.value.problem == "key" and ei.value.value == 1
    with pytest.raises(CheckError) as ei:
        check({"": 1}, dict[Annotated[str, NONEMPTY], int])
    assert ei.value.problem == "key"


def test_a_record_is_the_object_read_unless_something_was_converted() -> None:
    rec = {"xs": [1, 2], "m": {"a": 1}}
    assert check(rec, dict[str, Any]) is rec
    out = check(rec, dict[str, list[float] | dict[str, float]], coerce="floats")
    assert out == {"xs": [1.0, 2.0], "m": {"a": 1.0}} and out is not rec
    assert rec == {"xs": [1, 2], "m": {"a": 1}}  # never changed in place


# ------------------------------------------------------------- unions


class Admitted(TypedDict):
    op: Literal["admitted"]
    seq: int


class Status(TypedDict):
    op: Literal["status"]
    status: Literal["queued", "done"]


class Other(TypedDict):
    op: NotRequired[str]


def test_optional_and_unions() -> None:
    assert check(None, Optional[int]) is None  # noqa: UP045 - the spelling is the point
    assert check(None, int | None) is None
    assert check("x", int | str) == "x"
    with pytest.raises(CheckError) as ei:
        check([1], int | str)
    assert ei.value.problem == "type" and ei.value.path == ()
    # one member of the value's kind: its finding, when it lies deeper down
    with pytest.raises(CheckError) as ei:
        check({"a": "x"}, dict[str, int] | None)
    assert ei.value.where == "a"
    # ints and floats: the first member that fits
    assert check(2, int | float) == 2


def test_tagged_unions_are_told_apart_by_their_literal_key() -> None:
    tp = Admitted | Status
    assert check({"op": "status", "status": "done"}, tp)
    with pytest.raises(CheckError) as ei:
        check({"op": "status", "status": "gone"}, tp)
    assert ei.value.path == ("status",) and ei.value.problem == "value"
    with pytest.raises(CheckError) as ei:
        check({"op": "admitted", "seq": "1"}, tp)
    assert ei.value.where == "seq"
    with pytest.raises(CheckError) as ei:
        check({"op": "other"}, tp)
    assert ei.value.path == ("op",) and ei.value.problem == "value"
    with pytest.raises(CheckError) as ei:
        check({}, tp)
    assert ei.value.path == ("op",) and ei.value.problem == "missing"
    # a member typing the tag as text takes any other tag, and none
    wide = Admitted | Status | Other
    assert check({"op": "future"}, wide) == {"op": "future"}
    assert check({}, wide) == {}
    with pytest.raises(CheckError) as ei:
        check({"op": "admitted"}, wide)  # a known tag is still its member's
    assert ei.value.path == ("seq",)


# ---------------------------------------------------------- TypedDicts


class Inner(TypedDict):
    n: int


class Outer(TypedDict, total=False):
    name: Required[str]
    inner: Inner
    items: list[Inner]
    note: str | None


class Node(TypedDict):
    value: int
    children: list[Node]


def test_typeddicts_total_required_notrequired_and_paths() -> None:
    ok: dict[str, Any] = {"name": "x", "inner": {"n": 1}, "extra": object()}
    assert check(ok, Outer) is ok  # keys the type does not name are left alone
    assert check({"name": "x"}, Outer) == {"name": "x"}
    with pytest.raises(CheckError) as ei:
        check({}, Outer)
    assert ei.value.problem == "missing" and ei.value.path == ("name",)
    with pytest.raises(CheckError) as ei:
        check({"name": "x", "items": [{"n": 1}, {"n": "2"}]}, Outer)
    assert ei.value.path == ("items", 1, "n") and ei.value.where == "items[1].n"
    assert ei.value.expected is int and ei.value.value == "2"
    # a field of the wrong kind is reported before a missing one
    with pytest.raises(CheckError) as ei:
        check({"inner": {"n": "x"}}, Outer)
    assert ei.value.where == "inner.n"
    with pytest.raises(CheckError) as ei:
        check("x", Outer)
    assert ei.value.problem == "type" and ei.value.path == ()


def test_recursive_types() -> None:
    tree = {"value": 1, "children": [{"value": 2, "children": []}]}
    assert check(tree, Node) is tree
    with pytest.raises(CheckError) as ei:
        check({"value": 1, "children": [{"value": 2, "children": [{"value": "x"}]}]}, Node)
    assert ei.value.where == "children[0].children[0].value"


class WithJson(TypedDict):
    action: str
    content: NotRequired[Json]


def test_the_recursive_json_alias_checks_any_json_value() -> None:
    """``Json`` names itself (``list["Json"]``, a plain string): a field of
    that type takes any JSON value, nested, and refuses what JSON cannot
    hold (an MCP answer's ``content`` is one)."""
    value = {"a": [1, 2.5, None, {"b": [True, "x"]}], "c": {}}
    assert check(value, Json) == value
    assert check({"action": "accept", "content": value}, WithJson)["content"] == value
    for bad, where in (
        ({"a": [1, {"b": object()}]}, "a[1].b"),
        ({"a": {1: 2}}, "a"),
        ({"a": [float("nan")]}, "a[0]"),
    ):
        with pytest.raises(CheckError) as ei:
            check({"action": "accept", "content": bad}, WithJson)
        assert ei.value.where.startswith("content." + where), (bad, ei.value.where)


class Closed(TypedDict, total=False):
    a: int
    b: Required[Annotated[str, Rule(doc="the b")]]


closed(Closed)


def test_closed_typeddicts_refuse_unknown_keys_and_carry_docs() -> None:
    with pytest.raises(CheckError) as ei:
        check({"b": "x", "c": 1, "d": 2}, Closed)
    assert ei.value.problem == "unknown" and ei.value.keys == ("c", "d")
    assert ei.value.path == ("c",)
    with pytest.raises(CheckError) as ei:
        check({"a": 1}, Closed)
    assert ei.value.problem == "missing" and ei.value.doc == "the b"


class Documented(TypedDict, total=False):
    """Keys that document themselves (the config reference reads them)."""

    size: Required[Annotated[int, Rule(min=1, doc="the size", default="1", example=3)]]
    flag: Annotated[bool | None, Rule(doc="a flag", default="false", example=False)]
    bare: NotRequired[int]


def test_a_rule_documents_a_key_without_changing_its_check_or_schema() -> None:
    hints, required = typeddict_keys(Documented)
    assert list(hints) == ["size", "flag", "bare"] and required == {"size"}
    size, flag = rule_of(hints["size"]), rule_of(hints["flag"])
    assert size is not None and (size.doc, size.default, size.example) == ("the size", "1", 3)
    assert flag is not None and flag.example is False  # a falsy example is still one
    assert rule_of(hints["bare"]) is None
    assert "example=False" in repr(flag) and "nonempty" not in repr(flag)
    assert check({"size": 3, "flag": False}, Documented) == {"size": 3, "flag": False}
    with pytest.raises(CheckError) as ei:
        check({"size": 0}, Documented)
    assert ei.value.problem == "bound" and ei.value.path == ("size",)
    schema = json_schema(Documented)
    assert "default" not in str(schema) and "example" not in str(schema)


# ---------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class Point:
    x: int
    y: int = 0
    label: str | None = None
    tags: list[str] = field(default_factory=list)
    size: float = field(default=1.0, metadata={"min_exclusive": 0})
    kind: Literal["a", "b"] = field(default="a", metadata={"required": True, "doc": "the kind"})
    keyword: str | None = field(default=None, metadata={"key": "pass"})


def test_dataclasses_are_closed_and_built() -> None:
    p = check({"x": 1, "kind": "b", "pass": "p"}, Point)
    assert p == Point(x=1, kind="b", keyword="p")
    with pytest.raises(CheckError) as ei:
        check({"x": 1, "kind": "a", "z": 1, "w": 2}, Point)
    assert ei.value.problem == "unknown" and ei.value.keys == ("z", "w")
    with pytest.raises(CheckError) as ei:
        check({"kind": "a"}, Point)
    assert ei.value.problem == "missing" and ei.value.path == ("x",)
    with pytest.raises(CheckError) as ei:
        check({"x": 1}, Point)  # required by its metadata
    assert ei.value.path == ("kind",) and ei.value.doc == "the kind"
    # null: None for an optional field, "not given" for a defaulted one
    assert check({"x": 1, "kind": "a", "label": None, "y": None}, Point) == Point(x=1)
    with pytest.raises(CheckError) as ei:
        check({"x": None, "kind": "a"}, Point)
    assert ei.value.value is None
    with pytest.raises(CheckError) as ei:
        check({"x": 1, "kind": "a", "size": 0}, Point)
    assert ei.value.problem == "bound" and ei.value.limit == ("more_than", 0)
    assert check(Point(x=3), Point) == Point(x=3)  # already one


def test_rules() -> None:
    def even(v: int) -> str | None:
        return None if v % 2 == 0 else "is odd"

    tp = Annotated[int, Rule(min=0, test=even, hint="use an even number")]
    assert check(2, tp) == 2
    with pytest.raises(CheckError) as ei:
        check(-2, tp)
    assert ei.value.problem == "bound" and ei.value.limit == ("min", 0)
    with pytest.raises(CheckError) as ei:
        check(3, tp)
    assert ei.value.problem == "rule" and ei.value.detail == "is odd"
    assert ei.value.hint == "use an even number" and str(ei.value) == "value is odd"
    with pytest.raises(CheckError) as ei:
        check({"k": ""}, dict[str, Annotated[str, NONEMPTY]])
    assert ei.value.detail == "is empty" and ei.value.where == "k"


def test_a_checker_is_compiled_once_and_reports_problems() -> None:
    c = Checker[list[int]](list[int])
    assert c([1]) == [1]
    err = c.problem([1, "x"])
    assert err is not None and err.where == "[1]"
    assert c.problem([1]) is None
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    err = Checker[Any](list[Any] | int).problem(deep)  # Any inside: no recursion at all
    assert err is None
    with pytest.raises(CheckError):
        Checker[Node](Node)({"value": 1, "children": [deep]})


def test_words() -> None:
    assert dotted(("a", 0, "b", 2)) == "a[0].b[2]"
    assert json_kind(True) == "boolean" and json_kind(None) == "null"
    assert json_kind((1,)) == "array" and json_kind({}) == "object"
    assert describe("30") == "'30' (a string)" and describe(None) == "nothing (null)"
    assert str(CheckError("type", int, "x")) == "value must be int, got string"


def test_unsupported_types_are_a_bug_not_a_finding() -> None:
    with pytest.raises(TypeError):
        check(1, complex)


# ----------------------------------------------------------- schemas


@dataclass
class Args:
    path: str = field(metadata={"doc": "where"})
    mode: Literal["a", "b"] | None = None
    count: int = 1
    ratio: float | None = None
    flags: list[bool] = field(default_factory=list)
    extra: dict[str, Any] | None = None
    sub: Inner | None = None


def test_json_schema_of_a_dataclass_relaxed_and_strict() -> None:
    s = json_schema(Args)
    assert s["required"] == ["path"] and s["additionalProperties"] is False
    assert s["properties"]["path"] == {"type": "string", "description": "where"}
    assert s["properties"]["mode"] == {"type": "string", "enum": ["a", "b"]}
    assert s["properties"]["flags"] == {"type": "array", "items": {"type": "boolean"}}
    assert s["properties"]["extra"] == {"type": "object"}
    strict = json_schema(Args, strict=True)
    assert strict["required"] == list(strict["properties"])
    assert strict["properties"]["mode"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert strict["properties"]["count"] == {"type": ["integer", "null"]}
    assert strict["properties"]["sub"]["additionalProperties"] is False


# ---------------------------------------------- check and schema agree

# the type forms a tool argument uses, drawn at random
LEAVES: list[Any] = [str, int, float, bool, Literal["a", "b"], Any]


def _types() -> st.SearchStrategy[Any]:
    leaf = st.sampled_from(LEAVES)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            inner.map(lambda t: list[t]),  # type: ignore[valid-type]
            inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
            inner.map(lambda t: t | None),
        ),
        max_leaves=4,
    )


JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 5),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(["a", "b", "c"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b"]), inner)
    ),
    max_leaves=6,
)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of ``X | None``: ``json_schema`` leaves ``null`` to the
    strict form's optional properties, so the oracle adds it here."""
    return {"anyOf": [schema, {"type": "null"}]}


def _oracle(tp: Any) -> dict[str, Any]:
    """The JSON schema that says exactly what ``check`` accepts for ``tp``."""
    from typing import Union, get_args, get_origin

    origin = get_origin(tp)
    if origin is Union or type(tp).__name__ == "UnionType":
        rest = [a for a in get_args(tp) if a is not type(None)]
        inner = _oracle(rest[0] if len(rest) == 1 else Union[tuple(rest)])  # noqa: UP007
        return _nullable(inner)
    if origin is list:
        return {"type": "array", "items": _oracle(get_args(tp)[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": _oracle(get_args(tp)[1])}
    return json_schema(tp)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(tp=_types(), value=JSON)
def test_check_and_json_schema_agree(tp: Any, value: Any) -> None:
    """For the forms a tool uses, a value ``check`` accepts is valid under
    the type's JSON schema and the other way round (floats: JSON Schema's
    ``integer`` also takes 1.0, Python's ``int`` does not; bools are no
    integers in either)."""
    schema = _oracle(tp)
    by_schema = jsonschema.Draft202012Validator(schema).is_valid(value)
    try:
        check(value, tp)
        by_check = True
    except CheckError:
        by_check = False
    if by_schema and not by_check:
        assert _has_integral_float(value), (tp, value, schema)
    else:
        assert by_check == by_schema, (tp, value, schema)


def _has_integral_float(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, list):
        return any(_has_integral_float(v) for v in value)
    if isinstance(value, dict):
        return any(_has_integral_float(v) for v in value.values())
    return False


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=st.dictionaries(st.sampled_from(list(Args.__dataclass_fields__) + ["zz"]), JSON))
def test_tool_arguments_valid_by_the_strict_schema_are_accepted(value: dict[str, Any]) -> None:
    """What the model is told (the strict schema) is what the arguments take:
    a value valid under it is checked into the dataclass (integral floats
    aside, which ``coerce="numbers"`` takes for an int anyway)."""
    strict = json_schema(Args, strict=True)
    if jsonschema.Draft202012Validator(strict).is_valid(value):
        built = check(value, Args, coerce="numbers")
        assert dataclasses.is_dataclass(built)
        relaxed = {k: v for k, v in value.items() if v is not None}
        assert jsonschema.Draft202012Validator(json_schema(Args)).is_valid(relaxed)
