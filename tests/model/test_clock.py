"""clock.iso formats without datetime and must agree with it to the millisecond."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from holon_cli import clock


def _datetime_iso(t: float) -> str:
    dt = datetime.fromtimestamp(t, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


@given(st.floats(min_value=-2e9, max_value=4e9, allow_nan=False, allow_infinity=False))
def test_iso_agrees_with_datetime(t: float) -> None:
    assert clock.iso(t) == _datetime_iso(t)


def test_iso_at_the_rounding_edges() -> None:
    for t in (0.0, 0.9999995, 1.0000005, 1764000000.9999996, -0.0000004, -1.25, 59.9995):
        assert clock.iso(t) == _datetime_iso(t), t
    assert clock.iso(0.0) == "1970-01-01T00:00:00.000Z"
    assert clock.parse_iso(clock.iso(1764000000.123)) == 1764000000.123


def _datetime_parse(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@given(st.floats(min_value=-2e9, max_value=4e9, allow_nan=False, allow_infinity=False))
def test_parse_iso_of_our_format_equals_datetimes(t: float) -> None:
    text = clock.iso(t)
    assert clock.parse_iso(text) == _datetime_parse(text)


def test_parse_iso_edges_and_other_forms() -> None:
    for text in (
        "2024-02-29T23:59:59.999Z",  # leap day
        "2000-02-29T00:00:00.000Z",
        "1969-12-31T23:59:59.001Z",  # before the epoch
        "0001-01-01T00:00:00.000Z",
        "9999-12-31T23:59:59.999Z",
        "2026-11-23T10:00:00+02:00",  # offsets and other forms: datetime's job
        "2026-11-23T10:00:00.123456Z",
        "2026-11-23",
    ):
        assert clock.parse_iso(text) == _datetime_parse(text), text
    for bad in (
        "2023-02-29T00:00:00.000Z",
        "2026-13-01T00:00:00.000Z",
        "2026-11-23T24:00:00.000Z",
        "2026-+1-01T00:00:00.000Z",  # int() would take a sign or a space
        "2026-11- 1T00:00:00.000Z",
        "2026-11-01T00:00:00.-01Z",
        "２０２６-11-01T00:00:00.000Z",  # non-ASCII digits
        "0000-01-01T00:00:00.000Z",  # no year 0
        "2026-11-01T00:00:60.000Z",
    ):
        try:
            expected: object = _datetime_parse(bad)
        except ValueError:
            expected = ValueError
        try:
            got: object = clock.parse_iso(bad)
        except ValueError:
            got = ValueError
        assert got == expected, bad
