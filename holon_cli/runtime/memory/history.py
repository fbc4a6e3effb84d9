"""The agent's conversation across turns (``state/prompt_history.jsonl``):
what each request carries between the stable context and the new turn, in
append order, so the next turn's request starts with the previous turn's
bytes (issue 44: a prompt whose prefix survives the next turn).

A request is laid out stable-first (``model/provider.PromptFrame``): tools,
instructions, the frame's stable context blocks (trigger, this window's
working memory and earlier conversation), then this history, then the turn's
own context blocks, the message and the turn's rounds. A settled turn is
appended here as its last request carried it (its context item, the message
with any in-turn compaction summary, rounds and results) plus its final
answer; the next turn's request therefore *extends* the previous one, and
what changes every turn (turn mode, memory delta, work queue) comes after
everything that does not.

File (JSON lines, ``v: 1``)::

    {"op": "epoch", "epoch", "memory", "summary"}  first line: the window's
        working memory (a ``WorkingMemoryState``, or null) and the earlier
        conversation it summarizes (rendered, fenced, or null)
    {"op": "turn", "message_id", "turn_id", "compactions", "items": [...]}
        one settled turn (``compactions``: the turn's own compaction epochs)

Invariants:
- append-only within an epoch: a turn is appended once (by message id: a
  replayed settle adds nothing) and never rewritten, so the history's bytes
  only grow until the next epoch;
- an epoch changes the prefix once (:meth:`PromptHistory.roll`, the
  compaction across turns: the newest rounds that fit are kept, the rest is
  summarized from the transcript), written as a new file (atomic rename);
  the file as the turn found it is kept as ``prompt_history.prev.jsonl``
  by the turn's first roll (one epoch back: what `holon replay` needs to
  rebuild a turn's requests);
- every tool call in a kept turn has its result (a call that never got one,
  an aborted turn's, gets an ``interrupted`` result), so any provider
  accepts the history;
- disposable: the transcript ledger is the truth. Appends are plain writes
  (no fsync: a crash loses at most the newest turn, never half of one, as a
  torn last line is ignored); a damaged file is set aside
  (``prompt_history.jsonl.damaged``) and a new epoch starts from the
  transcript; ``holon agent rm`` removes it with the agent home.

Reading: a process keeps the turns it last parsed of each file (a few
files, :data:`READ_CACHE_FILES`, from at most :data:`READ_CACHE_MAX_BYTES`
all together), with the length and a digest of the bytes they came from.
The next read (``serve``: every turn of the agent) parses only the lines
after them when the file still begins with exactly those bytes, and the
whole file otherwise (a new epoch, a file replaced or edited). The turns
it hands out are the same objects each time (never changed in place: a turn
is appended or replaced whole), so the replay capture's memo
(``replay/docs.Memo``) packs the history once, not every turn.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, TypedDict

from holon_cli.runtime.memory import compaction as cp

if TYPE_CHECKING:
    from collections.abc import Mapping

    from holon_cli.model.memory import WorkingMemoryState
    from holon_cli.model.provider import ConversationItem
    from holon_cli.store.agent_store import AgentStore

HISTORY_VERSION = 1
# the history may take this share of what the instructions and tools leave of
# the context budget; a roll keeps the newest turns within KEEP of it. KEEP
# is half of SHARE, so a budget of twice the room never keeps less history
# than a smaller one (the projection benchmark's monotonic invariant).
HISTORY_SHARE = 0.5
HISTORY_KEEP = 0.25
# transcript entries a roll looks back over for the earlier conversation
SUMMARY_SCAN = 400
# history files whose parsed turns a process keeps (see the module docstring),
# and the bytes they came from, all files together (a window is bounded by
# the context budget: ~0.4 MB for 100,000 tokens)
READ_CACHE_FILES = 16
READ_CACHE_MAX_BYTES = 8 << 20

_NO_RESULT = (
    "this call got no result: the turn ended while it ran (it may or may not have taken effect)"
)


def history_path(store: AgentStore) -> Path:
    return store.layout.state_dir / "prompt_history.jsonl"


def previous_path(path: Path) -> Path:
    """The epoch before the current one (kept for `holon replay`)."""
    return path.with_name("prompt_history.prev.jsonl")


class EpochLine(TypedDict):
    """The history file's first line: the window's epoch."""

    v: int
    op: Literal["epoch"]
    epoch: int
    memory: WorkingMemoryState | None
    summary: str | None
    through: str | None


class TurnLine(TypedDict):
    """One turn of the window: its conversation items as the journal stores them."""

    v: int
    op: Literal["turn"]
    message_id: str
    turn_id: str
    compactions: int
    items: list[Mapping[str, object]]


class HistoryTurn(NamedTuple):
    message_id: str
    turn_id: str
    compactions: int
    items: list[ConversationItem]
    tokens: int


def answered(items: list[ConversationItem]) -> list[ConversationItem]:
    """``items`` with an ``interrupted`` result after any tool call that has
    none (a provider refuses a call without its result)."""
    have = {it.call_id for it in items if it.role == "tool" and it.call_id}
    if all(c.id in have for it in items for c in it.tool_calls):
        return items
    out: list[ConversationItem] = []
    pending: list[ConversationItem] = []
    for it in items:
        if it.role != "tool" and pending:
            out.extend(pending)
            pending = []
        out.append(it)
        if it.role == "assistant":
            pending = [_no_result(c.id, c.name) for c in it.tool_calls if c.id not in have]
    out.extend(pending)
    return out


def _no_result(call_id: str, name: str) -> ConversationItem:
    # the tool values load only here: a turn whose calls all got results never needs them
    from holon_cli.model.provider import ConversationItem
    from holon_cli.model.tool import render_error

    text = render_error(
        name,
        {
            "kind": "interrupted",
            "message": _NO_RESULT,
            "recovery_hint": "check its effects before running it again",
            "retryable": True,
            "details": None,
        },
    )
    return ConversationItem("tool", text, call_id=call_id, name=name, is_error=True)


class _Known(NamedTuple):
    """What a process parsed of a history file: its first ``length`` bytes
    (their digest) held ``turns``."""

    length: int
    digest: int
    turns: tuple[HistoryTurn, ...]


def _digest(raw: bytes, length: int) -> int:
    """The first ``length`` bytes' hash: this process's keyed SipHash (the
    cache lives no longer than the process), ~0.1 ms for 500 KB, and no
    OpenSSL loaded on the turn's path."""
    return hash(memoryview(raw)[:length])


class _ReadCache:
    """The turns last parsed of a few history files (module docstring)."""

    def __init__(self, files: int = READ_CACHE_FILES) -> None:
        self.files = files
        self._known: OrderedDict[str, _Known] = OrderedDict()
        self._lock = threading.Lock()  # serve reads agents' histories on several threads

    def turns_before(self, path: Path, raw: bytes) -> _Known | None:
        """The turns known of ``path`` when ``raw`` still begins with the
        bytes they were parsed from."""
        with self._lock:
            known = self._known.get(str(path))
        if known is None or len(raw) < known.length:
            return None
        if _digest(raw, known.length) != known.digest:
            return None
        return known

    def keep(
        self,
        path: Path,
        raw: bytes,
        length: int,
        turns: list[HistoryTurn],
        known: _Known | None = None,
    ) -> None:
        """``turns`` parsed from ``raw[:length]``; ``known``: what the read
        started from (its digest is reused when nothing was appended since)."""
        key = str(path)
        with self._lock:
            self._known.pop(key, None)
            if not 0 < length <= READ_CACHE_MAX_BYTES or self.files <= 0:
                return  # nothing whole to know (no newline yet), or too large
            if known is not None and known.length == length:
                digest = known.digest  # nothing appended since: the same bytes
            else:
                digest = _digest(raw, length)
            self._known[key] = _Known(length, digest, tuple(turns))
            total = sum(k.length for k in self._known.values())
            while len(self._known) > self.files or total > READ_CACHE_MAX_BYTES:
                total -= self._known.popitem(last=False)[1].length

    def clear(self) -> None:
        with self._lock:
            self._known.clear()


_READ = _ReadCache()


class PromptHistory:
    """One agent's conversation window: its epoch and the turns since."""

    def __init__(
        self,
        path: Path,
        epoch: int = 0,
        memory: WorkingMemoryState | None = None,
        summary: str | None = None,
        turns: list[HistoryTurn] | None = None,
        *,
        exists: bool = False,
    ) -> None:
        self.path = path
        self.epoch = epoch
        self.memory = memory
        self.summary = summary
        self.turns: list[HistoryTurn] = [] if turns is None else turns
        self.exists = exists  # the file is there (a turn writes epoch 0 when not)
        self.writable = True
        # the newest message appended before this epoch began (a roll may drop
        # it: a replayed settle must not append it again)
        self.through: str | None = None
        self.kept_previous = False  # this reading's first roll kept the file as .prev

    @classmethod
    def none(cls) -> PromptHistory:
        """No history (nothing read yet): empty, and never written."""
        h = cls(Path(os.devnull))
        h.writable = False
        return h

    # ------------------------------------------------------------ reading

    @classmethod
    def load(cls, store: AgentStore, *, repair: bool = True) -> PromptHistory:
        """The history on disk; an empty, unsaved one when there is none. A
        damaged file reads as none and, with ``repair`` (a turn), is set
        aside (``.damaged``) for the new epoch the turn then starts."""
        path = history_path(store)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path)
        try:
            return cls._parse(path, raw, _READ.turns_before(path, raw))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            if repair:
                try:
                    os.replace(path, path.with_name(path.name + ".damaged"))
                except OSError:
                    pass
            return cls(path)

    @classmethod
    def _parse(cls, path: Path, raw: bytes, known: _Known | None = None) -> PromptHistory:
        """The history in ``raw``; ``known``: the turns already parsed from
        its first ``known.length`` bytes (only the lines after them are read)."""
        from holon_cli.model.provider import item_from_dict

        end = raw.rfind(b"\n") + 1  # the part after the last newline is torn (or empty)
        first = raw.find(b"\n")
        head = json.loads(raw if first < 0 else raw[:first])
        if head.get("op") != "epoch" or head.get("v") != HISTORY_VERSION:
            raise ValueError("not a prompt history")
        memory, summary, through = head.get("memory"), head.get("summary"), head.get("through")
        if not (memory is None or isinstance(memory, dict)):
            raise ValueError("memory is not an object")
        if not all(v is None or isinstance(v, str) for v in (summary, through)):
            raise ValueError("summary or through is not text")
        h = cls(
            path,
            int(head["epoch"]),
            head.get("memory"),
            head.get("summary"),
            exists=True,
        )
        h.through = head.get("through")
        if known is not None:
            h.turns.extend(known.turns)
        start = known.length if known is not None else (first + 1 if first >= 0 else end)
        for line in raw[start:end].split(b"\n") if end > start else ():
            if not line.strip():
                continue
            rec = json.loads(line)
            if rec.get("op") != "turn" or not isinstance(rec["items"], list):
                raise ValueError("unknown record")
            items = [item_from_dict(d) for d in rec["items"]]
            if not all(isinstance(i.text, str) and isinstance(i.role, str) for i in items):
                raise ValueError("an item is not text")
            h.turns.append(
                HistoryTurn(
                    str(rec["message_id"]),
                    str(rec.get("turn_id") or ""),
                    int(rec.get("compactions") or 0),
                    items,
                    cp.items_tokens(items),
                )
            )
        _READ.keep(path, raw, end, h.turns, known)
        return h

    def items(self) -> list[ConversationItem]:
        """The conversation items, oldest first."""
        return [it for t in self.turns for it in t.items]

    def tokens(self) -> int:
        return sum(t.tokens for t in self.turns)

    @property
    def compression_epoch(self) -> int:
        """Compactions that changed the prefix so far: the epochs, and the
        kept turns' own compactions."""
        return self.epoch + sum(t.compactions for t in self.turns)

    def has(self, message_id: str) -> bool:
        return message_id == self.through or any(t.message_id == message_id for t in self.turns)

    def digest(self) -> str:
        """A short fingerprint of the window (epoch and turns) for diagnostics."""
        last = self.turns[-1].turn_id if self.turns else ""
        return f"{self.epoch}:{len(self.turns)}:{last}"

    # ------------------------------------------------------------ writing

    def _head(self) -> EpochLine:
        return {
            "v": HISTORY_VERSION,
            "op": "epoch",
            "epoch": self.epoch,
            "memory": self.memory,
            "summary": self.summary,
            "through": self.through,
        }

    @staticmethod
    def _turn_record(t: HistoryTurn) -> TurnLine:
        from holon_cli.model.provider import item_to_dict

        return {
            "v": HISTORY_VERSION,
            "op": "turn",
            "message_id": t.message_id,
            "turn_id": t.turn_id,
            "compactions": t.compactions,
            "items": [item_to_dict(i) for i in t.items],
        }

    def _write(self) -> None:
        from holon_cli.store.fsio import atomic_write_bytes, dumps

        if not self.writable:
            return
        lines = [self._head(), *(self._turn_record(t) for t in self.turns)]
        atomic_write_bytes(self.path, "".join(dumps(r) + "\n" for r in lines).encode("utf-8"))
        self.exists = True

    def start(self, memory: WorkingMemoryState | None, summary: str | None) -> None:
        """Save this (empty) window as epoch 0 with what the prompt shows
        before it, so later turns see the same bytes."""
        self.memory, self.summary = memory, summary
        self._write()

    def append(
        self, message_id: str, turn_id: str, items: list[ConversationItem], compactions: int = 0
    ) -> bool:
        """A settled turn joins the window (once per message). False when it
        was there already."""
        from holon_cli.store.fsio import append_bytes, dumps

        if not items or not self.writable or self.has(message_id):
            return False
        kept = answered(items)
        t = HistoryTurn(message_id, turn_id, compactions, kept, cp.items_tokens(kept))
        if not self.exists:
            self.turns.append(t)
            self._write()
            return True
        append_bytes(self.path, (dumps(self._turn_record(t)) + "\n").encode("utf-8"))
        self.turns.append(t)
        return True

    def keep_newest(self, max_tokens: int) -> list[HistoryTurn]:
        """The newest whole rounds within ``max_tokens``, as turns: a turn's
        head (its context and message), each round (an answer with its tool
        results and what joined after them) and its final answer are the
        units; the oldest kept turn may keep only its newest rounds. Newest
        first, as within a turn (the newest round always stays there): a
        larger budget keeps what a smaller one keeps."""
        kept: list[HistoryTurn] = []
        total = 0
        for t in reversed(self.turns):
            units = rounds_of(t.items)
            take: list[list[ConversationItem]] = []
            for u in reversed(units):
                n = cp.items_tokens(u)
                if total + n > max_tokens:
                    break
                take.append(u)
                total += n
            if not take:
                break
            items = [it for u in reversed(take) for it in u]
            kept.append(t._replace(items=items, tokens=cp.items_tokens(items)))
            if len(take) < len(units):
                break
        return list(reversed(kept))

    def roll(
        self,
        *,
        keep_tokens: int,
        memory: WorkingMemoryState | None,
        summary: str | None,
    ) -> int:
        """Start the next epoch: the newest rounds within ``keep_tokens``
        stay (:meth:`keep_newest`), the rest is what ``summary`` (the earlier
        conversation, see :func:`earlier_conversation`) and ``memory`` (the
        working memory now) carry. Returns how many items were dropped."""
        kept = self.keep_newest(keep_tokens)
        dropped = len(self.items()) - sum(len(t.items) for t in kept)
        if self.turns:
            self.through = self.turns[-1].message_id
        # the kept turns' own compactions are part of the new epoch's number
        self.epoch = self.compression_epoch + 1 - sum(t.compactions for t in kept)
        self.turns = kept
        self.memory, self.summary = memory, summary
        if self.writable and self.exists and not self.kept_previous:
            # the window as this turn found it is kept (``.prev``) by its first
            # roll: `holon replay` rebuilds the requests of this turn and of
            # the turns before it in that epoch (a later roll of the same turn
            # does not replace it)
            self.kept_previous = True
            try:
                os.replace(self.path, previous_path(self.path))
            except FileNotFoundError:
                pass
        self._write()
        return dropped


def rounds_of(items: list[ConversationItem]) -> list[list[ConversationItem]]:
    """A turn's items in units: the head (everything before the first answer:
    its context, its message), then one unit per answer with what follows it
    (tool results, updates, interjected messages) up to the next answer."""
    units: list[list[ConversationItem]] = [[]]
    for it in items:
        if it.role == "assistant":
            units.append([])
        units[-1].append(it)
    return [u for u in units if u]


def shown_in(turns: list[HistoryTurn]) -> tuple[set[str], set[str]]:
    """What of the transcript the kept turns show themselves: the ids of the
    messages their items carry (a message rendered with its ``[message id=``
    header) and the turns whose answers they keep. The earlier conversation
    leaves those out and shows the rest (a dropped head's message among it)."""
    messages: set[str] = set()
    answered: set[str] = set()
    for t in turns:
        for it in t.items:
            if it.role == "user" and it.text.startswith("[message id="):
                messages.add(it.text[len("[message id=") :].split(" ", 1)[0])
            elif it.role == "assistant":
                answered.add(t.turn_id)
    return messages, answered


def earlier_conversation(
    store: AgentStore,
    *,
    exclude_messages: set[str],
    exclude_turns: set[str],
    max_chars: int,
) -> str | None:
    """The operator-visible conversation before the window, rendered as the
    recent conversation is (fenced, bounded, oldest first): the transcript's
    newest entries but the messages in ``exclude_messages`` and the answers
    and failures of the turns in ``exclude_turns`` (what the window and the
    current turn show themselves)."""
    from holon_cli.runtime.prompt import render_recent

    entries = [
        e
        for e in store.ledger("transcript").tail_previews(SUMMARY_SCAN)
        if not (
            e.get("message_id") in exclude_messages
            if e.get("kind") == "message"
            else e.get("turn_id") in exclude_turns or e.get("message_id") in exclude_messages
        )
    ]
    return render_recent(entries, None, max_chars=max_chars, title=EARLIER_TITLE)


EARLIER_TITLE = "# Earlier conversation (oldest first; the turns after it follow in full)"
