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
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from holon_cli.store.fsio import UnsafePathError, atomic_write_bytes, fd_real_path, fsync_dir
from holon_cli.tools.base import ToolContext, ToolError, ToolResult, field_doc, tool
from holon_cli.tools.exec_command import resolve_inside_root

MAX_PATCH_CHARS = 5_000_000
PREVIEW_LINES = 8
NEARBY_RADIUS = 4
PREVIEW_LINE_CHARS = 120

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")

Action = Literal["add", "update", "delete"]


# ------------------------------------------------------------------ model


@dataclass
class Hunk:
    lines: list[tuple[str, str]]  # (tag, text); tag is " ", "-" or "+"
    header: str
    patch_line: int  # 1-based line of the header in the patch text
    old_start: int | None = None  # 1-based, None when the hunk has no position
    old_count: int | None = None
    new_count: int | None = None
    old_no_eol: bool = False
    new_no_eol: bool = False
    anchor: str | None = None  # Codex ``@@ <line>``: search after this line
    at_eof: bool = False  # Codex ``*** End of File``

    @property
    def old(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "+"]

    @property
    def new(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "-"]


@dataclass
class FilePatch:
    action: Action
    path: str
    patch_line: int
    hunks: list[Hunk] = field(default_factory=list)
    move_to: str | None = None


def _invalid(message: str, line: int | None = None, hint: str | None = None) -> ToolError:
    details = {"patch_line": line} if line else None
    return ToolError(
        "invalid_patch",
        message + (f" (patch line {line})" if line else ""),
        details=details,
        recovery_hint=hint
        or "send a unified diff (`--- a/path`, `+++ b/path`, `@@ -l,s +l,s @@` hunks) or a `*** "
        "Begin Patch` envelope",
    )


# ----------------------------------------------------------------- parsing


def _strip_fences(text: str) -> str:
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) >= 2 and lines[0].strip().startswith("```") and lines[-1].strip() == "```":
        lines = lines[1:-1]
    return "\n".join(lines)


def _unquote(p: str) -> str:
    """Undo git's C-style quoting of unusual paths (``"a/sp\\303\\251c.txt"``)."""
    if len(p) < 2 or p[0] != '"' or p[-1] != '"':
        return p
    raw, out, i = p[1:-1], bytearray(), 0
    simple = {
        "n": b"\n",
        "t": b"\t",
        '"': b'"',
        "\\": b"\\",
        "r": b"\r",
        "a": b"\a",
        "b": b"\b",
        "f": b"\f",
        "v": b"\v",
    }
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            if re.match(r"[0-7]{3}", raw[i + 1 : i + 4]):
                out.append(int(raw[i + 1 : i + 4], 8))
                i += 4
                continue
        out += ch.encode("utf-8")
        i += 1
    return out.decode("utf-8", "replace")


def _header_path(raw: str) -> str | None:
    p = raw.split("\t", 1)[0].rstrip()
    p = _unquote(p)
    return None if p == "/dev/null" else p


def _strip_prefixes(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    """Drop git's ``a/`` / ``b/`` prefixes, only when they look like git's."""
    old_pref = old is not None and old.startswith("a/")
    new_pref = new is not None and new.startswith("b/")
    if old is not None and new is not None:
        if old_pref and new_pref:
            return old[2:], new[2:]
        return old, new
    if old_pref and old is not None:
        return old[2:], new
    if new_pref and new is not None:
        return old, new[2:]
    return old, new


def parse_patch(text: str) -> tuple[list[FilePatch], list[dict[str, Any]]]:
    """Parse either dialect. Returns the file patches and parse warnings."""
    text = _strip_fences(text.replace("\r\n", "\n"))
    lines = text.split("\n")
    warnings: list[dict[str, Any]] = []
    if lines and lines[0].strip() == "*** Begin Patch":
        files = _parse_codex(lines, warnings)
    else:
        files = _parse_unified(lines, warnings)
    if not files:
        raise _invalid("the patch contains no file changes")
    return files, warnings


def _parse_hunk(
    lines: list[str], i: int, warnings: list[dict[str, Any]], path: str
) -> tuple[Hunk, int]:
    header = lines[i]
    m = _HUNK_RE.match(header)
    hunk = Hunk([], header, i + 1)
    if m:
        hunk.old_start = int(m.group(1))
        hunk.old_count = int(m.group(2)) if m.group(2) is not None else 1
        hunk.new_count = int(m.group(4)) if m.group(4) is not None else 1
    else:
        # a bare ``@@`` (or ``@@ text``): position unknown, found by content
        anchor = header[2:].strip().removesuffix("@@").strip()
        hunk.anchor = anchor or None
    i += 1
    n_old = n_new = 0
    blank_tail = 0  # trailing entries that came from empty patch lines

    def counts_met() -> bool:
        return (
            hunk.old_count is not None
            and hunk.new_count is not None
            and n_old >= hunk.old_count
            and n_new >= hunk.new_count
        )

    while i < len(lines):
        raw = lines[i]
        if raw.startswith("@@") or raw.startswith("diff --git "):
            break
        if raw.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            # a next-file header, unless the counts say this hunk still needs
            # lines and no hunk follows (then it is a removed "-- " line)
            if (
                hunk.old_count is None
                or counts_met()
                or (i + 2 < len(lines) and lines[i + 2].startswith("@@"))
            ):
                break
        if raw.startswith("\\"):
            if hunk.lines:
                tag = hunk.lines[-1][0]
                if tag in " -":
                    hunk.old_no_eol = True
                if tag in " +":
                    hunk.new_no_eol = True
            i += 1
            continue
        if raw == "":
            tag, body = " ", ""
            blank_tail += 1
        elif raw[0] in " +-":
            tag, body = raw[0], raw[1:]
            blank_tail = 0
        else:
            break  # commentary or junk ends the hunk
        hunk.lines.append((tag, body))
        if tag != "+":
            n_old += 1
        if tag != "-":
            n_new += 1
        i += 1
    # blank lines after a complete hunk are separators, not context
    while blank_tail and hunk.lines and hunk.lines[-1] == (" ", ""):
        if (
            hunk.old_count is not None
            and hunk.new_count is not None
            and (n_old - 1 < hunk.old_count or n_new - 1 < hunk.new_count)
        ):
            break
        hunk.lines.pop()
        n_old -= 1
        n_new -= 1
        blank_tail -= 1
    if not hunk.lines:
        raise _invalid(f"hunk {header!r} for {path} has no lines", hunk.patch_line)
    if hunk.old_count is not None and (n_old, n_new) != (hunk.old_count, hunk.new_count):
        warnings.append(
            {
                "kind": "hunk_counts_mismatch",
                "message": f"{path}: hunk {header.strip()!r} says -{hunk.old_count} "
                f"+{hunk.new_count} lines but its body has -{n_old} +{n_new}; the body was used",
            }
        )
    return hunk, i


def _parse_unified(lines: list[str], warnings: list[dict[str, Any]]) -> list[FilePatch]:
    files: list[FilePatch] = []
    i = 0
    git: dict[str, Any] | None = None  # the current ``diff --git`` block

    def flush_git() -> None:
        # a git block without ---/+++ (pure rename, empty new or deleted file)
        if git is None or git["emitted"]:
            return
        old, new = git.get("rename_from"), git.get("rename_to")
        if old and new:
            files.append(FilePatch("update", old, git["line"], move_to=new))
        elif git.get("new_file") and git.get("path"):
            files.append(FilePatch("add", git["path"], git["line"]))
        elif git.get("deleted_file") and git.get("path"):
            files.append(FilePatch("delete", git["path"], git["line"]))

    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            flush_git()
            git = {"line": i + 1, "emitted": False}
            m = re.match(r"^diff --git (?:a/)?(\S+) (?:b/)?(\S+)$", line)
            if m and m.group(1) == m.group(2):
                git["path"] = m.group(1)
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            start = i + 1
            old, new = _strip_prefixes(_header_path(line[4:]), _header_path(lines[i + 1][4:]))
            i += 2
            hunks: list[Hunk] = []
            label = new or old or "?"
            while i < len(lines) and lines[i].startswith("@@"):
                hunk, i = _parse_hunk(lines, i, warnings, label)
                hunks.append(hunk)
            if old is None and new is None:
                raise _invalid("both sides of the file header are /dev/null", start)
            if old is None:
                assert new is not None
                fp = FilePatch("add", new, start, hunks)
            elif new is None:
                fp = FilePatch("delete", old, start, hunks)
            else:
                fp = FilePatch("update", old, start, hunks, move_to=new if new != old else None)
                if not hunks and fp.move_to is None:
                    raise _invalid(
                        f"file header for {old} has no hunks",
                        start,
                        "add `@@ -l,s +l,s @@` hunks after the `+++` line",
                    )
            if git is not None:
                git["emitted"] = True
            files.append(fp)
            continue
        if line.startswith("@@"):
            raise _invalid("hunk found before any `--- a/path` / `+++ b/path` file header", i + 1)
        if git is not None:
            if line.startswith("rename from "):
                git["rename_from"] = _unquote(line[len("rename from ") :].strip())
            elif line.startswith("rename to "):
                git["rename_to"] = _unquote(line[len("rename to ") :].strip())
            elif line.startswith("new file mode"):
                git["new_file"] = True
            elif line.startswith("deleted file mode"):
                git["deleted_file"] = True
        i += 1
    flush_git()
    return files


def _parse_codex(lines: list[str], warnings: list[dict[str, Any]]) -> list[FilePatch]:
    files: list[FilePatch] = []
    i = 1
    ended = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped == "*** End Patch":
            ended = True
            break
        if line.startswith("*** Add File: "):
            fp = FilePatch("add", line[len("*** Add File: ") :].strip(), i + 1)
            hunk = Hunk([], line, i + 1, old_start=1)
            i += 1
            while i < len(lines) and not lines[i].startswith("*** "):
                if not lines[i].startswith("+"):
                    if lines[i] == "" and (i + 1 >= len(lines) or lines[i + 1].startswith("*** ")):
                        i += 1
                        continue
                    raise _invalid(
                        f"every line of an added file must start with '+' ({fp.path})", i + 1
                    )
                hunk.lines.append(("+", lines[i][1:]))
                i += 1
            fp.hunks = [hunk] if hunk.lines else []
            files.append(fp)
            continue
        if line.startswith("*** Delete File: "):
            files.append(FilePatch("delete", line[len("*** Delete File: ") :].strip(), i + 1))
            i += 1
            continue
        if line.startswith("*** Update File: "):
            fp = FilePatch("update", line[len("*** Update File: ") :].strip(), i + 1)
            i += 1
            if i < len(lines) and lines[i].startswith("*** Move to: "):
                fp.move_to = lines[i][len("*** Move to: ") :].strip()
                i += 1
            current: Hunk | None = None
            while i < len(lines):
                raw = lines[i]
                if raw.strip() == "*** End of File":
                    if current is None:
                        raise _invalid("`*** End of File` before any hunk line", i + 1)
                    current.at_eof = True
                    i += 1
                    continue
                if raw.startswith("*** "):
                    break
                if raw.startswith("@@"):
                    current = Hunk(
                        [], raw, i + 1, anchor=raw[2:].strip().removesuffix("@@").strip() or None
                    )
                    fp.hunks.append(current)
                    i += 1
                    continue
                if raw == "" or raw[0] in " +-":
                    if current is None:
                        current = Hunk([], "@@", i + 1)
                        fp.hunks.append(current)
                    current.lines.append((" ", "") if raw == "" else (raw[0], raw[1:]))
                    i += 1
                    continue
                raise _invalid(
                    f"unexpected line in the update of {fp.path}: {raw[:60]!r}",
                    i + 1,
                    "hunk lines start with ' ', '-' or '+'; a new hunk starts with '@@'",
                )
            for h in fp.hunks:
                while h.lines and h.lines[-1] == (" ", "") and any(t != " " for t, _ in h.lines):
                    h.lines.pop()  # blank separator lines before the next file
            fp.hunks = [h for h in fp.hunks if h.lines]
            if not fp.hunks and fp.move_to is None:
                raise _invalid(f"`*** Update File: {fp.path}` has no hunks", fp.patch_line)
            files.append(fp)
            continue
        if not stripped:
            i += 1
            continue
        raise _invalid(
            "expected `*** Add File:`, `*** Update File:`, `*** Delete File:` or `*** End Patch`, "
            f"got {line[:60]!r}",
            i + 1,
        )
    if not ended:
        warnings.append(
            {
                "kind": "missing_end_patch",
                "message": "the patch has no `*** End Patch` line; applied what was there",
            }
        )
    return files


# ---------------------------------------------------------------- applying


def split_lines(text: str) -> list[str]:
    """Split on LF only, keeping terminators (a final line may lack one)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _key(line: str) -> str:
    s = line[:-1] if line.endswith("\n") else line
    return s[:-1] if s.endswith("\r") else s


def _eq(file_line: str, patch_text: str, tolerant: bool) -> bool:
    k = _key(file_line)
    return k.rstrip() == patch_text.rstrip() if tolerant else k == patch_text


def _matches(lines: list[str], pos: int, old: list[str], tolerant: bool) -> bool:
    if pos < 0 or pos + len(old) > len(lines):
        return False
    return all(_eq(lines[pos + j], t, tolerant) for j, t in enumerate(old))


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_LINE_CHARS else text[:PREVIEW_LINE_CHARS] + "…"


class _Conflict(Exception):
    def __init__(self, reason: str, message: str, center: int | None, **extra: Any) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.center = center
        self.extra = extra


@dataclass
class _Applied:
    lines: list[str]
    added: int = 0
    removed: int = 0
    notes: list[str] = field(default_factory=list)


def _find(lines: list[str], hunk: Hunk, cursor: int, shift: int) -> tuple[int, bool]:
    """Where ``hunk`` applies: (position, whitespace-tolerant?)."""
    old = hunk.old
    if hunk.old_start is not None:
        expected = (hunk.old_start - 1 if old else hunk.old_start) + shift
        if not old:
            if cursor <= expected <= len(lines):
                return expected, False
            raise _Conflict(
                "out_of_range",
                f"insertion point line {hunk.old_start} is outside the file ({len(lines)} lines)",
                min(max(expected, 0), len(lines)),
            )
        for tolerant in (False, True):
            if expected >= cursor and _matches(lines, expected, old, tolerant):
                return expected, tolerant
        for tolerant in (False, True):
            cands = [
                p
                for p in range(cursor, len(lines) - len(old) + 1)
                if _matches(lines, p, old, tolerant)
            ]
            if len(cands) == 1:
                return cands[0], tolerant
            if len(cands) > 1:
                raise _Conflict(
                    "ambiguous",
                    f"the hunk's context does not match at line {hunk.old_start} and matches "
                    f"{len(cands)} other places",
                    expected,
                    candidate_lines=[c + 1 for c in cands[:10]],
                )
        raise _Conflict(
            "context_mismatch",
            "the hunk's context and removed lines were not found (expected at line "
            f"{hunk.old_start})",
            expected,
        )
    # no line numbers: Codex semantics, first match after the cursor (and anchor)
    start = cursor
    if hunk.anchor is not None:
        idx = next(
            (k for k in range(cursor, len(lines)) if _key(lines[k]).strip() == hunk.anchor.strip()),
            None,
        )
        if idx is None:
            raise _Conflict(
                "anchor_not_found",
                f"the anchor line {hunk.anchor!r} was not found after the previous hunk",
                None,
            )
        start = idx + 1
    if not old:
        return (start if hunk.anchor is not None else len(lines)), False
    for tolerant in (False, True):
        if hunk.at_eof:
            p = len(lines) - len(old)
            if p >= start and _matches(lines, p, old, tolerant):
                return p, tolerant
            continue
        for p in range(start, len(lines) - len(old) + 1):
            if _matches(lines, p, old, tolerant):
                return p, tolerant
    raise _Conflict(
        "context_mismatch",
        "the hunk's context and removed lines were not found"
        + (" at the end of the file" if hunk.at_eof else ""),
        start if hunk.anchor is not None else None,
    )


def _dominant_eol(lines: list[str]) -> str:
    crlf = sum(1 for ln in lines if ln.endswith("\r\n"))
    lf = sum(1 for ln in lines if ln.endswith("\n")) - crlf
    return "\r\n" if crlf > lf else "\n"


def _strip_eol(line: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith("\n"):
        return line[:-1]
    return line


def apply_hunks(lines: list[str], hunks: list[Hunk]) -> _Applied:
    """Apply ``hunks`` in order to a copy of ``lines``; raises :class:`_Conflict`
    with the failing hunk index in ``extra['hunk']``."""
    work = list(lines)
    eol = _dominant_eol(work)
    res = _Applied(work)
    cursor = 0
    shift = 0
    for n, hunk in enumerate(hunks, 1):
        try:
            pos, tolerant = _find(work, hunk, cursor, shift)
        except _Conflict as c:
            c.extra["hunk"] = n
            c.extra["hunk_obj"] = hunk
            raise
        out: list[str] = []
        idx = pos
        for tag, text in hunk.lines:
            if tag == " ":
                out.append(work[idx])
                idx += 1
            elif tag == "-":
                idx += 1
                res.removed += 1
            else:
                out.append(text + eol)
                res.added += 1
        reaches_eof = idx == len(work)
        work[pos:idx] = out
        new_end = pos + len(out)
        if reaches_eof and work and new_end == len(work):
            last = work[-1]
            if hunk.new_no_eol:
                work[-1] = _strip_eol(last)
            elif (hunk.old_no_eol or hunk.lines[-1][0] == "+") and not last.endswith("\n"):
                work[-1] = last + eol
        # only the last line of a file may lack a terminator
        for k in range(max(0, pos - 1), min(new_end + 1, len(work) - 1)):
            if not work[k].endswith("\n"):
                work[k] += eol
        if hunk.old_start is not None:
            stated = hunk.old_start - 1 if hunk.old else hunk.old_start
            if pos != stated + shift:
                res.notes.append(
                    f"hunk {n} applied at line {pos + 1} (offset {pos - stated - shift:+d})"
                )
            shift = pos - stated + len(out) - (idx - pos)
        if tolerant:
            res.notes.append(f"hunk {n} matched ignoring trailing whitespace")
        cursor = new_end
    return res


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
        store: Any = getattr(ctx, "store", None)
        layout = getattr(store, "layout", None)
        if store is None or layout is None:
            return
        self.runtime = Path(os.path.realpath(layout.runtime))
        try:
            state = store.read_record().get("state") or {}
        except Exception:  # noqa: BLE001 - no record, no plan exception
            return
        wid = state.get("current_work_item_id") if isinstance(state, dict) else None
        if isinstance(wid, str) and wid and "/" not in wid and wid not in (".", ".."):
            plan_dir = Path(os.path.realpath(layout.work_items_dir / wid))
            home = Path(os.path.realpath(layout.home))
            if home in plan_dir.parents:
                self.plan = plan_dir / "plan.md"

    def _inside(self, real: Path, top: Path) -> bool:
        return real == top or top in real.parents

    def violation(self, real: Path) -> str | None:
        """Why a write to the real path ``real`` is refused (``None``: allowed)."""
        if self.runtime is not None and self._inside(real, self.runtime):
            return "protected_path"
        if self._inside(real, self.root) or (self.plan is not None and real == self.plan):
            return None
        return "execution_root_violation"

    def check(self, real: Path) -> None:
        """The write-time re-check (``fsio.atomic_write_bytes``' ``check``)."""
        why = self.violation(real)
        if why is not None:
            raise _Escaped(why, real)


class _Escaped(UnsafePathError):
    def __init__(self, why: str, real: Path) -> None:
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
    details: dict[str, Any] = {
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
    """Validate every file change in memory. Raises :class:`ToolError`; touches nothing."""
    guard = guard or _Guard(ctx)
    overlay = _Overlay()
    ops: list[_FileOp] = []
    notes: list[str] = []
    for fp in files:
        target = _resolve(ctx, guard, fp.path, fp.patch_line)
        current = overlay.read(target)
        if fp.action == "add":
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
            ops.append(_FileOp("added", fp.path, target, data, added=len(body)))
            continue
        if current is None:
            verb = "delete" if fp.action == "delete" else "modify"
            raise ToolError(
                "file_not_found",
                f"cannot {verb} {fp.path}: the file does not exist; no file was changed",
                details={"path": fp.path, "resolved": str(target)},
                recovery_hint="check the path with `rg --files | rg NAME`; to create a file use "
                "`--- /dev/null` / `+++ b/path`",
            )
        lines = split_lines(_decode(current, fp.path))
        try:
            applied = apply_hunks(lines, fp.hunks)
        except _Conflict as c:
            raise _conflict_error(c, fp, lines) from None
        notes.extend(f"{fp.path}: {n}" for n in applied.notes)
        if fp.action == "delete":
            if fp.hunks and any(_key(ln).strip() for ln in applied.lines):
                raise ToolError(
                    "patch_conflict",
                    f"cannot delete {fp.path}: the file has content the patch does not remove; no "
                    "file was changed",
                    details={
                        "path": fp.path,
                        "remaining_lines": len(applied.lines),
                        "remaining_preview": [
                            _preview(_key(x)) for x in applied.lines[:PREVIEW_LINES]
                        ],
                    },
                    recovery_hint=f"re-read the file with `sed -n '1,200p' {fp.path}` and "
                    "regenerate the deletion",
                )
            overlay.state[target] = None
            ops.append(_FileOp("deleted", fp.path, target, None, removed=len(lines)))
            continue
        data = _encode("".join(applied.lines))
        if fp.move_to is not None:
            dest = _resolve(ctx, guard, fp.move_to, fp.patch_line)
            blocker = _file_ancestor(overlay, dest)
            if blocker is not None:
                raise _not_a_directory(fp, fp.move_to, dest, blocker)
            if dest != target and overlay.exists(dest):
                raise ToolError(
                    "file_exists",
                    f"cannot move {fp.path} to {fp.move_to}: the destination exists; no file was "
                    "changed",
                    details={"path": fp.move_to, "resolved": str(dest)},
                    recovery_hint="pick another destination or delete it first",
                )
            overlay.state[target] = None
            overlay.state[dest] = data
            ops.append(
                _FileOp(
                    "moved",
                    fp.move_to,
                    dest,
                    data,
                    applied.added,
                    applied.removed,
                    source=target,
                    source_path=fp.path,
                )
            )
            continue
        overlay.state[target] = data
        ops.append(_FileOp("modified", fp.path, target, data, applied.added, applied.removed))
    return ops, notes


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
    for m in reversed(missing):
        m.mkdir()
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
    originals: dict[Path, tuple[bytes | None, int | None]] = {}
    for op in ops:
        for p in (op.target, op.source):
            if p is not None and p not in originals:
                try:
                    originals[p] = (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
                except FileNotFoundError:
                    originals[p] = (None, None)
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
        if isinstance(exc, _Escaped):
            raise ToolError(
                exc.why,
                f"{exc.real} is outside the execution root or protected now (a folder or "
                "file was replaced by a symlink after the patch was checked); nothing was "
                "written there and the files already written were restored",
                details={"resolved": str(exc.real)},
                recovery_hint="inspect the paths with `ls -la`; remove the symlink, then retry",
            ) from None
        if isinstance(exc, UnsafePathError):
            raise ToolError(
                "unsafe_path",
                f"{exc}; the files already written were restored",
                recovery_hint="inspect the paths with `ls -la`; remove the symlink, then retry",
            ) from None
        if isinstance(exc, NotADirectoryError):
            raise ToolError(
                "not_a_directory",
                f"writing the patch failed: a folder on the way to "
                f"{getattr(exc, 'filename', '') or 'a target'} is a file; "
                "the files already written were restored",
                details={"path": str(getattr(exc, "filename", "") or "")},
                recovery_hint="pick a path whose folders are folders",
            ) from None
        raise ToolError(
            "write_failed",
            f"writing the patch failed ({exc.strerror or exc}: "
            f"{getattr(exc, 'filename', '')}); the files already written were restored",
            details={"path": str(getattr(exc, "filename", "") or "")},
            recovery_hint="check permissions and free space, then retry",
            retryable=True,
        ) from None
    dirs = {p.parent for p in deletes}
    for folder in dirs:
        try:
            fsync_dir(folder)
        except OSError:
            continue


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
    entries: list[dict[str, Any]] = []
    lines = [f"Applied patch to {len(ops)} file(s):"]
    for op in ops:
        summary[op.action].append(op.path)
        entry: dict[str, Any] = {
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
    data: dict[str, Any] = {"files": entries, **summary, "notes": notes}
    if warnings:
        data["warnings"] = warnings
    return ToolResult(True, "\n".join(lines), data=data, warnings=warnings)
