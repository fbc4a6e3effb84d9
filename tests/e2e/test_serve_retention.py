"""Issue 29: the HTTP events routes read across segments and say where
retention cut history (a real serve process on 127.0.0.1)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx2
import pytest
from serve_helpers import HOLON, scripted_model, serve_addr, start_serve, stop

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.home.gc import gc_home
from holon_cli.store.layout import HomeLayout

TOKEN = "s3cret-token"


@pytest.mark.slow
def test_events_page_spans_segments_and_names_the_cut(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_MODEL", scripted_model(tmp_path))
    subprocess.run([*HOLON, "agent", "create", "main"], check=True, capture_output=True)
    store = open_agent("main", create_default=False)
    for i in range(10):
        store.emit("agent_state_changed", {"i": i})
    HomeLayout.current().config.write_text("retention:\n  events_days: 0\n")
    gc_home()  # everything so far is dropped
    dropped = store.events.trimmed()["through_seq"]
    for i in range(3):
        store.emit("agent_state_changed", {"after": i})
    store.events.close_segment()  # kept: events_days only applies at the next gc
    store.emit("agent_state_changed", {"open": True})
    proc = start_serve(tmp_path, env={"HOLON_CONTROL_TOKEN": TOKEN})
    try:
        addr = serve_addr(holon_home)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with httpx2.Client(base_url=addr, timeout=10) as c:
            page = c.get("/agents/main/events?after=0&limit=3", headers=auth).json()
            assert page["trimmed"]["through_seq"] == dropped
            assert [e["event_seq"] for e in page["events"]] == [
                dropped + 1,
                dropped + 2,
                dropped + 3,
            ]
            nxt = c.get(f"/agents/main/events?after={page['next_after']}", headers=auth).json()
            assert nxt["trimmed"] is None
            assert nxt["events"][0]["data"] == {"open": True}
            # the stream says it once, first, then streams what is left
            lines: list[str] = []
            with c.stream("GET", "/agents/main/events/stream?after=0", headers=auth) as r:
                for line in r.iter_lines():
                    lines.append(line)
                    if line.startswith(f"id: {dropped + 1}"):
                        break
            assert lines[0] == "event: history_trimmed"
            assert json.loads(lines[1].removeprefix("data: "))["through_seq"] == dropped
            assert f"id: {dropped + 1}" in lines
    finally:
        stop(proc)
