"""Work-queue prompt projection (snapshots per candidate class, limits and
the budget order) and the stale-progress reminder."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from holon_cli import clock
from holon_cli.errors import UsageError
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.briefs import write_brief, write_transcript
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store.agent_store import AgentStore

T0 = 1_780_000_000.0  # 2026-05-28T20:26:40Z


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    t = [T0]
    clock.set_clock(lambda: t[0])
    counters: dict[str, int] = {}

    def fake_id(prefix: str) -> str:
        counters[prefix] = counters.get(prefix, 0) + 1
        return f"{prefix}_{counters[prefix]:02d}"

    monkeypatch.setattr(clock, "new_id", fake_id)
    yield t
    clock.set_clock(None)


@pytest.fixture
def store(now: list[float]) -> AgentStore:
    return open_agent()


def norm(store: AgentStore, text: str | None) -> str:
    assert text is not None
    text = text.replace(str(store.layout.home.absolute()), "<HOME>")
    text = re.sub(r"sha256 [0-9a-f]{12}", "sha256 <hash>", text)
    return re.sub(r"updated \S+;", "updated <mtime>;", text)


def step(now: list[float]) -> None:
    now[0] += 1


def new(store: AgentStore, objective: str, **kw: Any) -> str:
    wid: str = wi.create_work_item(store, objective, **kw)["work_item"]["id"]
    return wid


def trigger(store: AgentStore, wid: str, wait_id: str, count: int = 1) -> None:
    store.ledger("waiting_intents").append(
        {
            "v": 1,
            "id": wait_id,
            "work_item_id": wid,
            "kind": "external",
            "status": "active",
            "trigger_count": count,
            "last_triggered_at": clock.now_iso(),
            "source": "github",
            "resource": "pr/42",
        }
    )


def current_item(store: AgentStore, now: list[float]) -> str:
    cur = new(
        store,
        "Split compaction fixtures",
        plan=(
            "This is a test-support refactor, not a runtime behavior fix.\n\nVerify with the "
            "focused tests.\n"
        ),
        plan_status="ready",
        todo_list=[
            {"text": "inspect", "state": "completed"},
            {"text": "move fixtures", "state": "in_progress"},
            {"text": "run tests"},
        ],
    )
    wi.pick_work_item(store, cur)
    step(now)
    return cur


CURRENT = """\
## Work queue
Current work item: wi_01 (focus; readiness: runnable; scheduling: runnable)
- objective: Split compaction fixtures
- state: open; plan_status: ready
- plan: <HOME>/work-items/wi_01/plan.md (93 bytes, sha256 <hash>, updated <mtime>; preview complete)
  | This is a test-support refactor, not a runtime behavior fix.
  |
  | Verify with the focused tests.
- todo (1/3 completed; current: move fixtures):
  [x] inspect
  [>] move fixtures
  [ ] run tests
Priority: the objective says what this work is; the plan file is the durable \
interpretation and approach (it wins when they conflict); \
the todo list only tracks progress."""


def test_no_work_items_means_no_projection(store: AgentStore) -> None:
    assert wi.project_work_queue(store) is None


def test_current_item_snapshot(store: AgentStore, now: list[float]) -> None:
    current_item(store, now)
    assert norm(store, wi.project_work_queue(store)) == CURRENT


def test_no_current_item(store: AgentStore, now: list[float]) -> None:
    new(store, "Fix flaky login test")
    assert norm(store, wi.project_work_queue(store)) == (
        "## Work queue\n"
        "Current work item: none.\n"
        "Pick runnable work with PickWorkItem(work_item_id, reason?) or create a work item "
        "with CreateWorkItem when a separate objective appears.\n"
        "\n"
        "Queued runnable work items (oldest first; pick one with PickWorkItem when current "
        "work is done or blocked) - 1:\n"
        '- wi_01 "Fix flaky login test" - plan_status draft'
    )


def build_class(store: AgentStore, now: list[float], cls: str) -> None:
    if cls == "triggered_blocked":
        wid = new(store, "Address review on PR 42")
        step(now)
        wi.update_work_item(store, wid, blocked_by="waiting for review comments")
        step(now)
        trigger(store, wid, "wait_a", count=2)
    elif cls == "queued_runnable":
        new(
            store,
            "Fix flaky login test",
            plan="Reproduce with --count 50 first.\n",
            todo_list=[{"text": "reproduce"}],
        )
    elif cls == "waiting_for_operator":
        wid = new(store, "Choose the migration strategy")
        step(now)
        wi.update_work_item(store, wid, plan_status="needs_input")
    elif cls == "blocked":
        wid = new(store, "Upgrade dependencies")
        step(now)
        wi.update_work_item(store, wid, blocked_by="upstream 2.0 is not released")
    elif cls == "completed_recent":
        wid = new(store, "Write the changelog")
        step(now)
        wi.pick_work_item(store, wid)
        wi.complete_work_item(
            store,
            wid,
            report="Changelog written for 0.3.0.",
            source="agent",
            cancel_waits=cancel_for_work_item,
        )
        no_report = new(store, "Silent chore")
        wi.complete_work_item(
            store, no_report, source="operator", cancel_waits=cancel_for_work_item
        )  # no report: never projected


SECTIONS = {
    "triggered_blocked": (
        "Triggered blocked work items (an external event arrived; review before deciding - "
        "the blocker is not cleared automatically) - 1:\n"
        '- wi_02 "Address review on PR 42" - plan_status draft; blocked by: waiting for '
        "review comments; wait triggered at 2026-05-28T20:26:43.000Z (2 event(s)); blocker "
        "NOT cleared"
    ),
    "queued_runnable": (
        "Queued runnable work items (oldest first; pick one with PickWorkItem when current "
        "work is done or blocked) - 1:\n"
        '- wi_02 "Fix flaky login test" - plan_status draft; next todo: reproduce; plan: '
        "Reproduce with --count 50 first."
    ),
    "waiting_for_operator": (
        "Work items waiting for operator input (plan_status needs_input) - 1:\n"
        '- wi_02 "Choose the migration strategy" - plan_status needs_input'
    ),
    "blocked": (
        "Blocked work items - 1:\n"
        '- wi_02 "Upgrade dependencies" - plan_status draft; blocked by: upstream 2.0 is '
        "not released"
    ),
    "completed_recent": (
        "Recently completed work items (promoted completion reports) - 1; 2 completed in total:\n"
        '- wi_02 "Write the changelog" - report: Changelog written for 0.3.0.'
    ),
}


@pytest.mark.parametrize("cls", list(SECTIONS))
def test_candidate_class_snapshot(store: AgentStore, now: list[float], cls: str) -> None:
    cur = current_item(store, now)
    build_class(store, now, cls)
    if cls == "completed_recent":
        wi.pick_work_item(store, cur)
    text = norm(store, wi.project_work_queue(store))
    assert text == CURRENT + "\n\n" + SECTIONS[cls]


def test_all_classes_in_priority_order(store: AgentStore, now: list[float]) -> None:
    cur = current_item(store, now)
    for cls in (
        "completed_recent",
        "blocked",
        "waiting_for_operator",
        "queued_runnable",
        "triggered_blocked",
    ):
        build_class(store, now, cls)
    wi.pick_work_item(store, cur)
    text = norm(store, wi.project_work_queue(store))
    titles = [
        "Triggered blocked",
        "Queued runnable",
        "waiting for operator input",
        "Blocked work items",
        "Recently completed",
    ]
    pos = [text.index(t) for t in titles]
    assert pos == sorted(pos) and text.startswith(CURRENT)


def test_class_limits(store: AgentStore, now: list[float]) -> None:
    for i in range(7):
        new(store, f"queued {i}")
        step(now)
    for i in range(4):
        wid = new(store, f"blocked {i}")
        wi.update_work_item(store, wid, blocked_by="x")
        step(now)
    for i in range(4):
        wid = new(store, f"triggered {i}")
        wi.update_work_item(store, wid, blocked_by="review")
        step(now)
        trigger(store, wid, f"wait_{i}")
        step(now)
    for i in range(4):
        wid = new(store, f"done {i}")
        wi.pick_work_item(store, wid)
        wi.complete_work_item(store, wid, report=f"report {i}", cancel_waits=cancel_for_work_item)
        step(now)
    text = wi.project_work_queue(store) or ""
    assert (
        "Queued runnable work items (oldest first; pick one with PickWorkItem when current "
        "work is done or blocked) - 5 of 7:"
    ) in text
    assert (
        "Triggered blocked work items (an external event arrived; review before deciding - "
        "the blocker is not cleared automatically) - 3 of 4:"
    ) in text
    assert "Blocked work items - 3 of 4:" in text
    assert "Recently completed work items (promoted completion reports) - 3 of 4:" in text
    shown = re.findall(r'^- wi_\d+ "([a-z]+ \d)"', text, re.M)
    assert [s for s in shown if s.startswith("queued")] == [
        f"queued {i}" for i in range(5)
    ]  # oldest first
    assert [s for s in shown if s.startswith("triggered")] == [
        "triggered 3",
        "triggered 2",
        "triggered 1",
    ]  # newest trigger first
    assert [s for s in shown if s.startswith("blocked")] == ["blocked 3", "blocked 2", "blocked 1"]
    assert [s for s in shown if s.startswith("done")] == ["done 3", "done 2", "done 1"]


def _layout(text: str) -> list[tuple[str, str]]:
    """(class, full|count) for each candidate section in order."""
    names = {
        "Triggered blocked": "triggered_blocked",
        "Queued runnable": "queued_runnable",
        "Work items waiting for operator": "waiting_for_operator",
        "Blocked work items": "blocked",
        "Recently completed": "completed_recent",
    }
    out = []
    for block in text.split("\n\n")[1:]:
        first = block.splitlines()[0]
        for prefix, cls in names.items():
            if first.startswith(prefix):
                out.append((cls, "count" if "omitted for prompt budget" in first else "full"))
    return out


def test_budget_keeps_classes_in_priority_order(store: AgentStore, now: list[float]) -> None:
    cur = current_item(store, now)
    for cls in (
        "completed_recent",
        "blocked",
        "waiting_for_operator",
        "queued_runnable",
        "triggered_blocked",
    ):
        build_class(store, now, cls)
    wi.pick_work_item(store, cur)
    full = wi.project_work_queue(store) or ""
    order = [
        "triggered_blocked",
        "queued_runnable",
        "waiting_for_operator",
        "blocked",
        "completed_recent",
    ]
    assert _layout(full) == [(c, "full") for c in order]
    cur_len = len(full.split("\n\nTriggered")[0])
    seen_layouts = set()
    for budget in range(cur_len - 200, len(full) + 1, 10):
        text = wi.project_work_queue(store, max_chars=budget) or ""
        assert "Current work item: wi_01" in text  # the current item always survives
        lay = _layout(text)
        seen_layouts.add(tuple(lay))
        # classes appear as a prefix of the priority order ...
        assert [c for c, _ in lay] == order[: len(lay)]
        # ... and once one is cut to a count, none below it is detailed
        modes = [m for _, m in lay]
        assert modes == sorted(modes, key=lambda m: m == "count")
        if budget >= cur_len:
            assert len(text) <= budget
    # the sweep really exercised dropping and compacting
    assert () in seen_layouts
    assert any(lay and lay[-1][1] == "count" for lay in seen_layouts)
    assert any(
        lay and lay[0] == ("triggered_blocked", "full") and len(lay) < 5 for lay in seen_layouts
    )


def test_tight_budget_shrinks_the_current_item_last(store: AgentStore, now: list[float]) -> None:
    current_item(store, now)
    text = wi.project_work_queue(store, max_chars=200) or ""
    assert "Current work item: wi_01" in text and "- objective: Split compaction fixtures" in text


def test_bound_work_item_is_projected_as_current(store: AgentStore, now: list[float]) -> None:
    cur = current_item(store, now)
    other = new(store, "Bound by the message")
    text = wi.project_work_queue(store, bound_work_item_id=other) or ""
    assert f"Current work item: {other} (bound to this turn;" in text
    assert f'- {cur} "Split compaction fixtures"' in text  # the focus item is a candidate then


def test_process_trace_is_bound_and_bounded(store: AgentStore, now: list[float]) -> None:
    cur = current_item(store, now)
    for i in range(8):
        write_transcript(
            store,
            "assistant_round",
            text=f"progress note {i}",
            work_item_id=cur,
            thinking="SECRET-THINKING",
        )
        step(now)
    write_transcript(store, "assistant_round", text="OTHER-ITEM-TEXT", work_item_id="wi_other")
    write_transcript(
        store,
        "tool_result",
        tool_name="ExecCommand",
        is_error=True,
        work_item_id=cur,
        summary="exit 1",
    )
    step(now)
    write_brief(store, kind="ack", text="Working on the fixtures.", work_item_id=cur)
    text = wi.project_work_queue(store, trace_limit=4) or ""
    trace = text.split("- recent process trace:\n")[1].split("\nPriority:")[0].splitlines()
    assert trace == [
        "  - 20:26:47 assistant: progress note 6",
        "  - 20:26:48 assistant: progress note 7",
        "  - 20:26:49 tool ExecCommand: error - exit 1",
        "  - 20:26:50 brief (ack): Working on the fixtures.",
    ]
    assert "SECRET-THINKING" not in text and "OTHER-ITEM-TEXT" not in text


def test_current_blocked_item_for_review(store: AgentStore, now: list[float]) -> None:
    wid = new(store, "Address review")
    wi.update_work_item(store, wid, blocked_by="waiting for review", recheck_after_ms=60_000)
    wi.pick_work_item(store, wid)
    text = wi.project_work_queue(store) or ""
    assert "readiness: blocked" in text
    assert "- blocked_by: waiting for review (recheck at 2026-05-28T20:27:40.000Z)" in text
    assert "this item is not runnable; it is current for review" in text


# ------------------------------------------------------------ stale reminder


def test_stale_reminder_threshold_and_cooldown(
    store: AgentStore, now: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    current_item(store, now)
    monkeypatch.setenv("HOLON_WORK_ITEM_STALE_REMINDER_ROUNDS", "3")
    monkeypatch.setenv("HOLON_WORK_ITEM_STALE_REMINDER_COOLDOWN_ROUNDS", "2")
    fired = [n for n in range(0, 10) if wi.stale_reminder(store, n)]
    assert fired == [3, 5, 7, 9]


def test_stale_reminder_once_without_cooldown_and_disabled(
    store: AgentStore, now: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    current_item(store, now)
    monkeypatch.setenv("HOLON_WORK_ITEM_STALE_REMINDER_ROUNDS", "2")
    monkeypatch.setenv("HOLON_WORK_ITEM_STALE_REMINDER_COOLDOWN_ROUNDS", "0")
    assert [n for n in range(8) if wi.stale_reminder(store, n)] == [2]
    monkeypatch.setenv("HOLON_WORK_ITEM_STALE_REMINDER_ROUNDS", "0")
    assert [n for n in range(8) if wi.stale_reminder(store, n)] == []


def test_stale_reminder_defaults_and_config(
    store: AgentStore, now: list[float], holon_home: Any
) -> None:
    current_item(store, now)
    assert wi.stale_reminder(store, 7) is None and wi.stale_reminder(store, 8) is not None
    (holon_home / "config.yaml").write_text(
        "runtime:\n  work_item_stale_reminder_rounds: 4\n  "
        "work_item_stale_reminder_cooldown_rounds: 100\n"
    )
    assert wi.stale_reminder(store, 4) is not None and wi.stale_reminder(store, 8) is None


def test_stale_reminder_content(store: AgentStore, now: list[float]) -> None:
    cur = current_item(store, now)
    wi.update_work_item(store, cur, blocked_by="waiting for CI")
    wi.pick_work_item(store, cur)
    text = wi.stale_reminder(store, 8) or ""
    assert f"Current work item {cur}: Split compaction fixtures" in text
    assert "active todos: [>] move fixtures; [ ] run tests" in text
    assert "inspect" not in text  # completed todos are omitted
    assert "blocked_by: waiting for CI" in text
    assert "plan gist: This is a test-support refactor" in text
    assert "does not record progress" in text


def test_stale_reminder_is_bounded(
    store: AgentStore, now: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    cur = current_item(store, now)
    wi.update_work_item(
        store, cur, todo_list=[{"text": f"todo number {i} " * 5} for i in range(30)]
    )
    monkeypatch.setenv("HOLON_WORK_ITEM_STALE_REMINDER_MAX_TOKENS", "50")
    text = wi.stale_reminder(store, 8) or ""
    assert 0 < len(text) <= 200


def test_stale_reminder_needs_a_current_item(store: AgentStore, now: list[float]) -> None:
    new(store, "not current")
    assert wi.stale_reminder(store, 100) is None


def test_stale_reminder_bad_env(
    store: AgentStore, now: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    current_item(store, now)
    monkeypatch.setenv("HOLON_WORK_ITEM_STALE_REMINDER_ROUNDS", "many")
    with pytest.raises(UsageError, match="HOLON_WORK_ITEM_STALE_REMINDER_ROUNDS"):
        wi.stale_reminder(store, 8)


def test_mutation_tool_names() -> None:
    assert all(
        wi.is_work_item_mutation(n)
        for n in ("CreateWorkItem", "PickWorkItem", "UpdateWorkItem", "CompleteWorkItem")
    )
    assert not wi.is_work_item_mutation("GetWorkItem") and not wi.is_work_item_mutation(
        "ExecCommand"
    )
