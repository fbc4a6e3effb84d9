"""Every turn's record, as the turn runs (the default
:class:`~holon_cli.runtime.turn.observe.TurnObserver`).

What it keeps (the journal's ``capture`` records, then one compressed line
of ``ledger/turn_records.jsonl`` at settle):

- ``start``: the queue entry (the envelope), the agent record as the turn
  started it, the size of each ledger of the agent, where the transcript
  stood (its segment and size), where the prompt history stood (its size
  and epoch), the current work item's ``plan.md``, the home's and the agent
  home's paths;
- ``req`` / ``resp`` / ``fail``: each provider request as a transport-neutral
  document (:func:`~holon_cli.runtime.replay.docs.request_doc`), then its
  answer or its failure (a ``ChainFailure``'s kind, or the budget that
  stopped it);
- ``tool``: each tool result (content, error, warnings, effects) and what
  the call changed in the agent: ledgers that grew, the agent record when
  it was rewritten, the ``plan.md`` of a work item it touched;
- ``interject``: operator messages that joined the turn;
- at settle, the settlement and where the ledgers stood (``holon agent fork
  --at`` starts there).

Long strings and list elements are stored once per turn
(:func:`~holon_cli.runtime.replay.docs.pack`): a round adds what is new.

Cost: captures are plain appends to the journal, made durable by the fsync
batch the round already has; the record itself is one append to
``turn_records``, never fsync'd (``store/agent_store.WRITEBACK``; the
folder's fsync once, when the file is created). A capture that fails (a bug, an
unserialisable value) disables itself for the rest of the turn and the
record says why (``broken``): the turn itself never fails because of it.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, NamedTuple

from holon_cli import clock
from holon_cli.digest import sha256_hex
from holon_cli.runtime.replay import docs
from holon_cli.runtime.replay import records as R

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord
    from holon_cli.model.envelope import QueueEntry
    from holon_cli.model.tool import ToolResult
    from holon_cli.model.turn import TurnSettlement
    from holon_cli.providers.base import ModelResponse, ProviderRequest, ToolCall
    from holon_cli.runtime.replay.shapes import HistoryPosition
    from holon_cli.runtime.turn.journal import Journal
    from holon_cli.store.agent_store import AgentStore

log = logging.getLogger("holon.replay")

# ledgers whose positions are not kept: the record's own, and the ones a
# turn writes itself (replay's turn writes them again)
UNTRACKED = frozenset({R.LEDGER, "events", "transcript"})


def ledger_sizes(store: AgentStore) -> dict[str, int]:
    """``{name: size}`` of the agent's ledgers (one folder scan, no reads)."""
    out: dict[str, int] = {}
    try:
        with os.scandir(store.layout.ledger_dir) as it:
            for e in it:
                if e.name.endswith(".jsonl"):
                    name = e.name[: -len(".jsonl")]
                    if name not in UNTRACKED:
                        out[name] = e.stat().st_size
    except FileNotFoundError:
        pass
    return out


def history_position(store: AgentStore) -> HistoryPosition | None:
    """Where the prompt history stood (runtime/memory/history.py): its size
    and a digest of its epoch line. Within an epoch the file only grows, so a
    replay cuts today's file to that size while the epoch is the same."""
    from holon_cli.runtime.memory.history import history_path

    try:
        with history_path(store).open("rb") as f:
            head = f.readline()
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return None
    return {"size": size, "epoch_line": sha256_hex(head)[:24]}


def transcript_position(store: AgentStore) -> dict[str, int]:
    """Where the transcript stands: the number its open segment will get
    when closed, and its size (a later close keeps both meaningful)."""
    from holon_cli.store.ledger_segments import next_segment_number

    led = store.ledger("transcript")
    try:
        seg = next_segment_number(led.segments_dir, led.path.stem)
    except FileNotFoundError:
        seg = 1
    return {"segment": seg, "size": led.size()}


def _stat_key(path: Any) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class _Pending(NamedTuple):
    """A request noted as it went out, packed after the call (see
    :meth:`TurnCapture._request`)."""

    rec: dict[str, object]
    request: ProviderRequest
    cap: int | None
    state: tuple[dict[str, int], AgentRecord | None]


class TurnCapture:
    """The live observer: appends captures to the turn journal; writes the
    record at settle."""

    def __init__(
        self, store: AgentStore, journal: Journal, turn_id: str, entry: QueueEntry
    ) -> None:
        self.store = store
        self.journal = journal
        self.turn_id = turn_id
        self.entry = entry
        self.broken: str | None = None
        self.known: set[str] = set()
        self.seq = 0  # requests captured so far
        self.sizes: dict[str, int] = {}
        self.agent_key: tuple[int, int, int] | None = None
        self.plans: dict[str, str] = {}  # work item id -> blob key of its plan.md
        self.current: str | None = None  # the agent's current work item, as last read
        # tool specs and conversation items, converted once (the tool specs once
        # per process: they are the same objects turn after turn)
        self.memo = docs.SHARED
        self.memo.next_generation()
        self.last_request: ProviderRequest | None = None
        self._pending: _Pending | None = None
        blobs = self._blobs()
        for c in journal.captures:  # a resumed turn: what the journal holds
            self.known.update((c.get("blobs") or {}).keys())
            if c.get("k") == "req":
                self.seq = max(self.seq, int(c.get("n") or 0))
            self.sizes.update(c.get("ledgers") or {})
            self.plans.update(c.get("plans") or {})
            if c.get("agent") is not None:
                self.current = docs.unpack(c["agent"], blobs)["state"].get("current_work_item_id")

    # ---------------------------------------------------------- helpers

    def _blobs(self) -> docs.Blobs:
        out: docs.Blobs = {}
        for c in self.journal.captures:
            out.update(c.get("blobs") or {})
        return out

    def _add(self, rec: dict[str, object], blobs: docs.Blobs | None = None) -> None:
        if blobs:
            new = {k: v for k, v in blobs.items() if k not in self.known}
            if new:
                rec["blobs"] = new
                self.known.update(new)
        self.journal.add_capture(rec)

    def _guard(self, what: str, fn: Any, *args: Any) -> None:
        if self.broken is not None:
            return
        try:
            if fn != self._request:
                self._flush()  # a noted request is packed before what follows it
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - the turn must not fail for its record
            self.broken = f"capturing {what} failed: {type(exc).__name__}: {exc}"
            log.warning("%s: turn %s: %s", self.store.agent_id, self.turn_id, self.broken)

    def _plan(self, wid: str | None, blobs: docs.Blobs, out: dict[str, str]) -> None:
        """The plan.md of ``wid`` when it changed since last kept."""
        if not wid:
            return
        try:
            text = (self.store.layout.work_items_dir / wid / "plan.md").read_text(
                encoding="utf-8", errors="surrogateescape"
            )
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, ValueError):
            return
        ref = docs.pack([text], blobs)[0]
        key = ref[docs.BLOB] if isinstance(ref, dict) else None
        if key is None:  # a short plan: keep it as a blob anyway
            key = "p" + sha256_hex(text.encode("utf-8", "surrogateescape"))[:19]
            blobs[key] = text
        if self.plans.get(wid) != key:
            self.plans[wid] = key
            out[wid] = key

    def _changed_sizes(self) -> dict[str, int]:
        now = ledger_sizes(self.store)
        out = {k: v for k, v in now.items() if self.sizes.get(k) != v}
        self.sizes.update(out)
        return out

    # ------------------------------------------------------- the hooks

    def started(self, record: AgentRecord) -> None:
        self._guard("the turn start", self._started, record)

    def _started(self, record: AgentRecord) -> None:
        if any(c.get("k") == "start" for c in self.journal.captures):
            return  # a resumed turn: the first process's start stands
        blobs: docs.Blobs = {}
        plans: dict[str, str] = {}
        self.current = record["state"].get("current_work_item_id")
        self._plan(self.current, blobs, plans)
        self.sizes = ledger_sizes(self.store)
        self.agent_key = _stat_key(self.store.layout.agent_file)
        rec = {
            "k": "start",
            "at": clock.now_iso(),
            "home": str(self.store.layout.home.parent.parent),
            "agent_home": str(self.store.layout.home),
            "entry": docs.pack(docs.plain(self.entry), blobs),
            "agent": docs.pack(docs.plain(record), blobs),
            "ledgers": dict(self.sizes),
            "transcript": transcript_position(self.store),
            "plans": plans,
        }
        hist = history_position(self.store)
        if hist is not None:
            rec["prompt_history"] = hist
        self._add(rec, blobs)

    def request(self, round_no: int, request: ProviderRequest) -> None:
        self._guard("a request", self._request, round_no, request)

    def _request(self, round_no: int, request: ProviderRequest) -> None:
        """Note the request as it is about to go out; it is packed into its
        capture once the call has ended (:meth:`_flush`, first thing in every
        later hook), off the path between a message and its provider request
        (packing the history is the costliest step there). What it holds is
        read now: the cap the budget gate will set during the call, what
        building the prompt wrote (ledgers, a rewritten agent record)."""
        self.seq += 1
        self.last_request = request
        self._pending = _Pending(
            {"k": "req", "n": self.seq, "round": round_no, "at": clock.now_iso()},
            request,
            request.max_output_tokens,
            self._state_now(),
        )

    def _flush(self) -> None:
        """The noted request's capture, packed (see :meth:`_request`)."""
        p, self._pending = self._pending, None
        if p is None:
            return
        blobs: docs.Blobs = {}
        doc = docs.packed_request(p.request, self.memo, blobs)
        doc["max_output_tokens"] = p.cap  # as built, before the gate
        p.rec["doc"] = doc
        self._put_state(p.rec, p.state, blobs)
        self._add(p.rec, blobs)

    def _state_now(self) -> tuple[dict[str, int], AgentRecord | None]:
        """Ledgers that grew and the agent record, when rewritten, since the
        last capture."""
        grown = self._changed_sizes()
        key = _stat_key(self.store.layout.agent_file)
        if key == self.agent_key:
            return grown, None
        self.agent_key = key
        agent = self.store.read_record()
        self.current = agent["state"].get("current_work_item_id")
        return grown, agent

    def _put_state(
        self,
        rec: dict[str, object],
        state: tuple[dict[str, int], AgentRecord | None],
        blobs: docs.Blobs,
    ) -> None:
        grown, agent = state
        if grown:
            rec["ledgers"] = grown
        if agent is not None:
            rec["agent"] = docs.pack(docs.plain(agent), blobs)

    def _moved_state(self, rec: dict[str, object], blobs: docs.Blobs) -> None:
        self._put_state(rec, self._state_now(), blobs)

    def answered(self, response: ModelResponse, model_ref: str) -> None:
        self._guard("an answer", self._answered, response, model_ref)

    def _answered(self, response: ModelResponse, model_ref: str) -> None:
        blobs: docs.Blobs = {}
        doc = docs.pack(docs.redact(docs.response_doc(response)), blobs)
        rec = {"k": "resp", "n": self.seq, "model_ref": model_ref, "doc": doc}
        self._add(self._sent(rec), blobs)

    def _sent(self, rec: dict[str, object]) -> dict[str, object]:
        """The output cap the budget gate set on the request as it went out
        (the request is captured as built, before the gate)."""
        cap = getattr(self.last_request, "max_output_tokens", None)
        if cap is not None:
            rec["max_output_tokens"] = cap
        return rec

    def failed(self, error: BaseException) -> None:
        self._guard("a failure", self._failed, error)

    def _failed(self, error: BaseException) -> None:
        hit = getattr(error, "hit", None)
        if hit is not None:  # a budget refused the request
            self._add({"k": "fail", "n": self.seq, "budget": docs.plain(hit)})
            return
        f = getattr(error, "failure", None)
        usage = getattr(error, "usage", None)
        failure = {
            "kind": getattr(f, "kind", "provider_error"),
            "message": docs.redact(str(getattr(f, "message", error))),
            "status": getattr(f, "status", None),
            "retry_after_s": getattr(f, "retry_after_s", None),
            "model_ref": getattr(f, "model_ref", None),
            "usage": usage.to_dict() if usage is not None else None,
            "attempts": len((getattr(error, "timeline", None) or {}).get("attempts") or []),
        }
        self._add(self._sent({"k": "fail", "n": self.seq, "failure": failure}))

    def tool(self, call: ToolCall, result: ToolResult) -> None:
        self._guard("a tool result", self._tool, call, result)

    def _tool(self, call: ToolCall, result: ToolResult) -> None:
        blobs: docs.Blobs = {}
        rec: dict[str, object] = {
            "k": "tool",
            "round": self.journal.rounds,
            "call_id": call.id,
            "name": call.name,
            "doc": docs.pack(docs.tool_doc(result), blobs),
        }
        self._moved_state(rec, blobs)
        # the plans a later prompt may preview: any tool can edit a plan.md
        fx = result.effects
        plans: dict[str, str] = {}
        for wid in dict.fromkeys((fx.work_item_id, fx.current_work_item_id, self.current)):
            self._plan(wid, blobs, plans)
        if plans:
            rec["plans"] = plans
        self._add(rec, blobs)

    def interjected(self, entries: list[QueueEntry]) -> None:
        self._guard("interjected messages", self._interjected, entries)

    def _interjected(self, entries: list[QueueEntry]) -> None:
        blobs: docs.Blobs = {}
        packed = docs.pack(docs.plain(entries), blobs)
        self._add({"k": "interject", "round": self.journal.rounds, "entries": packed}, blobs)

    # ------------------------------------------------------------ settle

    def settled(self, settlement: TurnSettlement) -> None:
        """The record joins the settle's fsync batch (once per turn: a
        settle replayed after a crash finds it written)."""
        mid = self.journal.message_id
        self._guard("a request", self._flush)  # one that got no answer (an abort)
        try:
            if R.last_turn_id(self.store) == self.turn_id:
                return
            doc = self._doc(settlement)
        except Exception as exc:  # noqa: BLE001 - never fail the settle for the record
            self.broken = self.broken or f"building the record failed: {type(exc).__name__}: {exc}"
            doc = None
        try:
            if doc is None:
                R.append_broken(self.store, self.turn_id, mid, self.broken or "no record")
            else:
                R.append(self.store, self.turn_id, mid, doc)
        except Exception as exc:  # noqa: BLE001 - a full disk: the turn still settles
            aid = self.store.agent_id
            log.warning("%s: turn %s: no record written: %s", aid, self.turn_id, exc)

    def _doc(self, settlement: TurnSettlement) -> dict[str, object] | None:
        if self.broken is not None:
            return None
        caps = self.journal.captures
        start = next((c for c in caps if c.get("k") == "start"), None)
        if start is None:
            self.broken = "the turn started before turn records were kept"
            return None
        blobs: docs.Blobs = {}
        for c in caps:
            blobs.update(c.get("blobs") or {})
        steps = [
            {k: v for k, v in c.items() if k not in ("op", "blobs", "v")}
            for c in caps
            if c.get("k") != "start"
        ]
        j = self.journal
        doc = {
            "v": R.RECORD_VERSION,
            "turn_id": self.turn_id,
            "agent_id": self.store.agent_id,
            "message_id": j.message_id,
            "holon": _version(),
            "start": {k: v for k, v in start.items() if k not in ("op", "blobs", "v", "k")},
            "steps": steps,
            "end": {
                "at": clock.now_iso(),
                "settlement": docs.pack(docs.plain(settlement), blobs),
                "counted": dict(j.counted),
                "usage": dict(j.usage),
                "usage_reported": j.usage_reported,
                "ledgers": ledger_sizes(self.store),
                "transcript": transcript_position(self.store),
            },
            "blobs": blobs,
        }
        return doc


def _version() -> str:
    from holon_cli import __version__

    return __version__
