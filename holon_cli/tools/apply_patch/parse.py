"""ApplyPatch model and parsing: the ``Hunk``/``FilePatch`` data model, the
size and preview limits, and the two patch dialects (unified diff and the
Codex ``*** Begin Patch`` envelope) parsed into ``FilePatch`` lists.

See the package docstring (``holon_cli.tools.apply_patch``) for the engine's
invariants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

from holon_cli.tools.base import ToolError

if TYPE_CHECKING:
    from holon_cli.model.events import ToolWarning

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


def parse_patch(text: str) -> tuple[list[FilePatch], list[ToolWarning]]:
    """Parse either dialect. Returns the file patches and parse warnings."""
    text = _strip_fences(text.replace("\r\n", "\n"))
    lines = text.split("\n")
    warnings: list[ToolWarning] = []
    if lines and lines[0].strip() == "*** Begin Patch":
        files = _parse_codex(lines, warnings)
    else:
        files = _parse_unified(lines, warnings)
    if not files:
        raise _invalid("the patch contains no file changes")
    return files, warnings


def _parse_hunk(
    lines: list[str], i: int, warnings: list[ToolWarning], path: str
) -> tuple[Hunk, int]:
    header = lines[i]
    hunk = _hunk_header(header, i + 1)
    i, blank_tail = _read_hunk_body(hunk, lines, i + 1)
    _drop_blank_separators(hunk, blank_tail)
    if not hunk.lines:
        raise _invalid(f"hunk {header!r} for {path} has no lines", hunk.patch_line)
    n_old, n_new = len(hunk.old), len(hunk.new)
    if hunk.old_count is not None and (n_old, n_new) != (hunk.old_count, hunk.new_count):
        warnings.append(
            {
                "kind": "hunk_counts_mismatch",
                "message": f"{path}: hunk {header.strip()!r} says -{hunk.old_count} "
                f"+{hunk.new_count} lines but its body has -{n_old} +{n_new}; the body was used",
            }
        )
    return hunk, i


def _hunk_header(header: str, patch_line: int) -> Hunk:
    """An empty hunk from its ``@@`` line: positioned and counted when the
    line is a unified ``@@ -l,s +l,s @@``, else found by content later."""
    m = _HUNK_RE.match(header)
    hunk = Hunk([], header, patch_line)
    if m:
        hunk.old_start = int(m.group(1))
        hunk.old_count = int(m.group(2)) if m.group(2) is not None else 1
        hunk.new_count = int(m.group(4)) if m.group(4) is not None else 1
    else:
        # a bare ``@@`` (or ``@@ text``): position unknown, found by content
        anchor = header[2:].strip().removesuffix("@@").strip()
        hunk.anchor = anchor or None
    return hunk


def _read_hunk_body(hunk: Hunk, lines: list[str], i: int) -> tuple[int, int]:
    """Append the hunk's lines from ``lines[i]`` on, up to the next hunk or
    file or the first line that is not part of a hunk. Returns the index
    after the body and how many trailing entries came from empty lines."""
    n_old = n_new = 0
    blank_tail = 0  # trailing entries that came from empty patch lines
    while i < len(lines):
        raw = lines[i]
        if raw.startswith("@@") or raw.startswith("diff --git "):
            break
        if _at_next_file(hunk, lines, i, n_old, n_new):
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
    return i, blank_tail


def _at_next_file(hunk: Hunk, lines: list[str], i: int, n_old: int, n_new: int) -> bool:
    """Whether ``lines[i]`` starts a next-file ``---``/``+++`` header: it
    does unless the counts say this hunk still needs lines and no hunk
    follows (then it is a removed "-- " line)."""
    if not (lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
        return False
    counts_met = (
        hunk.old_count is not None
        and hunk.new_count is not None
        and n_old >= hunk.old_count
        and n_new >= hunk.new_count
    )
    return (
        hunk.old_count is None
        or counts_met
        or (i + 2 < len(lines) and lines[i + 2].startswith("@@"))
    )


def _drop_blank_separators(hunk: Hunk, blank_tail: int) -> None:
    """Blank lines after a complete hunk are separators, not context."""
    n_old, n_new = len(hunk.old), len(hunk.new)
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


class _GitBlock(TypedDict):
    """A ``diff --git`` block's header lines, as read so far."""

    line: int
    emitted: bool
    path: NotRequired[str]
    rename_from: NotRequired[str]
    rename_to: NotRequired[str]
    new_file: NotRequired[bool]
    deleted_file: NotRequired[bool]


def _parse_unified(lines: list[str], warnings: list[ToolWarning]) -> list[FilePatch]:
    files: list[FilePatch] = []
    i = 0
    git: _GitBlock | None = None  # the current ``diff --git`` block
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            _flush_git(git, files)
            git = {"line": i + 1, "emitted": False}
            m = re.match(r"^diff --git (?:a/)?(\S+) (?:b/)?(\S+)$", line)
            if m and m.group(1) == m.group(2):
                git["path"] = m.group(1)
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            fp, i = _unified_file(lines, i, warnings)
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
    _flush_git(git, files)
    return files


def _flush_git(git: _GitBlock | None, files: list[FilePatch]) -> None:
    """A ``diff --git`` block without ---/+++ (pure rename, empty new or
    deleted file) becomes its file patch."""
    if git is None or git["emitted"]:
        return
    old, new = git.get("rename_from"), git.get("rename_to")
    if old and new:
        files.append(FilePatch("update", old, git["line"], move_to=new))
    elif git.get("new_file") and git.get("path"):
        files.append(FilePatch("add", git["path"], git["line"]))
    elif git.get("deleted_file") and git.get("path"):
        files.append(FilePatch("delete", git["path"], git["line"]))


def _unified_file(lines: list[str], i: int, warnings: list[ToolWarning]) -> tuple[FilePatch, int]:
    """The ``---``/``+++`` header at ``lines[i]`` and its ``@@`` hunks."""
    start = i + 1
    old, new = _strip_prefixes(_header_path(lines[i][4:]), _header_path(lines[i + 1][4:]))
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
        return FilePatch("add", new, start, hunks), i
    if new is None:
        return FilePatch("delete", old, start, hunks), i
    fp = FilePatch("update", old, start, hunks, move_to=new if new != old else None)
    if not hunks and fp.move_to is None:
        raise _invalid(
            f"file header for {old} has no hunks",
            start,
            "add `@@ -l,s +l,s @@` hunks after the `+++` line",
        )
    return fp, i


def _parse_codex(lines: list[str], warnings: list[ToolWarning]) -> list[FilePatch]:
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
            fp, i = _codex_add(lines, i)
            files.append(fp)
            continue
        if line.startswith("*** Delete File: "):
            files.append(FilePatch("delete", line[len("*** Delete File: ") :].strip(), i + 1))
            i += 1
            continue
        if line.startswith("*** Update File: "):
            fp, i = _codex_update(lines, i)
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


def _codex_add(lines: list[str], i: int) -> tuple[FilePatch, int]:
    """``*** Add File: path`` at ``lines[i]`` and its ``+`` lines (a blank
    line just before the next ``***`` line or the end is a separator)."""
    line = lines[i]
    fp = FilePatch("add", line[len("*** Add File: ") :].strip(), i + 1)
    hunk = Hunk([], line, i + 1, old_start=1)
    i += 1
    while i < len(lines) and not lines[i].startswith("*** "):
        if not lines[i].startswith("+"):
            if lines[i] == "" and (i + 1 >= len(lines) or lines[i + 1].startswith("*** ")):
                i += 1
                continue
            raise _invalid(f"every line of an added file must start with '+' ({fp.path})", i + 1)
        hunk.lines.append(("+", lines[i][1:]))
        i += 1
    fp.hunks = [hunk] if hunk.lines else []
    return fp, i


def _codex_update(lines: list[str], i: int) -> tuple[FilePatch, int]:
    """``*** Update File: path`` at ``lines[i]``, an optional ``*** Move to:``
    and its hunks, up to the next ``***`` line."""
    fp = FilePatch("update", lines[i][len("*** Update File: ") :].strip(), i + 1)
    i += 1
    if i < len(lines) and lines[i].startswith("*** Move to: "):
        fp.move_to = lines[i][len("*** Move to: ") :].strip()
        i += 1
    i = _codex_hunks(fp, lines, i)
    for h in fp.hunks:
        while h.lines and h.lines[-1] == (" ", "") and any(t != " " for t, _ in h.lines):
            h.lines.pop()  # blank separator lines before the next file
    fp.hunks = [h for h in fp.hunks if h.lines]
    if not fp.hunks and fp.move_to is None:
        raise _invalid(f"`*** Update File: {fp.path}` has no hunks", fp.patch_line)
    return fp, i


def _codex_hunks(fp: FilePatch, lines: list[str], i: int) -> int:
    """Append the update's hunks from ``lines[i]`` on (``@@ [anchor]`` starts
    one; lines before any ``@@`` form one without an anchor); the index of
    the next ``***`` line or the end."""
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
    return i
