"""The work item index as a small head plus an append-only archive (issue 44
item 7): a write reads and rewrites only the head, whatever the number of
items; every reader that needs all items still sees all of them; the v1
snapshot migrates; a kill anywhere in a checkpoint or the migration loses
nothing; a damaged archive is reported, read around and repaired."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store import workitem_archive as wa
from holon_cli.store import workitem_fold as wf
from holon_cli.store import workitem_index as wix
from holon_cli.store.agent_store import AgentStore

KEEP = 2  # completed items the head keeps in these tests (of each kind)


@pytest.fixture
def store(now: list[float], monkeypatch: pytest.MonkeyPatch) -> AgentStore:
    monkeypatch.setattr(wf, "KEEP_RECENT", KEEP)
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    wf._WARNED.clear()
    return open_agent()


def tick(now: list[float]) -> None:
    now[0] += 1.0  # distinct updated_at per change


def completed_items(store: AgentStore, n: int, now: list[float]) -> list[str]:
    ids = []
    for i in range(n):
        tick(now)
        wid = wi.create_work_item(store, f"done {i}", source="operator")["work_item"]["id"]
        tick(now)
        wi.complete_work_item(
            store, wid, report=f"report {i}", source="operator", cancel_waits=cancel_for_work_item
        )
        ids.append(wid)
    return ids


def checkpoint(store: AgentStore) -> None:
    with store.lock():
        wix.save(store, wix.load(store), force=True)


def head(store: AgentStore) -> dict[str, Any]:
    snap: dict[str, Any] = json.loads(wix.index_path(store).read_text())
    return snap


def full_fold(store: AgentStore) -> dict[str, Any]:
    """Every item as the ledgers say (no index involved)."""
    idx = wf.fold_ledgers(
        store.ledger(wix.WORK_ITEMS_LEDGER),
        store.ledger(wix.DELIVERY_LEDGER),
        store.ledger(wix.WAITS_LEDGER),
        (1 << 62, 1 << 62, 1 << 62),
    )
    return dict(idx.head)


def no_archive_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("the archive was read")

    monkeypatch.setattr(wf, "read_archive", refuse)
    monkeypatch.setattr(wix, "read_archive", refuse)
    wa._ARCHIVES.clear()
    wix._LOADED.clear()


def test_a_checkpoint_moves_old_completed_items_to_the_archive(
    store: AgentStore, now: list[float]
) -> None:
    done = completed_items(store, 6, now)
    opened = wi.create_work_item(store, "still open", source="operator")["work_item"]["id"]
    checkpoint(store)
    snap = head(store)
    assert snap["v"] == 2
    # the head: the open item and the newest completed ones; the rest archived
    assert set(snap["items"]) == {opened, *done[-KEEP:]}
    assert snap["archive"]["items"] == 4
    arch = wix.archive_path(store)
    assert snap["archive"]["bytes"] == arch.stat().st_size
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    idx = wix.load(store)
    assert idx.items == full_fold(store)  # every item, exactly as the ledgers say
    assert idx.get(done[0])["result_summary"] == "report 0"  # type: ignore[index]
    assert idx.completed_count() == 6 and [r["id"] for r in idx.open_records()] == [opened]
    listed = wi.list_work_items(store, filter="completed")
    assert listed["total"] == 6 and listed["counts"]["completed"] == 6
    assert wi.get_work_item(store, done[0])["work_item"]["completion_report"]["text"] == "report 0"


def test_writes_and_the_hot_reads_never_read_the_archive(
    store: AgentStore, now: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    completed_items(store, 6, now)
    checkpoint(store)
    no_archive_reads(monkeypatch)
    tick(now)
    wid = wi.create_work_item(store, "new work", source="operator")["work_item"]["id"]
    wi.update_work_item(store, wid, plan_status="ready", source="operator")
    wi.pick_work_item(store, wid, source="operator")
    assert "new work" in (wi.project_work_queue(store) or "")
    assert wi.readiness_counts(store)["completed"] == 6
    assert wi.activation_signal(store) is not None
    assert [w["id"] for w in wi.list_work_items(store, filter="open")["work_items"]] == [wid]
    tick(now)
    wi.complete_work_item(
        store, wid, report="done", source="operator", cancel_waits=cancel_for_work_item
    )
    for _ in range(3):  # enough to checkpoint again: the archive is appended to, not read
        checkpoint(store)
    assert wi.readiness_counts(store)["completed"] == 7


def test_a_checkpoint_appends_to_the_archive_and_never_rewrites_it(
    store: AgentStore, now: list[float]
) -> None:
    completed_items(store, 5, now)
    checkpoint(store)
    arch = wix.archive_path(store)
    before, ino = arch.read_bytes(), arch.stat().st_ino
    completed_items(store, 3, now)
    checkpoint(store)
    after = arch.read_bytes()
    assert arch.stat().st_ino == ino and after.startswith(before) and len(after) > len(before)
    assert head(store)["archive"] == {
        "generation": json.loads(before.splitlines()[0])["generation"],
        "bytes": len(after),
        "items": 6,
        "lines": len(after.splitlines()) - 1,
    }


def test_changes_to_archived_items_reach_the_archive(store: AgentStore, now: list[float]) -> None:
    done = completed_items(store, 5, now)
    checkpoint(store)
    plan = wix.plan_path(store, done[0])
    plan.write_text(plan.read_text() + "\nedited after it was archived\n")
    got = wi.get_work_item(store, done[0])["work_item"]  # refreshes the descriptor
    assert got["plan_artifact"]["hash"] == wix.describe_file(plan)["hash"]
    assert done[0] not in head(store)["items"]  # it stays archived
    checkpoint(store)
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    idx = wix.load(store)
    assert idx.get(done[0])["plan_artifact"]["hash"] == got["plan_artifact"]["hash"]  # type: ignore[index]
    assert idx.items == full_fold(store) and idx.completed_count() == 5


def write_v1(store: AgentStore) -> dict[str, Any]:
    """Today's (v1) snapshot: every item in one file, as the old build wrote it."""
    items = full_fold(store)
    snap = {
        "v": 1,
        "offset": store.ledger(wix.WORK_ITEMS_LEDGER).size(),
        "ds_offset": store.ledger(wix.DELIVERY_LEDGER).size(),
        "wait_offset": store.ledger(wix.WAITS_LEDGER).size(),
        "items": items,
        "reports": {},
        "waits": {},
    }
    wix.index_path(store).write_text(json.dumps(snap))
    wix.archive_path(store).unlink(missing_ok=True)
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    return items


def test_a_v1_snapshot_is_read_as_it_is_and_migrated_by_the_next_write(
    store: AgentStore, now: list[float]
) -> None:
    completed_items(store, 5, now)
    items = write_v1(store)
    v1 = wix.index_path(store).read_bytes()
    assert wi.list_work_items(store)["total"] == 5  # a read leaves the file alone
    assert wix.index_path(store).read_bytes() == v1
    tick(now)
    new = wi.create_work_item(store, "after the upgrade", source="operator")["work_item"]["id"]
    snap = head(store)
    assert snap["v"] == 2 and snap["archive"]["items"] == 5 - KEEP
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    assert set(wix.load(store).items) == {*items, new}


MIGRATE = textwrap.dedent(
    """
    import os, signal, sys
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.store import workitem_archive as wa, workitem_fold as wf, workitem_index as wix

    wf.KEEP_RECENT = 2
    where = sys.argv[1]
    real_snapshot, real_archive = wix.write_snapshot, wa.atomic_write_bytes

    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)

    if where == "before_head":  # the archive renamed into place, the head not written
        wix.write_snapshot = die
    elif where == "mid_archive":  # half the archive written to its temporary file
        def half(path, data, **k):
            fd = os.open(str(path) + ".tmp-killed", os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, data[: len(data) // 2])
            die()
        wa.atomic_write_bytes = half
    elif where == "before_head_append":  # a checkpoint's append done, the head not written
        wix.write_snapshot = die
    wi.create_work_item(open_agent(), "written when killed", source="operator")
    """
)


def _killed(where: str) -> None:
    res = subprocess.run([sys.executable, "-c", MIGRATE, where], env=dict(os.environ))
    assert res.returncode == -signal.SIGKILL, res


@pytest.mark.parametrize("where", ["before_head", "mid_archive"])
def test_a_kill_mid_migration_loses_nothing(
    store: AgentStore, now: list[float], where: str
) -> None:
    completed_items(store, 5, now)
    items = write_v1(store)
    v1 = wix.index_path(store).read_bytes()
    _killed(where)
    assert wix.index_path(store).read_bytes() == v1  # the commit point was never reached
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    got = wix.load(store).items
    # everything the v1 index held, and the item whose ledger append came first
    assert set(items) < set(got) and len(got) == len(items) + 1
    assert got == full_fold(store)
    from holon_cli.runtime.inspect import home_check

    assert home_check()["ok"]
    tick(now)
    wi.create_work_item(store, "the next write migrates", source="operator")
    assert head(store)["v"] == 2
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    assert wix.load(store).items == full_fold(store)
    assert home_check()["ok"]


def test_a_kill_between_an_archive_append_and_its_head_loses_nothing(
    store: AgentStore, now: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    completed_items(store, 5, now)
    checkpoint(store)
    covered = head(store)["archive"]["bytes"]
    completed_items(store, 3, now)
    # the killed process checkpoints at once (its threshold made 0)
    src = MIGRATE.replace("wf.KEEP_RECENT = 2", "wf.KEEP_RECENT = 2\nwix.SNAPSHOT_EVERY_BYTES = 0")
    res = subprocess.run([sys.executable, "-c", src, "before_head_append"], env=dict(os.environ))
    assert res.returncode == -signal.SIGKILL
    arch = wix.archive_path(store)
    assert arch.stat().st_size > covered == head(store)["archive"]["bytes"]
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    assert wix.load(store).items == full_fold(store)  # the extra bytes are not read
    from holon_cli.runtime.inspect import home_check

    report = home_check()
    assert report["ok"] and any(n["path"] == str(arch) for n in report["notes"])
    checkpoint(store)  # the next checkpoint cuts them off before it appends
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    assert wix.load(store).items == full_fold(store)
    assert wix.load(store).completed_count() == 8
    assert home_check()["ok"]


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "cut":
        path.write_bytes(data[: len(data) - 10])
    elif how == "garbage_line":
        lines = data.splitlines(keepends=True)
        lines[2] = b"{not json\n"
        path.write_bytes(b"".join(lines))
    elif how == "two_values":  # a line holding two records (no newline between)
        lines = data.splitlines(keepends=True)
        lines[2] = lines[2].rstrip(b"\n") + b"," + lines[3]
        del lines[3]
        path.write_bytes(b"".join(lines) + b"\n" * (len(data) - len(b"".join(lines))))
    elif how == "other_generation":
        lines = data.splitlines(keepends=True)
        lines[0] = json.dumps({"v": 1, "kind": "archive", "generation": "wia_other"}).encode()
        path.write_bytes(lines[0] + b"\n" + b"".join(lines[1:]))
    elif how == "deleted":
        path.unlink()


@pytest.mark.parametrize(
    "how", ["cut", "garbage_line", "two_values", "other_generation", "deleted"]
)
def test_a_damaged_archive_is_read_around_reported_and_repaired(
    store: AgentStore, now: list[float], how: str, caplog: pytest.LogCaptureFixture
) -> None:
    from holon_cli.runtime.home.repair import repair_home
    from holon_cli.runtime.inspect import home_check

    completed_items(store, 5, now)
    checkpoint(store)
    arch = wix.archive_path(store)
    damage(arch, how)
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    # nothing is lost to a reader: the ledgers are the truth
    assert wix.load(store).items == full_fold(store)
    assert wi.list_work_items(store)["total"] == 5
    assert "home check --repair" in caplog.text
    report = home_check()
    assert not report["ok"] and any(p["path"] == str(arch) for p in report["problems"])
    actions = repair_home()
    assert any(a["action"] == "rebuilt" for a in actions), actions
    if how != "deleted":
        assert list(arch.parent.glob(arch.name + ".damaged-*"))  # kept aside, not deleted
    assert home_check()["ok"]
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    assert wix.load(store).items == full_fold(store)


def test_a_head_counting_other_than_its_archive_is_reported(
    store: AgentStore, now: list[float]
) -> None:
    from holon_cli.runtime.inspect import home_check

    completed_items(store, 5, now)
    checkpoint(store)
    snap = head(store)
    snap["archive"]["items"] += 1
    wix.index_path(store).write_text(json.dumps(snap))
    report = home_check()
    assert any(
        p["path"] == str(wix.index_path(store)) and "archived item" in p["message"]
        for p in report["problems"]
    )


def test_an_archive_line_of_a_newer_format_is_refused_by_name(
    store: AgentStore, now: list[float]
) -> None:
    completed_items(store, 5, now)
    checkpoint(store)
    arch = wix.archive_path(store)
    snap = head(store)
    line = json.dumps({"v": 9, "kind": "item", "rec": {"id": "wi_x", "state": "open"}}) + "\n"
    with arch.open("a") as f:
        f.write(line)
    with pytest.raises(Exception, match="newer than this holon understands"):
        wa.read_archive(arch, snap["archive"]["generation"], arch.stat().st_size)


def edit_archived_plans(store: AgentStore, ids: list[str], times: int) -> None:
    """Late changes to archived items: each plan edit adds an archive line."""
    for n in range(times):
        for wid in ids:
            plan = wix.plan_path(store, wid)
            plan.write_text(plan.read_text() + f"edit {n}\n")
        wi.refresh_plan_descriptor(store, ids[0])
        from holon_cli.runtime.workitems.plans import refresh

        refresh(store, ids)
        checkpoint(store)


def test_home_gc_compacts_an_archive_late_changes_doubled(
    store: AgentStore,
    now: list[float],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from holon_cli.runtime.home.gc import gc_home
    from holon_cli.runtime.inspect import home_check

    done = completed_items(store, 12, now)
    checkpoint(store)
    archived = done[:-KEEP]
    monkeypatch.setattr(wix, "compaction_due", lambda lines, items: lines > 2 * items)
    arch = wix.archive_path(store)
    gen0 = head(store)["archive"]["generation"]
    assert gc_home()["closed"] is not None  # not yet due: left alone
    assert head(store)["archive"]["generation"] == gen0
    edit_archived_plans(store, archived, 2)
    before = head(store)["archive"]
    assert before["lines"] > 2 * before["items"]
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    reader = wix.load(store)  # a reader holding the head from before the compaction
    gc_home()
    after = head(store)["archive"]
    assert after["generation"] != gen0 and after["lines"] == after["items"] == len(archived)
    assert arch.stat().st_size == after["bytes"] < before["bytes"]
    assert reader.items == full_fold(store)  # it adopts the new archive, no warning
    assert "read from the ledgers" not in caplog.text
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    assert wix.load(store).items == full_fold(store)
    assert home_check()["ok"]


def test_compaction_skips_a_busy_agent(store: AgentStore, now: list[float]) -> None:
    completed_items(store, 5, now)
    checkpoint(store)
    with store.lock():
        assert wix.compact(store, force=True) is False
    assert wix.compact(store, force=True) is True


def test_a_damaged_archive_line_is_named_by_its_number(store: AgentStore, now: list[float]) -> None:
    completed_items(store, 6, now)
    checkpoint(store)
    arch = wix.archive_path(store)
    snap = head(store)
    for bad, line in ((b"{not json", 3), (b'{"v":1},{"v":1}', 4)):
        lines = arch.read_bytes().splitlines(keepends=True)
        original = lines[line - 1]
        lines[line - 1] = bad + b" " * max(0, len(original) - len(bad) - 1) + b"\n"
        arch.write_bytes(b"".join(lines))
        with pytest.raises(Exception) as exc:
            wa.read_archive(arch, snap["archive"]["generation"], arch.stat().st_size)
        assert f"{arch}:{line}:" in str(exc.value.message)  # type: ignore[attr-defined]
        lines[line - 1] = original
        arch.write_bytes(b"".join(lines))
    # and the intact file reads again, every line
    got = wa.read_archive(arch, snap["archive"]["generation"], snap["archive"]["bytes"])
    assert len(got.items) == snap["archive"]["items"]


def test_reports_and_waits_go_with_their_items_and_late_ones_reach_the_archive(
    store: AgentStore, now: list[float]
) -> None:
    from holon_cli import clock
    from holon_cli.model import workitem as wm

    def report(wid: str, text: str) -> None:
        with store.lock():
            idx = wix.load(store)
            rec = wm.new_delivery_summary(
                summary_id=clock.new_id("ds"),
                agent_id=store.agent_id,
                work_item_id=wid,
                text=text,
                source="agent",
                created_at=clock.now_iso(),
            )
            wix.append_report(store, idx, rec)

    done = completed_items(store, 6, now)
    tick(now)
    report(done[0], "promoted while it was recent")
    checkpoint(store)  # done[0] leaves the head with its report
    assert done[0] not in head(store)["items"]
    tick(now)
    report(done[1], "arrived after it was archived")
    checkpoint(store)
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    idx = wix.load(store)
    assert idx.report_of(done[0])["text"] == "promoted while it was recent"  # type: ignore[index]
    assert idx.report_of(done[1])["text"] == "arrived after it was archived"  # type: ignore[index]
    assert idx.reports[done[1]]["text"] == "arrived after it was archived"
    lines = [json.loads(x) for x in wix.archive_path(store).read_text().splitlines()[1:]]
    assert {ln["kind"] for ln in lines} == {"item", "report"}
    assert wix.compact(store, force=True)  # a compaction keeps them
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    assert wix.load(store).report_of(done[1])["text"] == "arrived after it was archived"  # type: ignore[index]


def test_an_archived_items_waits_are_archived_with_it(store: AgentStore, now: list[float]) -> None:
    from holon_cli.runtime.waiting.intents import record_wait

    tick(now)
    wid = wi.create_work_item(store, "waited on", source="operator")["work_item"]["id"]
    record_wait(store, description="CI run", source="github", work_item_id=wid)
    tick(now)
    wi.complete_work_item(
        store, wid, report="done", source="operator", cancel_waits=cancel_for_work_item
    )
    completed_items(store, 4, now)
    checkpoint(store)
    snap = head(store)
    assert wid not in snap["items"] and not any(
        w["work_item_id"] == wid for w in snap["waits"].values()
    )
    wix._LOADED.clear()
    wa._ARCHIVES.clear()
    idx = wix.load(store)
    assert [w["work_item_id"] for w in idx.waits.values()] == [wid]
    assert idx.waits_for(idx.get(wid)) == wix.load(store).waits_for(full_fold(store)[wid])  # type: ignore[arg-type]
    assert wi.get_work_item(store, wid)["work_item"]["state"] == "completed"
