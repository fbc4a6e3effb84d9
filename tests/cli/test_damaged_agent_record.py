"""Issue 31 item 18: a damaged ``agent.json`` no longer breaks ``holon agent
list`` for the whole home, its hint points at a repair holon can do (not a
backup it never made), and ``holon home check --repair`` rebuilds the record
from the copy kept before its last change or from the ledgers, losing no
message and no event."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from inprocess_cli import bind_runner as bind_runner  # autouse: holon() runs in-process
from inprocess_cli import run as run_holon


def holon(*args: str) -> Any:
    return run_holon(*args, stdin=io.StringIO(""), env=dict(os.environ))


@pytest.fixture
def two_agents(holon_home: Path) -> Path:
    for aid in ("alpha", "beta"):
        assert holon("agent", "create", aid).returncode == 0
    assert holon("agent", "model", "beta", "scripted:/tmp/x.yaml").returncode == 0
    assert holon("enqueue", "--agent", "beta", "keep me").returncode == 0
    assert holon("agent", "stop", "beta").returncode == 0
    return holon_home / "agents" / "beta" / ".holon" / "state" / "agent.json"


def _events(home: Path) -> list[dict[str, Any]]:
    path = home / "agents" / "beta" / ".holon" / "ledger" / "events.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def test_agent_list_shows_the_others_and_marks_the_damaged_one(two_agents: Path) -> None:
    two_agents.write_bytes(b"{ garbage")
    res = holon("agent", "list", "--json")
    assert res.returncode == 0, res.stderr
    agents = {a["agent_id"]: a for a in json.loads(res.stdout)["data"]["agents"]}
    assert agents["alpha"]["status"] == "awake_idle" and "problem" not in agents["alpha"]
    assert agents["beta"]["status"] == "damaged" and "not valid JSON" in agents["beta"]["problem"]
    human = holon("agent", "list")
    assert human.returncode == 0 and "alpha" in human.stdout and "damaged" in human.stdout
    assert "home check --repair" in human.stderr
    # commands on the damaged agent say how to repair it, not to restore a backup
    st = holon("status", "--agent", "beta")
    assert st.returncode == 1 and "Traceback" not in st.stderr
    assert "home check --repair" in st.stderr and "backup" not in st.stderr
    two_agents.unlink()  # deleted outright: still listed, still repairable
    agents = {
        a["agent_id"]: a
        for a in json.loads(holon("agent", "list", "--json").stdout)["data"]["agents"]
    }
    assert agents["beta"]["status"] == "damaged"


@pytest.mark.parametrize("kept_copy", [True, False])
def test_repair_rebuilds_the_record_and_loses_nothing(
    two_agents: Path, holon_home: Path, kept_copy: bool
) -> None:
    events_before = _events(holon_home)
    pending = json.loads(holon("status", "--agent", "beta", "--json").stdout)["data"]["pending"]
    assert pending == 1
    prev = two_agents.with_name("agent.json.prev")
    assert prev.exists()  # the version before the last change is kept
    if not kept_copy:
        prev.unlink()
    two_agents.write_bytes(b"\xff\xfe not json")
    res = holon("home", "check", "--repair", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    repairs = json.loads(res.stdout)["data"]["repairs"]
    restored = [r for r in repairs if r["action"] == "restored"]
    assert restored and ("agent.json.prev" in restored[0]["detail"]) is kept_copy
    assert list(two_agents.parent.glob("agent.json.damaged-*"))  # kept aside
    st = json.loads(holon("status", "--agent", "beta", "--json").stdout)["data"]
    # the operator's stop holds, the model override and the queued message survive
    assert st["status"] == "stopped" and st["pending"] == 1
    assert "x.yaml" in json.dumps(st["model"])
    events_after = _events(holon_home)
    assert events_after[: len(events_before)] == events_before
    assert events_after[-1]["kind"] == "agent_state_repaired"
    assert holon("home", "check").returncode == 0
    assert holon("agent", "start", "beta").returncode == 0
