"""Agent-plane tools: ``Sleep``, ``Enqueue``, ``AgentGet`` and ``SpawnAgent``.

Owns the model-facing shapes only; the work happens in ``runtime/``
(admission, inspection) or in the turn engine, which reads the turn-local
effects these tools report:

- ``ctx.report.sleep`` (a :class:`~holon_cli.tools.base.SleepRequest`): the
  model asked to rest. The engine ends the turn after the current round;
  ``duration_ms`` is a short session-local wake delay (``None``: rest until
  the next wake signal). The last ``Sleep`` of a round wins.
- ``ctx.effects["enqueued"] = [message_id, ...]`` (turn-local scratch, not
  read by the loop): follow-ups this turn admitted for the same agent
  (bounded by ``MAX_FOLLOWUPS_PER_TURN``).

``AgentGet`` never reveals private agents other than the caller's own
supervised children: an unknown or private id is ``not_found`` alike; it
lists the caller's ``active_children``.

``SpawnAgent`` is the delegation primitive (``runtime/children``): a
supervised ``private_child`` (result: ``agent_id``, ``child_agent_id``,
``supervision_task_id``, ``task_handle``, ``child_supervision``) or a
``public_named`` peer (result: exactly ``{agent_id}``). Its only text field
is ``initial_message``; any other field is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from holon_cli.errors import HolonError, UsageError
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.inspect import agent_summary
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot
from holon_cli.store.layout import AGENT_ID_RE, HomeLayout
from holon_cli.tools.base import SleepRequest, ToolContext, ToolError, field_doc, tool

if TYPE_CHECKING:
    from collections.abc import Mapping

    from holon_cli.runtime.agents.profiles import ChildProfile

MAX_FOLLOWUPS_PER_TURN = 8
SELF_FOLLOWUP_ORIGIN = "system:self_followup"


def _tool_error(err: HolonError, *, field: str | None = None) -> ToolError:
    """Map a runtime error onto the tool error envelope (kinds stay stable)."""
    kind = "invalid_arguments" if isinstance(err, UsageError) else err.kind
    message, hint = err.said_on("tool")
    return ToolError(
        kind, message, details=dict(err.details) or None, recovery_hint=hint, field=field
    )


# ------------------------------------------------------------------- Sleep


@dataclass(frozen=True)
class SleepArgs:
    duration_ms: int | None = field_doc(
        (
            "Omit to rest until the next message or event. Only for a short, bounded wake-up "
            "delay in milliseconds."
        ),
        default=None,
    )
    reason: str | None = field_doc("Why you are resting (recorded for the operator).", default=None)


@tool(
    "Sleep",
    SleepArgs,
    description=(
        "Rest: end this turn after the current tool round. Omit `duration_ms` to sleep "
        "until the next "
        "message, event or task result arrives; pass a positive `duration_ms` only to be "
        "woken after a short delay."
    ),
)
def sleep(ctx: ToolContext, args: SleepArgs) -> dict[str, object]:
    duration = args.duration_ms
    if duration is not None and duration < 0:
        raise ToolError(
            "invalid_arguments",
            "`duration_ms` must not be negative",
            field="duration_ms",
            recovery_hint=(
                "omit `duration_ms` to rest until the next wake signal, or pass a positive delay"
            ),
        )
    if duration == 0:
        duration = None  # tolerated model output: same as omitting it
    reason = (args.reason or "").strip() or None
    ctx.report.sleep = SleepRequest(duration, reason)
    wake = (
        f"after {duration} ms or on the next wake signal"
        if duration
        else "on the next message, event or task result"
    )
    return {
        "sleeping": True,
        "duration_ms": duration,
        "reason": reason,
        "wake": wake,
        "summary": f"The turn ends after this round; you will wake {wake}.",
    }


# ----------------------------------------------------------------- Enqueue


@dataclass(frozen=True)
class EnqueueArgs:
    text: str = field_doc("The follow-up instruction to deliver to yourself as a new message.")
    priority: Literal["interject", "next", "normal", "background"] | None = field_doc(
        (
            "Queue priority (default normal): interject and next run before other queued "
            "messages, background after."
        ),
        default=None,
    )


@tool(
    "Enqueue",
    EnqueueArgs,
    description=(
        "Queue a follow-up message to yourself (an internal follow-up). It is handled in a "
        "later turn, "
        "after this one ends, in priority order with other queued messages. Returns the message id."
    ),
)
def enqueue(ctx: ToolContext, args: EnqueueArgs) -> dict[str, object]:
    sent: list[str] = ctx.effects.setdefault("enqueued", [])
    if len(sent) >= MAX_FOLLOWUPS_PER_TURN:
        raise ToolError(
            "limit_exceeded",
            (
                f"this turn already queued {len(sent)} follow-ups (the limit is "
                f"{MAX_FOLLOWUPS_PER_TURN})"
            ),
            details={"enqueued": list(sent)},
            recovery_hint="combine the remaining follow-ups into one message",
        )
    message = ctx.message or {}
    metadata: dict[str, object] = {"enqueued_by": "Enqueue", "turn_id": ctx.turn_id}
    try:
        env = admit(
            args.text,
            store=ctx.store,
            kind="internal_followup",
            origin=SELF_FOLLOWUP_ORIGIN,
            priority=args.priority or "normal",
            causation_id=message.get("id"),
            correlation_id=message.get("correlation_id"),
            delivery_surface="runtime_system",
            admission_context="runtime_owned",
            metadata=metadata,
        )
    except HolonError as err:
        raise _tool_error(err, field="text" if isinstance(err, UsageError) else None) from None
    sent.append(env["id"])
    return {
        "message_id": env["id"],
        "agent_id": env["agent_id"],
        "kind": env["kind"],
        "priority": env["priority"],
        "causation_id": env.get("causation_id"),
        "summary": (
            f"Queued follow-up {env['id']} ({env['priority']}); it is handled after this turn ends."
        ),
    }


# ---------------------------------------------------------------- AgentGet


@dataclass(frozen=True)
class AgentGetArgs:
    agent_id: str | None = field_doc("The agent to inspect; omit for yourself.", default=None)


def _visible_store(ctx: ToolContext, agent_id: str) -> AgentStore:
    not_found = ToolError(
        "not_found",
        f"no visible agent named {agent_id!r}",
        field="agent_id",
        recovery_hint=(
            "omit `agent_id` to inspect yourself; other agents are visible only when public"
        ),
    )
    if not AGENT_ID_RE.match(agent_id) or agent_id in (".", ".."):
        raise not_found
    layout = HomeLayout.current().agent(agent_id)
    try:
        rec = read_snapshot(layout.agent_file)
    except HolonError:
        rec = None
    if rec is None:
        raise not_found
    ident = rec.get("identity") or {}
    own_child = (
        ident.get("lineage_parent_agent_id") == ctx.agent_id
        and ident.get("ownership") == "parent_supervised"
    )
    if ident.get("visibility") != "public" and not own_child:
        raise not_found
    return AgentStore(layout)


@tool(
    "AgentGet",
    AgentGetArgs,
    description=(
        "Inspect an agent's current state: status, identity (visibility, ownership, "
        "profile preset, lineage), "
        "queue counts, current work item and token usage. Omit `agent_id` for yourself."
    ),
)
def agent_get(ctx: ToolContext, args: AgentGetArgs) -> dict[str, object]:
    aid = (args.agent_id or "").strip()
    store: AgentStore = ctx.store if not aid or aid == ctx.agent_id else _visible_store(ctx, aid)
    try:
        summary = agent_summary(store)
    except HolonError as err:
        raise _tool_error(err) from None
    summary["is_self"] = store.agent_id == ctx.agent_id
    from holon_cli.runtime.children.handle import active_children

    summary["active_children"] = active_children(store)
    return {"agent": summary}


# --------------------------------------------------------------- SpawnAgent


@dataclass(frozen=True)
class SpawnAgentArgs:
    initial_message: str | None = field_doc(
        "What the new agent should do: its first message (required for private_child; "
        "optional bootstrap input for public_named). The child's task label comes from it.",
        default=None,
    )
    preset: str | None = field_doc(
        "private_child (default): a private child you supervise through the returned task "
        "handle (TaskStatus, TaskOutput, TaskInput, TaskStop); its result comes back as one "
        "task_result. public_named: a durable public agent that owns itself (needs agent_id). "
        "Any other name is a child profile file (.agents/profiles/<name>.md in your "
        "workspace, or profiles/<name>.md in the holon home): a private_child with that "
        "profile's model, tools, budgets and instructions.",
        default=None,
    )
    agent_id: str | None = field_doc(
        "The new agent's id (public_named only; private children get a generated id).",
        default=None,
    )
    template: str | None = field_doc(
        "Template of the new agent's home (default: holon-default).", default=None
    )
    workspace_mode: Literal["inherit", "worktree", "explicit_root"] | None = field_doc(
        "private_child: inherit (default) works in your workspace; worktree gives the child "
        "a new git worktree on its own branch (removed when clean at the end, else kept); "
        "explicit_root works in the directory `workspace_root` names.",
        default=None,
    )
    workspace_root: str | None = field_doc(
        "explicit_root only: the child's directory (relative to your cwd); never the holon "
        "home or a folder inside it.",
        default=None,
    )
    context: Literal["fork", "fresh"] | None = field_doc(
        "private_child: fork (default) also gives the child a bounded, runtime-derived view "
        "of your context (your active work item with its plan and waits, working memory, "
        "related episodes, recent conversation); fresh gives it initial_message only.",
        default=None,
    )


def _spawn_error(message: str, field: str, hint: str) -> ToolError:
    return ToolError("invalid_arguments", message, field=field, recovery_hint=hint)


def _profile(ctx: ToolContext, name: str) -> ChildProfile:
    """The child profile ``name`` for this agent's workspace, as a tool error
    when it is missing or broken (the message names the file and key)."""
    import json
    from pathlib import Path

    from holon_cli.errors import NotFoundError
    from holon_cli.runtime.agents.profiles import ProfileError, find

    # the built-in tools' names, from the generated manifest (tools/catalog.py reads it too)
    rows = json.loads(Path(__file__).with_name("manifest.json").read_bytes())["tools"]
    known = {str(r["name"]) for r in rows}
    try:
        return find(name, ctx.workspace_anchor, known_tools=known)
    except NotFoundError as err:
        raise ToolError(
            "invalid_arguments", err.message, field="preset", recovery_hint=err.hint
        ) from None
    except ProfileError as err:
        raise ToolError(
            "invalid_arguments",
            err.message,
            field="preset",
            details=dict(err.details) or None,
            recovery_hint=err.hint,
        ) from None


@tool(
    "SpawnAgent",
    SpawnAgentArgs,
    description=(
        "Delegate: create a child agent. Default preset private_child: a private child that "
        "works on initial_message in the background; supervise it with the task tools on the "
        "returned task_handle; its final answer arrives as one task_result message. "
        "public_named creates a durable public agent (agent_id required) and returns its id. "
        "Another preset name picks a child profile file."
    ),
)
def spawn_agent(ctx: ToolContext, args: SpawnAgentArgs) -> Mapping[str, object]:
    from holon_cli.runtime.children import spawn as sp

    preset = (args.preset or "private_child").strip()
    text = args.initial_message
    try:
        if preset == "public_named":
            if not (args.agent_id or "").strip():
                raise _spawn_error(
                    "public_named needs `agent_id`",
                    "agent_id",
                    'pass the new agent\'s id, e.g. {"agent_id": "reviewer"}',
                )
            for name in ("workspace_mode", "workspace_root", "context"):
                if getattr(args, name) is not None:
                    raise _spawn_error(
                        f"`{name}` is for private children only",
                        name,
                        "omit it: a public agent inherits your attached workspaces and "
                        "starts from initial_message",
                    )
            return sp.spawn_public_named(
                ctx.store, args.agent_id or "", initial_message=text, template=args.template
            )
        profile: ChildProfile | None = None
        if preset != "private_child":
            profile = _profile(ctx, preset)
        if args.agent_id is not None:
            raise _spawn_error(
                "`agent_id` is for public_named only; private children get a generated id",
                "agent_id",
                "omit agent_id, or pass preset public_named",
            )
        if text is None or not text.strip():
            raise _spawn_error(
                "private_child needs a non-empty `initial_message`",
                "initial_message",
                "say what the child should do and what to report back",
            )
        mode = args.workspace_mode or (profile.workspace_mode if profile else None)
        root = args.workspace_root
        if root is None and profile is not None and args.workspace_mode is None:
            root = profile.workspace_root
        return sp.spawn_private_child(
            ctx.store,
            text,
            template=args.template,
            workspace_mode=mode or "inherit",
            parent_message=ctx.message,
            turn_id=ctx.turn_id,
            context=args.context or (profile.context if profile else None) or "fork",
            workspace_root=root,
            profile=profile,
        )
    except HolonError as err:
        raise _tool_error(err) from None
