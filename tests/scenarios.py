"""Scripted model scenarios shared by several end-to-end tests."""

from __future__ import annotations

from typing import Any

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
