"""Scripted model scenarios shared by several end-to-end tests, and the wait
for a real process to reach a point of one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def wait_for_event(home: Path, kind: str, agent: str = "main", timeout: float = 30.0) -> None:
    """Poll until an agent's event ledger has an event of ``kind`` (``agent``
    may be a glob, e.g. ``run-*`` for the temporary agent of ``holon run``)."""
    deadline = time.monotonic() + timeout
    needle = f'"kind":"{kind}"'
    while time.monotonic() < deadline:
        for log in home.glob(f"agents/{agent}/.holon/ledger/events.jsonl"):
            if needle in log.read_text(errors="replace"):
                return
        time.sleep(0.05)
    raise AssertionError(f"no {kind} event within {timeout}s")


# a turn that creates a work item, focuses it and leaves it blocked on an
# external CI run (RecordExternalWait): the agent then waits for a wake hint
WAIT_ON_CI: dict[str, Any] = {
    "steps": [
        {
            "tool_calls": [
                {
                    "id": "c_a",
                    "name": "CreateWorkItem",
                    "arguments": {"objective": "release v2 when CI is green"},
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "PickWorkItem",
                    "arguments": {"work_item_id": "{{c_a.work_item_id}}"},
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "RecordExternalWait",
                    "arguments": {
                        "description": "CI run for v2",
                        "source": "github-actions",
                        "external_ref": "run/77",
                    },
                },
                {
                    "name": "UpdateWorkItem",
                    "arguments": {
                        "work_item_id": "{{c_a.work_item_id}}",
                        "blocked_by": "waiting for CI",
                    },
                },
            ]
        },
        {"text": "Waiting for CI."},
    ]
}
