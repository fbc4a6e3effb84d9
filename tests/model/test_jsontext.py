"""The one JSON door (issue 31, items 15 and 24): standard JSON only, and
every way Python's parser fails is a clear UsageError."""

from __future__ import annotations

import pytest

from holon_cli.errors import UsageError
from holon_cli.model.jsontext import MAX_DEPTH, parse_json


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("NaN", "NaN is not a JSON value"),
        ('{"a": Infinity}', "Infinity is not a JSON value"),
        ("[-Infinity]", "-Infinity is not a JSON value"),
        ('{"a": "\\ud800"}', "lone surrogate"),
        ('{"\\udfff": 1}', "lone surrogate"),
        ("[" * 50_000, "nested deeper"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested deeper"),
        ("1" * 5000, "Exceeds the limit"),
        ("{nope", "line 1 column 2"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_refused(text: str | bytes, why: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_json(text)
    assert why in info.value.message and "not valid JSON" in info.value.message
    assert info.value.hint


def test_standard_json_passes() -> None:
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(deep)
    assert parse_json('{"a": [1, 2.5, "\\ud83d\\ude00", null, true]}') == {
        "a": [1, 2.5, "\U0001f600", None, True]
    }
    assert parse_json("1" * 4000) == int("1" * 4000)
