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
