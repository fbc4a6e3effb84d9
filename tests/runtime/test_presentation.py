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
from holon_cli.runtime.agents import open_agent
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
