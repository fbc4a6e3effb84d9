"""ApplyPatch hunk application: matching hunks on content in a file's lines
(at the stated line shifted by earlier hunks, else a unique match after the
previous hunk; only trailing whitespace may differ) and producing the new
lines with the file's own line ending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from holon_cli.tools.apply_patch.parse import PREVIEW_LINE_CHARS, Hunk

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
