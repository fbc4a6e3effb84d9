"""The turn's step hook: each provider round and each tool call of a turn,
offered to a recorder as it completes (``serve --engine dbos`` records them
as DBOS steps; issue 30).

:class:`TurnRun <holon_cli.runtime.turn.loop.TurnRun>` calls, in order:

- :meth:`TurnSteps.replayed` for every round and tool result the resumed
  journal already holds (a replayed turn re-walks them first, so a
  recorder's step positions line up with the journal's records);
- :meth:`TurnSteps.round` around a provider round (the call and its journal
  records) and :meth:`TurnSteps.tool` around a tool call (its execution and
  its result's records; a call closed as interrupted on replay is one too).

Invariants:
- ``fn`` is run exactly once, by the hook, whatever the recorder knows: the
  turn journal is the truth (a recorder that finds another record at that
  position reports it; it never skips the work);
- ``fn`` returns after its journal records are written; they are durable
  with the turn's next fsync batch: a round's own records when ``fn``
  returns, a tool call's with the next round's (or the settlement). A
  recorder that writes a step only after that (a tool call's after the
  next round's ``fn`` returned, or after the turn) holds a prefix of the
  journal, never more. (A recorder says so with ``durable_rounds = True``;
  without a recorder, :data:`DIRECT`, a round that calls no tool is made
  durable with the settlement instead: nothing runs before it);
- a round that produced no answer (provider failure, budget stop) returns
  ``None`` and is no step: its replay is decided by the journal alone;
- records are small: indexes, ids, ok flags, usage; never transcripts.

The default :data:`DIRECT` records nothing (``holon turn``, ``tick``, local
``serve``). The runtime never imports a recorder: the caller passes one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict

from holon_cli.digest import sha256_hex

if TYPE_CHECKING:
    from holon_cli.providers.base import ConversationItem

StepKind = Literal["round", "tool"]


class StepRecord(TypedDict, total=False):
    """What a step leaves in a recorder. ``kind``, ``round`` and the keys of
    its kind are derived from the journal alike on a replay (compared);
    ``usage`` is present on live rounds only."""

    kind: StepKind
    round: int
    calls: list[str]  # a round: its tool call ids, in order
    text_sha: str  # a round: SHA-256 (16 hex) of its answer text
    call_id: str  # a tool call
    name: str
    ok: bool
    usage: dict[str, int]


COMPARED = ("kind", "round", "calls", "text_sha", "call_id", "name", "ok")


def round_record(n: int, item: ConversationItem, usage: dict[str, int] | None) -> StepRecord:
    """A round's record from its assistant item (live or from the journal)."""
    rec: StepRecord = {
        "kind": "round",
        "round": n,
        "calls": [c.id for c in item.tool_calls],
        "text_sha": sha256_hex(item.text.encode("utf-8"))[:16],
    }
    if usage is not None:
        rec["usage"] = dict(usage)
    return rec


def tool_record(n: int, item: ConversationItem) -> StepRecord:
    """A tool call's record from its tool item (live or from the journal)."""
    return {
        "kind": "tool",
        "round": n,
        "call_id": item.call_id or "",
        "name": item.name or "",
        "ok": not item.is_error,
    }


def differs(a: StepRecord, b: StepRecord) -> list[str]:
    """The compared keys on which two records of one step disagree."""
    return [k for k in COMPARED if a.get(k) != b.get(k)]


class TurnSteps(Protocol):
    """Where a turn's steps are recorded (see the module docstring)."""

    #: every round durable when its ``fn`` returns (a recorder that trails
    #: the journal needs it); ``False``: only rounds that call tools
    durable_rounds: bool

    def replayed(self, record: StepRecord) -> None:
        """A step the resumed journal already holds."""
        ...

    def round(self, n: int, fn: Callable[[], StepRecord | None]) -> None:
        """Run provider round ``n`` (``fn``: the call and its records)."""
        ...

    def tool(self, call_id: str, fn: Callable[[], StepRecord]) -> None:
        """Run tool call ``call_id`` (``fn``: its execution and its records)."""
        ...


class Direct:
    """No recorder: each ``fn`` just runs."""

    durable_rounds = False

    def replayed(self, record: StepRecord) -> None:
        return None

    def round(self, n: int, fn: Callable[[], StepRecord | None]) -> None:
        fn()

    def tool(self, call_id: str, fn: Callable[[], StepRecord]) -> None:
        fn()


DIRECT: TurnSteps = Direct()
