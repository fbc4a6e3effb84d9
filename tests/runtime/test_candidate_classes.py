"""The ``triggered_blocked`` candidate class counted apart from ``blocked``
(rfc-work-item-centered-agent-runtime.md "Candidate Classes" L239-249;
"Waiting And External Events" L196-212: a delivery surfaces the item as
triggered and does not clear its blocker), in ``holon status``, the
console (runtime/presentation.py, cli/tui) and the readiness projection
(same RFC, "WorkItem State And Readiness" L171-183: scheduler tests,
``/state``, TUI and prompt context agree)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from holon_cli.cli.tui.session import state_summary
from holon_cli.model import workitem_readiness as wr
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.inspect import agent_summary
from holon_cli.runtime.presentation import present, work_counts
from holon_cli.runtime.waiting import intents, triggers
from holon_cli.store.agent_store import AgentStore


@pytest.fixture
def store() -> AgentStore:
    return open_agent()


def fire_wait_on(store: AgentStore) -> tuple[str, str]:
    """A blocked item with an external wait, and one unrelated blocked item;
    then a delivery to the agent's trigger. Returns (triggered, blocked)."""
    a = wi.create_work_item(store, "release when CI is green")["work_item"]["id"]
    b = wi.create_work_item(store, "waits on a person")["work_item"]["id"]
    wi.update_work_item(store, a, blocked_by="waiting for CI")
    wi.update_work_item(store, b, blocked_by="waiting for Ann")
    intents.record_wait(store, description="CI run", source="ci", work_item_id=a)
    url = triggers.show(store)["trigger_url"]
    assert url
    triggers.deliver(url.rsplit("/", 1)[-1], b'{"ci": "green"}', "application/json", "ci")
    return a, b


def test_an_item_whose_wait_fired_is_counted_triggered_blocked(store: AgentStore) -> None:
    a, b = fire_wait_on(store)
    counts = agent_summary(store)["work_items"]
    assert counts == {
        "runnable": 0,
        "waiting_for_operator": 0,
        "triggered_blocked": 1,
        "blocked": 1,
        "completed": 0,
    }
    # the blocker is not cleared by the delivery (RFC L209-210)
    item = wi.get_work_item(store, a)["work_item"]
    assert item["blocked_by"] == "waiting for CI"
    assert item["readiness"] == "blocked" and item["candidate_class"] == "triggered_blocked"
    assert wi.get_work_item(store, b)["work_item"]["candidate_class"] == "blocked"
    # the list view and its counts agree with status
    listed = wi.list_work_items(store)
    assert listed["counts"] == counts
    assert [w["candidate_class"] for w in listed["work_items"]] == ["triggered_blocked", "blocked"]


def test_the_projection_and_the_prompt_classes_agree(store: AgentStore) -> None:
    """One derivation: the item's candidate class equals the class the
    prompt's work queue puts it in (model/workitem_readiness.classify)."""
    a, b = fire_wait_on(store)
    c = wi.create_work_item(store, "runnable one")["work_item"]["id"]
    from holon_cli.store.workitem_index import load

    idx = load(store)
    cand = wr.classify(idx.items.values(), current_id=None, waits=idx.wait_summaries())
    by_class = {r["id"]: cls for cls, rows in cand.classes.items() for r in rows}
    for wid in (a, b, c):
        rec = idx.items[wid]
        proj = wr.readiness_projection(rec, current_id=None, waits=idx.waits_for(rec))
        assert proj["candidate_class"] == by_class[wid]
    text = wi.project_work_queue(store)
    assert text is not None and a in text.split("Blocked work items")[0]


def test_candidate_class_of_the_current_and_completed_items() -> None:
    rec: dict[str, Any] = {"id": "wi_1", "state": "open", "plan_status": "ready"}
    assert wr.candidate_class(rec, current_id="wi_1") == "current_runnable"
    assert wr.candidate_class(rec, current_id=None) == "queued_runnable"
    assert wr.candidate_class({**rec, "plan_status": "needs_input"}, current_id=None) == (
        "waiting_for_operator"
    )
    assert wr.candidate_class({**rec, "state": "completed"}, current_id=None) == (
        "completed_recent"
    )
    fired = wr.summarize_waits(
        rec,
        [{"status": "active", "kind": "external", "trigger_count": 2, "last_triggered_at": "t"}],
    )
    # a current item blocked on a fired wait is a review candidate, too
    assert wr.candidate_class(rec, current_id="wi_1", waits=fired) == "triggered_blocked"


def test_status_prints_the_count(store: AgentStore, script_runner: Any) -> None:
    fire_wait_on(store)
    r = script_runner.run(["holon", "status"])
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("work items"))
    assert "triggered_blocked (wait fired, review) 1" in line and "blocked 1" in line
    r = script_runner.run(["holon", "status", "--json"])
    assert json.loads(r.stdout)["data"]["work_items"]["triggered_blocked"] == 1


def test_the_console_shows_the_count_and_the_delivery(store: AgentStore) -> None:
    a, _ = fire_wait_on(store)
    payload = {"agent": agent_summary(store), "state": {}, "identity": {}}
    assert state_summary(payload)["work"] == "triggered_blocked (wait fired, review) 1, blocked 1"
    assert work_counts({"runnable": 0, "blocked": 0}) == "none"
    ev = next(e for e in store.events.records() if e["kind"] == "external_trigger_delivered")
    assert ev["data"]["work_item_ids"] == [a]
    row = present(ev)
    assert row["category"] == "waiting" and a in row["summary"]
    assert "blocker kept" in row["summary"]
