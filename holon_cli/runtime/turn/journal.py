"""The in-flight turn's journal (``state/turn_journal.jsonl``): an
append-only record of the turn, folded on replay into the conversation so
far, usage, the attempt timeline, interjected messages and, once the turn has
decided how it ends, its settlement.

Records (compact JSON, one per line, ``v: 1``)::

    {"op": "begin", "turn_id", "message_id"}       first line; starts a new file
    {"op": "item", "item": <conversation item>}    a message, answer or tool result
    {"op": "round", "rounds", "usage", "usage_reported", "attempts", "counted"}
    {"op": "failure", "usage", "attempts"}         a provider failure's usage/attempts
    {"op": "interject", "message_id"}
    {"op": "request", "turn_id"}                   a turn's first provider request starts
    {"op": "compaction", "cut_round", "epoch", "compacted", "summary"}  the window now
    {"op": "effects", "files", "commands", "completed"}  a tool call's memory effects
    {"op": "fit", "clip", "shrinks", "summary_shown", "memory_chars", "queue_chars"}
        what the context budget cut this turn besides compaction (a replay
        sends the same bytes: runtime/turn/fit.py)
    {"op": "context", "blocks", "shown", "item"?}  the turn's context blocks as
        first sent (kept for the turn), as last shown, and the update item a
        change during the turn appended (runtime/turn/fit.py)
    {"op": "latency", "tool", "ms", "ok"}          a tool call's duration (agent state
                                                   ``tool_latency`` at settle)
    {"op": "settlement", "settlement": {...}}
    {"op": "capture", "k": ...}                    what the turn record keeps (runtime/replay)

Invariants:
- appends are plain writes; :meth:`Journal.sync` makes them durable, once per
  round together with the round's ledger records (the turn calls it before
  the round's tool calls start), so a replay after a crash sees every tool
  result that was recorded and runs no recorded call again;
- a torn last line (a writer killed mid-append) is ignored on replay;
- the settlement is durable before the terminal records (brief, transcript
  entry, ``turn_terminal`` event) are written; a replay that finds it writes
  only the records that are missing and settles the queue entry, so a
  message gets exactly one terminal and one result brief under any kill;
- ``request`` is written (a plain write: a killed process loses nothing the
  kernel holds) just before a turn's first provider request: a crashed turn
  without one never reached the model, and its replay is not counted as an
  attempt (``queue.recover``);
- removed once the agent record reflects the settled turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from holon_cli.errors import CorruptStateError
from holon_cli.model.provider import item_from_dict, item_to_dict
from holon_cli.providers.base import ConversationItem
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import append_bytes, atomic_write_bytes, dumps, fsync_file

if TYPE_CHECKING:
    from holon_cli.model.memory import CommandRun
    from holon_cli.model.turn import ProviderAttemptRecord, TurnSettlement


class ContextRecord(TypedDict):
    """The turn's context blocks: ``[[title, text]]`` as first sent, and
    ``{title: text}`` as last shown."""

    blocks: list[list[str]]
    shown: dict[str, str]


class FitRecord(TypedDict, total=False):
    """The context budget's cuts besides compaction (``ContextFit.note_cuts``)."""

    clip: int | None
    shrinks: int
    summary_shown: bool
    memory_chars: int
    queue_chars: int


class Effects(TypedDict):
    """What the turn's tool calls did, for working memory at settle."""

    files: list[str]
    commands: list[CommandRun]
    completed: bool


JOURNAL_VERSION = 1

__all__ = ["JOURNAL_VERSION", "Journal", "item_from_dict", "item_to_dict", "journal_path"]


def journal_path(store: AgentStore) -> Path:
    return store.layout.state_dir / "turn_journal.jsonl"


def _legacy_path(store: AgentStore) -> Path:
    # the whole-file snapshot journal of earlier builds (read once on replay)
    return store.layout.state_dir / "turn_journal.json"


def _zero() -> dict[str, int]:
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


class Journal:
    """The in-flight turn, as appended records and their fold."""

    def __init__(self, store: AgentStore, turn_id: str, message_id: str) -> None:
        self.store = store
        self.path = journal_path(store)
        self.turn_id = turn_id
        self.message_id = message_id
        self.items: list[ConversationItem] = []
        self.rounds = 0
        self.usage = _zero()
        self.usage_reported = False  # some provider answer carried token data
        # successful rounds' usage and count: added to the agent's totals at settle
        self.counted = {"input_tokens": 0, "output_tokens": 0, "rounds": 0}
        self.timeline: list[ProviderAttemptRecord] = []
        self.interject_ids: list[str] = []
        self.settlement: TurnSettlement | None = None
        # turns (of this message) that got as far as a provider request
        self.requested: set[str] = set()
        # the compacted window of the conversation (runtime/memory/compaction.py):
        # restored on replay, so a restart sends the bytes it would have sent
        self.compaction: dict[str, Any] | None = None
        # the turn's context blocks: [[title, text]] as first sent, and
        # {title: text} as last shown (a change is appended as an item)
        self.context: ContextRecord | None = None
        # the context budget's cuts besides compaction (clipped results, shrunk blocks)
        self.fit: FitRecord | None = None
        # what the turn's tool calls did, for working memory at settle
        self.files: list[str] = []
        self.commands: list[CommandRun] = []
        self.completed_work_item = False
        # each tool call's (name, milliseconds, ok), in order (runtime/turn/stats.py)
        self.latency: list[tuple[str, float, bool]] = []
        # the turn record's captures (runtime/replay/capture.py), in order
        self.captures: list[dict[str, Any]] = []
        self._dirty = False

    # ------------------------------------------------------------- replay

    @classmethod
    def load(cls, store: AgentStore) -> Journal | None:
        """The journal on disk, folded; ``None`` when there is none."""
        path = journal_path(store)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls._load_legacy(store)
        j: Journal | None = None
        lines = raw.split(b"\n")
        # the part after the last newline is a torn append (or empty): ignore it
        for n, line in enumerate(lines[:-1], 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                raise CorruptStateError(
                    f"{path}:{n}: damaged turn journal record",
                    hint=f"remove {path}; the message is then replayed from its start",
                    details={"path": str(path), "line": n},
                ) from None
            if rec.get("op") == "begin":
                j = cls(store, str(rec.get("turn_id") or ""), str(rec["message_id"]))
            elif j is not None:
                j._apply(rec)
        return j

    @classmethod
    def _load_legacy(cls, store: AgentStore) -> Journal | None:
        from holon_cli.store.fsio import read_snapshot

        snap = read_snapshot(_legacy_path(store))
        if not snap or not snap.get("message_id"):
            return None
        j = cls(store, str(snap.get("turn_id") or ""), str(snap["message_id"]))
        j.items = [item_from_dict(d) for d in snap.get("items", [])]
        j.rounds = int(snap.get("rounds", 0))
        j.usage = dict(snap.get("usage") or j.usage)
        j.timeline = list(snap.get("timeline") or [])
        j.interject_ids = list(snap.get("interject_ids") or [])
        j._rewrite()
        return j

    def _rewrite(self) -> None:
        """Write the folded state as a new journal file (upgrading a legacy one)."""
        lines = [{"v": JOURNAL_VERSION, "op": "begin", "turn_id": self.turn_id}]
        lines[0]["message_id"] = self.message_id
        lines += [{"v": JOURNAL_VERSION, "op": "item", "item": item_to_dict(i)} for i in self.items]
        lines.append(
            {
                "v": JOURNAL_VERSION,
                "op": "round",
                "rounds": self.rounds,
                "usage": self.usage,
                "usage_reported": self.usage_reported,
                "counted": self.counted,
                "attempts": self.timeline,
            }
        )
        lines += [
            {"v": JOURNAL_VERSION, "op": "interject", "message_id": m} for m in self.interject_ids
        ]
        if self.compaction is not None:
            lines.append({"v": JOURNAL_VERSION, "op": "compaction", **self.compaction})
        if self.files or self.commands or self.completed_work_item:
            lines.append({"v": JOURNAL_VERSION, "op": "effects", **self._effects()})
        if self.context is not None:
            lines.append({"v": JOURNAL_VERSION, "op": "context", **self.context})
        if self.fit is not None:
            lines.append({"v": JOURNAL_VERSION, "op": "fit", **self.fit})
        lines += [
            {"v": JOURNAL_VERSION, "op": "latency", "tool": t, "ms": ms, "ok": ok}
            for t, ms, ok in self.latency
        ]
        atomic_write_bytes(self.path, "".join(dumps(r) + "\n" for r in lines).encode("utf-8"))
        _legacy_path(self.store).unlink(missing_ok=True)

    def _apply(self, rec: dict[str, Any]) -> None:
        op = rec.get("op")
        if op == "item":
            self.items.append(item_from_dict(rec["item"]))
        elif op == "round":
            self.rounds = int(rec["rounds"])
            self.usage = dict(rec["usage"])
            self.usage_reported = bool(rec.get("usage_reported"))
            self.counted = dict(rec.get("counted") or self.counted)
            self.timeline.extend(rec.get("attempts") or [])
        elif op == "failure":
            self.usage = dict(rec["usage"])
            self.usage_reported = bool(rec.get("usage_reported"))
            self.timeline.extend(rec.get("attempts") or [])
        elif op == "interject":
            self.interject_ids.append(str(rec["message_id"]))
        elif op == "request":
            self.requested.add(str(rec.get("turn_id") or ""))
        elif op == "settlement":
            self.settlement = cast("TurnSettlement", rec["settlement"])
        elif op == "effects":
            self._fold_effects(rec)
        elif op == "compaction":
            keys = ("cut_round", "epoch", "compacted", "summary")
            self.compaction = {k: rec[k] for k in keys}
        elif op == "fit":
            self.fit = _fit_of(rec)
        elif op == "context":
            if rec.get("item") is not None:
                self.items.append(item_from_dict(rec["item"]))
            self.context = {"blocks": rec["blocks"], "shown": rec["shown"]}
        elif op == "latency":
            entry = (str(rec.get("tool")), float(rec.get("ms") or 0), bool(rec.get("ok")))
            self.latency.append(entry)
        elif op == "capture":
            self.captures.append(rec)

    @classmethod
    def resume(cls, store: AgentStore, turn_id: str, message_id: str) -> Journal | None:
        j = cls.load(store)
        if j is None or j.message_id != message_id:
            return None
        j.turn_id = turn_id
        return j

    # ------------------------------------------------------------ writing

    def begin(self) -> None:
        """Start a new journal file for this message (replaces any older one).
        Not fsync'd here: the turn fsyncs the state folder once after its start
        (the file's name) and the file with its first batch. A kill while the
        line is written leaves a torn line and no ``begin``: no journal."""
        rec = {"v": JOURNAL_VERSION, "op": "begin", "turn_id": self.turn_id}
        rec["message_id"] = self.message_id
        append_bytes(self.path, (dumps(rec) + "\n").encode("utf-8"), truncate=True)
        self._dirty = True
        try:
            _legacy_path(self.store).unlink()
        except FileNotFoundError:
            pass

    def _append(self, rec: Mapping[str, object]) -> None:
        append_bytes(self.path, (dumps({"v": JOURNAL_VERSION, **rec}) + "\n").encode("utf-8"))
        self._dirty = True

    def sync(self) -> None:
        """Make every append so far durable (one fsync)."""
        if not self._dirty:
            return
        fsync_file(self.path)
        self._dirty = False

    def mark_request(self) -> None:
        """Say (once per turn) that this turn is about to call the model."""
        if self.turn_id in self.requested:
            return
        self.requested.add(self.turn_id)
        self._append({"op": "request", "turn_id": self.turn_id})

    def add_item(self, item: ConversationItem) -> None:
        self.items.append(item)
        self._append({"op": "item", "item": item_to_dict(item)})

    def add_provider_only(self, item: ConversationItem) -> None:
        """An item the model sees this turn but a replay does not (reminders)."""
        self.items.append(item)

    def add_usage(self, usage: Mapping[str, int] | None) -> None:
        if not usage:
            return
        self.usage_reported = True
        for k in self.usage:
            self.usage[k] += int(usage.get(k, 0))

    def record_round(
        self, usage: Mapping[str, int] | None, attempts: list[ProviderAttemptRecord]
    ) -> None:
        """A successful provider round: its usage, its attempts, the round count."""
        self.add_usage(usage)
        self.timeline.extend(attempts)
        self.rounds += 1
        u = usage or {}
        self.counted["input_tokens"] += int(u.get("input_tokens", 0))
        self.counted["output_tokens"] += int(u.get("output_tokens", 0))
        self.counted["rounds"] += 1
        self._append(
            {
                "op": "round",
                "rounds": self.rounds,
                "usage": self.usage,
                "usage_reported": self.usage_reported,
                "counted": self.counted,
                "attempts": attempts,
            }
        )

    def record_failure(
        self, usage: Mapping[str, int] | None, attempts: list[ProviderAttemptRecord]
    ) -> None:
        self.add_usage(usage)
        self.timeline.extend(attempts)
        self._append(
            {
                "op": "failure",
                "usage": self.usage,
                "usage_reported": self.usage_reported,
                "attempts": attempts,
            }
        )

    def record_compaction(self, cut_round: int, epoch: int, compacted: int, summary: str) -> None:
        """The conversation's compacted window, by round (reminders are not
        journaled, so item positions are not stable); durable with the next
        round."""
        self.compaction = {
            "cut_round": cut_round,
            "epoch": epoch,
            "compacted": compacted,
            "summary": summary,
        }
        self._append({"op": "compaction", **self.compaction})

    def record_fit(self, state: FitRecord) -> None:
        """The context budget's cuts so far (replaces the previous record)."""
        self.fit = state.copy()
        self._append({"op": "fit", **state})

    def record_context(
        self,
        blocks: list[list[str]],
        shown: dict[str, str],
        item: ConversationItem | None = None,
    ) -> None:
        """The turn's context blocks as first sent (``blocks``) and as last
        shown; ``item`` (an update the model sees after the latest round)
        joins the conversation in the same record."""
        self.context = {"blocks": blocks, "shown": shown}
        rec: dict[str, object] = {"op": "context", "blocks": blocks, "shown": shown}
        if item is not None:
            self.items.append(item)
            rec["item"] = item_to_dict(item)
        self._append(rec)

    def _effects(self) -> Effects:
        return {
            "files": self.files,
            "commands": self.commands,
            "completed": self.completed_work_item,
        }

    def _fold_effects(self, rec: Mapping[str, object]) -> None:
        files, commands = rec.get("files") or [], rec.get("commands") or []
        if isinstance(files, list):
            self.files.extend(str(f) for f in files)
        if isinstance(commands, list):
            self.commands.extend(_command_of(c) for c in commands if isinstance(c, dict))
        self.completed_work_item = self.completed_work_item or bool(rec.get("completed"))

    def add_effects(self, files: list[str], commands: list[CommandRun], completed: bool) -> None:
        """One tool call's memory effects (durable with its round's batch)."""
        if not (files or commands or completed):
            return
        rec: Effects = {"files": list(files), "commands": list(commands), "completed": completed}
        self._fold_effects(rec)
        self._append({"op": "effects", **rec})

    def add_latency(self, tool: str, ms: float, ok: bool) -> None:
        """One tool call's duration (durable with its round's batch)."""
        self.latency.append((tool, ms, ok))
        self._append({"op": "latency", "tool": tool, "ms": ms, "ok": ok})

    def add_capture(self, rec: dict[str, Any]) -> None:
        """One of the turn record's captures (durable with the round's batch)."""
        full = {"op": "capture", **rec}
        self.captures.append(full)
        self._append(full)

    def add_interject(self, message_id: str) -> None:
        self.interject_ids.append(message_id)
        self._append({"op": "interject", "message_id": message_id})

    def settle(self, settlement: TurnSettlement) -> None:
        """Save how the turn ends, durably, before any terminal record."""
        self.settlement = settlement
        self._append({"op": "settlement", "settlement": settlement})
        self.sync()

    def clear(self) -> None:
        for p in (self.path, _legacy_path(self.store)):
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    def recorded_results(self) -> dict[str, ConversationItem]:
        return {it.call_id: it for it in self.items if it.role == "tool" and it.call_id}


def _command_of(c: Mapping[str, object]) -> CommandRun:
    """A journaled command run (its exit status an int or nothing)."""
    status = c.get("exit_status")
    if not isinstance(status, int) or isinstance(status, bool):
        status = None
    return {"cmd": str(c.get("cmd")), "exit_status": status}


def _fit_of(rec: Mapping[str, object]) -> FitRecord:
    """A journaled ``fit`` record: the keys it has (a replay defaults the rest)."""
    out: FitRecord = {}
    clip, shrinks = rec.get("clip"), rec.get("shrinks")
    memory, queue = rec.get("memory_chars"), rec.get("queue_chars")
    if "clip" in rec:
        out["clip"] = clip if isinstance(clip, int) else None
    if isinstance(shrinks, (int, float)):
        out["shrinks"] = int(shrinks)
    if "summary_shown" in rec:
        out["summary_shown"] = bool(rec["summary_shown"])
    if isinstance(memory, (int, float)):
        out["memory_chars"] = int(memory)
    if isinstance(queue, (int, float)):
        out["queue_chars"] = int(queue)
    return out
