"""The memory index's text projection: what FTS5 indexes and what a query
asks for. CJK runs (which ``unicode61`` cannot split into words) become
space-separated bigrams on both sides, so a two-character query finds them."""

from __future__ import annotations

import re

# Han (incl. extensions A and compatibility), kana, Hangul syllables and jamo
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_]+", re.UNICODE)


def _bigrams(run: str) -> str:
    if len(run) == 1:
        return run
    return " ".join(run[i : i + 2] for i in range(len(run) - 1))


def project(text: str) -> str:
    """The FTS projection: CJK runs become space-separated bigrams."""
    return _CJK_RUN.sub(lambda m: " " + _bigrams(m.group(0)) + " ", text)


def query_terms(query: str) -> list[str]:
    """A query's terms as FTS5 phrases: each a quoted string (no operator a
    caller types reaches FTS5), a CJK run as its bigram phrase."""
    out: list[str] = []
    for tok in _TOKEN.findall(query):
        text = _bigrams(tok) if _CJK_RUN.fullmatch(tok) else tok
        out.append('"' + text.replace('"', '""') + '"')
    return out
