"""ApplyPatch planning and writing: resolving every path inside the execution
root, reading and patching all files in memory before the first write
(``plan_patch``), then writing them atomically and restoring what was written
if a later write fails (``commit``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from holon_cli.model.agent import is_supervised_child
from holon_cli.store.fsio import (
    UnsafePathError,
    atomic_write_bytes,
    fd_real_path,
    fsync_dir,
)
from holon_cli.store.layout import HomeLayout
from holon_cli.tools.apply_patch.hunks import (
    _Applied,
    _Conflict,
    _key,
    _preview,
    apply_hunks,
    split_lines,
)
from holon_cli.tools.apply_patch.parse import (
    NEARBY_RADIUS,
    PREVIEW_LINE_CHARS,
    PREVIEW_LINES,
    FilePatch,
    Hunk,
    _invalid,
)
from holon_cli.tools.base import ToolContext, ToolError
from holon_cli.tools.exec_command import resolve_inside_root
from holon_cli.umask import user_umask

# ------------------------------------------------------------ the planning


@dataclass
class _FileOp:
    action: str  # added | modified | deleted | moved
    path: str  # as written in the patch (the destination for moves)
    target: Path
    data: bytes | None  # None: delete
    added: int = 0
    removed: int = 0
    source: Path | None = None  # moves: the file removed after the write
    source_path: str | None = None


def _decode(data: bytes, display: str) -> str:
    if b"\0" in data[:8192]:
        raise ToolError(
            "unsupported_file",
            f"{display} looks like a binary file; ApplyPatch edits text files only",
            details={"path": display},
            recovery_hint="change binary files with a shell command instead",
        )
    return data.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class _Overlay:
    """The working view of the filesystem while a patch is validated."""

    def __init__(self) -> None:
        self.state: dict[Path, bytes | None] = {}

    def exists(self, p: Path) -> bool:
        if p in self.state:
            return self.state[p] is not None
        return p.is_file()

    def read(self, p: Path) -> bytes | None:
        if p in self.state:
            return self.state[p]
        try:
            return p.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None


# why a write is refused: both are tool error kinds
_Violation = Literal["protected_path", "execution_root_violation"]


class _Guard:
    """Where a patch may write, checked at plan time and again at write time.

    Inside the execution root, outside the runtime area (``.holon/``); the
    one exception is the current work item's ``plan.md``, which the work-item
    RFC makes editable regardless of the bound workspace.
    """

    def __init__(self, ctx: ToolContext) -> None:
        self.root = Path(os.path.realpath(ctx.execution_root))
        self.base = Path(os.path.realpath(ctx.cwd)) if ctx.cwd else self.root
        self.runtime: Path | None = None
        self.plan: Path | None = None
        self.shared: Path | None = None  # a child: other agents' homes are off limits
        self.own_home: Path | None = None
        store: Any = getattr(ctx, "store", None)
        layout = getattr(store, "layout", None)
        if store is None or layout is None:
            return
        self.runtime = Path(os.path.realpath(layout.runtime))
        try:
            rec = store.read_record()
            state = rec.get("state") or {}
        except Exception:  # noqa: BLE001 - no record, no plan exception
            return
        if is_supervised_child(rec.get("identity") or {}):
            self.shared = Path(os.path.realpath(HomeLayout.current().agents_dir))
            self.own_home = Path(os.path.realpath(layout.home))
        wid = state.get("current_work_item_id") if isinstance(state, dict) else None
        if isinstance(wid, str) and wid and "/" not in wid and wid not in (".", ".."):
            plan_dir = Path(os.path.realpath(layout.work_items_dir / wid))
            home = Path(os.path.realpath(layout.home))
            if home in plan_dir.parents:
                self.plan = plan_dir / "plan.md"

    def _inside(self, real: Path, top: Path) -> bool:
        return real == top or top in real.parents

    def violation(self, real: Path) -> _Violation | None:
        """Why a write to the real path ``real`` is refused (``None``: allowed)."""
        if self.runtime is not None and self._inside(real, self.runtime):
            return "protected_path"
        if (
            self.shared is not None
            and self._inside(real, self.shared)
            and not (self.own_home is not None and self._inside(real, self.own_home))
        ):
            return "protected_path"  # a child never writes another agent's (shared) memory
        if self._inside(real, self.root) or (self.plan is not None and real == self.plan):
            return None
        return "execution_root_violation"

    def check(self, real: Path) -> None:
        """The write-time re-check (``fsio.atomic_write_bytes``' ``check``)."""
        why = self.violation(real)
        if why is not None:
            raise _Escaped(why, real)


class _Escaped(UnsafePathError):
    def __init__(self, why: _Violation, real: Path) -> None:
        super().__init__(f"{real} is outside the execution root at write time")
        self.why = why
        self.real = real


def _resolve(ctx: ToolContext, guard: _Guard, raw: str, patch_line: int) -> Path:
    if not raw or "\0" in raw:
        raise _invalid("empty or invalid file path", patch_line)
    target = Path(os.path.realpath(guard.base / Path(raw).expanduser()))
    why = guard.violation(target)
    if why == "execution_root_violation":
        resolve_inside_root(ctx, raw, field="path")  # raises the standard error
        raise ToolError(  # pragma: no cover - resolve_inside_root agrees with the guard
            "execution_root_violation", f"{raw} resolves outside the execution root"
        )
    if why == "protected_path" and guard.shared is not None and guard.shared in target.parents:
        if guard.runtime is None or guard.runtime not in target.parents:
            raise ToolError(
                "protected_path",
                f"{raw} is in another agent's home; a child agent does not write shared memory",
                details={"path": raw, "resolved": str(target)},
                recovery_hint="report what should change in your final answer; your parent "
                "decides what to keep",
            )
    if why == "protected_path":
        raise ToolError(
            "protected_path",
            f"{raw} is inside the runtime-owned area {guard.runtime}; it cannot be patched",
            details={"path": raw, "resolved": str(target)},
            recovery_hint="leave `.holon/` to the runtime; "
            "patch files elsewhere in the agent home or workspace",
        )
    if target.is_dir():
        raise ToolError(
            "invalid_patch",
            f"{raw} is a directory, not a file",
            details={"path": raw},
            recovery_hint="patch files, not directories",
        )
    return target


def _not_a_directory(fp: FilePatch, raw: str, target: Path, blocker: Path) -> ToolError:
    return ToolError(
        "not_a_directory",
        f"cannot write {raw}: {blocker} is a file, not a folder; no file was changed",
        details={"path": raw, "resolved": str(target), "blocking_file": str(blocker)},
        recovery_hint=f"pick a path whose folders are folders, or move {blocker.name} "
        "away first (a file and a folder cannot share a name)",
    )


def _file_ancestor(overlay: _Overlay, target: Path) -> Path | None:
    """The nearest ancestor of ``target`` that is (or will be) a file."""
    for anc in target.parents:
        if anc in overlay.state:
            if overlay.state[anc] is not None:
                return anc
            continue
        try:
            st = os.stat(anc)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            return anc
        return None  # an existing folder: its own ancestors are folders too
    return None


def _conflict_error(c: _Conflict, fp: FilePatch, lines: list[str]) -> ToolError:
    hunk: Hunk = c.extra.pop("hunk_obj")
    index = c.extra.pop("hunk")
    center = c.center
    old = hunk.old
    if center is None:
        first = next((t for t in old if t.strip()), None)
        if first is not None:
            center = next(
                (k for k, ln in enumerate(lines) if _key(ln).strip() == first.strip()), None
            )
    center = 0 if center is None else min(max(center, 0), max(len(lines) - 1, 0))
    lo = max(0, center - NEARBY_RADIUS)
    hi = min(len(lines), center + NEARBY_RADIUS + 1)
    nearby = [{"line": k + 1, "text": _preview(_key(lines[k]))} for k in range(lo, hi)]
    details: dict[str, object] = {
        "path": fp.path,
        "hunk": index,
        "hunk_count": len(fp.hunks),
        "hunk_header": hunk.header.strip()[:PREVIEW_LINE_CHARS],
        "reason": c.reason,
        "expected_line": hunk.old_start,
        "expected_context": [_preview(t) for t in old[:PREVIEW_LINES]],
        "nearby_actual": nearby,
        "file_lines": len(lines),
        **c.extra,
    }
    a, b = (lo + 1, max(hi, lo + 1) + 20) if lines else (1, 40)
    return ToolError(
        "patch_conflict",
        f"{fp.path}: hunk {index} of {len(fp.hunks)} does not apply: {c.message}; no file was "
        "changed",
        details=details,
        recovery_hint=f"re-read the file with `sed -n '{a},{b}p' {fp.path}` and regenerate the "
        "hunk against its current content",
    )


def plan_patch(
    ctx: ToolContext, files: list[FilePatch], guard: _Guard | None = None
) -> tuple[list[_FileOp], list[str]]:
    """Validate every file change in memory. Raises :class:`ToolError`; touches nothing.

    Each file is planned against an overlay of the earlier files' results, so
    a patch that adds a file and then updates it applies as one.
    """
    guard = guard or _Guard(ctx)
    overlay = _Overlay()
    ops: list[_FileOp] = []
    notes: list[str] = []
    for fp in files:
        target = _resolve(ctx, guard, fp.path, fp.patch_line)
        current = overlay.read(target)
        if fp.action == "add":
            ops.append(_plan_add(fp, target, current, overlay))
            continue
        if current is None:
            raise _missing_file(fp, target)
        lines = split_lines(_decode(current, fp.path))
        try:
            applied = apply_hunks(lines, fp.hunks)
        except _Conflict as c:
            raise _conflict_error(c, fp, lines) from None
        notes.extend(f"{fp.path}: {n}" for n in applied.notes)
        if fp.action == "delete":
            ops.append(_plan_delete(fp, target, lines, applied, overlay))
        elif fp.move_to is not None:
            ops.append(_plan_move(ctx, guard, fp, target, applied, overlay))
        else:
            data = _encode("".join(applied.lines))
            overlay.state[target] = data
            ops.append(_FileOp("modified", fp.path, target, data, applied.added, applied.removed))
    return ops, notes


def _plan_add(fp: FilePatch, target: Path, current: bytes | None, overlay: _Overlay) -> _FileOp:
    """A new file: only '+' lines, no existing file, no file where a folder must be."""
    if current is not None:
        raise ToolError(
            "file_exists",
            f"cannot create {fp.path}: the file already exists; no file was changed",
            details={"path": fp.path, "resolved": str(target)},
            recovery_hint="patch it with an update hunk (`--- a/path` / `+++ b/path`) "
            "instead, after reading it with `sed -n`",
        )
    blocker = _file_ancestor(overlay, target)
    if blocker is not None:
        raise _not_a_directory(fp, fp.path, target, blocker)
    body: list[str] = []
    no_eol = False
    for h in fp.hunks:
        if any(tag != "+" for tag, _ in h.lines):
            raise _invalid(
                f"the hunk creating {fp.path} has context or removed lines",
                h.patch_line,
                "a new file's hunk is `@@ -0,0 +1,N @@` with only '+' lines",
            )
        body.extend(t for _, t in h.lines)
        no_eol = h.new_no_eol
    text = "".join(t + "\n" for t in body)
    if no_eol and text:
        text = text[:-1]
    data = _encode(text)
    overlay.state[target] = data
    return _FileOp("added", fp.path, target, data, added=len(body))


def _missing_file(fp: FilePatch, target: Path) -> ToolError:
    verb = "delete" if fp.action == "delete" else "modify"
    return ToolError(
        "file_not_found",
        f"cannot {verb} {fp.path}: the file does not exist; no file was changed",
        details={"path": fp.path, "resolved": str(target)},
        recovery_hint="check the path with `rg --files | rg NAME`; to create a file use "
        "`--- /dev/null` / `+++ b/path`",
    )


def _plan_delete(
    fp: FilePatch, target: Path, lines: list[str], applied: _Applied, overlay: _Overlay
) -> _FileOp:
    """A deletion whose hunks (if any) must remove every non-blank line."""
    if fp.hunks and any(_key(ln).strip() for ln in applied.lines):
        raise ToolError(
            "patch_conflict",
            f"cannot delete {fp.path}: the file has content the patch does not remove; no "
            "file was changed",
            details={
                "path": fp.path,
                "remaining_lines": len(applied.lines),
                "remaining_preview": [_preview(_key(x)) for x in applied.lines[:PREVIEW_LINES]],
            },
            recovery_hint=f"re-read the file with `sed -n '1,200p' {fp.path}` and "
            "regenerate the deletion",
        )
    overlay.state[target] = None
    return _FileOp("deleted", fp.path, target, None, removed=len(lines))


def _plan_move(
    ctx: ToolContext,
    guard: _Guard,
    fp: FilePatch,
    target: Path,
    applied: _Applied,
    overlay: _Overlay,
) -> _FileOp:
    """An update that also renames: the destination must be free (or the file itself)."""
    assert fp.move_to is not None
    data = _encode("".join(applied.lines))
    dest = _resolve(ctx, guard, fp.move_to, fp.patch_line)
    blocker = _file_ancestor(overlay, dest)
    if blocker is not None:
        raise _not_a_directory(fp, fp.move_to, dest, blocker)
    if dest != target and overlay.exists(dest):
        raise ToolError(
            "file_exists",
            f"cannot move {fp.path} to {fp.move_to}: the destination exists; no file was changed",
            details={"path": fp.move_to, "resolved": str(dest)},
            recovery_hint="pick another destination or delete it first",
        )
    overlay.state[target] = None
    overlay.state[dest] = data
    return _FileOp(
        "moved",
        fp.move_to,
        dest,
        data,
        applied.added,
        applied.removed,
        source=target,
        source_path=fp.path,
    )


# ----------------------------------------------------------------- writing


def _atomic_write(
    path: Path, data: bytes, mode: int | None, check: Callable[[Path], None] | None = None
) -> None:
    """The tree's one atomic write (``fsio``). ``mode=None``: a new file (umask
    applies, as with an editor); ``check`` re-checks containment of the real
    target at write time; a target that became a symlink is refused."""
    atomic_write_bytes(
        path, data, mode=mode, new_mode=None, check=check, refuse_symlink=True, mkdirs=False
    )


def _unlink_checked(path: Path, check: Callable[[Path], None] | None) -> None:
    """Delete ``path`` by name inside its folder, after checking the folder's real path."""
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if check is not None:
            check(fd_real_path(dfd, path.parent) / path.name)
        os.unlink(path.name, dir_fd=dfd)
    finally:
        os.close(dfd)


def _mkdirs(d: Path, created: list[Path]) -> None:
    missing: list[Path] = []
    p = d
    while not p.exists():
        missing.append(p)
        p = p.parent
    mode = 0o777 & ~user_umask()  # holon's own umask is 077: a workspace gets the user's
    for m in reversed(missing):
        m.mkdir()
        os.chmod(m, mode)
        created.append(m)


def commit(ops: list[_FileOp], guard: _Guard | None = None) -> None:
    """Write every planned change; on failure restore what was already written.

    With a ``guard`` every write and delete re-checks, at that moment, that
    the real path is still where the patch may write: a command that swapped
    a folder for a symlink (or planted one at the target) after the patch was
    planned cannot redirect the write."""
    check = guard.check if guard is not None else None
    undo: list[tuple[Path, bytes | None, int | None]] = []
    created_dirs: list[Path] = []
    # every original is read before anything is written
    originals = _read_originals(ops)
    final: dict[Path, bytes | None] = {}
    for op in ops:
        if op.source is not None and op.source != op.target:
            final[op.source] = None
        final[op.target] = op.data
    writes = [(p, d) for p, d in final.items() if d is not None]
    deletes = [p for p, d in final.items() if d is None and originals[p][0] is not None]
    try:
        for p, data in writes:
            orig, mode = originals[p]
            _mkdirs(p.parent, created_dirs)
            undo.append((p, orig, mode))
            _atomic_write(p, data, mode, check)
        for p in deletes:
            orig, mode = originals[p]
            undo.append((p, orig, mode))
            _unlink_checked(p, check)
    except OSError as exc:
        _roll_back(undo, created_dirs, check)
        raise _write_error(exc) from None
    dirs = {p.parent for p in deletes}
    for folder in dirs:
        try:
            fsync_dir(folder)
        except OSError:
            continue


def _read_originals(ops: list[_FileOp]) -> dict[Path, tuple[bytes | None, int | None]]:
    """Content and mode of every path the ops touch (``None`` when missing)."""
    originals: dict[Path, tuple[bytes | None, int | None]] = {}
    for op in ops:
        for p in (op.target, op.source):
            if p is not None and p not in originals:
                try:
                    originals[p] = (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
                except FileNotFoundError:
                    originals[p] = (None, None)
    return originals


def _roll_back(
    undo: list[tuple[Path, bytes | None, int | None]],
    created_dirs: list[Path],
    check: Callable[[Path], None] | None,
) -> None:
    """Restore what was written, newest first, then remove the folders made
    for it; best effort (a restore that fails leaves the rest to restore)."""
    for p, orig, mode in reversed(undo):
        try:
            if orig is None:
                _unlink_checked(p, check)
            else:
                _atomic_write(p, orig, mode, check)
        except OSError:
            pass
    for made in reversed(created_dirs):
        try:
            made.rmdir()
        except OSError:
            pass


def _write_error(exc: OSError) -> ToolError:
    """The tool error for a write that failed (and was rolled back)."""
    if isinstance(exc, _Escaped):
        return ToolError(
            exc.why,
            f"{exc.real} is outside the execution root or protected now (a folder or "
            "file was replaced by a symlink after the patch was checked); nothing was "
            "written there and the files already written were restored",
            details={"resolved": str(exc.real)},
            recovery_hint="inspect the paths with `ls -la`; remove the symlink, then retry",
        )
    if isinstance(exc, UnsafePathError):
        return ToolError(
            "unsafe_path",
            f"{exc}; the files already written were restored",
            recovery_hint="inspect the paths with `ls -la`; remove the symlink, then retry",
        )
    if isinstance(exc, NotADirectoryError):
        return ToolError(
            "not_a_directory",
            f"writing the patch failed: a folder on the way to "
            f"{getattr(exc, 'filename', '') or 'a target'} is a file; "
            "the files already written were restored",
            details={"path": str(getattr(exc, "filename", "") or "")},
            recovery_hint="pick a path whose folders are folders",
        )
    return ToolError(
        "write_failed",
        f"writing the patch failed ({exc.strerror or exc}: "
        f"{getattr(exc, 'filename', '')}); the files already written were restored",
        details={"path": str(getattr(exc, "filename", "") or "")},
        recovery_hint="check permissions and free space, then retry",
        retryable=True,
    )
