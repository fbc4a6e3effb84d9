"""The ``mcp_requests`` ledger read back: each line is checked into its
type where the requests are folded (a damaged one hides no other), and
``home check`` names a damaged one."""

from __future__ import annotations

import json
from pathlib import Path

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.mcp import requests


def opened(rid: str, **over: object) -> dict[str, object]:
    rec: dict[str, object] = {
        "v": 1,
        "op": "opened",
        "id": rid,
        "at": "2026-11-29T12:00:00Z",
        "agent_id": "main",
        "server": "forms",
        "server_key": "k1",
        "tool": "ask",
        "arguments": {"q": 1},
        "legacy": False,
        "input_requests": {
            "e1": {
                "method": "elicitation/create",
                "params": {
                    "message": "Pick a color",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"color": {"type": "string", "enum": ["teal", "red"]}},
                        "required": ["color"],
                    },
                },
            }
        },
        "request_state": None,
        "turn_id": None,
        "call_id": None,
        "message_id": None,
        "previous_id": None,
    }
    rec.update(over)
    return rec


def test_an_opened_line_that_does_not_fit_is_no_request(tmp_path: Path) -> None:
    from holon_cli.runtime.inspect import home_check

    store = open_agent(None)
    led = store.ledger(requests.LEDGER)
    led.append(opened("mcpreq_good"))
    for bad in (
        opened("mcpreq_bad", input_requests=["not", "a", "map"]),
        opened("mcpreq_short", server=None),
    ):
        with store.layout.ledger_path(requests.LEDGER).open("a") as f:  # damage
            f.write(json.dumps(bad) + "\n")
    problems = home_check()["problems"]
    assert [(p["path"].endswith("ledger/mcp_requests.jsonl"), p["line"]) for p in problems] == [
        (True, 2),
        (True, 3),
    ], problems
    assert "`input_requests` must be dict" in problems[0]["message"], problems
    assert "`server` must be str" in problems[1]["message"], problems
    rows = requests.list_requests([store])
    assert [r["id"] for r in rows] == ["mcpreq_good"]
    assert requests.open_count(store) == 1
    row = rows[0]
    assert row["message"] == "Pick a color" and row["requests"] == ["elicitation/create"]
    assert row["requested_schema"] is not None
    assert sorted(row["requested_schema"].get("properties") or {}) == ["color"]


def test_a_schema_that_is_not_a_flat_form_is_none(tmp_path: Path) -> None:
    store = open_agent(None)
    bad = {"e1": {"method": "elicitation/create", "params": {"requestedSchema": [1, 2]}}}
    store.ledger(requests.LEDGER).append(opened("mcpreq_x", input_requests=bad))
    (row,) = requests.list_requests([store])
    assert row["requested_schema"] is None and row["message"] == ""
