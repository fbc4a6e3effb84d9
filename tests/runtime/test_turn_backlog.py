"""Issue 31 item 27: a turn's cost is flat in the size of the backlog. With
1 MB messages queued (ingested) and 1 MB messages already processed, one
turn reads one message body (the one it processes) and previews of the
recent transcript, never every body: counted here through the readers
(inbox bodies, parsed ledger records), and as the turn's peak memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.tick import tick_agent
from holon_cli.runtime.turn import run_turn
from holon_cli.store.inbox import Inbox
from holon_cli.store.ledger_tail import PREVIEW_KEY
from holon_cli.tools.catalog import default_catalog

MB = 1_000_000


def _home(tmp_path: Path, processed: int, queued: int) -> str:
    """``processed`` 1 MB messages through real turns, then one small message
    (the next turn's) and ``queued`` 1 MB ones behind it, ingested."""
    p = tmp_path / "m.yaml"
    p.write_text('loop: true\nsteps:\n  - "noted."\n')
    model = f"scripted:{p}"
    for i in range(processed):
        admit(f"{i:05d} " + "x" * (MB - 6))
        assert run_turn(None, cli_model=model, catalog=default_catalog()).ran
    admit("the next one")
    for i in range(queued):
        admit(f"{1000 + i:05d} " + "x" * (MB - 6))
    tick_agent(open_agent(None))  # ingestion reads each new body once, before any turn
    return model


class Reads:
    """Bytes of inbox bodies read and of ledger records parsed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bodies: list[int] = []
        self.parsed = 0
        from holon_cli.store import ledger_read, ledger_reader, ledger_segments

        read, parse = Inbox.read, ledger_reader._parse

        def counted_read(path: Path) -> Any:
            self.bodies.append(path.stat().st_size)
            return read(path)

        def counted_parse(path: Path, raw: bytes, *a: Any, **k: Any) -> dict[str, Any]:
            self.parsed += len(raw)
            return parse(path, raw, *a, **k)

        monkeypatch.setattr(Inbox, "read", staticmethod(counted_read))
        # every module that parses ledger lines: the ledger's readers
        for mod in (ledger_reader, ledger_read, ledger_segments):
            monkeypatch.setattr(mod, "_parse", counted_parse)


def _turn(model: str) -> int:
    """One turn; its peak traced memory."""
    tracemalloc.start()
    try:
        res = run_turn(None, cli_model=model, catalog=default_catalog())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.ran and res.status == "completed"
    return peak


@pytest.mark.slow
def test_a_turn_reads_its_own_body_and_previews_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _home(tmp_path, processed=6, queued=6)
    reads = Reads(monkeypatch)
    _turn(model)  # the small message, 6 MB processed before it, 6 MB queued behind
    assert len(reads.bodies) == 1 and reads.bodies[0] < 10_000, reads.bodies
    assert reads.parsed < MB, f"a turn parsed {reads.parsed / MB:.1f} MB of ledger records"
    reads.bodies.clear()
    reads.parsed = 0
    _turn(model)  # a 1 MB message: that body, once
    assert len(reads.bodies) == 1 and reads.bodies[0] > MB, reads.bodies
    assert reads.parsed < MB, f"a turn parsed {reads.parsed / MB:.1f} MB of ledger records"


@pytest.mark.slow
def test_peak_memory_is_flat_in_the_backlog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    peaks = []
    for name, n in (("empty", 0), ("busy", 8)):
        monkeypatch.setenv("HOLON_HOME", str(tmp_path / name / "home"))
        (tmp_path / name).mkdir()
        peaks.append(_turn(_home(tmp_path / name, processed=n, queued=n)))
    base, busy = peaks
    assert busy < base + 3 * MB, f"peak {busy / MB:.1f} MB vs {base / MB:.1f} MB empty"


def test_a_preview_of_a_real_message_entry_keeps_every_field_but_the_text(
    tmp_path: Path,
) -> None:
    """The transcript writes a message's text after its provenance (label,
    authority, trust): the preview the prompt renders from loses nothing
    but the text's end, so a fence and its authority stay right."""
    _home(tmp_path, processed=1, queued=0)
    led = open_agent(None).ledger("transcript")
    whole = [r for r in led.tail(20) if r.get("kind") == "message"]
    previews = [r for r in led.tail_previews(20) if r.get("kind") == "message"]
    big = next(p for p in previews if PREVIEW_KEY in p)
    full = next(r for r in whole if r["message_id"] == big["message_id"])
    assert {k: v for k, v in full.items() if k != "text"} == {
        k: v for k, v in big.items() if k not in ("text", PREVIEW_KEY)
    }
    assert full["text"].startswith(big["text"]) and len(big["text"]) == 4000
