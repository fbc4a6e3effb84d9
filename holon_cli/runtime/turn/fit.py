"""The turn's context budget (:class:`ContextFit`): the history of earlier
turns (runtime/memory/history.py), the compacted window over the journal's
conversation, the last request's size, and the context blocks' current
sizes, kept under ``runtime.context_budget_tokens``.

:class:`~holon_cli.runtime.turn.loop.TurnRun` builds the prompt and asks
:meth:`ContextFit.fit` before every request; a ``context_length_exceeded``
from the provider gets one compaction and a retry
(:meth:`ContextFit.overflow_compacted`).

It also keeps the request's prefix stable (issue 44): the turn's context
blocks are the ones its first request carried, for the whole turn
(:meth:`ContextFit.keep_turn_blocks`: a change during the turn is appended
after the latest round instead), the history rolls to a new epoch only when
it outgrows its share of the budget (once, at a turn's start, or when this
turn alone no longer fits), and the settled turn joins the history as its
last request carried it (:meth:`ContextFit.keep_turn`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from holon_cli.providers.base import ConversationItem
from holon_cli.runtime.memory import compaction as cp
from holon_cli.runtime.memory import working
from holon_cli.runtime.memory.history import (
    HISTORY_KEEP,
    HISTORY_SHARE,
    PromptHistory,
    earlier_conversation,
    shown_in,
)
from holon_cli.runtime.prompt import with_turn_blocks
from holon_cli.runtime.turn.context import recent_chars_for

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.events import (
        ContextCompactedData,
        ContextWindowRolledData,
        RuntimeErrorData,
        TurnContextBuiltData,
    )
    from holon_cli.model.failure import FailureArtifact
    from holon_cli.model.memory import WorkingMemoryState
    from holon_cli.model.provider import ToolSpec
    from holon_cli.providers.base import PromptFrame
    from holon_cli.runtime.prompt import BuiltPrompt
    from holon_cli.runtime.turn.journal import Journal
    from holon_cli.runtime.turn.recorder import TurnRecorder

UPDATE_TITLE = "# Context update (changed during this turn; it replaces the block above)"


class CacheState(TypedDict):
    """``build_frame``'s cache-record arguments (:meth:`ContextFit.cache_state`)."""

    memory_revision: int
    compression_epoch: int
    history_digest: str


class ContextFit:
    """One turn's view of its conversation against the context budget."""

    def __init__(self, journal: Journal, rec: TurnRecorder, config: HolonConfig) -> None:
        self.journal = journal
        self.rec = rec
        self.budget_tokens = cp.context_budget(config)
        self.window = cp.Window.restore(journal.items, journal.compaction)
        self.frame_t = 0  # the frame's and the history's tokens (set by each prompt build)
        self.fixed_t = 0  # the instructions' and tools' tokens (set by each prompt build)
        # the earlier turns (open_history: none until then) and what a roll needs
        self.history = PromptHistory.none()
        self.history_checked = False  # the start-of-turn share check is done
        self.wm: WorkingMemoryState | None = None
        self.summary_shown = True  # shrink_context can leave the earlier conversation out
        self.refreeze = False  # shrink_context changed the turn's blocks: send them anew
        self.shrinks = 0  # context blocks shrunk this turn (each changes the prefix)
        # the last request: reported input tokens, items, cut, frame tokens, clip
        self.sent: tuple[int, int, int, int, int | None] | None = None
        self.overflow_retried = False
        # the context blocks' sizes, shrunk for the rest of the turn when needed
        self.memory_chars = working.memory_chars_for(self.budget_tokens)
        self.queue_chars = working.queue_chars_for(self.budget_tokens)
        saved = journal.fit
        if saved:  # a replay: the cuts the turn had made stand (the same bytes)
            self.window.clip = saved.get("clip")
            self.shrinks = int(saved.get("shrinks") or 0)
            self.summary_shown = bool(saved.get("summary_shown", True))
            self.memory_chars = int(saved.get("memory_chars") or self.memory_chars)
            self.queue_chars = int(saved.get("queue_chars") or self.queue_chars)

    # ------------------------------------------------------------ history

    def open_history(
        self, store: Any, wm: WorkingMemoryState, message_id: str, turn_id: str
    ) -> None:
        """Read the earlier turns; the first turn that finds none saves the
        window's start (the working memory and earlier conversation it shows)."""
        self.store, self.message_id, self.turn_id = store, message_id, turn_id
        self.wm = wm if wm.get("current_working_memory") else None
        h = PromptHistory.load(store)
        if not h.exists:
            h.start(self.wm, self._earlier({message_id}, {turn_id}))
        self.history = h

    def _earlier(self, messages: set[str], turns: set[str]) -> str | None:
        return earlier_conversation(
            self.store,
            exclude_messages=messages,
            exclude_turns=turns,
            max_chars=recent_chars_for(self.budget_tokens),
        )

    @property
    def recent(self) -> str | None:
        """The earlier conversation the prompt shows (the window's summary)."""
        return self.history.summary if self.summary_shown else None

    def memory_block(self) -> str | None:
        """The window's working memory, rendered within the turn's share."""
        mem = self.history.memory
        return working.render(working.state_of(mem), max_chars=self.memory_chars) if mem else None

    def measure(self, frame: PromptFrame, tools: list[ToolSpec]) -> None:
        """A new prompt build's sizes: fixed (instructions, tools) and the
        whole frame with the history."""
        self.fixed_t = cp.fixed_tokens(frame, tools)
        self.frame_t = cp.frame_tokens(frame, tools) + self.history.tokens()

    def roll_history(
        self,
        keep_tokens: int,
        reason: str,
        focus: str | None,
        *,
        settled: bool = False,
        force: bool = False,
    ) -> bool:
        """A new epoch of the history (the prefix changes once): the newest
        turns within ``keep_tokens`` stay. ``settled``: this turn has joined
        the history (the roll is its settle's; the working memory is the one
        it left). False when there was nothing to drop (unless ``force``)."""
        h = self.history
        kept = h.keep_newest(keep_tokens)
        if not force and sum(len(t.items) for t in kept) == len(h.items()):
            return False
        before = len(h.items())
        messages, turns = shown_in(kept)
        memory = self.wm
        if settled:
            wm = working.state_of(self.store.read_record()["state"].get("working_memory"))
            memory = wm if wm.get("current_working_memory") else None
        else:  # this turn's own entries are in its conversation, not the summary
            messages.add(self.message_id)
            turns.add(self.turn_id)
        summary = self._earlier(messages, turns)
        est = self.frame_t + cp.items_tokens(self.window.view(self.journal.items))
        h.roll(keep_tokens=keep_tokens, memory=memory, summary=summary)
        data: ContextWindowRolledData = {
            "dropped_message_count": before - len(h.items()),
            "kept_message_count": len(h.items()),
            "compression_epoch": h.compression_epoch,
            "budget_tokens": self.budget_tokens,
            "estimated_tokens": est,
            "reason": reason,
        }
        self.rec.event("context_window_rolled", data, work_item_id=focus)
        return True

    def keep_turn(self, message_id: str, turn_id: str) -> None:
        """The settled turn joins the history as its last request carried it
        (its context item, the compacted view of its conversation) and its answer."""
        items = self.window.view(self.journal.items)
        ctx = self.journal.context
        if ctx is not None:
            from holon_cli.providers.wire import join_blocks

            text = join_blocks([t for _, t in ctx["blocks"]])
            if text:
                items = [ConversationItem("user", text), *items]
        if not self.history.exists:
            return
        changes = self.window.epoch + self.shrinks  # this turn's prefix changes
        if self.history.append(message_id, turn_id, items, changes):
            # a window over its share rolls now, not at the next turn's start
            # (the next turn reads no turn it would drop at once); so does one
            # whose blocks this turn had to shrink (the next turn would show
            # them whole again: a change of prefix, so a new epoch)
            room = max(0, self.budget_tokens - self.fixed_t)
            over = self.history.tokens() > HISTORY_SHARE * room
            if over or self.shrinks:
                keep = int(HISTORY_KEEP * room)
                why = "history_window" if over else "blocks_shrunk"
                self.roll_history(keep, why, None, settled=True, force=True)

    @property
    def compression_epoch(self) -> int:
        """The prefix's changes so far: the history's epochs, and this turn's
        compactions and shrunk blocks."""
        return self.history.compression_epoch + self.window.epoch + self.shrinks

    def cache_state(self) -> CacheState:
        """``build_frame``'s cache-record arguments: the window's working
        memory revision, the compression epoch, the history's fingerprint."""
        mem = self.history.memory
        return {
            "memory_revision": int(mem["working_memory_revision"]) if mem else 0,
            "compression_epoch": self.compression_epoch,
            "history_digest": self.history.digest(),
        }

    def stamped(self, frame: PromptFrame) -> PromptFrame:
        """``frame`` with its cache record's compression epoch as it is now (a
        compaction since the frame was built changed the prefix)."""
        if frame.cache is not None:
            frame.cache.compression_epoch = self.compression_epoch
        return frame

    def report_cache(self, data: TurnContextBuiltData) -> None:
        """The ``turn_context_built`` event's cache fields."""
        st = self.cache_state()
        data["working_memory_revision"] = st["memory_revision"]
        data["compression_epoch"] = st["compression_epoch"]
        data["history_turns"] = len(self.history.turns)
        data["history_tokens"] = self.history.tokens()

    def keep_turn_blocks(self, built: BuiltPrompt) -> BuiltPrompt:
        """The turn's context blocks stay the ones its first request carried
        (journaled, so a replay sends them too); when one of them changes (a
        work item was changed, a skill activated) the new text is appended
        after the latest round, once, instead of rewriting the prefix."""
        fresh = [
            [m["title"], t]
            for m, t in zip(built.sections, built.texts, strict=True)
            if m.get("placement") == "after_history"
        ]
        saved = self.journal.context
        if saved is None or self.refreeze:
            self.refreeze = False
            self.journal.record_context(fresh, dict(fresh))
            return built
        shown: dict[str, str] = dict(saved["shown"])
        now: dict[str, str] = dict(fresh)
        changed = [k for k in dict.fromkeys([*now, *shown]) if now.get(k) != shown.get(k)]
        if changed:
            parts = [now.get(k) or f"({k}: none any more)" for k in changed]
            update = ConversationItem("user", "\n\n".join([UPDATE_TITLE, *parts]))
            self.journal.record_context(saved["blocks"], now, update)
        return with_turn_blocks(built, [t for _, t in saved["blocks"]])

    # ---------------------------------------------------------------- fit

    def fit(self, focus: str | None) -> bool:
        """Keep the next request under the budget. At the turn's start, a
        history over its share of the budget rolls to a new epoch. Then, when
        the request would exceed the budget: compact this turn's older
        rounds; when that is not enough, roll the history down to nothing
        but its summary, then shrink the context blocks
        (:meth:`shrink_context`). True when the prompt is to be built (and
        fitted) again."""
        room = max(0, self.budget_tokens - self.fixed_t)
        if not self.history_checked:
            self.history_checked = True
            if self.history.tokens() > HISTORY_SHARE * room and self.roll_history(
                int(HISTORY_KEEP * room), "history_window", focus
            ):
                return True
        est = self.estimate()
        if est > self.budget_tokens:
            target = int((self.budget_tokens - self.frame_t) * cp.HEADROOM)
            self.compact(target, est, "over_budget", focus)
            if self.estimate() > self.budget_tokens and self.roll_history(0, "over_budget", focus):
                return True
            if self.estimate() > self.budget_tokens and self.shrink_context():
                return True  # the prefix settles again after this
            over = self.estimate() - self.budget_tokens
            if over > 0 and self.window.clip_to(self.journal.items, over):
                self.note_cuts()
        return False

    def note_cuts(self) -> None:
        """Journal the cuts besides compaction (clipped results, shrunk
        blocks): they depend on the provider's reported sizes, which a
        replay does not have, so it takes them from here."""
        self.journal.record_fit(
            {
                "clip": self.window.clip,
                "shrinks": self.shrinks,
                "summary_shown": self.summary_shown,
                "memory_chars": self.memory_chars,
                "queue_chars": self.queue_chars,
            }
        )

    def shrink_context(self) -> bool:
        """One step down, for the rest of the turn: leave the earlier
        conversation out, then halve the working-memory and work-queue
        blocks down to their floors. False when nothing is left to shrink."""
        if self.recent:
            self.summary_shown = False
        elif self.history.memory and self.memory_chars > working.MEMORY_MIN_CHARS:
            self.memory_chars = max(working.MEMORY_MIN_CHARS, self.memory_chars // 2)
        elif self.queue_chars > working.QUEUE_MIN_CHARS:
            self.queue_chars = max(working.QUEUE_MIN_CHARS, self.queue_chars // 2)
            self.refreeze = True  # the work queue is one of the turn's blocks
        else:
            return False
        self.shrinks += 1
        self.note_cuts()
        return True

    def estimate(self) -> int:
        """The next request: the provider's last reported input tokens plus
        bytes / 4 of what was appended since (the whole request without a
        report, or once the window changed)."""
        items = self.journal.items
        w = self.window
        if self.sent is not None and self.sent[0] > 0 and self.sent[2:5:2] == (w.cut, w.clip):
            reported, n_sent, _, frame_sent, _ = self.sent
            # the frame may have grown (a work item changed) or shrunk (shrink_context)
            return reported + cp.items_tokens(items[n_sent:]) + self.frame_t - frame_sent
        return self.frame_t + cp.items_tokens(self.window.view(items))

    def compact(self, target: int, est: int, reason: str, focus: str | None) -> int:
        """Compact older rounds to ``target`` tokens; the journal and the
        ``context_compacted`` event record it. Returns the messages compacted."""
        n = self.window.compact(self.journal.items, target, focus)
        if n:
            w = self.window
            cut_round = cp.round_ordinal(self.journal.items, w.cut)
            self.journal.record_compaction(cut_round, w.epoch, w.compacted, w.summary)
            data: ContextCompactedData = {
                "compacted_message_count": n,
                "compression_epoch": self.window.epoch,
                "budget_tokens": self.budget_tokens,
                "estimated_tokens": est,
                "kept_message_count": len(self.journal.items) - self.window.cut,
                "reason": reason,
            }
            self.rec.event("context_compacted", data, work_item_id=focus)
        return n

    def overflow_compacted(self, failure: Any, focus: str | None) -> bool:
        """A provider ``context_length_exceeded``: one compaction (to half of
        the conversation) and a retry instead of ending the turn."""
        if getattr(failure.last, "kind", None) != "context_length_exceeded":
            return False
        if self.overflow_retried:
            return False
        self.overflow_retried = True
        usage = failure.usage.to_dict() if failure.usage is not None else None
        self.journal.record_failure(usage, list(failure.timeline.get("attempts", [])))
        conv = cp.items_tokens(self.window.view(self.journal.items))
        return self.compact(conv // 2, self.frame_t + conv, "context_length_exceeded", focus) > 0

    def note_sent(self, reported: int) -> None:
        """A request went through: the next estimate starts from its report."""
        w = self.window
        self.sent = (reported, len(self.journal.items), w.cut, self.frame_t, w.clip)
        self.overflow_retried = False

    def fail_budget(self, fixed: int) -> FailureArtifact:
        """A budget below the frame's fixed part: the turn fails, naming both.
        Records the failure and returns its artifact."""
        summary = cp.budget_too_small(fixed, self.budget_tokens)
        artifact: FailureArtifact = {
            "summary": summary,
            "category": "config",
            "budget_tokens": self.budget_tokens,
            "fixed_tokens": fixed,
            "hint": f"raise runtime.context_budget_tokens in config.yaml above {fixed}, "
            "or shorten AGENTS.md and the skill catalog",
        }
        err: RuntimeErrorData = {
            "error": summary,
            "failure_kind": "context_budget_too_small",
            "failure_artifact": artifact,
        }
        self.rec.event("runtime_error", err)
        self.rec.transcript("runtime_failure", text=summary, failure_artifact=artifact)
        return artifact
