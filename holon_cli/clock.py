"""The one source of time and ids.

Tests freeze time with :func:`set_clock`. Ids are sortable: a fixed-width
millisecond timestamp followed by a per-process monotonic counter and random
bits, so names sort in creation order within a process and (to the
millisecond) across processes.
"""

from __future__ import annotations

import math
import os
import time
from _thread import allocate_lock
from collections.abc import Callable
from typing import Any

_clock: Callable[[], float] = time.time
_lock = allocate_lock()  # threading.Lock without importing threading
_last_ms = 0
_counter = 0


def set_clock(fn: Callable[[], float] | None) -> None:
    """Replace the wall clock (seconds since the epoch); ``None`` restores it."""
    global _clock
    _clock = fn or time.time


def current() -> Callable[[], float]:
    """The clock in force (to put back after a temporary :func:`set_clock`)."""
    return _clock


def now() -> float:
    return _clock()


def iso(ts: float | None = None) -> str:
    """ISO-8601 UTC with milliseconds and a ``Z`` suffix.

    Rounds like ``datetime.fromtimestamp`` (microseconds half-even, then
    truncated to milliseconds) without importing datetime: every enqueue
    stamps a message, and start-up counts.
    """
    t = now() if ts is None else ts
    frac, whole = math.modf(t)
    sec, us = int(whole), round(frac * 1e6)
    if us >= 1_000_000:
        sec, us = sec + 1, us - 1_000_000
    elif us < 0:
        sec, us = sec - 1, us + 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + f".{us // 1000:03d}Z"


def now_iso() -> str:
    return iso(now())


def parse_iso(text: str) -> float:
    """Inverse of :func:`iso` (accepts any ISO-8601 with offset or ``Z``).

    The form :func:`iso` writes (``YYYY-MM-DDTHH:MM:SS.mmmZ``, on every
    record) is parsed without importing datetime; anything else goes to
    ``datetime.fromisoformat``. Both give the same value (a test checks)."""
    if len(text) == 24 and _our_form().fullmatch(text):
        y, mo, d = int(text[0:4]), int(text[5:7]), int(text[8:10])
        h, mi, sec, ms = int(text[11:13]), int(text[14:16]), int(text[17:19]), int(text[20:23])
        ok = y >= 1 and 1 <= mo <= 12 and 1 <= d <= _days_in_month(y, mo)
        if ok and h < 24 and mi < 60 and sec < 60:
            secs = _days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec
            return (secs * 1_000_000 + ms * 1000) / 1_000_000  # as datetime computes it
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


_OUR_FORM: Any = None


def _our_form() -> Any:
    """The pattern of :func:`iso`'s output (compiled on first use: ``re`` is
    not loaded by the commands that only write timestamps)."""
    global _OUR_FORM
    if _OUR_FORM is None:
        import re

        _OUR_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
    return _OUR_FORM


def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else 28
    return 30 if m in (4, 6, 9, 11) else 31


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


_B32 = "0123456789abcdefghjkmnpqrstvwxyz"


def _b32(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        out.append(_B32[n & 31])
        n >>= 5
    return "".join(reversed(out))


def new_id(prefix: str) -> str:
    """``<prefix>_<10 chars ms><4 chars counter><6 chars random>``, sortable."""
    global _last_ms, _counter
    ms = int(now() * 1000)
    with _lock:
        if ms <= _last_ms:
            ms = _last_ms
            _counter += 1
        else:
            _last_ms = ms
            _counter = 0
        c = _counter
    rnd = int.from_bytes(os.urandom(4), "big")
    return f"{prefix}_{_b32(ms, 10)}{_b32(c, 4)}{_b32(rnd, 6)}"


def parse_duration(text: str) -> float:
    """Parse ``90s``, ``15m``, ``2h``, ``1d``, ``500ms`` or bare seconds into seconds."""
    s = text.strip().lower()
    units = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0), ("w", 604800.0))
    for suffix, mult in units:
        if s.endswith(suffix):
            num = s[: -len(suffix)].strip()
            break
    else:
        num, mult = s, 1.0
    try:
        value = float(num)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30s, 15m, 2h, 1d)") from None
    if value <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    return value * mult
