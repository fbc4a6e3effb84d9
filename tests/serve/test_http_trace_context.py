"""A caller's W3C ``traceparent`` (issue 39): the control prompt, the public
enqueue and a webhook store it on the message, through the Maildir and the
queue's re-validation, so the turn continues the caller's trace in whatever
process runs it; a malformed header is ignored, never a refusal. No
OpenTelemetry is needed for this: the serve need not trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from http_app import make_client

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _messages() -> list[dict[str, Any]]:
    store = open_agent("main", create_default=False)
    q.try_ingest(store)
    return [r["message"] for r in store.ledger("queue").records() if r.get("op") == "admitted"]


def _post(route: str) -> Any:
    c = make_client()
    headers = {"traceparent": TP, "tracestate": "congo=t61rcWkgMzE"}
    if route == "prompt":
        return c.post("/control/agents/main/prompt", json={"text": "hi"}, headers=headers)
    if route == "enqueue":
        body = {"text": "hi", "origin": "channel:ops"}
        return c.post("/agents/main/enqueue", json=body, headers=headers)
    return c.post(
        "/webhooks/ci/main",
        content=b'{"ok": true}',
        headers={**headers, "content-type": "application/json"},
    )


@pytest.mark.parametrize("route", ["prompt", "enqueue", "webhook"])
def test_the_callers_trace_is_stored_on_the_message(holon_home: Path, route: str) -> None:
    open_agent(None)
    r = _post(route)
    assert r.status_code == 202, r.text
    [msg] = _messages()
    assert msg["id"] == r.json()["message_id"]
    assert msg["trace_context"] == {"traceparent": TP, "tracestate": "congo=t61rcWkgMzE"}


@pytest.mark.parametrize(
    "value", ["00-nope", "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", ""]
)
def test_a_bad_traceparent_is_ignored(holon_home: Path, value: str) -> None:
    open_agent(None)
    c = make_client()
    r = c.post("/control/agents/main/prompt", json={"text": "hi"}, headers={"traceparent": value})
    assert r.status_code == 202, r.text
    [msg] = _messages()
    assert "trace_context" not in msg


def test_a_trace_context_edited_into_an_inbox_file_is_checked(holon_home: Path) -> None:
    """The queue re-validates an inbox file: a hand-made bad context is dropped."""
    from holon_cli.runtime.enqueue import admit

    store = open_agent(None)
    env = admit("hi", trace_context={"traceparent": TP})
    path = next((store.layout.inbox_dir / "new").iterdir())
    import json

    raw = json.loads(path.read_text())
    assert raw["trace_context"] == {"traceparent": TP}
    raw["trace_context"] = {"traceparent": "garbage", "tracestate": "x"}
    path.write_text(json.dumps(raw))
    [msg] = _messages()
    assert msg["id"] == env["id"] and "trace_context" not in msg
