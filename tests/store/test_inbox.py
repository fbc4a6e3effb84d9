"""The Maildir inbox: deliver, pending, archive, quarantine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from holon_cli.store.inbox import Inbox


@pytest.fixture
def inbox(tmp_path: Path) -> Inbox:
    return Inbox(tmp_path / "inbox")


def test_deliver_writes_to_new_via_tmp(inbox: Inbox) -> None:
    path = inbox.deliver("msg_b", {"id": "msg_b", "body": {"type": "text", "text": "hi\nthere"}})
    assert path == inbox.new / "msg_b.json"
    assert json.loads(path.read_text()) == {
        "id": "msg_b",
        "body": {"type": "text", "text": "hi\nthere"},
    }
    assert path.read_bytes().count(b"\n") == 1  # one compact line
    assert os.listdir(inbox.tmp) == []
    assert Inbox.read(path)["id"] == "msg_b"


def test_deliver_creates_missing_folders(inbox: Inbox) -> None:
    assert not inbox.root.exists()
    inbox.deliver("msg_a", {"id": "msg_a"})
    assert inbox.tmp.is_dir() and inbox.new.is_dir() and inbox.cur.is_dir()


def test_pending_is_in_id_order_and_ignores_foreign_files(inbox: Inbox) -> None:
    assert inbox.pending() == [] and inbox.pending_count() == 0  # no folders yet
    for mid in ("msg_c", "msg_a", "msg_b"):
        inbox.deliver(mid, {"id": mid})
    (inbox.new / ".msg_d.json.swp").write_text("editor junk")
    (inbox.new / "README").write_text("x")
    assert [p.name for p in inbox.pending()] == ["msg_a.json", "msg_b.json", "msg_c.json"]
    assert inbox.pending_count() == 3


def test_archive_retires_the_file(inbox: Inbox) -> None:
    p = inbox.deliver("msg_a", {"id": "msg_a"})
    inbox.archive(p)
    assert not p.exists()
    assert list(inbox.cur.iterdir()) == []  # the ledger keeps the envelope; no copy piles up
    assert inbox.pending() == []
    inbox.archive(p)  # idempotent: a second retire is harmless


def test_sweep_tmp_removes_only_old_leftovers(inbox: Inbox) -> None:
    import os
    import time

    inbox.ensure()
    old = inbox.tmp / "msg_old.json.123"
    old.write_text("{")
    past = time.time() - 7200
    os.utime(old, (past, past))
    fresh = inbox.tmp / "msg_new.json.456"
    fresh.write_text("{")
    assert inbox.sweep_tmp(3600) == 1
    assert not old.exists() and fresh.exists()


def test_quarantine_moves_aside_with_the_reason(inbox: Inbox) -> None:
    inbox.ensure()
    p = inbox.new / "msg_x.json"
    p.write_text("{broken")
    with pytest.raises(ValueError):
        Inbox.read(p)
    dest = inbox.quarantine(p, "not JSON")
    assert dest == inbox.root / "quarantine" / "msg_x.json"
    assert (inbox.root / "quarantine" / "msg_x.json.reason").read_text() == "not JSON\n"
    assert inbox.quarantined() == [dest]
    assert dest.read_text() == "{broken"
    assert inbox.pending() == []


def test_read_rejects_non_object(inbox: Inbox) -> None:
    inbox.ensure()
    p = inbox.new / "msg_y.json"
    p.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        Inbox.read(p)


def test_crash_in_tmp_is_invisible(inbox: Inbox) -> None:
    """A writer killed before the rename leaves only a tmp/ file: never pending."""
    inbox.ensure()
    (inbox.tmp / "msg_z.json.12345").write_text('{"id": "msg_z"')
    assert inbox.pending() == []
    inbox.deliver("msg_q", {"id": "msg_q"})
    assert [p.name for p in inbox.pending()] == ["msg_q.json"]
