"""Work-item persistence (ledger + index), mutations, focus and read views."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from holon_cli import clock
from holon_cli.errors import CorruptStateError, NotFoundError, RejectedError, UsageError
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.ledger import Ledger

T0 = 1_780_000_000.0


@pytest.fixture
def store(now: list[float]) -> AgentStore:
    return open_agent()


def events(store: AgentStore, kind: str) -> list[dict[str, Any]]:
    return [e for e in store.events.records() if e["kind"] == kind]


def focus(store: AgentStore) -> str | None:
    return store.read_record()["state"]["current_work_item_id"]


def ledger_lines(store: AgentStore) -> list[dict[str, Any]]:
    return store.ledger("work_items").records()


# ----------------------------------------------------------- persistence


def test_create_persists_full_snapshot_and_plan_file(store: AgentStore) -> None:
    res = wi.create_work_item(store, "Split provider fixtures", todo_list=[{"text": "inspect"}])
    w = res["work_item"]
    assert w["id"].startswith("wi_")
    assert w["state"] == "open" and w["plan_status"] == "draft"
    assert w["todo_list"] == [{"text": "inspect", "state": "pending"}]
    (line,) = ledger_lines(store)
    assert line["v"] == 1 and line["rev"] == 1 and line["change"] == "created"
    assert (
        line["id"] == w["id"]
        and line["objective"] == "Split provider fixtures"
        and line["agent_id"] == "main"
    )
    plan = Path(w["plan_artifact"]["path"])
    assert (
        plan.is_absolute() and plan == store.layout.work_items_dir.absolute() / w["id"] / "plan.md"
    )
    body = plan.read_bytes()
    assert b"# Split provider fixtures" in body
    assert w["plan_artifact"]["hash"] == "sha256:" + hashlib.sha256(body).hexdigest()
    assert w["plan_artifact"]["bytes"] == len(body)
    assert w["plan_artifact"]["preview_complete"] is True and w["plan_artifact"]["exists"] is True


def test_create_seeds_plan_from_text_and_never_stores_the_body(store: AgentStore) -> None:
    plan = "This is a test-support refactor, not a runtime behavior fix.\n"
    w = wi.create_work_item(store, "Refactor", plan=plan, plan_status="ready")["work_item"]
    assert Path(w["plan_artifact"]["path"]).read_text() == plan
    assert w["plan_status"] == "ready"
    (line,) = ledger_lines(store)
    assert "plan" not in line  # only the descriptor (with a bounded preview)
    assert line["plan_artifact"]["preview"] == plan


def test_create_is_the_control_plane_path_no_message_no_focus_change(store: AgentStore) -> None:
    a = wi.create_work_item(store, "first")["work_item"]["id"]
    wi.pick_work_item(store, a)
    res = wi.create_work_item(store, "second", source="control_plane")
    assert focus(store) == a and res["current_work_item_id"] == a
    assert store.ledger("queue").records() == []
    assert list(store.inbox.pending()) == []
    assert events(store, "work_item_created")[-1]["data"]["source"] == "control_plane"


def test_every_change_appends_a_full_snapshot(store: AgentStore, now: list[float]) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    now[0] += 1
    wi.update_work_item(store, wid, plan_status="ready")
    now[0] += 1
    wi.update_work_item(store, wid, todo_list=[{"text": "a", "state": "in_progress"}])
    lines = ledger_lines(store)
    assert [ln["rev"] for ln in lines] == [1, 2, 3]
    assert lines[0]["plan_status"] == "draft"  # history untouched
    assert lines[2]["plan_status"] == "ready" and lines[2]["todo_list"] == [
        {"text": "a", "state": "in_progress"}
    ]
    assert lines[2]["updated_at"] > lines[1]["updated_at"] > lines[0]["updated_at"]


def test_index_snapshot_tracks_ledger_offset(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    snap = json.loads(wi.index_path(store).read_text())
    assert snap["offset"] == store.ledger("work_items").size()
    assert wid in snap["items"]


def test_load_replays_only_the_tail(store: AgentStore, monkeypatch: pytest.MonkeyPatch) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    size = store.ledger("work_items").size()
    # another writer appended after the index was written (crash before index save)
    rec = {**wi.load(store).items[wid], "objective": "changed elsewhere", "rev": 2}
    store.ledger("work_items").append(rec)
    seen: list[tuple[str, int]] = []
    orig = Ledger.scan

    def spy(self: Ledger, offset: int = 0) -> Any:
        seen.append((self.path.name, offset))
        return orig(self, offset)

    monkeypatch.setattr(Ledger, "scan", spy)
    idx = wi.load(store)
    assert idx.items[wid]["objective"] == "changed elsewhere"
    assert ("work_items.jsonl", size) in seen and ("work_items.jsonl", 0) not in seen


def test_index_from_another_ledger_is_rebuilt(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    snap = json.loads(wi.index_path(store).read_text())
    snap["offset"] = 10**9
    snap["items"] = {}
    wi.index_path(store).write_text(json.dumps(snap))
    assert wid in wi.load(store).items


def test_missing_index_is_rebuilt_from_ledgers(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.index_path(store).unlink()
    assert wi.load(store).items[wid]["objective"] == "obj"


def test_newer_record_version_is_rejected_clearly(store: AgentStore) -> None:
    store.ledger("work_items").append({"v": 1, "id": "wi_x", "objective": "o", "state": "open"})
    # an old minimal record is upgraded: defaults filled, plan path derived
    old = wi.get_work_item(store, "wi_x")["work_item"]
    assert old["todo_list"] == [] and old["plan_artifact"]["path"].endswith(
        "work-items/wi_x/plan.md"
    )
    assert old["plan_artifact"]["exists"] is False
    # a newer format written by a future holon: the ledger reader refuses it
    with store.ledger("work_items").path.open("a") as f:
        f.write(json.dumps({"v": 2, "id": "wi_y"}) + "\n")
    with pytest.raises(CorruptStateError, match="newer"):
        wi.load(store)


def test_require_work_item(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    assert wi.require_work_item(store, wid)["objective"] == "obj"
    with pytest.raises(NotFoundError) as e:
        wi.require_work_item(store, "wi_missing")
    assert e.value.exit_code == 3 and "holon workitem list" in (e.value.hint or "")


def test_work_item_events_are_visible_in_tail(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.pick_work_item(store, wid)
    wi.update_work_item(store, wid, plan_status="ready")
    wi.complete_work_item(
        store, wid, report="done", source="operator", cancel_waits=cancel_for_work_item
    )
    kinds = [e["kind"] for e in store.events.records() if e.get("work_item_id") == wid]
    assert kinds == [
        "work_item_created",
        "work_item_picked",
        "work_item_updated",
        "work_item_completed",
    ]


# ---------------------------------------------------------------- pick


def test_pick_sets_the_focus_pointer(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    res = wi.pick_work_item(store, wid)
    assert focus(store) == wid
    assert res["work_item"]["is_current"] is True and res["previous_work_item"] is None
    assert res["switch_kind"] == "select"
    assert wid in res["binding"] and "bound" in res["binding"]


def test_pick_returns_previous_snapshot(store: AgentStore) -> None:
    a = wi.create_work_item(store, "a")["work_item"]["id"]
    b = wi.create_work_item(store, "b")["work_item"]["id"]
    wi.pick_work_item(store, a)
    res = wi.pick_work_item(store, b, reason="operator asked")
    assert res["previous_work_item"]["id"] == a and res["previous_work_item"]["is_current"] is False
    assert res["work_item"]["id"] == b


def test_pick_same_item_is_a_reaffirm(store: AgentStore) -> None:
    a = wi.create_work_item(store, "a")["work_item"]["id"]
    wi.pick_work_item(store, a)
    res = wi.pick_work_item(store, a)
    assert res["switch_kind"] == "reaffirm" and res["warnings"] == [] and focus(store) == a


def test_pick_unknown_is_not_found_and_changes_nothing(store: AgentStore) -> None:
    a = wi.create_work_item(store, "a")["work_item"]["id"]
    wi.pick_work_item(store, a)
    with pytest.raises(NotFoundError):
        wi.pick_work_item(store, "wi_nope")
    assert focus(store) == a


def test_pick_completed_is_rejected(store: AgentStore) -> None:
    a = wi.create_work_item(store, "a")["work_item"]["id"]
    wi.complete_work_item(store, a, source="operator", cancel_waits=cancel_for_work_item)
    with pytest.raises(RejectedError) as e:
        wi.pick_work_item(store, a)
    assert e.value.exit_code == 4 and e.value.kind == "work_item_completed"
    assert focus(store) is None


# --------------------------------------------------------------- update


def test_update_replaces_the_full_todo_snapshot(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj", todo_list=[{"text": "a"}, {"text": "b"}])["work_item"][
        "id"
    ]
    res = wi.update_work_item(store, wid, todo_list=[{"text": "b", "state": "completed"}])
    assert res["work_item"]["todo_list"] == [{"text": "b", "state": "completed"}]
    assert res["changed"] == ["todo_list"]


def test_update_objective_and_plan_status(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    w = wi.update_work_item(store, wid, objective="  sharper objective ", plan_status="ready")[
        "work_item"
    ]
    assert w["objective"] == "sharper objective" and w["plan_status"] == "ready"


def test_blocking_assigns_the_default_recheck_deadline(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    w = wi.update_work_item(store, wid, blocked_by="waiting for CI")["work_item"]
    assert w["blocked_by"] == "waiting for CI"
    assert w["recheck_at"] == clock.iso(T0 + 30 * 60) and w["recheck_consumed_at"] is None


def test_recheck_default_comes_from_config(store: AgentStore, holon_home: Path) -> None:
    (holon_home / "config.yaml").write_text("runtime:\n  default_recheck_after_ms: 60000\n")
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    assert wi.update_work_item(store, wid, blocked_by="x")["work_item"]["recheck_at"] == clock.iso(
        T0 + 60
    )


def test_explicit_recheck_after(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    w = wi.update_work_item(store, wid, blocked_by="x", recheck_after_ms=5000)["work_item"]
    assert w["recheck_at"] == clock.iso(T0 + 5)


def test_other_updates_preserve_the_deadline(store: AgentStore, now: list[float]) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    at = wi.update_work_item(store, wid, blocked_by="x", recheck_after_ms=5000)["work_item"][
        "recheck_at"
    ]
    now[0] += 100
    w = wi.update_work_item(store, wid, todo_list=[{"text": "t"}])["work_item"]
    assert w["recheck_at"] == at and w["blocked_by"] == "x"


def test_clearing_the_blocker_clears_recheck_state(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.update_work_item(store, wid, blocked_by="x", recheck_after_ms=1)
    wi.recheck_due(store, T0 + 10)
    w = wi.update_work_item(store, wid, blocked_by=None)["work_item"]
    assert w["blocked_by"] is None and w["recheck_at"] is None and w["recheck_consumed_at"] is None
    assert w["readiness"] == "runnable"


def test_absent_blocked_by_keeps_the_blocker(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.update_work_item(store, wid, blocked_by="x")
    assert wi.update_work_item(store, wid, plan_status="ready")["work_item"]["blocked_by"] == "x"


@pytest.mark.parametrize(
    "kwargs, field_name",
    [
        ({"blocked_by": ""}, "blocked_by"),
        ({"blocked_by": "   "}, "blocked_by"),
        ({"objective": ""}, "objective"),
        ({"plan_status": "done"}, "plan_status"),
        ({"todo_list": [{"text": "x", "state": "blocked"}]}, "todo_list[0].state"),
        ({"recheck_after_ms": 1000}, "recheck_after"),
        ({"blocked_by": "x", "recheck_after_ms": -1}, "recheck_after"),
        ({"blocked_by": None, "recheck_after_ms": 1000}, "recheck_after"),
    ],
)
def test_bad_updates_are_rejected_and_change_nothing(
    store: AgentStore, kwargs: dict[str, Any], field_name: str
) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.pick_work_item(store, wid)
    size = store.ledger("work_items").size()
    with pytest.raises(UsageError) as e:
        wi.update_work_item(store, wid, **kwargs)
    assert e.value.exit_code == 2 and e.value.details.get("field") == field_name
    assert store.ledger("work_items").size() == size and focus(store) == wid


def test_update_with_nothing_is_rejected(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    with pytest.raises(UsageError, match="nothing to update"):
        wi.update_work_item(store, wid)


def test_update_unknown_and_completed(store: AgentStore) -> None:
    with pytest.raises(NotFoundError):
        wi.update_work_item(store, "wi_nope", plan_status="ready")
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.complete_work_item(store, wid, source="operator", cancel_waits=cancel_for_work_item)
    with pytest.raises(RejectedError):
        wi.update_work_item(store, wid, plan_status="ready")


# ------------------------------------------------------------- complete


def test_complete_clears_blocker_and_records_completion(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.update_work_item(store, wid, blocked_by="x")
    res = wi.complete_work_item(
        store, wid, source="operator", report="Shipped.", cancel_waits=cancel_for_work_item
    )
    w = res["work_item"]
    assert w["state"] == "completed" and w["blocked_by"] is None and w["recheck_at"] is None
    assert w["completed_at"] == clock.iso(T0) and w["readiness"] == "completed"
    assert w["result_summary"] == "Shipped."
    assert w["completion_report"] == {"text": "Shipped.", "source": "result_summary"}


def test_operator_completion_writes_no_delivery_summary_or_brief(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.pick_work_item(store, wid)
    wi.complete_work_item(
        store, wid, source="operator", report="Done by hand.", cancel_waits=cancel_for_work_item
    )
    assert store.ledger("delivery_summaries").records() == []
    assert store.ledger("briefs").records() == []


def test_complete_twice_is_rejected(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.complete_work_item(store, wid, source="operator", cancel_waits=cancel_for_work_item)
    size = store.ledger("work_items").size()
    with pytest.raises(RejectedError) as e:
        wi.complete_work_item(
            store, wid, source="operator", report="again", cancel_waits=cancel_for_work_item
        )
    assert e.value.exit_code == 4
    assert store.ledger("work_items").size() == size


def test_complete_unknown(store: AgentStore) -> None:
    with pytest.raises(NotFoundError):
        wi.complete_work_item(store, "wi_nope", cancel_waits=cancel_for_work_item)


def test_completion_report_falls_back_to_delivery_summary(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.complete_work_item(store, wid, source="operator", cancel_waits=cancel_for_work_item)
    # a legacy record: report only in the delivery summaries ledger
    store.ledger("delivery_summaries").append(
        {
            "v": 1,
            "id": "dsum_1",
            "agent_id": "main",
            "work_item_id": wid,
            "text": "legacy report",
            "created_at": clock.now_iso(),
        }
    )
    rep = wi.get_work_item(store, wid)["work_item"]["completion_report"]
    assert rep["text"] == "legacy report" and rep["source"] == "delivery_summary"


# ----------------------------------------------------------------- reads


def test_get_and_list_views(store: AgentStore, now: list[float]) -> None:
    a = wi.create_work_item(store, "a", todo_list=[{"text": "t1", "state": "in_progress"}])[
        "work_item"
    ]["id"]
    now[0] += 1
    b = wi.create_work_item(store, "b")["work_item"]["id"]
    now[0] += 1
    c = wi.create_work_item(store, "c")["work_item"]["id"]
    wi.pick_work_item(store, b)
    wi.update_work_item(store, c, blocked_by="x")
    g = wi.get_work_item(store, a)["work_item"]
    assert g["current_todo"] == {"text": "t1", "state": "in_progress"}
    assert g["todo_counts"]["in_progress"] == 1 and "todo_list" in g
    assert "plan" not in g and set(g["plan_artifact"]) >= {
        "path",
        "hash",
        "bytes",
        "updated_at",
        "preview",
        "preview_complete",
        "exists",
    }
    res = wi.list_work_items(store)
    assert [w["id"] for w in res["work_items"]] == [b, a, c]  # current, queued, blocked
    assert "todo_list" not in res["work_items"][0]
    assert res["counts"] == {
        "runnable": 2,
        "waiting_for_operator": 0,
        "triggered_blocked": 0,
        "blocked": 1,
        "completed": 0,
    }
    assert [w["id"] for w in wi.list_work_items(store, filter="current")["work_items"]] == [b]
    assert [w["id"] for w in wi.list_work_items(store, filter="queued")["work_items"]] == [a]
    assert [w["id"] for w in wi.list_work_items(store, filter="blocked")["work_items"]] == [c]
    lim = wi.list_work_items(store, limit=1)
    assert len(lim["work_items"]) == 1 and lim["truncated"] and lim["total"] == 3


@pytest.mark.parametrize("kwargs", [{"filter": "bogus"}, {"limit": 0}, {"limit": -3}])
def test_list_bad_arguments(store: AgentStore, kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        wi.list_work_items(store, **kwargs)


def test_readiness_counts(store: AgentStore) -> None:
    assert wi.readiness_counts(store) == {
        "runnable": 0,
        "waiting_for_operator": 0,
        "triggered_blocked": 0,
        "blocked": 0,
        "completed": 0,
    }
    a = wi.create_work_item(store, "a")["work_item"]["id"]
    b = wi.create_work_item(store, "b")["work_item"]["id"]
    c = wi.create_work_item(store, "c")["work_item"]["id"]
    wi.create_work_item(store, "d")
    wi.update_work_item(store, a, plan_status="needs_input")
    wi.update_work_item(store, b, blocked_by="x")
    wi.complete_work_item(store, c, source="operator", cancel_waits=cancel_for_work_item)
    assert wi.readiness_counts(store) == {
        "runnable": 1,
        "waiting_for_operator": 1,
        "triggered_blocked": 0,
        "blocked": 1,
        "completed": 1,
    }


def test_status_summary_includes_work_item_counts(store: AgentStore) -> None:
    from holon_cli.runtime.inspect import agent_summary

    wi.create_work_item(store, "a")
    assert agent_summary(store)["work_items"]["runnable"] == 1


def test_corrupt_index_is_rebuilt_from_the_ledgers(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    wi.index_path(store).write_text("{ not json")
    assert wi.load(store).items[wid]["objective"] == "obj"
    wi.update_work_item(store, wid, plan_status="ready")  # and the next write repairs it
    assert json.loads(wi.index_path(store).read_text())["items"][wid]["plan_status"] == "ready"


def test_operator_notes_speak_cli(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj", source="operator")
    assert f"holon workitem pick {wid['work_item']['id']}" in wid["note"]


CONCURRENT = """
import sys
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
store = open_agent()
for i in range(8):
    w = wi.create_work_item(store, f"{sys.argv[1]}-{i}")["work_item"]["id"]
    wi.update_work_item(store, w, todo_list=[{"text": "t"}])
    wi.pick_work_item(store, w, reason="race")
"""


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(store: AgentStore) -> None:
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, f"p{n}"]) for n in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    idx = wi.load(store)
    assert sorted(r["objective"] for r in idx.items.values()) == sorted(
        f"p{n}-{i}" for n in range(4) for i in range(8)
    )
    assert all(r["todo_list"] == [{"text": "t", "state": "pending"}] for r in idx.items.values())
    lines = ledger_lines(store)
    assert len(lines) == 64
    for wid in idx.items:  # revisions per item are dense: no lost or duplicated update
        assert [ln["rev"] for ln in lines if ln["id"] == wid] == [1, 2]
    # the snapshot is a checkpoint: it may lag the ledger, never lead it, and
    # snapshot + ledger tail equals a full rebuild from the ledger
    snap = json.loads(wi.index_path(store).read_text())
    assert 0 < snap["offset"] <= store.ledger("work_items").size()
    wi.index_path(store).unlink()
    wi._LOADED.clear()
    rebuilt = wi.load(store)
    assert rebuilt.items == idx.items
    assert focus(store) in idx.items


def test_index_snapshot_is_a_checkpoint_not_rewritten_per_mutation(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    first = wi.index_path(store).stat().st_ino
    for i in range(5):
        wi.update_work_item(store, wid, objective=f"obj {i}")
    assert wi.index_path(store).stat().st_ino == first  # five appends, no rewrite
    wi._LOADED.clear()
    assert wi.load(store).items[wid]["objective"] == "obj 4"  # snapshot + ledger tail
    big = "x" * 900
    for i in range(120):  # past the checkpoint threshold
        wi.update_work_item(store, wid, objective=f"{big} {i}")
    snap = json.loads(wi.index_path(store).read_text())
    assert wi.index_path(store).stat().st_ino != first
    assert snap["offset"] > 128 * 1024


def test_the_model_keeps_its_tool_vocabulary(store: AgentStore) -> None:
    a = wi.create_work_item(store, "a")["work_item"]["id"]
    b = wi.create_work_item(store, "b")["work_item"]["id"]
    wi.pick_work_item(store, a)
    res = wi.pick_work_item(store, b)
    assert "pass `reason`" in res["warnings"][0]["message"]
    with pytest.raises(UsageError, match=r"todo_list\[1\]\.text"):
        wi.update_work_item(store, a, todo_list=[{"text": "x"}, {"text": " "}])
    with pytest.raises(UsageError) as e:
        wi.update_work_item(store, a, blocked_by=" ")
    assert "pass null (--clear-blocker)" in (e.value.hint or "")
    wi.update_work_item(store, a, blocked_by="ci")
    res = wi.pick_work_item(store, a, reason="review")
    assert "with UpdateWorkItem" in res["warnings"][-1]["message"]
