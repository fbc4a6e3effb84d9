"""Memory tools: ``MemorySearch`` and ``MemoryGet`` (spec "Memory Search Index").

Model-facing shapes only; the index, its freshness and the opaque
``source_ref`` live in :mod:`holon_cli.runtime.memory.search`. Results carry
provenance (kind, scope, workspace, source path) so the model can tell
curated memory from runtime evidence; ``MemoryGet`` returns the exact
original text, never the index's projection.
"""

from __future__ import annotations

from dataclasses import dataclass

from holon_cli.errors import HolonError, UsageError
from holon_cli.runtime.memory import search as M
from holon_cli.tools.base import ToolContext, ToolError, field_doc, tool


def _tool_error(err: HolonError) -> ToolError:
    field = str(err.details.get("field")) if err.details.get("field") else None
    kind = "invalid_arguments" if isinstance(err, UsageError) else err.kind
    message, hint = err.said_on("tool")
    return ToolError(kind, message, recovery_hint=hint, field=field)


@dataclass(frozen=True)
class MemorySearchArgs:
    query: str = field_doc("Words to look for (any language; Chinese/Japanese/Korean included).")
    limit: int | None = field_doc(
        f"At most this many results (1-{M.MAX_LIMIT}, default {M.DEFAULT_LIMIT}).", default=None
    )
    include_all_workspaces: bool | None = field_doc(
        "Also search memory recorded in other workspaces (default: the active one and "
        "agent-wide memory).",
        default=None,
    )


@tool(
    "MemorySearch",
    MemorySearchArgs,
    description=(
        "Search your durable memory: memory/self.md and memory/operator.md, past briefs, "
        "work items (objective, plan, completion report) and archived episodes. Returns "
        "ranked results with a snippet and an opaque `source_ref` for MemoryGet."
    ),
    guidance=(
        "Use MemorySearch before asking the operator something you may have been told "
        "before, or when resuming work from an earlier day; then MemoryGet the best result."
    ),
)
def memory_search(ctx: ToolContext, args: MemorySearchArgs) -> dict[str, object]:
    try:
        return M.memory_search(
            ctx.store,
            args.query,
            limit=M.DEFAULT_LIMIT if args.limit is None else args.limit,
            include_all_workspaces=bool(args.include_all_workspaces),
        )
    except HolonError as err:
        raise _tool_error(err) from None


@dataclass(frozen=True)
class MemoryGetArgs:
    source_ref: str = field_doc("A `source_ref` exactly as MemorySearch returned it.")
    max_chars: int | None = field_doc(
        f"Return at most this many characters (1-{M.MAX_CHARS}, default {M.DEFAULT_MAX_CHARS}).",
        default=None,
    )


@tool(
    "MemoryGet",
    MemoryGetArgs,
    description=(
        "Read the exact text of one memory source found by MemorySearch, with its "
        "provenance; `truncated` says whether `max_chars` cut it."
    ),
)
def memory_get(ctx: ToolContext, args: MemoryGetArgs) -> dict[str, object]:
    try:
        return M.memory_get(
            ctx.store,
            args.source_ref,
            max_chars=M.DEFAULT_MAX_CHARS if args.max_chars is None else args.max_chars,
        )
    except HolonError as err:
        raise _tool_error(err) from None
