"""Working memory is exactly-once under a real SIGKILL (issue 23): a `holon
turn` process killed between the settled turn and its memory update (after
the finalized episode was appended, or before) replays to the same revision,
with the episode written once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.memory import working

HOLON = [sys.executable, "-m", "holon_cli"]

# `holon turn`, with a real SIGKILL planted at the memory update of turn N
KILLER = """
import os, signal, sys
from holon_cli.runtime.turn import settle
real = settle._settle_memory
where = os.environ["KILL_WHERE"]
def dies(*a, **kw):
    if where == "after_episodes":
        real(*a, **kw)
    os.kill(os.getpid(), signal.SIGKILL)
settle._settle_memory = dies
from holon_cli.cli import main
sys.argv = ["holon", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["before_memory", "after_episodes"])
def test_sigkill_at_the_memory_update_replays_to_the_same_revision(
    tmp_path: Path, where: str
) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"loop": True, "steps": ["noted"]}))
    model = f"scripted:{script}"

    def holon(*args: str) -> None:
        subprocess.run([*HOLON, *args], check=True, capture_output=True)

    for i in range(7):
        holon("enqueue", f"message {i}")
        holon("turn", "--model", model)
    holon("enqueue", "message 7")  # its turn finalizes turns 1-8 (the hard cap)
    env = {**os.environ, "KILL_WHERE": where}
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, "turn", "--model", model], env=env, capture_output=True
    )
    assert proc.returncode == -9, proc.stderr
    store = open_agent(None)
    assert (
        working.state_of(store.read_record()["state"].get("working_memory"))[
            "working_memory_revision"
        ]
        == 7
    )
    holon("turn", "--model", model)  # repairs the stale run: records the settled turn
    wm = working.state_of(store.read_record()["state"].get("working_memory"))
    assert wm["working_memory_revision"] == 8 and wm["archived_episode_count"] == 1
    eps = store.ledger("context_episodes").records()
    assert [e["turn_range"] for e in eps] == [[1, 8]]
    holon("enqueue", "message 8")
    holon("turn", "--model", model)
    wm = working.state_of(store.read_record()["state"].get("working_memory"))
    assert (
        wm["working_memory_revision"] == 9 and len(store.ledger("context_episodes").records()) == 1
    )
