"""``holon replay TURN_ID``: a recorded turn run again by today's code,
offline, request by request.

The turn runs as a real :class:`~holon_cli.runtime.turn.loop.TurnRun` (so
whatever today's code builds is what is compared: prompt assembly, context
fitting and compaction, reminders, skill activation) over a
:class:`~holon_cli.runtime.replay.scratch.Scratch` home, with three parts
swapped for the record:

- the model: a transport that serves each recorded answer (or failure) in
  turn; no network;
- the tools: the catalog's specs and guidance (today's), but each call is
  answered with its recorded result (nothing runs), after which the
  scratch home is moved to the state the live call left;
- the observer: each request the turn is about to send is compared with
  the recorded one (both normalised: :func:`~.docs.normalise`); the first
  difference stops the replay.

The budget gate answers as the live turn's did (a budget stop is served
back, no budget is checked), interjected messages come from the record,
and the clock reads the time each request was made. Nothing in the real
home is written (the tests hash it); the scratch home is removed after.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from holon_cli import clock
from holon_cli.errors import HolonError
from holon_cli.runtime.replay import docs
from holon_cli.runtime.replay import records as R
from holon_cli.runtime.replay.scratch import Scratch
from holon_cli.runtime.turn.abort import AbortWatch, TurnAborted
from holon_cli.runtime.turn.hooks import Quiet, TurnHooks
from holon_cli.runtime.turn.loop import TurnRun
from holon_cli.runtime.turn.spend import TurnSpend

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.envelope import QueueEntry
    from holon_cli.model.tool import Toolbox, ToolContext, ToolResult
    from holon_cli.providers.base import ModelResponse, ProviderRequest, ToolCall, ToolSpec
    from holon_cli.runtime.replay.shapes import RecordStep, TurnRecordDoc
    from holon_cli.store.agent_store import AgentStore


T = TypeVar("T")


class Diverged(Exception):
    """The replayed turn sent something else (or nothing) at ``n``."""

    def __init__(self, n: int, round_no: int, recorded: Any, replayed: Any) -> None:
        super().__init__(f"request {n} differs")
        self.n = n
        self.round_no = round_no
        self.recorded = recorded
        self.replayed = replayed


class Exchange(TypedDict):
    """A recorded request and what answered it (``None``: in flight when
    the turn was aborted)."""

    req: RecordStep
    out: RecordStep | None


class _Record:
    """The record's steps, indexed for serving."""

    def __init__(self, record: TurnRecordDoc) -> None:
        self.blobs: Mapping[str, object] = record.get("blobs") or {}
        self.exchanges: list[Exchange] = []
        self.tools: dict[str, list[RecordStep]] = {}
        self.interjects: dict[int, list[QueueEntry]] = {}
        self.resent = 0
        for step in record.get("steps") or []:
            k = step.get("k")
            if k == "req":
                if self.exchanges and self.exchanges[-1]["out"] is None:
                    # in flight when its process died; the turn, resumed, sent it again
                    self.exchanges.pop()
                    self.resent += 1
                self.exchanges.append({"req": step, "out": None})
            elif k in ("resp", "fail") and self.exchanges:
                self.exchanges[-1]["out"] = step
            elif k == "tool":
                self.tools.setdefault(str(step.get("call_id")), []).append(step)
            elif k == "interject":
                entries = docs.unpack(step.get("entries") or [], self.blobs)
                self.interjects.setdefault(int(step.get("round") or 0), []).extend(entries)
        end = record.get("end") or {}
        settlement = docs.unpack(end.get("settlement") or {}, self.blobs)
        self.aborted = settlement.get("reason") == "operator_aborted"
        self.end_at = end.get("at")


class Replay(Quiet):
    """The observer, the model and the tools of one replayed turn (as an
    observer it compares each request; the rest it hears as ``Quiet`` does)."""

    def __init__(self, record: TurnRecordDoc, scratch: Scratch, catalog: Toolbox) -> None:
        self.rec = _Record(record)
        self.scratch = scratch
        self.catalog = catalog
        self.n = 0  # requests the replayed turn made so far
        self.matched = 0
        self.subs = scratch.subs(docs.unpack(record["start"]["agent"], self.rec.blobs))
        self.model_ref = "replay:" + str(record.get("turn_id"))
        for ex in self.rec.exchanges:
            out = ex["out"]
            if out is not None and out.get("model_ref"):
                self.model_ref = str(out["model_ref"])
                break
        self.provider = "replay"
        self.memo = docs.Memo()
        self.unpacked: dict[str, object] = {}  # blob key -> unpacked value, shared by requests

    # ------------------------------------------------------------ clock

    def _freeze(self, iso: str | None) -> None:
        if not iso:
            return
        try:
            t = clock.parse_iso(iso)
        except ValueError:
            return
        clock.set_clock(lambda: t)

    def before_build(self) -> None:
        """The state the next request's prompt was built from: what the
        runtime wrote between the last capture and that request."""
        if self.n < len(self.rec.exchanges):
            step = self.rec.exchanges[self.n]["req"]
            if not step.get("_applied"):
                step["_applied"] = True
                self.scratch.after_tool(step)

    def exchange(self) -> Exchange:
        return self.rec.exchanges[self.n - 1]

    # ------------------------------------------------- observer (compare)

    def request(self, round_no: int, request: ProviderRequest) -> None:
        self.n += 1
        replayed = docs.request_doc(request, self.memo)
        if self.n > len(self.rec.exchanges):
            raise Diverged(self.n, round_no, None, docs.normalise(replayed, self.subs))
        step = self.exchange()["req"]
        recorded = docs.unpack(step["doc"], self.rec.blobs, self.unpacked)
        if docs.path_text(recorded, self.subs) == docs.path_text(replayed, self.subs):
            self.matched += 1
            return
        recorded = docs.normalise(recorded, self.subs)
        replayed = docs.normalise(replayed, self.subs)
        if recorded != replayed:
            raise Diverged(self.n, int(step.get("round") or round_no), recorded, replayed)
        self.matched += 1

    # ------------------------------------------------- the model (serve)

    def gate(self) -> None:
        """Before each attempt: a recorded budget stop, or an abort while
        the request was in flight, ends the round as it did live."""
        out = self.exchange()["out"]
        if out is None:
            raise TurnAborted
        if out.get("budget") is not None:
            from holon_cli.runtime.budgets.check import BudgetStop

            raise BudgetStop(out["budget"])

    def complete(self, request: ProviderRequest) -> ModelResponse:
        from holon_cli.providers.base import ProviderFailure

        answer = self.exchange()["out"]
        out: RecordStep = answer if answer is not None else {"k": ""}
        ahead = self.rec.exchanges[self.n :]
        self._freeze(ahead[0]["req"].get("at") if ahead else self.rec.end_at)
        if out.get("k") == "fail":
            f = out.get("failure") or {}
            raise ProviderFailure(
                str(f.get("kind") or "provider_error"),
                str(f.get("message") or "recorded failure"),
                status=f.get("status"),
                provider=self.provider,
                model_ref=self.model_ref,
            )
        return docs.response_from_doc(docs.unpack(out["doc"], self.rec.blobs))

    # ------------------------------------------------- the tools (serve)

    @property
    def specs(self) -> list[ToolSpec]:
        return self.catalog.specs

    @property
    def guidance(self) -> dict[str, str]:
        return self.catalog.guidance

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        queue = self.rec.tools.get(call.id) or []
        if not queue:
            if self.rec.aborted:
                raise TurnAborted  # the operator aborted the turn during this call
            raise HolonError(
                f"the record has no result for tool call {call.id} ({call.name})",
                kind="record_damaged",
                hint="the record is incomplete; this turn cannot be replayed further",
            )
        step = queue.pop(0)
        self.scratch.after_tool(step)
        result = docs.tool_from_doc(docs.unpack(step["doc"], self.rec.blobs))
        # commands name the recorded home's paths: the scratch home's now
        result.effects.commands = [self.scratch.moved(c) for c in result.effects.commands]
        return result

    def interjects_at(self, round_no: int) -> list[QueueEntry]:
        return self.rec.interjects.pop(round_no, [])


class _Spend(TurnSpend):
    """No budget is checked, reserved or spent: the record answers."""

    replay: Replay

    def before_attempt(self, ref: str, transport: Any, focus: str | None) -> None:
        self.replay.gate()

    def end_round(self) -> None:
        return None

    def record(
        self, model_ref: str | None, usage: dict[str, int], focus: str | None, *, estimated: bool
    ) -> None:
        return None

    def sync(self) -> None:
        return None


class _NoAbort(AbortWatch):
    def call(self, fn: Callable[[], T], on_abort: Callable[[], None] | None = None) -> T:
        return fn()


class ReplayRun(TurnRun):
    """A :class:`TurnRun` over the scratch home whose model, tools, budget
    gate, interjections and observer are the replay's (the children plane's
    hook is the real catalog's: a forked child's turn reads its inherited
    context, copied into the scratch home)."""

    def __init__(
        self, replay: Replay, store: AgentStore, entry: QueueEntry, config: HolonConfig
    ) -> None:
        turn_id = str(entry.get("turn_id") or "")
        real = getattr(replay.catalog, "turn_hooks", None)
        super().__init__(
            store,
            entry,
            turn_id,
            [replay.model_ref],
            catalog=replay,
            config=config,
            sleep=lambda _s: None,
            resolve=lambda _ref: replay,
            hooks=TurnHooks(
                record=lambda *_a: replay, lineage=real.lineage if real is not None else None
            ),
        )
        spend = _Spend(store, config, turn_id, self.t.mid)
        spend.replay = replay
        self.round.spend = spend
        self.round.before_build = replay.before_build
        self.replay = replay
        # nothing to abort: calls run on the turn's thread (a recorded abort
        # is served back as one)
        self.t.abort = _NoAbort(store, turn_id)

    def _interjects(self) -> list[QueueEntry]:
        return self.replay.interjects_at(self.journal.rounds)


@contextmanager
def _pointed_at(scratch: Scratch, at: str | None) -> Iterator[None]:
    """``HOLON_HOME`` and the clock of the replayed turn, restored after."""
    prev = os.environ.get("HOLON_HOME")
    prev_clock = clock.current()
    os.environ["HOLON_HOME"] = str(scratch.root)
    try:
        if at:
            t = clock.parse_iso(at)
            clock.set_clock(lambda: t)
        yield
    finally:
        clock.set_clock(prev_clock)
        if prev is None:
            os.environ.pop("HOLON_HOME", None)
        else:
            os.environ["HOLON_HOME"] = prev


def replay_turn(
    turn_id: str, *, agent_id: str | None = None, catalog: Toolbox
) -> dict[str, object]:
    """Replay one recorded turn (see the module docstring). Returns ``{turn_id,
    agent_id, match, rounds, recorded_rounds, divergence}``; ``divergence``
    is ``{round, request, path, recorded, replayed, diff}`` or ``None``."""
    from holon_cli.store.config import load_config
    from holon_cli.store.fsio import fsyncs_skipped

    real = R.locate(turn_id, agent_id)
    record = R.load(real, turn_id)
    scratch = Scratch(real, record)
    start = record["start"]
    out: dict[str, object] = {
        "turn_id": turn_id,
        "agent_id": real.agent_id,
        "match": True,
        "rounds": 0,
        "recorded_rounds": 0,
        "divergence": None,
    }
    try:
        with fsyncs_skipped(scratch.root), _pointed_at(scratch, start.get("at")):
            store = scratch.build()
            replay = Replay(record, scratch, catalog)
            out["recorded_rounds"] = len(replay.rec.exchanges)
            entry = docs.unpack(start["entry"], replay.rec.blobs)
            entry["turn_id"] = turn_id
            cfg = load_config(scratch.home)
            run = ReplayRun(replay, store, entry, cfg)
            try:
                run.start()
                run.rounds()
            except TurnAborted:
                pass
            if replay.n < len(replay.rec.exchanges):
                step = replay.rec.exchanges[replay.n]["req"]
                recorded = docs.normalise(docs.unpack(step["doc"], replay.rec.blobs), replay.subs)
                raise Diverged(replay.n + 1, int(step.get("round") or 0), recorded, None)
            out["rounds"] = replay.matched
    except Diverged as d:
        out["match"] = False
        out["rounds"] = d.n - 1
        path, rec_v, rep_v = docs.first_difference(d.recorded, d.replayed) or ("", None, None)
        if d.recorded is None:
            path, rec_v = "", None
        if d.replayed is None:
            path, rep_v = "", None
        out["divergence"] = {
            "round": d.round_no,
            "request": d.n,
            "path": path,
            "recorded": rec_v if d.recorded is not None else None,
            "replayed": rep_v if d.replayed is not None else None,
            "diff": docs.unified(d.recorded, d.replayed),
        }
    finally:
        scratch.close()
    return out
