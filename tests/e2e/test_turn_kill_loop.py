"""Exactly-once completion under SIGKILL (issue 13.2): `holon turn` is killed
at random points over many turns; every message still gets at most one
completed `turn_terminal` and one result brief, and exactly one of each when
it was processed."""

from __future__ import annotations

import collections
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent

HOLON = [sys.executable, "-m", "holon_cli"]


@pytest.mark.slow
def test_random_kills_never_complete_a_message_twice(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "loop": True,
                "steps": [
                    {
                        "text": "working",
                        # long enough that a kill at 0.05-1.5 s lands inside a
                        # turn as well as between turns (a `true` turn is now
                        # ~0.15 s, and the replay assertion below needs one)
                        "tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "sleep 0.4"}}],
                    },
                    {"text": "finished"},
                ],
            }
        )
    )
    model = f"scripted:{script}"
    n = 6
    for i in range(n):
        subprocess.run([*HOLON, "enqueue", f"message {i}"], check=True, capture_output=True)
    rng = random.Random(1302)
    for _ in range(24):
        proc = subprocess.Popen(
            [*HOLON, "turn", "--model", model],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.05, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    for _ in range(3 * n):  # drain without kills
        out = subprocess.run(
            [*HOLON, "turn", "--model", model, "--json"], capture_output=True, text=True
        )
        assert out.returncode in (0, 5), out.stderr
        if not json.loads(out.stdout)["data"]["ran"]:
            break
    store = open_agent(None)
    st = q.load(store)
    assert st.entries == {} and st.processed + st.aborted == n
    terminals = collections.Counter(
        e["message_id"]
        for e in store.events.records()
        if e["kind"] == "turn_terminal" and e["data"]["status"] == "completed"
    )
    transcript_terminals = collections.Counter(
        t["message_id"]
        for t in store.ledger("transcript").records()
        if t["kind"] == "turn_terminal" and t["status"] == "completed"
    )
    briefs = collections.Counter(
        b["related_message_id"]
        for b in store.ledger("briefs").records()
        if b["kind"] == "result" and b.get("related_message_id")
    )
    # the kills did land inside turns (the test exercised replay)
    assert any(e["kind"] == "message_replayed" for e in store.events.records())
    assert all(c == 1 for c in terminals.values()), terminals
    assert all(c == 1 for c in transcript_terminals.values()), transcript_terminals
    assert all(c == 1 for c in briefs.values()), briefs
    # every processed message has its terminal and brief (aborted ones hit the
    # replay limit without one)
    assert len(terminals) == st.processed == len(briefs) == len(transcript_terminals)
    assert subprocess.run([*HOLON, "home", "check"], capture_output=True).returncode == 0
