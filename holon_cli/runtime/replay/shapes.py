"""A turn record's document (``ledger/turn_records.jsonl``, decoded): what
:mod:`.capture` writes and :mod:`.records` checks it into when it reads one
(``decode``), for replay, fork and export.

Packed values (``entry``, ``agent``, a step's ``doc``, the settlement) stay
``object``: :func:`~holon_cli.runtime.replay.docs.unpack` gives them back
with the record's ``blobs``.
"""

from __future__ import annotations

from typing import NotRequired, Required, TypedDict

from holon_cli.model.budget import BudgetHit


class HistoryPosition(TypedDict):
    """Where the prompt history stood (``runtime/memory/history.py``)."""

    size: int
    epoch_line: str  # a digest of the epoch's first line


class RecordedFailure(TypedDict, total=False):
    """A provider failure as captured (``fail`` steps)."""

    kind: str
    message: str
    status: int | None
    retry_after_s: float | None
    model_ref: str | None
    usage: dict[str, int] | None
    attempts: int


class RecordStep(TypedDict, total=False):
    """One capture after the start: ``req``, ``resp``, ``fail``, ``tool`` or
    ``interject`` (``k``), with what each kind carries."""

    k: Required[str]
    n: int
    round: int
    at: str
    doc: object  # packed: a request, a response or a tool result document
    ledgers: dict[str, int]  # ledgers that grew since the last capture
    agent: object  # packed: the agent record, when it was rewritten
    plans: dict[str, str]  # work item id -> blob key of its plan.md
    model_ref: str
    max_output_tokens: int
    budget: BudgetHit
    failure: RecordedFailure
    call_id: str
    name: str
    entries: object  # packed: interjected queue entries
    _applied: bool  # replay's mark: this request's state was put back


class RecordStart(TypedDict):
    """Where the turn started (the ``start`` capture)."""

    at: str
    home: str
    agent_home: str
    entry: object  # packed: the queue entry
    agent: object  # packed: the agent record
    ledgers: NotRequired[dict[str, int]]
    transcript: NotRequired[dict[str, int]]  # segment, size
    plans: NotRequired[dict[str, str]]
    prompt_history: NotRequired[HistoryPosition]


class RecordEnd(TypedDict, total=False):
    at: str
    settlement: object  # packed: the turn's settlement
    counted: dict[str, int]
    usage: dict[str, int]
    usage_reported: bool
    ledgers: dict[str, int]
    transcript: dict[str, int]


class TurnRecordDoc(TypedDict):
    """A turn's record (its ``base``'s blobs merged in)."""

    v: int
    turn_id: str
    agent_id: NotRequired[str]
    message_id: NotRequired[str]
    holon: NotRequired[str]
    start: RecordStart
    steps: list[RecordStep]
    end: NotRequired[RecordEnd]
    blobs: dict[str, object]
