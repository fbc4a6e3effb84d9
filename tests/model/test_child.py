"""The pure child-delegation rules: the handle's summary and the phase of a child."""

from __future__ import annotations

import pytest

from holon_cli.model.child import child_phase, spawn_summary


def test_summary_is_the_first_non_empty_line_folded_and_bounded() -> None:
    assert spawn_summary("\n\n  Fix   the build.\nDetails follow") == "Fix the build."
    long = spawn_summary("x" * 500)
    assert len(long) == 120 and long.endswith("…")


DONE = {"outcome": "completed", "runtime_posture": "awake"}


@pytest.mark.parametrize(
    ("kw", "want"),
    [
        ({"status": "awake_idle", "closure": None, "pending": 1}, ("running", None, None)),
        ({"status": "awake_running", "closure": DONE, "pending": 0}, ("running", None, None)),
        ({"status": "awake_idle", "closure": DONE, "pending": 0}, ("terminal", None, None)),
        ({"status": "awake_idle", "closure": DONE, "pending": 2}, ("running", None, None)),
        (
            {"status": "awake_idle", "closure": {"outcome": "failed"}, "pending": 0},
            ("terminal", None, None),
        ),
        ({"status": "asleep", "closure": DONE, "pending": 0}, ("waiting", None, "asleep")),
        ({"status": "paused", "closure": DONE, "pending": 0}, ("blocked", "agent_paused", None)),
        (
            {
                "status": "awake_idle",
                "closure": {"outcome": "waiting", "waiting_reason": "awaiting_task_result"},
                "pending": 0,
            },
            ("blocked", "awaiting_task_result", None),
        ),
        (
            {
                "status": "awake_idle",
                "closure": {"outcome": "waiting", "waiting_reason": "awaiting_operator_input"},
                "pending": 0,
            },
            ("waiting", None, "awaiting_operator_input"),
        ),
    ],
)
def test_child_phase(kw: dict, want: tuple) -> None:
    assert child_phase(archived=False, **kw) == want


def test_an_archived_child_is_terminal_whatever_its_state() -> None:
    assert child_phase(status="stopped", closure=None, pending=3, archived=True)[0] == "terminal"
