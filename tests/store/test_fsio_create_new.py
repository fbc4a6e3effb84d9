"""fsio.create_new_bytes: create only if absent, never half a file, never
over an existing one (the default agent's AGENTS.md, the memory ref key)."""

from __future__ import annotations

import threading
from pathlib import Path

from holon_cli.store.fsio import create_new_bytes


def test_creates_once_and_never_replaces(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "f.txt"
    assert create_new_bytes(p, b"first") is True
    assert create_new_bytes(p, b"second") is False
    assert p.read_bytes() == b"first"
    assert p.stat().st_mode & 0o777 == 0o600
    assert sorted(x.name for x in p.parent.iterdir()) == ["f.txt"]  # no temp left


def test_concurrent_creators_one_whole_winner(tmp_path: Path) -> None:
    p = tmp_path / "race" / "key"
    won: list[bytes] = []

    def go(i: int) -> None:
        data = bytes([i]) * 4096
        if create_new_bytes(p, data):
            won.append(data)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and p.read_bytes() == won[0]
    assert [x.name for x in p.parent.iterdir()] == ["key"]
