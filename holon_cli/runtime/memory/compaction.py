"""Compaction inside a turn: the conversation a provider request carries is
kept under ``runtime.context_budget_tokens`` (default
:data:`DEFAULT_BUDGET_TOKENS`).

The size of the next request is the provider's last reported input tokens
plus an estimate (UTF-8 bytes / 4) of what was appended since; without a
report it is the estimate of the whole request. When it would exceed the
budget, whole older rounds (an assistant answer with its tool results and
any message that joined after it) are replaced by one structured,
deterministic summary appended to the current input:

- the current input (the first item, with its provenance header) is sent
  exactly once, first; the direct predecessor (the newest round) is always
  kept whole, as is every kept message with its provenance header; the
  header lines of compacted messages are listed in the summary;
- rounds are dropped oldest first down to :data:`HEADROOM` of what the
  frame leaves, so the next rounds append to a stable prefix instead of
  compacting again at once;
- the journal's items are never rewritten: the window is a view over them,
  and each compaction is journaled (by round), so a turn replayed after a
  restart sends the bytes it would have sent without one.

The work queue context block (current work item: objective, plan preview,
open todos, blocker, waits) is part of the frame and never compacted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.provider import ConversationItem, PromptFrame, ToolSpec

DEFAULT_BUDGET_TOKENS = 128_000
HEADROOM = 0.6  # after a compaction the conversation takes at most this share of what is left
ITEM_OVERHEAD_TOKENS = 4
SUMMARY_NOTES = 6
SUMMARY_COMMANDS = 8
SUMMARY_HEADERS = 12


def context_budget(config: HolonConfig) -> int:
    """``runtime.context_budget_tokens`` (validated by the config schema)."""
    rt = config.get("runtime") or {}
    value = rt.get("context_budget_tokens")
    return int(value) if value else DEFAULT_BUDGET_TOKENS


def estimate(text: str) -> int:
    return (len(text.encode("utf-8", "replace")) + 3) // 4


def fixed_tokens(frame: PromptFrame, tools: list[ToolSpec]) -> int:
    """The frame's fixed part: instructions and tool schemas."""
    schemas = json.dumps(
        [[t.name, t.description, t.input_schema] for t in tools], sort_keys=True, default=str
    )
    return (
        estimate(frame.system_prompt)
        + sum(estimate(b) for b in frame.system_blocks)
        + estimate(schemas)
    )


def frame_tokens(frame: PromptFrame, tools: list[ToolSpec]) -> int:
    return fixed_tokens(frame, tools) + sum(estimate(b) for b in frame.context_blocks)


def item_tokens(it: ConversationItem) -> int:
    calls = sum(estimate(json.dumps(c.arguments, default=str)) for c in it.tool_calls)
    return estimate(it.text) + calls + ITEM_OVERHEAD_TOKENS


def items_tokens(items: list[ConversationItem]) -> int:
    return sum(item_tokens(it) for it in items)


def budget_too_small(fixed: int, budget: int) -> str:
    return (
        f"runtime.context_budget_tokens is {budget}, but the prompt's fixed part "
        f"(instructions + tool schemas) alone needs about {fixed} tokens"
    )


def _round_starts(items: list[ConversationItem], after: int) -> list[int]:
    return [i for i in range(max(after, 1), len(items)) if items[i].role == "assistant"]


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def summarize(items: list[ConversationItem], epoch: int, focus: str | None) -> str:
    """The summary of the compacted items (``items[1:cut]``); deterministic."""
    calls: dict[str, list[int]] = {}
    commands: list[str] = []
    notes: list[str] = []
    headers: list[str] = []
    rounds = 0
    for it in items:
        if it.role == "assistant":
            rounds += 1
            if it.text.strip():
                notes.append(_first_line(it.text))
            for c in it.tool_calls:
                calls.setdefault(c.name, [0, 0])[0] += 1
                cmd = c.arguments.get("cmd") if isinstance(c.arguments, dict) else None
                if isinstance(cmd, str):
                    commands.append(_first_line(cmd, 120))
        elif it.role == "tool" and it.is_error:
            calls.setdefault(it.name or "tool", [0, 0])[1] += 1
        elif it.role == "user" and it.text.startswith("[message "):
            headers.append(it.text.split("\n", 1)[0])
    lines = [
        f"[runtime: context compacted, epoch {epoch}: {len(items)} earlier message(s) of this "
        f"turn ({rounds} round(s)) are replaced by this summary; their tool outputs are not "
        "shown again: re-run a command or read a file when you need them]"
    ]
    if focus:
        lines.append(f"Current work item: {focus} (see the work queue above)")
    if calls:
        lines.append(
            "Tool calls: "
            + ", ".join(
                f"{n} x{k}" + (f" ({e} failed)" if e else "") for n, (k, e) in sorted(calls.items())
            )
        )
    if commands:
        lines.append("Last commands: " + "; ".join(f"`{c}`" for c in commands[-SUMMARY_COMMANDS:]))
    if notes:
        lines.append("Your last notes: " + " | ".join(notes[-SUMMARY_NOTES:]))
    if headers:
        lines.append("Messages that joined (provenance):")
        lines.extend(headers[-SUMMARY_HEADERS:])
    return "\n".join(lines)


MIN_CLIP = 256


def clip_result(it: ConversationItem, limit: int) -> ConversationItem:
    if it.role != "tool" or len(it.text) <= limit:
        return it
    cut = len(it.text) - limit
    note = f"\n[... {cut} characters cut to fit the context budget; run the call again to see them]"
    return it.with_text(it.text[:limit] + note)


def round_ordinal(items: list[ConversationItem], cut: int) -> int:
    """How many rounds (assistant items) lie before position ``cut``."""
    return sum(1 for it in items[:cut] if it.role == "assistant")


def round_index(items: list[ConversationItem], ordinal: int) -> int:
    """The position of round number ``ordinal`` (0-based), or the end."""
    seen = 0
    for i, it in enumerate(items):
        if it.role == "assistant":
            if seen == ordinal:
                return i
            seen += 1
    return len(items)


class Window:
    """The compacted view of one turn's conversation: ``items[1:cut]`` are
    replaced by ``summary`` (appended to the current input)."""

    def __init__(self, cut: int = 1, summary: str = "", epoch: int = 0, compacted: int = 0) -> None:
        self.cut = cut
        self.summary = summary
        self.epoch = epoch
        self.compacted = compacted  # messages compacted in this turn so far
        self.clip: int | None = None  # last resort: tool results longer than this are cut

    @classmethod
    def restore(cls, items: list[ConversationItem], saved: dict[str, Any] | None) -> Window:
        """The window a journal recorded (a replay sends the same bytes)."""
        if not saved:
            return cls()
        return cls(
            cut=max(1, round_index(items, int(saved["cut_round"]))),
            summary=str(saved["summary"]),
            epoch=int(saved["epoch"]),
            compacted=int(saved["compacted"]),
        )

    def view(self, items: list[ConversationItem]) -> list[ConversationItem]:
        if self.cut <= 1 or not items:
            out = list(items)
        else:
            head = items[0]
            out = [head.with_text(f"{head.text}\n\n{self.summary}"), *items[self.cut :]]
        if self.clip is not None:
            out = [clip_result(it, self.clip) for it in out]
        return out

    def clip_to(self, items: list[ConversationItem], over_tokens: int) -> bool:
        """The last resort when the newest round alone does not fit: cut the
        longest tool results (the model is told; re-running the call shows
        it again). False when they are already at :data:`MIN_CLIP`."""
        kept = items[self.cut :] if self.cut > 1 else items
        longest = max((len(it.text) for it in kept if it.role == "tool"), default=0)
        current = min(longest, self.clip) if self.clip is not None else longest
        want = max(MIN_CLIP, current - over_tokens * 4 - 160)
        if want >= current:
            return False
        self.clip = want
        return True

    def compact(self, items: list[ConversationItem], target_tokens: int, focus: str | None) -> int:
        """Drop the oldest whole rounds until the kept ones (with the new
        summary) fit ``target_tokens``; the newest round always stays.
        Returns how many messages this compaction removed (0: nothing to drop)."""
        starts = _round_starts(items, self.cut)
        if len(starts) < 2:
            return 0
        head = items_tokens(items[:1])
        chosen = starts[-1]
        for s in starts[1:]:
            draft = summarize(items[1:s], self.epoch + 1, focus)
            if head + estimate(draft) + items_tokens(items[s:]) <= target_tokens:
                chosen = s
                break
        removed = chosen - self.cut
        if removed <= 0:
            return 0
        self.epoch += 1
        self.summary = summarize(items[1:chosen], self.epoch, focus)
        self.cut = chosen
        self.compacted += removed
        return removed
