"""The console's model, apart from drawing: typed lines, the conversation
built through the presentation layer (once per event, in ``event_seq``
order), display modes, terminal-safe text, the state line and the SSE
parser of the client."""

from __future__ import annotations

from typing import Any

import pytest

from holon_cli.cli.tui.session import (
    SCRIPT_COMMANDS,
    Command,
    Conversation,
    format_line,
    parse_input,
    state_summary,
    visible,
)
from holon_cli.errors import UsageError
from holon_cli.serve.client import _sse_step


def ev(seq: int, kind: str, **kw: Any) -> dict[str, Any]:
    return {"event_seq": seq, "kind": kind, "agent_id": "main", **kw}


def operator(seq: int, text: str, mid: str = "msg_1") -> dict[str, Any]:
    return ev(
        seq,
        "message_admitted",
        message_id=mid,
        authority_class="operator_instruction",
        origin={"kind": "operator"},
        data={"kind": "operator_prompt", "text_preview": text},
    )


def brief(seq: int, text: str, mid: str = "msg_1") -> dict[str, Any]:
    data = {"kind": "result", "visibility": "turn_result", "text_preview": text}
    return ev(seq, "brief_recorded", message_id=mid, data=data)


def round_(seq: int, text: str, turn: str = "turn_1") -> dict[str, Any]:
    data = {"turn_id": turn, "round": 1, "text_preview": text, "tool_requests": []}
    return ev(seq, "assistant_round_recorded", data=data)


def test_parse_input() -> None:
    assert parse_input("hello") == Command("prompt", "hello")
    assert parse_input("  /display   4 ") == Command("display", "4")
    assert parse_input("/AGENT kid") == Command("agent", "kid")
    assert parse_input("//etc/passwd is a path") == Command("prompt", "/etc/passwd is a path")
    with pytest.raises(UsageError) as e:
        parse_input("/bogus x")
    assert "unknown command '/bogus'" in e.value.message and "/display" in (e.value.hint or "")
    with pytest.raises(UsageError):
        parse_input("/help", SCRIPT_COMMANDS)  # --script knows /display, /agent, /quit
    with pytest.raises(UsageError) as e:
        parse_input("/\x1b[2J")
    assert "\x1b" not in e.value.message


def test_conversation_rows_modes_and_settlement() -> None:
    conv = Conversation()
    shown = [
        conv.feed(e)
        for e in (
            operator(1, "hi"),
            ev(2, "message_processing_started", message_id="msg_1", data={"turn_id": "turn_1"}),
            round_(3, "thinking"),
            ev(4, "agent_state_changed", data={"from": "awake_idle", "to": "awake_running"}),
            brief(5, "line one\nline two"),
        )
    ]
    assert [line.title if line else None for line in shown] == [
        "Operator",
        None,
        None,  # progress is not shown at info
        None,  # state sync is never a conversation row
        "Result",
    ]
    assert conv.activity == "Assistant progress: thinking"
    assert format_line(shown[4]) == "Result: line one\n    line two"  # type: ignore[arg-type]
    assert "msg_1" not in conv.settled
    conv.feed(ev(6, "turn_terminal", message_id="msg_1", data={"status": "completed"}))
    assert "msg_1" in conv.settled and conv.activity == ""
    conv.set_mode("4")
    assert [line.title for line in conv.lines()] == ["Operator", "Assistant", "Result"]
    conv.set_mode("debug")
    assert [line.title for line in conv.lines()][-1] == "Turn completed"
    with pytest.raises(UsageError) as e:
        conv.set_mode("loud")
    assert "unknown display mode 'loud'" in e.value.message and conv.mode == "debug"
    with pytest.raises(UsageError) as e:
        conv.set_mode(" ")
    assert e.value.message == "/display needs a mode" and "verbose" in (e.value.hint or "")


def test_a_resumed_stream_applies_each_event_once() -> None:
    conv = Conversation()
    assert conv.feed(operator(1, "hi")) is not None
    assert conv.feed(operator(1, "hi")) is None  # repeated after a reconnect
    assert conv.feed(brief(2, "ok")) is not None
    assert conv.feed(operator(1, "hi")) is None  # older than the cursor
    assert conv.feed({"kind": "brief_recorded"}) is None  # no event_seq
    assert [line.text for line in conv.lines()] == ["hi", "ok"] and conv.cursor == 2


def test_a_new_message_does_not_inherit_the_last_activity() -> None:
    conv = Conversation("verbose")
    conv.feed(round_(1, "old preview"))
    assert conv.activity == "Assistant progress: old preview"
    conv.feed(operator(2, "next", mid="msg_2"))
    assert conv.activity == ""


def test_text_from_outside_is_shown_visibly() -> None:
    assert visible("a\x1b[2Jb\x07\x9b\u202e") == "a␛[2Jb␇\\x9b\\u202e"
    assert visible("bad \udcff byte") == "bad \\udcff byte"  # non-UTF-8 kept visible
    assert visible("line\nnext\ttab") == "line\nnext\ttab"
    conv = Conversation()
    line = conv.feed(operator(1, "x\x1b]0;pwned\x07 \udcfe"))
    assert line is not None and line.text == "x␛]0;pwned␇ \\udcfe"
    line.text.encode("utf-8")  # printable on any UTF-8 terminal


def test_state_summary_reads_what_serve_sends_and_tolerates_more() -> None:
    payload = {
        "agent": {"agent_id": "main", "status": "awake_idle", "pending": 2, "work_items": {}},
        "state": {"status": "awake_idle", "workspace_anchor": None},
        "identity": {"profile_preset": "public_named"},
    }
    s = state_summary(payload)
    assert (s["workspace"], s["projection"], s["access"]) == (
        "agent home",
        "agent_home",
        "public_named",
    )
    assert s["pending"] == "2" and s["work"] == "none"
    payload["state"] = {"workspace_anchor": "/src/app", "active_workspace_id": "ws_1"}
    payload["agent"]["work_items"] = {"ready": 1, "blocked": 0}
    s = state_summary(payload)
    assert s["workspace"] == "ws_1 /src/app" and s["projection"] == "canonical_root"
    assert s["work"] == "ready 1"
    # the agent's execution snapshot (what serve sends) wins over the record
    payload["agent"]["workspace"] = {"workspace_id": "ws_2", "workspace_anchor": "/w"}
    payload["state"]["access_mode"] = "ro"
    s = state_summary(payload)
    assert s["workspace"] == "ws_2 /w" and s["access"] == "ro"
    assert state_summary({})["agent"] == "?"


def test_sse_parser() -> None:
    data: list[str] = []
    got: list[dict[str, Any]] = []
    lines = [": keep-alive", "", "id: 3", "event: x", 'data: {"event_seq": 3}', "", "data: [1]"]
    for line in [*lines, "", "data: not json", ""]:
        got += _sse_step(line, data)
    assert got == [{"event_seq": 3}]


def test_state_summary_reads_the_execution_snapshot() -> None:
    agent = {
        "agent_id": "main",
        "status": "awake_idle",
        "workspace": {
            "workspace_id": "ws_0123456789ab",
            "workspace_anchor": "/src/app",
            "execution_root": "/home/h/worktrees/main/app",
            "cwd": "/home/h/worktrees/main/app/lib",
            "projection_kind": "git_worktree_root",
        },
        "worktree_session": {"worktree_branch": "holon/main/app", "original_branch": "main"},
    }
    s = state_summary({"agent": agent, "state": {}, "identity": {}})
    assert s["workspace"] == "ws_0123456789ab /src/app"
    assert s["projection"] == "git_worktree_root (cwd /home/h/worktrees/main/app/lib)"
    assert s["worktree"] == "holon/main/app from main"
    # a linked worktree attached direct: its root is named, no worktree label
    agent["worktree_session"] = None
    agent["workspace"] |= {"execution_root": "/src/app-wt", "cwd": "/src/app-wt"}
    s = state_summary({"agent": agent})
    assert s["projection"] == "git_worktree_root /src/app-wt" and "worktree" not in s
    # agent_home wins over a stale anchor in the record
    home = {"workspace_id": "agent_home", "workspace_anchor": "/h/agents/main"}
    s = state_summary({"agent": {"workspace": home}, "state": {"workspace_anchor": "/old"}})
    assert (s["workspace"], s["projection"]) == ("agent home", "agent_home")
    # text from the record is terminal-safe
    agent["workspace"] = {"workspace_id": "ws_1", "workspace_anchor": "/x\x1b[2J"}
    assert "\x1b" not in state_summary({"agent": agent})["workspace"]


def test_workspace_choices_and_notice() -> None:
    from holon_cli.cli.tui.views import workspace_choices, workspace_notice

    rows = [
        {"workspace_id": "agent_home", "workspace_anchor": "/h", "active": False, "exists": True},
        {"workspace_id": "ws_a", "workspace_anchor": "/a", "active": True, "exists": True},
        {"workspace_id": "ws_b", "workspace_anchor": "/gone", "active": False, "exists": False},
        {"workspace_id": "ws_c", "workspace_anchor": "/c", "exists": True, "attached": False},
    ]
    got = workspace_choices(rows)
    assert [(k, ok) for k, _, ok in got] == [
        ("direct:ws_a", True),
        ("isolated:ws_a", True),
        ("direct:ws_b", False),
        ("isolated:ws_b", False),
    ]
    assert got[0][1].startswith("* ws_a  /a  [direct]") and "directory gone" in got[2][1]
    note = workspace_notice(
        "main",
        {
            "workspace_id": "ws_a",
            "execution_root": "/wt",
            "projection_kind": "git_worktree_root",
            "worktree_session": {"worktree_branch": "holon/x", "original_branch": "main"},
        },
    )
    assert note == "main now works in ws_a: /wt (git_worktree_root), branch holon/x from main"
    assert "agent_home" in workspace_notice("main", {"workspace_id": "agent_home"})


def test_history_trimmed_notice_from_the_stream_is_shown_once() -> None:
    from holon_cli.cli.tui.session import Conversation

    data: list[str] = []
    name: list[str] = []
    got: list[dict[str, Any]] = []
    trimmed = '{"through_seq": 40, "before": "2026-11-01T00:00:00Z"}'
    lines = ["event: history_trimmed", f"data: {trimmed}", "", "id: 41", "event: x"]
    for line in [*lines, 'data: {"event_seq": 41, "kind": "x"}', ""]:
        got += _sse_step(line, data, name)
    assert got[0] == {
        "kind": "history_trimmed",
        "data": {"through_seq": 40, "before": "2026-11-01T00:00:00Z"},
    }
    assert got[1] == {"event_seq": 41, "kind": "x"} and name == []
    conv = Conversation("verbose")
    line = conv.feed(got[0])
    assert line is not None and line.title == "History trimmed"
    assert "through #40 were removed by retention" in line.text
    assert conv.feed(got[0]) is None and conv.cursor == 0  # once; the cursor stays
    assert Conversation("info").feed(got[0]) is None  # progress: verbose and debug


def test_access_label_names_the_command_backend() -> None:
    ident = {"profile_preset": "public_named"}
    host = {"backend": "host_local", "network_confinement": "not_enforced"}
    s = state_summary({"identity": ident, "execution_policy": host})
    assert s["access"] == "public_named, host_local"
    bwrap = {"backend": "bwrap", "network_confinement": "enforced"}
    s = state_summary({"identity": ident, "execution_policy": bwrap})
    assert s["access"] == "public_named, bwrap (network off)"
    bwrap["network_confinement"] = "not_enforced"
    assert "bwrap (network on)" in state_summary({"execution_policy": bwrap})["access"]
    assert state_summary({"identity": ident, "execution_policy": None})["access"] == "public_named"


def test_state_summary_shows_mcp_servers_a_failed_one_included() -> None:
    payload = {
        "agent": {
            "agent_id": "main",
            "status": "awake_idle",
            "mcp_servers": [
                {"name": "git", "state": "ok"},
                {"name": "web", "state": "failed", "last_error": "refused"},
            ],
            "mcp_requests_open": 2,
        },
        "state": {},
    }
    s = state_summary(payload)
    assert s["mcp"].startswith("git ok, web failed")
    assert "2 request(s)" in s["mcp"]
    assert "mcp" not in state_summary({"agent": {"agent_id": "main"}, "state": {}})
