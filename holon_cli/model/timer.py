"""Timer records and the duration grammar of the contract (pure values, no I/O).

A timer is a control-plane record, never a queued message: creating one is
an audit event; only a due fire admits a ``timer_tick`` message. The public
record (``holon timer add|list --json``) is exactly :class:`TimerRecord`;
the ledger keeps two more runtime-owned fields (:class:`StoredTimer`).
"""

from __future__ import annotations

import math
import re
from typing import Literal, NotRequired, TypedDict

from holon_cli.errors import UsageError

TIMER_VERSION = 1
TimerStatus = Literal["active", "fired", "cancelled"]
TIMER_STATUSES = ("active", "fired", "cancelled")
# why a timer exists: an operator/script timer, or the wake of a timed Sleep
TimerPurpose = Literal["timer", "sleep"]

DURATION_FORMS = "500ms, 90s, 5m, 2h or 1d"
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MIN_EVERY_MS = 1000


class TimerRecord(TypedDict):
    """The contract's timer record (``--json`` data of ``timer add|list``)."""

    id: str
    agent_id: str
    status: TimerStatus
    created_at: str
    next_fire_at: str | None
    every_ms: int | None
    message: str | None
    work_item_id: str | None
    fire_count: int
    last_fired_at: str | None


class StoredTimer(TimerRecord):
    """The ledger form: the public record plus runtime-owned fields."""

    v: int
    purpose: TimerPurpose
    # message id of the newest timer_tick this timer admitted (None: none yet)
    last_message_id: str | None


class TimerLedgerRecord(TypedDict):
    """One line of ``ledger/timers.jsonl``: the timer as it is after ``op``."""

    v: int
    op: str  # created | fired | cancelled | ...
    timer: StoredTimer
    at: NotRequired[str]
    reason: NotRequired[str | None]  # cancelled: why
    # fired: the message it admitted (or the queued one it joined), fires missed
    message_id: NotRequired[str | None]
    coalesced_into: NotRequired[str | None]
    missed_fires: NotRequired[int]


class TimersSnapshot(TypedDict):
    """``state/timers.json``: the fold of the ledger up to ``offset``."""

    v: NotRequired[int]
    offset: int
    timers: list[StoredTimer]


PUBLIC_FIELDS = tuple(TimerRecord.__annotations__)


def public(rec: StoredTimer | TimerRecord) -> TimerRecord:
    return {
        "id": rec["id"],
        "agent_id": rec["agent_id"],
        "status": rec["status"],
        "created_at": rec["created_at"],
        "next_fire_at": rec.get("next_fire_at"),
        "every_ms": rec.get("every_ms"),
        "message": rec.get("message"),
        "work_item_id": rec.get("work_item_id"),
        "fire_count": rec["fire_count"],
        "last_fired_at": rec.get("last_fired_at"),
    }


def parse_duration_ms(text: str, *, flag: str = "DURATION") -> int:
    """``500ms``/``90s``/``5m``/``2h``/``1d`` -> milliseconds (positive).

    Raises :class:`UsageError` (exit 2) naming the accepted forms."""
    m = _DURATION_RE.match(text or "")
    if not m:
        raise UsageError(
            f"{flag}: not a duration: {text!r}",
            hint=f"write a number with a unit: {DURATION_FORMS}",
        )
    ms = math.floor(float(m.group(1)) * _UNIT_MS[m.group(2)])
    if ms <= 0:
        raise UsageError(
            f"{flag}: duration must be positive: {text!r}",
            hint=f"write a number with a unit: {DURATION_FORMS}",
        )
    return ms


def advance(next_fire_ms: int, every_ms: int, now_ms: int) -> tuple[int, int]:
    """For a repeating timer due at ``next_fire_ms`` (<= now): the first
    point of its schedule strictly after ``now_ms`` and how many scheduled
    fires were missed (coalesced into the one being admitted now)."""
    assert every_ms > 0 and next_fire_ms <= now_ms
    k = (now_ms - next_fire_ms) // every_ms + 1
    return next_fire_ms + k * every_ms, int(k - 1)


def default_message(timer_id: str, purpose: str = "timer") -> str:
    if purpose == "sleep":
        return "Runtime wake: the sleep you requested has ended. Continue where you left off."
    return f"Timer {timer_id} fired."
