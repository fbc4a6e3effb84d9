"""The presentation layer: every event kind maps to a row with the spec's
fields; visibility and display modes; provider-round wording; state sync is
never a conversation row; activity is scoped to a turn; `holon tail
--presented` renders through it and keeps terminal control out."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest

from holon_cli.model.events import EventKind
from holon_cli.runtime import presentation as P
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.briefs import write_brief
from tests.inprocess_cli import bind_runner, run  # noqa: F401


def ev(kind: str, data: dict[str, Any] | None = None, **env: Any) -> dict[str, Any]:
    return {
        "v": 1,
        "event_seq": 1,
        "at": "2026-11-27T05:00:00Z",
        "kind": kind,
        "data": data or {},
        **env,
    }


@pytest.mark.parametrize("kind", get_args(EventKind))
def test_every_known_kind_is_presented(kind: str) -> None:
    row = P.present(ev(kind))
    assert set(row) == {"visibility", "category", "title", "body", "summary", "source_event_kind"}
    assert row["visibility"] in P.VISIBILITIES and row["category"] in P.CATEGORIES
    assert row["source_event_kind"] == kind and row["summary"]
    assert "severity" not in row


def test_unknown_and_malformed_events_are_trace_rows() -> None:
    assert P.present(ev("from_the_future"))["visibility"] == "trace"
    assert P.present({"kind": "brief_recorded", "data": "not a mapping"})["category"] == "brief"
    assert P.present({})["source_event_kind"] == "?"


def test_provider_round_wording() -> None:
    text = P.present(
        ev("assistant_round_recorded", {"round": 1, "text_preview": "Reading  the\nlogs"})
    )
    assert text["summary"] == "Assistant progress: Reading the logs"
    tools = P.present(
        ev(
            "assistant_round_recorded",
            {"round": 2, "tool_requests": [{"name": "ExecCommand"}, {"name": "ApplyPatch"}]},
        )
    )
    assert tools["summary"] == "Model requested tools: ExecCommand, ApplyPatch"
    bare = P.present(ev("assistant_round_recorded", {"round": 3}))
    assert bare["summary"] == "Model round 3 finished"
    assert {text["visibility"], tools["category"]} == {"progress", "assistant_progress"}


def test_visibility_of_briefs_messages_and_work() -> None:
    assert (
        P.present(
            ev(
                "brief_recorded",
                {"kind": "ack", "visibility": "action_required", "text_preview": "Need the key"},
            )
        )["visibility"]
        == "action_required"
    )
    assert (
        P.present(
            ev(
                "brief_recorded",
                {"kind": "result", "visibility": "turn_result", "text_preview": "done"},
            )
        )["title"]
        == "Result"
    )
    op = P.present(
        ev(
            "message_admitted",
            {"text_preview": "hi"},
            authority_class="operator_instruction",
            origin={"kind": "operator"},
        )
    )
    assert (op["visibility"], op["category"], op["summary"]) == ("turn_result", "message", "hi")
    hook = P.present(
        ev(
            "message_admitted",
            {"text_preview": "{}"},
            authority_class="integration_signal",
            origin={"kind": "webhook", "source": "github"},
        )
    )
    assert hook["title"] == "Evidence from webhook:github" and hook["visibility"] == "progress"
    timer = P.present(
        ev(
            "message_admitted",
            {"kind": "timer_tick"},
            authority_class="runtime_instruction",
            origin={"kind": "timer", "timer_id": "tmr_1"},
        )
    )
    assert timer["visibility"] == "trace" and "timer:tmr_1" in timer["summary"]
    done = P.present(ev("work_item_completed", {"objective": "Ship it"}, work_item_id="wi_1"))
    assert done["visibility"] == "work_done" and "wi_1" in done["summary"]
    failed = P.present(ev("turn_terminal", {"status": "failed", "failure_kind": "auth"}))
    assert failed["visibility"] == "turn_result" and failed["summary"] == "Turn failed: auth"
    assert P.present(ev("turn_terminal", {"status": "completed"}))["visibility"] == "trace"


def test_display_modes_and_state_sync() -> None:
    result = P.present(ev("brief_recorded", {"kind": "result", "text_preview": "x"}))
    progress = P.present(ev("assistant_round_recorded", {"text_preview": "y"}))
    tool = P.present(
        ev(
            "tool_executed",
            {"tool_name": "ExecCommand", "ok": False, "tool_error": {"kind": "spawn_failed"}},
        )
    )
    state = P.present(ev("agent_state_changed", {"from": "asleep", "to": "awake_running"}))
    assert tool["summary"] == "ExecCommand failed: spawn_failed"
    assert [P.shown_at(r, "info") for r in (result, progress, tool, state)] == [
        True,
        False,
        False,
        False,
    ]
    assert [P.shown_at(r, "verbose") for r in (result, progress, tool, state)] == [
        True,
        True,
        False,
        False,
    ]
    assert [P.shown_at(r, "debug") for r in (result, progress, tool, state)] == [
        True,
        True,
        True,
        False,
    ]
    assert state["category"] == "state_sync"
    assert [P.display_mode(x) for x in ("3", "4", "5", "INFO", " debug ")] == [
        "info",
        "verbose",
        "debug",
        "info",
        "debug",
    ]
    with pytest.raises(ValueError):
        P.display_mode("trace")


def test_activity_is_scoped_to_the_turn() -> None:
    a = P.Activity()
    e1 = ev("assistant_round_recorded", {"turn_id": "t1", "text_preview": "looking"})
    assert a.update(e1, P.present(e1)) == "Assistant progress: looking"
    e2 = ev(
        "message_admitted",
        {"text_preview": "new question"},
        authority_class="operator_instruction",
        origin={"kind": "operator"},
    )
    assert a.update(e2, P.present(e2)) == ""  # a new operator message: nothing inherited
    e3 = ev(
        "tool_executed",
        {"turn_id": "t2", "tool_name": "ExecCommand", "ok": True, "duration_ms": 12},
    )
    assert a.update(e3, P.present(e3)) == "ExecCommand ran (12 ms)"
    e4 = ev("turn_terminal", {"turn_id": "t2", "status": "completed"})
    assert a.update(e4, P.present(e4)) == ""


def test_tail_presented_renders_through_the_layer() -> None:
    store = open_agent(None)
    r = run("enqueue", "hello \x1b[31mred\x1b[0m there")
    assert r.returncode == 0, r.stderr
    run("queue", "list")  # ingest
    write_brief(store, kind="result", text="All \x07done\x1b]0;pwned\x07")
    store.emit("agent_state_changed", {"from": "asleep", "to": "awake_idle", "reason": "x"})
    out = run("tail", "--presented")
    assert out.returncode == 0, out.stderr
    assert "Operator: hello" in out.stdout and "Result: All" in out.stdout
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout  # shown, never executed
    assert "asleep" not in out.stdout
    js = run("tail", "--presented", "--display", "debug", "--jsonl")
    rows = [json.loads(line) for line in js.stdout.splitlines()]
    assert {
        "visibility",
        "category",
        "title",
        "body",
        "summary",
        "source_event_kind",
        "event_seq",
    } <= set(rows[0])
    assert all(r["category"] != "state_sync" for r in rows)
    bad = run("tail", "--presented", "--display", "loud")
    assert bad.returncode == 2 and "unknown display mode" in bad.stderr


def _emitted_kinds() -> set[str]:
    """Every event kind the runtime writes: ``emit("kind"`` and the turn
    recorder's ``event("kind"`` across the package."""
    import re
    from pathlib import Path

    import holon_cli

    pattern = re.compile(r"\b(?:emit|event)\(\s*\"([a-z_]+)\"")
    root = Path(holon_cli.__file__).parent
    return {k for f in root.rglob("*.py") for k in pattern.findall(f.read_text())}


def test_every_emitted_kind_has_its_own_presenter() -> None:
    emitted = _emitted_kinds()
    assert len(emitted) > 40  # the scan found the emitters
    assert emitted <= set(get_args(EventKind)), emitted - set(get_args(EventKind))
    missing = sorted(k for k in (*get_args(EventKind), "history_trimmed") if k not in P._PRESENTERS)
    assert missing == []  # none falls back to the generic trace row


NEW_ROWS = [
    (
        ev(
            "workspace_bound",
            {
                "workspace_id": "ws_0123456789ab",
                "workspace_anchor": "/src/app",
                "execution_root": "/src/app",
                "projection_kind": "canonical_root",
                "mode": "direct",
            },
        ),
        ("progress", "workspace"),
        "Working in ws_0123456789ab /src/app (canonical_root, direct)",
    ),
    (
        ev("workspace_bound", {"workspace_id": "agent_home", "workspace_anchor": "/h"}),
        ("progress", "workspace"),
        "Working in the agent's home",
    ),
    (
        ev("workspace_detached", {"workspace_id": "ws_1", "workspace_anchor": "/a", "stale": True}),
        ("progress", "workspace"),
        "Detached ws_1 /a (its directory was already gone)",
    ),
    (
        ev(
            "worktree_created",
            {
                "workspace_id": "ws_1",
                "worktree_path": "/w",
                "worktree_branch": "holon/main/x",
                "original_branch": "main",
            },
        ),
        ("progress", "workspace"),
        "Isolated worktree for ws_1: branch holon/main/x from main at /w",
    ),
    (
        ev(
            "worktree_retained",
            {"path": "/w", "branch": "b", "changed_files": ["a", "b"], "reason": "dirty"},
        ),
        ("action_required", "task"),
        "Child worktree /w (branch b) kept with 2 changed file(s): dirty",
    ),
    (
        ev(
            "child_agent_result_reported",
            {"child_agent_id": None, "task_status": "completed", "task_id": "tsk_1"},
        ),
        ("progress", "task"),
        "Child ? completed",
    ),
    (
        ev("message_processing_started", {"attempt": 2, "trigger_kind": "operator_prompt"}),
        ("trace", "runtime"),
        "Working on a message (operator_prompt, attempt 2)",
    ),
    (
        ev("message_processing_started", {"attempt": 1, "replayed": True}),
        ("trace", "runtime"),
        "Replaying a message",
    ),
    (
        ev("message_requeued", {"queue_seq": 7}, message_id="msg_1"),
        ("progress", "runtime"),
        "Message msg_1 requeued (queue #7)",
    ),
    (
        ev("queue_rebuilt_from_inbox", {"reason": "missing", "restored_message_ids": ["m"]}),
        ("progress", "runtime"),
        "The queue was rebuilt from the inbox (1 message(s) restored): missing",
    ),
    (
        ev(
            "agent_state_repaired",
            {"stale_run_id": "run_1", "from": "awake_running", "to": "awake_idle"},
        ),
        ("progress", "runtime"),
        "Stale run run_1 repaired: awake_running -> awake_idle",
    ),
    (
        ev("agent_state_repaired", {"file": "events.jsonl", "lost_event_seq": 12}),
        ("progress", "runtime"),
        "events.jsonl repaired; events from 12 were lost",
    ),
    (
        ev("turn_abort_requested", {"run_id": "run_9"}),
        ("progress", "runtime"),
        "Abort requested for run run_9",
    ),
    (
        ev("tick_completed", {"actions": [{"action": "activated"}]}),
        ("trace", "runtime"),
        "Tick: 1 action(s)",
    ),
    (
        ev("plan_artifact_missing", {"path": "plan.md"}),
        ("progress", "work_item"),
        "Plan file plan.md is missing",
    ),
    (
        ev("plan_artifact_changed", {"path": "plan.md", "restored": True}),
        ("trace", "work_item"),
        "Plan file plan.md restored",
    ),
    (
        ev("message_interjected", {"into_message_id": "msg_0"}),
        ("progress", "message"),
        "A new message joined the running turn",
    ),
    (
        {"kind": "history_trimmed", "data": {"through_seq": 40, "before": "2026-11-01"}},
        ("progress", "runtime"),
        "Events through #40 were removed by retention (before 2026-11-01)",
    ),
]


@pytest.mark.parametrize(("event", "where", "summary"), NEW_ROWS)
def test_rows_of_the_newer_kinds(
    event: dict[str, Any], where: tuple[str, str], summary: str
) -> None:
    row = P.present(event)
    assert (row["visibility"], row["category"]) == where
    assert row["summary"] == summary


def test_briefs_that_need_the_operator_say_so(holon_home: Any) -> None:
    store = open_agent(None)
    write_brief(store, kind="result", text="Budget used up: raise it", visibility="action_required")
    write_brief(
        store,
        kind="result",
        text="No progress: ...",
        visibility="action_required",
        title="no_progress_guard",
    )
    write_brief(store, kind="failure", text="Turn failed: x", visibility="action_required")
    briefs = [e for e in store.events.records() if e["kind"] == "brief_recorded"]
    assert briefs[1]["data"]["title"] == "no_progress_guard" and "title" not in briefs[0]["data"]
    rows = [P.present(e) for e in briefs]
    assert [r["title"] for r in rows] == ["Needs you", "No progress", "Failed"]
    assert {r["visibility"] for r in rows} == {"action_required"}
