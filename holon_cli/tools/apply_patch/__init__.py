"""``ApplyPatch``: the runtime's own patch engine (no external ``patch``).

Owns parsing and applying file patches in two dialects:

- unified diffs (``--- a/x`` / ``+++ b/x``, ``/dev/null`` for create and
  delete, ``@@ -l,s +l,s @@`` hunks, ``\\ No newline at end of file``, git
  ``diff --git`` headers including pure renames);
- the Codex envelope (``*** Begin Patch`` / ``*** Add File:`` /
  ``*** Update File:`` [+ ``*** Move to:``] / ``*** Delete File:`` /
  ``*** End Patch``), whose hunks carry no line numbers.

Invariants:

- All or nothing: every file is read, patched in memory and validated before
  the first write; writes are atomic per file, and a failure while writing
  restores the files already written.
- Hunks match on content. A unified hunk is tried at its stated line
  (shifted by what earlier hunks changed), then anywhere after the previous
  hunk when that location is unique; only trailing whitespace may differ.
  Context lines keep the file's own bytes; added lines use the file's line
  ending (LF or CRLF).
- Paths resolve against ``ctx.cwd`` and must stay inside the execution root
  (symlinks resolved). The agent's runtime area (``.holon/``) is never
  patched.

Layout: this module owns the tool (``ApplyPatchArgs`` and the ``ApplyPatch``
handler) and re-exports the engine; ``parse`` holds the model and parsing,
``hunks`` applying hunks to lines, ``plan`` planning and writing.
"""

from __future__ import annotations

from dataclasses import dataclass

from holon_cli.tools.apply_patch.hunks import (
    _Applied,
    _Conflict,
    _dominant_eol,
    _eq,
    _find,
    _key,
    _matches,
    _preview,
    _strip_eol,
    apply_hunks,
    split_lines,
)
from holon_cli.tools.apply_patch.parse import (
    _HUNK_RE,
    MAX_PATCH_CHARS,
    NEARBY_RADIUS,
    PREVIEW_LINE_CHARS,
    PREVIEW_LINES,
    Action,
    FilePatch,
    Hunk,
    _header_path,
    _invalid,
    _parse_codex,
    _parse_hunk,
    _parse_unified,
    _strip_fences,
    _strip_prefixes,
    _unquote,
    parse_patch,
)
from holon_cli.tools.apply_patch.plan import (
    _atomic_write,
    _conflict_error,
    _decode,
    _encode,
    _Escaped,
    _file_ancestor,
    _FileOp,
    _Guard,
    _mkdirs,
    _not_a_directory,
    _Overlay,
    _resolve,
    _unlink_checked,
    commit,
    plan_patch,
)
from holon_cli.tools.base import ToolContext, ToolError, ToolResult, field_doc, tool

# Every name importable from the single-module version, kept importable here.
__all__ = [
    "ApplyPatchArgs",
    "apply_patch",
    "MAX_PATCH_CHARS",
    "PREVIEW_LINES",
    "NEARBY_RADIUS",
    "PREVIEW_LINE_CHARS",
    "_HUNK_RE",
    "Action",
    "Hunk",
    "FilePatch",
    "_invalid",
    "_strip_fences",
    "_unquote",
    "_header_path",
    "_strip_prefixes",
    "parse_patch",
    "_parse_hunk",
    "_parse_unified",
    "_parse_codex",
    "split_lines",
    "_key",
    "_eq",
    "_matches",
    "_preview",
    "_Conflict",
    "_Applied",
    "_find",
    "_dominant_eol",
    "_strip_eol",
    "apply_hunks",
    "_FileOp",
    "_decode",
    "_encode",
    "_Overlay",
    "_Guard",
    "_Escaped",
    "_resolve",
    "_not_a_directory",
    "_file_ancestor",
    "_conflict_error",
    "plan_patch",
    "_atomic_write",
    "_unlink_checked",
    "_mkdirs",
    "commit",
]


# --------------------------------------------------------------- the tool


@dataclass(frozen=True)
class ApplyPatchArgs:
    patch: str = field_doc(
        "A unified diff: per file `--- a/path` and `+++ b/path` (use /dev/null to create or "
        "delete), then "
        "`@@ -l,s +l,s @@` hunks with ' ' context, '-' removed and '+' added lines. Paths are "
        "relative to the "
        "current directory. A `*** Begin Patch` envelope is also accepted."
    )


_CODES = {"added": "A", "modified": "M", "deleted": "D", "moved": "R"}


@tool(
    "ApplyPatch",
    ApplyPatchArgs,
    description=(
        "Create, modify, delete or rename text files with a unified diff. All files change or none "
        "does. "
        "Hunks must match the file's current content (line numbers may be off); include 3 lines of "
        "context. "
        "Read the file first with `sed -n START,ENDp`."
    ),
)
def apply_patch(ctx: ToolContext, args: ApplyPatchArgs) -> ToolResult:
    if len(args.patch) > MAX_PATCH_CHARS:
        raise ToolError(
            "invalid_patch",
            f"the patch is larger than {MAX_PATCH_CHARS} characters",
            field="patch",
            recovery_hint="split it into several smaller patches",
        )
    if not args.patch.strip():
        raise ToolError(
            "invalid_arguments",
            "`patch` is empty",
            field="patch",
            recovery_hint="send the unified diff text",
        )
    files, warnings = parse_patch(args.patch)
    guard = _Guard(ctx)
    ops, notes = plan_patch(ctx, files, guard)
    commit(ops, guard)
    summary: dict[str, list[str]] = {"added": [], "modified": [], "deleted": [], "moved": []}
    entries: list[dict[str, object]] = []
    lines = [f"Applied patch to {len(ops)} file(s):"]
    for op in ops:
        summary[op.action].append(op.path)
        ctx.report.files_touched.append(op.path)
        entry: dict[str, object] = {
            "path": op.path,
            "action": op.action,
            "added_lines": op.added,
            "removed_lines": op.removed,
        }
        if op.source_path:
            entry["moved_from"] = op.source_path
        entries.append(entry)
        counts = (
            " ".join(
                x
                for x in (
                    f"+{op.added}" if op.added else "",
                    f"-{op.removed}" if op.removed else "",
                )
                if x
            )
            or "no line changes"
        )
        name = f"{op.source_path} -> {op.path}" if op.source_path else op.path
        lines.append(f"{_CODES[op.action]} {name} ({counts})")
    for note in notes:
        lines.append(f"Note: {note}")
    for w in warnings:
        lines.append(f"Warning: {w['message']}")
    data: dict[str, object] = {"files": entries, **summary, "notes": notes}
    if warnings:
        data["warnings"] = warnings
    return ToolResult(True, "\n".join(lines), data=data, warnings=warnings)
