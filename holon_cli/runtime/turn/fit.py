"""The turn's context budget (:class:`ContextFit`): the compacted window
over the journal's conversation, the last request's size, and the context
blocks' current sizes, kept under ``runtime.context_budget_tokens``.

:class:`~holon_cli.runtime.turn.loop.TurnRun` builds the prompt and asks
:meth:`ContextFit.fit` before every request; a ``context_length_exceeded``
from the provider gets one compaction and a retry
(:meth:`ContextFit.overflow_compacted`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holon_cli.runtime.memory import compaction as cp
from holon_cli.runtime.memory import working

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.events import ContextCompactedData, RuntimeErrorData
    from holon_cli.runtime.turn.journal import Journal
    from holon_cli.runtime.turn.recorder import TurnRecorder


class ContextFit:
    """One turn's view of its conversation against the context budget."""

    def __init__(self, journal: Journal, rec: TurnRecorder, config: HolonConfig) -> None:
        self.journal = journal
        self.rec = rec
        self.budget_tokens = cp.context_budget(config)
        self.window = cp.Window.restore(journal.items, journal.compaction)
        self.frame_t = 0  # the frame's tokens (set by each prompt build)
        # the last request: reported input tokens, items, cut, frame tokens, clip
        self.sent: tuple[int, int, int, int, int | None] | None = None
        self.overflow_retried = False
        # the context blocks' sizes, shrunk for the rest of the turn when needed
        self.recent: str | None = None
        self.memory_chars = working.memory_chars_for(self.budget_tokens)
        self.queue_chars = working.queue_chars_for(self.budget_tokens)

    def fit(self, focus: str | None) -> bool:
        """Keep the next request under the budget: compact older rounds when
        it would exceed it, and when that is not enough, shrink the context
        blocks (:meth:`shrink_context`: the recent conversation first; working
        memory and the archived episodes still carry it). True when a block
        shrank: the prompt is to be built (and fitted) again."""
        est = self.estimate()
        if est > self.budget_tokens:
            target = int((self.budget_tokens - self.frame_t) * cp.HEADROOM)
            self.compact(target, est, "over_budget", focus)
            if self.estimate() > self.budget_tokens and self.shrink_context():
                return True  # the prefix settles again after this
            over = self.estimate() - self.budget_tokens
            if over > 0:
                self.window.clip_to(self.journal.items, over)
        return False

    def shrink_context(self) -> bool:
        """One step down, for the rest of the turn: leave the recent
        conversation out, then halve the working-memory and work-queue
        blocks down to their floors. False when nothing is left to shrink."""
        if self.recent:
            self.recent = None
            return True
        if self.memory_chars > working.MEMORY_MIN_CHARS:
            self.memory_chars = max(working.MEMORY_MIN_CHARS, self.memory_chars // 2)
            return True
        if self.queue_chars > working.QUEUE_MIN_CHARS:
            self.queue_chars = max(working.QUEUE_MIN_CHARS, self.queue_chars // 2)
            return True
        return False

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

    def fail_budget(self, fixed: int) -> dict[str, Any]:
        """A budget below the frame's fixed part: the turn fails, naming both.
        Records the failure and returns its artifact."""
        summary = cp.budget_too_small(fixed, self.budget_tokens)
        artifact: dict[str, Any] = {
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
