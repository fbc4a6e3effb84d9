"""click parameter types for the values the contract defines (DURATION, MODEL),
so a bad value gets click's standard message and exit 2 before any work; and
the ``shell_complete`` callbacks that offer live ids on TAB (agents, work
items, tasks, timers: read by :mod:`holon_cli.cli.completion_ids`) and the
closed sets of plain options (``enqueue --kind``/``--priority``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from holon_cli.cli.refs import check_env_model, check_model_text

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from holon_cli.cli.completion_ids import Candidate

if TYPE_CHECKING:  # click >= 8.2 makes ParamType generic; 8.1 (still supported) does not
    _FloatParam = click.ParamType[float]
    _StrParam = click.ParamType[str]
else:
    _FloatParam = _StrParam = click.ParamType


class Duration(_FloatParam):
    """``500ms``, ``90s``, ``5m``, ``2h``, ``1d`` -> seconds (float)."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float):
            return float(value)
        from holon_cli.clock import parse_duration

        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class ModelRefType(_StrParam):
    """``<provider>/<model>`` with a known provider, or ``scripted:<path>``."""

    name = "model"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from holon_cli.errors import UsageError

        try:
            return check_model_text(str(value))
        except UsageError as exc:
            self.fail(f"{exc.message} ({exc.hint})" if exc.hint else exc.message, param, ctx)


__all__ = [
    "DURATION",
    "MODEL",
    "Duration",
    "ModelRefType",
    "check_env_model",
    "check_model_text",
    "complete_agents",
    "complete_open_work_items",
    "complete_running_tasks",
    "complete_skills",
    "complete_tasks",
    "complete_timers",
    "complete_turns",
    "complete_work_items",
    "complete_words",
]

DURATION = Duration()
MODEL = ModelRefType()


# -- shell completion ------------------------------------------------------------------

Completer = Callable[[click.Context, click.Parameter, str], "list[CompletionItem[str]]"]


def _items(cands: Sequence[Candidate]) -> list[CompletionItem[str]]:
    from click.shell_completion import CompletionItem

    return [CompletionItem(c.value, help=c.help or None) for c in cands]


def _agent_of(ctx: click.Context) -> str | None:
    """The ``--agent`` given before the word being completed (else the default)."""
    value = ctx.params.get("agent_id")
    return value if isinstance(value, str) else None


def complete_agents(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem[str]]:
    """Agent ids of the home (``--agent``, ``holon agent status ID``, ...)."""
    from holon_cli.cli import completion_ids

    return _items(completion_ids.agents(incomplete))


def _work_items(open_only: bool) -> Completer:
    def complete(
        ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem[str]]:
        from holon_cli.cli import completion_ids

        return _items(completion_ids.work_items(_agent_of(ctx), incomplete, open_only=open_only))

    return complete


def _tasks(active_only: bool) -> Completer:
    def complete(
        ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem[str]]:
        from holon_cli.cli import completion_ids

        return _items(completion_ids.tasks(_agent_of(ctx), incomplete, active_only=active_only))

    return complete


def complete_timers(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem[str]]:
    """The active timers of the ``--agent`` (what ``holon timer cancel`` takes)."""
    from holon_cli.cli import completion_ids

    return _items(completion_ids.timers(_agent_of(ctx), incomplete, active_only=True))


def complete_turns(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem[str]]:
    """Recorded turn ids of the ``--agent`` (newest first; what ``holon replay`` takes)."""
    from holon_cli.cli import completion_ids

    return _items(completion_ids.turns(_agent_of(ctx), incomplete))


def complete_attached_workspaces(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem[str]]:
    """The ``--agent``'s attached workspace ids (what ``workspace detach`` takes)."""
    from holon_cli.cli import completion_ids

    return _items(completion_ids.workspaces(_agent_of(ctx), incomplete, with_home=False))


def complete_workspace_targets(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem[str]]:
    """What ``workspace use`` takes: ``agent_home``, the attached ids, or a directory."""
    from click.shell_completion import CompletionItem

    from holon_cli.cli import completion_ids

    ids = _items(completion_ids.workspaces(_agent_of(ctx), incomplete, with_home=True))
    return [*ids, CompletionItem(incomplete, type="dir")]


def complete_skills(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem[str]]:
    """The ``--agent``'s own skills (what ``holon skills rm`` takes)."""
    from holon_cli.cli import completion_ids

    return _items(completion_ids.skills(_agent_of(ctx), incomplete))


def complete_words(words: Sequence[str]) -> Completer:
    """A closed set of values for a plain option the command checks itself."""

    def complete(
        ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem[str]]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(w) for w in words if w.startswith(incomplete)]

    return complete


complete_work_items = _work_items(open_only=False)
"""Every work item of the ``--agent`` (show, path, edit)."""
complete_open_work_items = _work_items(open_only=True)
"""Open work items of the ``--agent`` (pick, update, complete, ``--work-item``)."""
complete_tasks = _tasks(active_only=False)
"""Every command task of the ``--agent`` (status, output)."""
complete_running_tasks = _tasks(active_only=True)
"""Running command tasks of the ``--agent`` (input, stop)."""
