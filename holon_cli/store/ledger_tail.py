"""Bounded tail reads of a JSONL ledger whose records may be huge.

A transcript line can hold a whole 1 MB message body. The readers of a tail
that only show a preview of each record (the prompt's recent conversation,
a work item's trace) must not hold every such body in memory nor parse it:
:func:`scan_tail` walks the file backwards in fixed chunks and hands back,
newest last, each line whole when it is at most ``max_line_bytes`` long and
only its head otherwise; :func:`preview_record` turns such a head into a
record whose fields are those the head holds, the cut string shortened
(``_preview_of_bytes`` names the size of the whole line).

Memory and the bytes read are bounded by ``n * max_line_bytes`` (plus one
chunk), whatever the size of the lines: a line is found by reading it, so
the read stops at that budget and the lines before it are left out (their
previews would not fit the readers' budgets anyway).
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject

CHUNK_BYTES = 256 * 1024
PREVIEW_KEY = "_preview_of_bytes"


class TailLine(NamedTuple):
    raw: bytes  # the whole line, or its head when ``size`` > len(raw)
    size: int  # bytes of the whole line (without its newline)
    offset: int  # where the line starts in the file
    terminated: bool  # ends with a newline (else: the file's last bytes)


def scan_tail(
    path: Path, n: int, max_line_bytes: int, max_bytes: int | None = None
) -> tuple[list[TailLine], int]:
    """The last ``n`` lines of ``path``, oldest first, each whole when it is
    at most ``max_line_bytes`` long, else its first ``max_line_bytes`` bytes,
    and the bytes read. The read stops after ``max_bytes`` (default ``n *
    max_line_bytes``): fewer lines then, the one the stop fell in left out.
    A missing file has no lines."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return [], 0
    try:
        return _scan(fd, n, max_line_bytes, n * max_line_bytes if max_bytes is None else max_bytes)
    finally:
        os.close(fd)


def _scan(fd: int, n: int, max_line_bytes: int, max_bytes: int) -> tuple[list[TailLine], int]:
    size = os.fstat(fd).st_size
    floor = max(0, size - max_bytes)
    out: list[TailLine] = []
    pend: deque[bytes] = deque()  # the current line's bytes kept, in file order
    kept = 0  # bytes in ``pend``
    total = 0  # bytes of the current line seen so far
    end = size  # where the current line ends (its newline, or the end of file)
    pos = size
    while pos > floor and len(out) < n:
        start = max(floor, pos - CHUNK_BYTES)
        chunk = os.pread(fd, pos - start, start)
        if not chunk:
            break
        cut = len(chunk)
        while len(out) < n:
            nl = chunk.rfind(b"\n", 0, cut)
            if nl < 0:
                break
            piece = chunk[nl + 1 : cut]
            line_start = start + nl + 1
            if line_start < size:  # not the nothing after the final newline
                out.append(
                    _line(pend, piece, total + len(piece), line_start, end, size, max_line_bytes)
                )
            pend.clear()
            kept = total = 0
            end = start + nl
            cut = nl
        if len(out) >= n:
            break
        piece = chunk[:cut]
        pend.appendleft(piece)
        kept += len(piece)
        total += len(piece)
        while kept > max_line_bytes and len(pend) > 1:  # keep the head only
            kept -= len(pend.pop())
        pos = start
    if pos == 0 and len(out) < n and total:
        out.append(_line(pend, b"", total, 0, end, size, max_line_bytes))
    out.reverse()
    return out, size - pos


def _line(
    pend: deque[bytes], piece: bytes, size: int, start: int, end: int, fsize: int, cap: int
) -> TailLine:
    raw = piece + b"".join(pend) if pend else piece
    return TailLine(raw[:cap] if size > cap else raw, size, start, end < fsize)


def preview_record(line: TailLine, max_chars: int) -> JsonObject | None:
    """The fields the head of a cut line holds, the one the cut falls in (a
    string) shortened to ``max_chars`` characters; ``None`` when the head is
    not the start of a JSON object. A field after the cut is not there (the
    ledgers write ``v`` and the short fields first, bodies last)."""
    s = line.raw.decode("utf-8", errors="ignore")
    dec = json.JSONDecoder()
    i = _ws(s, 0)
    if not s.startswith("{", i):
        return None
    out: JsonObject = {}
    i += 1
    while True:
        i = _ws(s, i)
        try:
            key, i = dec.raw_decode(s, i)
        except json.JSONDecodeError:
            break
        i = _ws(s, i)
        if not isinstance(key, str) or not s.startswith(":", i):
            break
        i = _ws(s, i + 1)
        try:
            val, i = dec.raw_decode(s, i)
        except json.JSONDecodeError:
            if s.startswith('"', i):
                out[key] = _partial_string(s[i + 1 : i + 1 + 6 * max_chars], max_chars)
            break
        out[key] = val
        i = _ws(s, i)
        if not s.startswith(",", i):
            break
        i += 1
    out[PREVIEW_KEY] = line.size
    return out


def _ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\r\n":
        i += 1
    return i


def _partial_string(frag: str, max_chars: int) -> str:
    """The decoded start of a JSON string cut inside (a trailing half escape
    is dropped)."""
    for drop in range(7):
        try:
            text = json.loads('"' + frag[: len(frag) - drop] + '"')
        except json.JSONDecodeError:
            continue
        return str(text)[:max_chars]
    return ""
