"""What the work plane knows about its callers' words: tool names and hint prose.

The runtime's work plane (:mod:`holon_cli.runtime.workitems`) decides *what*
to tell a caller (pick an item, clear a blocker, pass a reason); this module
says it in the caller's vocabulary. :class:`Vocabulary` speaks the model's
tool names and argument names (``PickWorkItem``, ``blocked_by``);
:class:`CliVocabulary` speaks ``holon workitem`` commands and flags and
repeats the ``--agent`` the operator used. The model-facing context texts
(work-queue projection, tick signals, reminders) are here too, so the runtime
never spells a tool name.

This module imports nothing of holon but the error tree. It lives with the
plane (not in ``tools/``) because the plane speaks it: imports run from tools
to the runtime, never back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from holon_cli.errors import HolonError

CREATE_TOOL = "CreateWorkItem"
PICK_TOOL = "PickWorkItem"
UPDATE_TOOL = "UpdateWorkItem"
COMPLETE_TOOL = "CompleteWorkItem"
MUTATION_TOOLS = frozenset({CREATE_TOOL, PICK_TOOL, UPDATE_TOOL, COMPLETE_TOOL})


def is_work_item_mutation(tool_name: str) -> bool:
    """Whether a successful call of ``tool_name`` resets the stale-round count."""
    return tool_name in MUTATION_TOOLS


def round_completion_targets(calls: Iterable[Any]) -> list[str]:
    """Distinct ``work_item_id`` values of the ``CompleteWorkItem`` calls in one
    assistant round (``ToolCall`` objects or dicts)."""
    out: list[str] = []
    for c in calls:
        name = c.get("name") if isinstance(c, Mapping) else getattr(c, "name", None)
        if name != COMPLETE_TOOL:
            continue
        args = c.get("arguments") if isinstance(c, Mapping) else getattr(c, "arguments", None)
        wid = args.get("work_item_id") if isinstance(args, Mapping) else None
        key = wid if isinstance(wid, str) else repr(wid)
        if key not in out:
            out.append(key)
    return out


class Vocabulary:
    """Hints in the model's tool vocabulary (the default for agent calls)."""

    def pick(self, wid: str | None = None) -> str:
        """How to make an item current, as an imperative phrase."""
        return f"call {PICK_TOOL}({wid})" if wid else f"call {PICK_TOOL}"

    def list_hint(self) -> str:
        return (
            "list work items with `holon workitem list` (tool: ListWorkItems) "
            "and use an id from there"
        )

    def pick_completed_hint(self) -> str:
        return (
            "pick an open work item (ListWorkItems filter=open), "
            "or create a new one for follow-up work"
        )

    def field(self, name: str) -> str:
        """An argument's name as the caller types it (``reason``, ``--reason``)."""
        return f"`{name}`"

    def field_path(self, path: str) -> str:
        """A validation field path (``todo_list[0].text``) as the caller knows it."""
        return path

    def pick_reason_missing(self, prev_id: str | None) -> str:
        return (
            f"Switched focus away from runnable work item {prev_id} without a reason; "
            f"pass {self.field('reason')} when overriding a runnable current work item."
        )

    def picked_non_runnable(self, wid: str, readiness: str) -> str:
        return (
            f"{wid} is {readiness}; picking it for review does not make it runnable. "
            f"Clear blocked_by (or set plan_status) with {UPDATE_TOOL} only once the "
            "blocker is resolved."
        )

    def nothing_to_update_hint(self) -> str:
        return "pass at least one of objective, plan_status, todo_list, blocked_by"

    def reword(self, err: HolonError) -> None:
        """Say a validation error (raised in the model's field names) in this
        vocabulary, in place. The model's own vocabulary needs no change."""

    @contextmanager
    def worded(self) -> Iterator[None]:
        """Validation errors raised inside the block are reworded (:meth:`reword`)."""
        try:
            yield
        except HolonError as err:
            self.reword(err)
            raise

    def recheck_without_blocker(self) -> tuple[str, str]:
        """(message, hint) for a recheck delay given without a blocker."""
        return (
            "recheck_after applies only when setting a non-empty blocked_by",
            "pass blocked_by together with recheck_after "
            "(re-stating the blocker refreshes its deadline)",
        )


class CliVocabulary(Vocabulary):
    """Hints in ``holon workitem`` commands and flags. ``agent`` (the value of
    ``--agent`` when the operator gave one) is repeated in every command shown;
    ``flags`` overrides how an argument is named (``create`` takes the
    objective as its OBJECTIVE argument, ``update`` as ``--objective``)."""

    FLAGS = {
        "objective": "--objective",
        "reason": "--reason",
        "plan_status": "--plan-status",
        "todo_list": "--todo",
        "blocked_by": "--blocked-by",
        "recheck_after": "--recheck-after",
        "filter": "--filter",
        "limit": "--limit",
        "report": "--report",
        "work_item_id": "ID",
    }

    def __init__(self, agent: str | None = None, flags: Mapping[str, str] | None = None) -> None:
        self.agent = agent
        self.flags = {**self.FLAGS, **(flags or {})}

    def command(self, rest: str) -> str:
        """A ``holon workitem`` command line, quoted, with the operator's ``--agent``."""
        agent = f" --agent {self.agent}" if self.agent else ""
        return f"`holon workitem {rest}{agent}`"

    def pick(self, wid: str | None = None) -> str:
        return "run " + self.command(f"pick {wid or 'ID'}")

    def list_hint(self) -> str:
        return f"list work items with {self.command('list')} and use an id from there"

    def pick_completed_hint(self) -> str:
        return (
            f"pick an open work item (see {self.command('list --filter open')}), "
            f"or create a new one with {self.command('create OBJECTIVE')} for follow-up work"
        )

    def field(self, name: str) -> str:
        return f"`{self.flags.get(name, name)}`"

    def field_path(self, path: str) -> str:
        m = re.fullmatch(r"todo_list\[(\d+)\]\.(text|state)", path)
        if m:
            return f"--todo #{int(m.group(1)) + 1}"
        return self.flags.get(path, path)

    def reword(self, err: HolonError) -> None:
        field = err.details.get("field")
        if isinstance(field, str) and field in err.message:
            err.message = err.message.replace(field, self.field_path(field), 1)
            err.args = (err.message,)
        if err.hint:
            err.hint = err.hint.replace("pass null (--clear-blocker)", "pass --clear-blocker")

    def picked_non_runnable(self, wid: str, readiness: str) -> str:
        return (
            f"{wid} is {readiness}; picking it for review does not make it runnable. "
            f"Clear the blocker with {self.command(f'update {wid} --clear-blocker')} "
            "(or change --plan-status) only once it is resolved."
        )

    def nothing_to_update_hint(self) -> str:
        return (
            "pass at least one of --objective, --plan-status, --todo (or --clear-todos), "
            "--blocked-by (or --clear-blocker)"
        )

    def recheck_without_blocker(self) -> tuple[str, str]:
        return (
            "--recheck-after applies only together with --blocked-by",
            "pass --blocked-by with --recheck-after "
            "(re-stating the blocker refreshes its deadline)",
        )


TOOLS = Vocabulary()


def for_source(source: str, vocab: Vocabulary | None = None) -> Vocabulary:
    """The vocabulary for a caller: ``vocab`` when given, else the CLI's for
    ``source="operator"`` and the model's for everything else."""
    if vocab is not None:
        return vocab
    return CliVocabulary() if source == "operator" else TOOLS


# ------------------------------------------------- model-facing context prose

BINDING_NOTE = (
    "Subsequent tool calls in this turn are bound to work item {wid} "
    "unless another work_item_id is explicit."
)

MISSING_COMPLETION_REPORT = (
    "Completed without same-round report text, so no completion report was recorded. "
    f"Write the operator-facing report as assistant text in the same round as {COMPLETE_TOOL}; "
    "if one is needed now, give it in your next reply."
)
COMPLETION_REPORT_AMBIGUOUS = (
    "This round completes more than one work item, so its text was not promoted to any of "
    "them. Complete one work item per round with its own report."
)
COMPLETION_REPORT_NOT_FOCUSED = (
    "{wid} was not the current work item, so the round's text was not promoted to its "
    "completion report. Pick a work item before completing it with a report."
)

REVIEW_TRIGGERED_LEAD = (
    "An external event arrived for blocked work; review it "
    "(the blocker is not cleared automatically):"
)
ACTIVATE_QUEUED_LEAD = (
    f"No work item is current. Pick one of the queued runnable work items with {PICK_TOOL}:"
)

RECHECK_TEXT = (
    "Recheck reminder for blocked work item {wid} ({objective}): blocked by {blocked_by!r}. "
    f"Inspect the blocker; clear it with {UPDATE_TOOL}(blocked_by=null) if resolved, "
    "or re-state it to wait longer."
)

NO_CURRENT_ITEM = (
    "Current work item: none.\n"
    f"Pick runnable work with {PICK_TOOL}(work_item_id, reason?) or create a work item "
    f"with {CREATE_TOOL} when a separate objective appears."
)
NOT_RUNNABLE_NOTE = (
    "- note: this item is not runnable; it is current for review. Clear blocked_by or set "
    f"plan_status with {UPDATE_TOOL} only when the blocker is really resolved."
)
PRIORITY_NOTE = (
    "Priority: the objective says what this work is; the plan file is the durable "
    "interpretation and approach (it wins when they conflict); the todo list only "
    "tracks progress."
)
SECTION_TITLES = {
    "triggered_blocked": (
        "Triggered blocked work items (an external event arrived; review before deciding"
        " - the blocker is not cleared automatically)"
    ),
    "queued_runnable": (
        "Queued runnable work items (oldest first; pick one with "
        f"{PICK_TOOL} when current work is done or blocked)"
    ),
    "waiting_for_operator": "Work items waiting for operator input (plan_status needs_input)",
    "blocked": "Blocked work items",
    "completed_recent": "Recently completed work items (promoted completion reports)",
}
SECTION_OMITTED = "{title}: {count} (omitted for prompt budget; use ListWorkItems)"

STALE_REMINDER_CLOSING = (
    f"Update the work item ({UPDATE_TOOL} todo_list/plan_status/blocked_by, or "
    f"{COMPLETE_TOOL}) only if material progress, a scope change, a blocker or completed "
    "checklist items actually emerged. This reminder does not record progress."
)
