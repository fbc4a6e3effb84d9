"""Plan artifacts: the file is the truth; records keep a descriptor that is
refreshed when the file changes (any process, any editor)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from holon_cli.model.workitem import PREVIEW_CHARS as PREVIEW
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store.agent_store import AgentStore


@pytest.fixture
def store() -> AgentStore:
    return open_agent()


def events(store: AgentStore, kind: str) -> list[dict[str, Any]]:
    return [e for e in store.events.records() if e["kind"] == kind]


def plan_of(store: AgentStore, wid: str) -> Path:
    return Path(wi.require_work_item(store, wid)["plan_artifact"]["path"])


def test_write_from_another_process_is_picked_up(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    path = plan_of(store, wid)
    old_hash = wi.require_work_item(store, wid)["plan_artifact"]["hash"]
    code = "import sys; open(sys.argv[1], 'a').write('\\nScope: only the test support module.\\n')"
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    res = wi.refresh_plan_descriptor(store, wid)
    data = path.read_bytes()
    assert res["changed"] is True and res["exists"] is True
    assert res["plan_artifact"]["hash"] == "sha256:" + hashlib.sha256(data).hexdigest()
    assert "Scope: only the test support module." in res["plan_artifact"]["preview"]
    (ev,) = events(store, "plan_artifact_changed")
    assert (
        ev["work_item_id"] == wid
        and ev["data"]["previous_hash"] == old_hash
        and ev["data"]["path"] == str(path)
    )
    assert store.ledger("work_items").records()[-1]["change"] == "plan_artifact_refreshed"
    # nothing new: no record, no event
    size = store.ledger("work_items").size()
    assert wi.refresh_plan_descriptor(store, wid)["changed"] is False
    assert (
        store.ledger("work_items").size() == size
        and len(events(store, "plan_artifact_changed")) == 1
    )


def test_reads_return_the_fresh_descriptor(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    plan_of(store, wid).write_text("rewritten by the agent with ApplyPatch\n")
    assert (
        wi.get_work_item(store, wid)["work_item"]["plan_artifact"]["preview"]
        == "rewritten by the agent with ApplyPatch\n"
    )
    plan_of(store, wid).write_text("and again\n")
    (item,) = wi.list_work_items(store)["work_items"]
    assert item["plan_artifact"]["preview"] == "and again\n"


def test_touch_without_content_change_is_not_a_change(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    path = plan_of(store, wid)
    st = path.stat()
    os.utime(path, (st.st_atime + 100, st.st_mtime + 100))
    assert wi.refresh_plan_descriptor(store, wid)["changed"] is False
    assert events(store, "plan_artifact_changed") == []


def test_plan_larger_than_the_preview_bound(store: AgentStore) -> None:
    body = "# Plan\n" + "".join(f"step {i}: é détail\n" for i in range(400))
    wid = wi.create_work_item(store, "obj", plan=body)["work_item"]["id"]
    desc = wi.get_work_item(store, wid)["work_item"]["plan_artifact"]
    raw = plan_of(store, wid).read_bytes()
    assert desc["bytes"] == len(raw) > PREVIEW
    assert desc["hash"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert len(desc["preview"]) == PREVIEW and body.startswith(desc["preview"])
    assert desc["preview_complete"] is False


def test_plan_exactly_at_the_bound_is_complete(store: AgentStore) -> None:
    body = "x" * (PREVIEW - 1) + "\n"
    wid = wi.create_work_item(store, "obj", plan=body)["work_item"]["id"]
    desc = wi.get_work_item(store, wid)["work_item"]["plan_artifact"]
    assert desc["preview"] == body and desc["preview_complete"] is True


def test_deleted_plan_is_reported_once_and_not_recreated(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    path = plan_of(store, wid)
    wi.pick_work_item(store, wid)
    path.unlink()
    res = wi.refresh_plan_descriptor(store, wid)
    assert res["changed"] is True and res["exists"] is False
    assert res["plan_artifact"]["exists"] is False and res["plan_artifact"]["hash"] is None
    assert not path.exists()
    wi.refresh_plan_descriptor(store, wid)
    wi.refresh_all(store)
    wi.get_work_item(store, wid)
    (ev,) = events(store, "plan_artifact_missing")
    assert ev["data"]["path"] == str(path)
    assert not path.exists()
    text = wi.project_work_queue(store) or ""
    assert "MISSING" in text and str(path) in text


def test_restored_plan_is_a_change(store: AgentStore) -> None:
    wid = wi.create_work_item(store, "obj")["work_item"]["id"]
    path = plan_of(store, wid)
    path.unlink()
    wi.refresh_plan_descriptor(store, wid)
    path.write_text("recreated by the agent\n")
    res = wi.refresh_plan_descriptor(store, wid)
    assert res["exists"] is True and res["changed"] is True
    assert events(store, "plan_artifact_changed")[-1]["data"]["restored"] is True


def test_refresh_all_covers_open_items_only(store: AgentStore) -> None:
    a = wi.create_work_item(store, "a")["work_item"]["id"]
    b = wi.create_work_item(store, "b")["work_item"]["id"]
    c = wi.create_work_item(store, "c")["work_item"]["id"]
    wi.complete_work_item(store, c, source="operator", cancel_waits=cancel_for_work_item)
    for wid in (a, b, c):
        plan_of(store, wid).write_text(f"new plan for {wid}\n")
    changes = wi.refresh_all(store)
    assert sorted(ch["work_item_id"] for ch in changes) == sorted([a, b])
    assert all(ch["change"] == "changed" for ch in changes)
    assert wi.refresh_all(store) == []


def test_refresh_unknown_item(store: AgentStore) -> None:
    from holon_cli.errors import NotFoundError

    with pytest.raises(NotFoundError):
        wi.refresh_plan_descriptor(store, "wi_nope")
