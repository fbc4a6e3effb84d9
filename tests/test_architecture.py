"""ARCHITECTURE.md matches the tree: every source path it names exists.

A path is a word like ``store/ledger.py``, ``runtime/agents/``,
``runtime/enqueue.admit`` (a module and a name in it) or ``cli/cmd_`` (a
prefix), under ``holon_cli/`` or the repository root, or a bare file name
ending in ``.py`` that some file of the package or its tests ends with.
Words that only look like paths (an MCP method) are listed below.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPS = "model|store|providers|runtime|tools|serve|cli|tests|benchmarks|scripts|docs"
NOT_PATHS = frozenset({"tools/call"})  # the MCP method


@cache
def _files() -> tuple[str, ...]:
    skip = {".venv", ".git", "__pycache__", "site", "node_modules", ".mypy_cache", ".ruff_cache"}
    found: list[str] = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith(".pytest")]
        rel = Path(folder).relative_to(ROOT)
        found.extend((rel / n).as_posix() for n in names)
    return tuple(found)


def _exists(word: str) -> bool:
    word = word.rstrip("/.")
    candidates = {word, word + ".py"}
    if not word.endswith((".py", ".md", ".json", ".toml", ".yaml", ".yml")):
        head = word.partition(".")[0]  # runtime/enqueue.admit -> runtime/enqueue
        candidates |= {head, head + ".py"}
    for file in _files():
        short = file.removeprefix("holon_cli/")
        for c in candidates:
            if file == c or short == c or file.startswith(c + "/") or short.startswith(c + "/"):
                return True
            if c.endswith("_") and short.startswith(c):
                return True
            if c.endswith(".py") and "/" not in c and file.endswith("/" + c):
                return True
            if c.endswith(".py") and short.endswith("/" + c):
                return True
    return False


def _named_paths(text: str) -> set[str]:
    words = set(re.findall(rf"(?<![\w/.-])((?:holon_cli/)?(?:{TOPS})/(?:[\w-]+/)*[\w.-]*)", text))
    words |= set(re.findall(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.py)\b", text))
    return {w for w in words if w not in NOT_PATHS}


def test_every_path_architecture_names_exists() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = sorted(w for w in _named_paths(text) if not _exists(w))
    assert missing == [], f"ARCHITECTURE.md names paths that do not exist: {missing}"


def test_the_path_check_would_catch_a_moved_module() -> None:
    assert _exists("store/ledger.py") and _exists("runtime/agents/")
    assert _exists("runtime/enqueue.admit") and _exists("cli/cmd_")
    assert not _exists("model/envelope_gone.py")
    assert not _exists("runtime/queue_gone.ingest")
    assert _named_paths("see `runtime/queue_gone.py` and tools/call") == {"runtime/queue_gone.py"}
