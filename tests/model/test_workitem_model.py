"""Pure work-item values: validation, derived readiness, candidate classes,
ranking and the structured warnings."""

from __future__ import annotations

from typing import Any

import pytest

from holon_cli.errors import CorruptStateError, UsageError
from holon_cli.model import workitem as wm
from holon_cli.model import workitem_readiness as wr


def rec(wid: str, **kw: Any) -> dict[str, Any]:
    base = wm.new_work_item_record(
        work_item_id=wid,
        agent_id="main",
        workspace_id=None,
        objective=kw.pop("objective", f"objective {wid}"),
        plan_status=kw.pop("plan_status", "ready"),
        todo_list=kw.pop("todo_list", []),
        plan_artifact=wm.describe_plan(f"/p/{wid}/plan.md", b"plan\n", "2026-01-01T00:00:00.000Z"),
        created_at=kw.pop("created_at", "2026-01-01T00:00:00.000Z"),
    )
    base.update(kw)
    return base


# ------------------------------------------------------------- validation


@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_objective_must_be_text(bad: Any) -> None:
    with pytest.raises(UsageError) as e:
        wm.validate_objective(bad)
    assert e.value.details["field"] == "objective"


def test_objective_is_trimmed_and_bounded() -> None:
    assert wm.validate_objective("  fix it  ") == "fix it"
    with pytest.raises(UsageError):
        wm.validate_objective("x" * (wm.MAX_OBJECTIVE_CHARS + 1))


def test_plan_status_enum() -> None:
    for s in wm.PLAN_STATUSES:
        assert wm.validate_plan_status(s) == s
    with pytest.raises(UsageError, match="plan_status"):
        wm.validate_plan_status("done")


@pytest.mark.parametrize("bad", ["", "  \n", None])
def test_empty_blocker_is_rejected(bad: Any) -> None:
    with pytest.raises(UsageError) as e:
        wm.validate_blocked_by(bad)
    assert e.value.details["field"] == "blocked_by"


@pytest.mark.parametrize("bad", [0, -5, True, 1.5, "10"])
def test_recheck_after_must_be_positive_ms(bad: Any) -> None:
    with pytest.raises(UsageError):
        wm.validate_recheck_after_ms(bad)


def test_todo_list_normalization() -> None:
    out = wm.normalize_todo_list(
        [{"text": " a "}, {"text": "b", "state": "in_progress"}, {"text": "c", "state": None}]
    )
    assert out == [
        {"text": "a", "state": "pending"},
        {"text": "b", "state": "in_progress"},
        {"text": "c", "state": "pending"},
    ]


@pytest.mark.parametrize(
    "items, field_name",
    [
        ([{"text": ""}], "todo_list[0].text"),
        ([{"text": "ok"}, {"text": "x", "state": "blocked"}], "todo_list[1].state"),
        ("not a list", "todo_list"),
    ],
)
def test_todo_list_rejects_bad_items(items: Any, field_name: str) -> None:
    with pytest.raises(UsageError) as e:
        wm.normalize_todo_list(items)
    assert e.value.details["field"] == field_name


def test_todo_list_has_no_blocked_state() -> None:
    assert "blocked" not in wm.TODO_STATES


def test_unset_is_distinct_from_none() -> None:
    assert wm.UNSET is not None
    assert wm.Unset() is wm.UNSET
    assert not wm.UNSET
    assert repr(wm.UNSET) == "UNSET"


# ---------------------------------------------------------------- records


def test_new_record_shape() -> None:
    r = rec("wi_1")
    assert r["state"] == "open" and r["v"] == wm.WORK_ITEM_RECORD_VERSION
    for k in (
        "id",
        "agent_id",
        "workspace_id",
        "objective",
        "state",
        "plan_status",
        "todo_list",
        "blocked_by",
        "recheck_at",
        "recheck_consumed_at",
        "result_summary",
        "created_at",
        "updated_at",
        "plan_artifact",
    ):
        assert k in r
    assert "plan" not in r  # the body lives in the plan file only


def test_upgrade_rejects_newer_records_and_fills_defaults() -> None:
    with pytest.raises(CorruptStateError, match="newer"):
        wm.upgrade_record({"v": 99, "id": "wi_x"})
    up = wm.upgrade_record({"v": 1, "id": "wi_x", "objective": "o", "state": "open"})
    assert up["todo_list"] == [] and up["blocked_by"] is None and up["plan_status"] == "draft"


def test_public_record_strips_ledger_keys() -> None:
    r = {**rec("wi_1"), "rev": 3, "change": "updated", "recorded_at": "t"}
    pub = wm.public_record(r)
    assert not {"v", "rev", "change", "recorded_at"} & set(pub)


def test_describe_plan_preview_bound() -> None:
    small = wm.describe_plan("/p", b"hello\n", "t")
    assert small["exists"] and small["preview_complete"] and small["bytes"] == 6
    assert small["hash"].startswith("sha256:")
    big = wm.describe_plan("/p", b"x" * 5000, "t")
    assert len(big["preview"]) == wm.PREVIEW_CHARS and big["preview_complete"] is False
    missing = wm.describe_plan("/p", None, None)
    assert missing["exists"] is False and missing["hash"] is None


def test_plan_changed() -> None:
    a = wm.describe_plan("/p", b"a", "t1")
    assert not wm.plan_changed(a, wm.describe_plan("/p", b"a", "t2"))  # touch only
    assert wm.plan_changed(a, wm.describe_plan("/p", b"b", "t1"))
    assert wm.plan_changed(a, wm.describe_plan("/p", None, None))


# ------------------------------------------------------------------ todos


def test_current_todo_prefers_in_progress_then_pending() -> None:
    todos = [
        {"text": "a", "state": "completed"},
        {"text": "b", "state": "pending"},
        {"text": "c", "state": "in_progress"},
    ]
    assert wm.current_todo(todos) == {"text": "c", "state": "in_progress"}
    assert wm.current_todo(todos[:2]) == {"text": "b", "state": "pending"}
    assert wm.current_todo(todos[:1]) is None


def test_unfinished_todos_warning_shape() -> None:
    todos = [
        {"text": "run regression tests", "state": "pending"},
        {"text": "x", "state": "pending"},
        {"text": "update docs", "state": "in_progress"},
        {"text": "d", "state": "completed"},
    ]
    w = wm.unfinished_todos_warning(todos)
    assert w is not None
    assert w["kind"] == "unfinished_todos"
    assert w["pending_count"] == 2 and w["in_progress_count"] == 1
    assert {"text": "update docs", "state": "in_progress"} in w["sample"]
    assert wm.unfinished_todos_warning([{"text": "d", "state": "completed"}]) is None


def test_multiple_in_progress_is_a_warning_only() -> None:
    todos = wm.normalize_todo_list(
        [{"text": "a", "state": "in_progress"}, {"text": "b", "state": "in_progress"}]
    )
    assert [w["kind"] for w in wm.todo_warnings(todos)] == ["multiple_in_progress"]


# -------------------------------------------------------------- readiness


@pytest.mark.parametrize(
    "fields, waits, sched, ready",
    [
        ({}, wr.NO_WAITS, "runnable", "runnable"),
        ({"plan_status": "draft"}, wr.NO_WAITS, "runnable", "runnable"),
        ({"plan_status": "needs_input"}, wr.NO_WAITS, "waiting_operator", "waiting_for_operator"),
        ({"blocked_by": "CI"}, wr.NO_WAITS, "blocked", "blocked"),
        ({"blocked_by": "CI", "plan_status": "needs_input"}, wr.NO_WAITS, "blocked", "blocked"),
        ({}, wr.WaitSummary(({"id": "w"},), 1, 0), "waiting_task", "blocked"),
        ({}, wr.WaitSummary(({"id": "w"},), 0, 1), "waiting_external", "blocked"),
        ({"state": "completed"}, wr.NO_WAITS, "completed", "completed"),
    ],
)
def test_scheduling_state_and_readiness(
    fields: dict[str, Any], waits: wr.WaitSummary, sched: str, ready: str
) -> None:
    r = rec("wi_1", **fields)
    assert wr.scheduling_state(r, waits) == sched
    assert wr.readiness(r, waits) == ready
    assert wr.is_runnable(r, waits) == (sched == "runnable")


def test_readiness_projection_fields() -> None:
    r = rec("wi_1", todo_list=[{"text": "a", "state": "pending"}])
    p = wr.readiness_projection(r, current_id="wi_1")
    assert p == {
        "lifecycle": "open",
        "scheduling_state": "runnable",
        "readiness": "runnable",
        "candidate_class": "current_runnable",
        "focus": "current",
        "has_active_waits": False,
        "has_triggered_waits": False,
        "current_todo": {"text": "a", "state": "pending"},
    }
    assert wr.readiness_projection(r, current_id=None)["focus"] == "queued"


def test_triggered_is_derived_as_the_rfc_says_and_unreviewed_is_after_last_update() -> None:
    r = rec("wi_1", blocked_by="review", updated_at="2026-01-01T00:00:05.000Z")
    before = {
        "id": "w1",
        "status": "active",
        "kind": "external",
        "trigger_count": 1,
        "last_triggered_at": "2026-01-01T00:00:01.000Z",
    }
    after = {**before, "trigger_count": 2, "last_triggered_at": "2026-01-01T00:00:09.000Z"}
    # triggered: trigger_count > 0 and last_triggered_at set (work-item RFC),
    # even when the item changed since; unreviewed: the event is newer
    old = wr.summarize_waits(r, [before])
    assert old.triggered and not old.unreviewed
    s = wr.summarize_waits(r, [after])
    assert s.triggered and s.unreviewed and s.last_triggered_at == after["last_triggered_at"]
    # cancelled waits do not count; a wait that never fired is active but not triggered
    assert wr.summarize_waits(r, [{**after, "status": "cancelled"}]) is wr.NO_WAITS
    idle = wr.summarize_waits(
        r, [{"id": "w2", "status": "active", "kind": "task", "trigger_count": 0}]
    )
    assert idle.has_active and idle.active_task == 1 and not idle.triggered


# ------------------------------------------------------ candidate classes


def test_classify_each_class() -> None:
    items = [
        rec("wi_cur"),
        rec("wi_q"),
        rec("wi_op", plan_status="needs_input"),
        rec("wi_blk", blocked_by="CI"),
        rec("wi_trg", blocked_by="review"),
        rec("wi_done", state="completed"),
        rec("wi_done_norep", state="completed"),
    ]
    waits = {
        "wi_trg": wr.WaitSummary(
            ({"id": "w"},), 0, 1, True, "2026-01-02T00:00:00.000Z", unreviewed=True
        )
    }
    c = wr.classify(items, current_id="wi_cur", waits=waits, has_report={"wi_done": True})
    ids = {k: [r["id"] for r in v] for k, v in c.classes.items()}
    assert ids == {
        "current_runnable": ["wi_cur"],
        "triggered_blocked": ["wi_trg"],
        "queued_runnable": ["wi_q"],
        "waiting_for_operator": ["wi_op"],
        "blocked": ["wi_blk"],
        "completed_recent": ["wi_done"],
    }
    assert c.current is not None and c.current["id"] == "wi_cur"
    assert c.completed_total == 2


def test_current_non_runnable_is_current_but_not_current_runnable() -> None:
    c = wr.classify([rec("wi_cur", blocked_by="x")], current_id="wi_cur")
    assert (
        c.current is not None and c.classes["current_runnable"] == [] and c.classes["blocked"] == []
    )


def test_ranking_rules() -> None:
    t = "2026-01-01T00:00:0{}.000Z".format
    # queued runnable: updated_at asc, then created_at asc
    q = [
        rec("wi_a", updated_at=t(5), created_at=t(1)),
        rec("wi_b", updated_at=t(3), created_at=t(2)),
        rec("wi_c", updated_at=t(3), created_at=t(1)),
    ]
    assert [r["id"] for r in wr.rank("queued_runnable", q, {})] == ["wi_c", "wi_b", "wi_a"]
    # blocked and completed: updated_at desc
    b = [rec("wi_a", updated_at=t(1)), rec("wi_b", updated_at=t(7)), rec("wi_c", updated_at=t(4))]
    assert [r["id"] for r in wr.rank("blocked", b, {})] == ["wi_b", "wi_c", "wi_a"]
    assert [r["id"] for r in wr.rank("completed_recent", b, {})] == ["wi_b", "wi_c", "wi_a"]
    # triggered: last_triggered_at desc, then updated_at desc
    w = {
        "wi_a": wr.WaitSummary((), 0, 1, True, t(9)),
        "wi_b": wr.WaitSummary((), 0, 1, True, t(8)),
        "wi_c": wr.WaitSummary((), 0, 1, True, t(8)),
    }
    tr = [rec("wi_b", updated_at=t(1)), rec("wi_c", updated_at=t(2)), rec("wi_a", updated_at=t(0))]
    assert [r["id"] for r in wr.rank("triggered_blocked", tr, w)] == ["wi_a", "wi_c", "wi_b"]


def test_prompt_limits_are_the_rfc_defaults() -> None:
    assert wr.PROMPT_LIMITS["triggered_blocked"] == 3
    assert wr.PROMPT_LIMITS["queued_runnable"] == 5
    assert wr.PROMPT_LIMITS["blocked"] == 3
    assert wr.PROMPT_LIMITS["completed_recent"] == 3
    items = [rec(f"wi_{i}", updated_at=f"2026-01-01T00:00:{i:02d}.000Z") for i in range(8)]
    c = wr.classify(items, current_id=None)
    assert [r["id"] for r in c.top("queued_runnable")] == [f"wi_{i}" for i in range(5)]


def test_candidate_priority_order() -> None:
    assert wr.CANDIDATE_CLASSES == (
        "current_runnable",
        "triggered_blocked",
        "queued_runnable",
        "waiting_for_operator",
        "blocked",
        "completed_recent",
    )


@pytest.mark.parametrize(
    "flt, expected",
    [
        ("all", {"wi_cur", "wi_q", "wi_blk", "wi_op", "wi_done"}),
        ("current", {"wi_cur"}),
        ("open", {"wi_cur", "wi_q", "wi_blk", "wi_op"}),
        ("queued", {"wi_q", "wi_op"}),
        ("blocked", {"wi_blk"}),
        ("completed", {"wi_done"}),
    ],
)
def test_filters(flt: str, expected: set[str]) -> None:
    items = [
        rec("wi_cur"),
        rec("wi_q"),
        rec("wi_blk", blocked_by="x"),
        rec("wi_op", plan_status="needs_input"),
        rec("wi_done", state="completed"),
    ]
    assert {r["id"] for r in items if wr.matches_filter(r, flt, current_id="wi_cur")} == expected


def test_unknown_filter() -> None:
    with pytest.raises(UsageError):
        wr.matches_filter(rec("wi_1"), "nope", current_id=None)
