"""Bounded previews of command output files (head and tail, never the whole
file in memory; :func:`output_tail` reads only the end). Standard library only."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import NamedTuple


class BoundedOutput(NamedTuple):
    text: str  # what the model sees (head + note + tail when truncated)
    total_chars: int
    total_bytes: int
    truncated: bool
    omitted_chars: int


def bound_output(path: Path, budget_chars: int, *, saved_path: str | None = None) -> BoundedOutput:
    """Read ``path`` as UTF-8 (invalid bytes replaced) keeping the first and last
    ``budget_chars // 2`` characters; streams, so any file size is fine. A
    missing file reads as empty."""
    head_cap = budget_chars // 2
    tail_cap = budget_chars - head_cap
    head: list[str] = []
    head_len = 0
    tail = ""
    total = 0
    nbytes = 0
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return BoundedOutput("", 0, 0, False, 0)
    with fh:
        while True:
            chunk = fh.read(1 << 20)
            final = not chunk
            nbytes += len(chunk)
            text = decoder.decode(chunk, final=final)
            if text:
                total += len(text)
                if head_len < head_cap:
                    take = text[: head_cap - head_len]
                    head.append(take)
                    head_len += len(take)
                tail = (tail + text)[-tail_cap:] if tail_cap else ""
            if final:
                break
    if total <= budget_chars:
        full = "".join(head)
        rest = total - len(full)
        text_out = full + (tail[-rest:] if rest > 0 else "")
        return BoundedOutput(text_out, total, nbytes, False, 0)
    omitted = total - head_len - len(tail)
    where = f"; the full output ({total} chars) was saved to {saved_path}" if saved_path else ""
    hint = " (inspect it with `sed -n 'START,ENDp'`, `rg -n` or `tail`)" if saved_path else ""
    note = f"\n[... {omitted} chars omitted{where}{hint} ...]\n"
    return BoundedOutput("".join(head) + note + tail, total, nbytes, True, omitted)


def output_tail(path: Path, max_chars: int) -> tuple[str, bool]:
    """The last ``max_chars`` characters of ``path`` (UTF-8, invalid bytes
    replaced) and whether anything came before them; reads only the file's
    end, so a task's growing output costs the same to look at every time. A
    missing file reads as empty."""
    want = max(0, max_chars) * 4  # a character is at most 4 bytes of UTF-8
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return "", False
    with fh:
        size = fh.seek(0, 2)
        start = max(0, size - want)
        fh.seek(start)
        raw = fh.read(want)
    if start:  # the cut may fall inside a character: drop its continuation bytes
        cut = 0
        while cut < min(3, len(raw)) and raw[cut] & 0xC0 == 0x80:
            cut += 1
        raw = raw[cut:]
    text = raw.decode("utf-8", errors="replace")
    return (text[-max_chars:] if max_chars else ""), start > 0 or len(text) > max_chars
