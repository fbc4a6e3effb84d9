"""Workspace tools: ``UseWorkspace`` and ``DetachWorkspace`` (runtime spec
"UseWorkspace", "DetachWorkspace"; contract "Workspaces").

Thin adapters onto :mod:`holon_cli.runtime.workspace.plane`: a relative
path is taken from the current ``cwd``; the agent may not attach the
filesystem root or the runtime's home; every refusal is a tool error with
the previous binding intact. A successful ``UseWorkspace`` reports
``workspace_changed`` so the rest of the turn runs in the new execution
root. Neither tool deletes anything: detaching only forgets an id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from holon_cli.errors import HolonError, UsageError
from holon_cli.runtime.workspace import plane
from holon_cli.tools.base import ToolContext, ToolError, field_doc, tool


def _tool_error(err: HolonError) -> ToolError:
    field = str(err.details.get("field")) if err.details.get("field") else None
    kind = "invalid_arguments" if isinstance(err, UsageError) else err.kind
    details = {k: v for k, v in err.details.items() if k != "field"}
    message, hint = err.said_on("tool")
    return ToolError(kind, message, recovery_hint=hint, field=field, details=details)


@dataclass(frozen=True)
class UseWorkspaceArgs:
    path: str | None = field_doc(
        "A project directory to attach and make active (relative to your cwd).", default=None
    )
    workspace_id: str | None = field_doc(
        'An attached workspace id to make active again; "agent_home" returns to your home.',
        default=None,
    )
    mode: Literal["direct", "isolated"] | None = field_doc(
        "direct (default): work in the project itself; isolated: work in a git worktree "
        "on a branch of its own, made (or resumed) by the runtime.",
        default=None,
    )


@tool(
    "UseWorkspace",
    UseWorkspaceArgs,
    description=(
        "Make a workspace active: give exactly one of `path` (a project directory; attached "
        "on first use) or `workspace_id`. Commands and patches then run in its execution "
        "root; its AGENTS.md applies from the next round. Returns workspace_id, "
        "workspace_anchor, execution_root, execution_root_id, cwd, projection_kind and "
        "worktree_session."
    ),
    guidance=(
        "Use UseWorkspace to switch projects (path) or return to one (workspace_id; "
        '"agent_home" for your home); mode "isolated" to change a git repository on a '
        "branch of your own without touching its checkout."
    ),
)
def use_workspace(ctx: ToolContext, args: UseWorkspaceArgs) -> dict[str, object]:
    try:
        out = plane.use_workspace(
            ctx.store,
            path=args.path,
            workspace_id=args.workspace_id,
            mode=args.mode,
            base=ctx.cwd,
            source="tool",
        )
    except HolonError as err:
        raise _tool_error(err) from None
    ctx.report.workspace_changed = True
    return out


@dataclass(frozen=True)
class DetachWorkspaceArgs:
    workspace_id: str = field_doc("The attached workspace id to forget (not the active one).")


@tool(
    "DetachWorkspace",
    DetachWorkspaceArgs,
    description=(
        "Remove a workspace id from your attached workspaces. The active workspace cannot "
        "be detached (switch first; AgentHome is the fallback). Nothing on disk is deleted."
    ),
)
def detach_workspace(ctx: ToolContext, args: DetachWorkspaceArgs) -> dict[str, object]:
    try:
        return plane.detach_workspace(ctx.store, args.workspace_id, source="tool")
    except HolonError as err:
        raise _tool_error(err) from None
