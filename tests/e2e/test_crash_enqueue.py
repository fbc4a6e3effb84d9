"""SIGKILL at random moments: nothing acknowledged is ever lost, nothing torn
survives the next append, and `holon home check` stays green."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HOLON = str(Path(sys.executable).parent / "holon")


# Admits messages as fast as it can and prints each id once admit() returned
# (i.e. once it is durable); every few messages it also ingests, so kills land
# inside ledger appends, snapshot writes and between the queue append and the
# inbox archive as well.
ADMIT_LOOP = r"""
import sys
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit

tag = sys.argv[1]
store = open_agent(None)
i = 0
while True:
    i += 1
    env = admit(f"{tag}-{i}", store=store, priority=("normal", "next", "background")[i % 3])
    sys.stdout.write(env["id"] + "\n")
    sys.stdout.flush()
    if i % 4 == 0:
        with store.lock():
            q.ingest(store, q.load(store))
"""

CLI_LOOP = r"""
i=0
while true; do
  i=$((i+1))
  "$HOLON_BIN" enqueue "$1-$i" || exit 1
done
"""


def _printed_ids(raw: bytes) -> list[str]:
    lines = raw.split(b"\n")
    if lines and lines[-1] != b"":
        lines = lines[:-1]  # a line cut by the kill was never fully printed
    return [ln.decode() for ln in lines if ln]


def _kill_cycles(
    argv_for: callable, kills: int, delays: tuple[float, float], seed: int
) -> list[str]:  # type: ignore[valid-type]
    rng = random.Random(seed)
    env = {**os.environ, "HOLON_BIN": HOLON}
    acknowledged: list[str] = []
    for n in range(kills):
        proc = subprocess.Popen(
            argv_for(f"round{n}"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        time.sleep(rng.uniform(*delays))
        os.killpg(proc.pid, signal.SIGKILL)  # the loop and whatever holon child it is running
        out, err = proc.communicate(timeout=30)
        assert b"Traceback" not in err, err.decode()
        acknowledged += _printed_ids(out)
    return acknowledged


def _final_ingest() -> tuple[list[str], list[dict]]:
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(None)
    with store.lock():
        st = q.load(store)
        q.ingest(store, st)
    admitted = [
        r["message"]["id"] for r in store.ledger("queue").records() if r["op"] == "admitted"
    ]
    return admitted, list(q.load(store).entries.values())


def _assert_home_check_passes() -> dict:
    res = subprocess.run(
        [HOLON, "home", "check", "--json"], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    return json.loads(res.stdout)["data"]


@pytest.mark.slow
def test_sigkilled_admit_loop_loses_nothing(holon_home: Path) -> None:
    acknowledged = _kill_cycles(
        lambda tag: [sys.executable, "-c", ADMIT_LOOP, tag], kills=20, delays=(0.15, 0.6), seed=1234
    )
    assert len(acknowledged) > 20, "the loop never got going; the test proves nothing"
    assert len(set(acknowledged)) == len(acknowledged)
    _assert_home_check_passes()  # torn tails, if any, are only notes
    admitted, entries = _final_ingest()
    assert len(admitted) == len(set(admitted)), "a message was admitted twice"
    missing = set(acknowledged) - set(admitted)
    assert not missing, f"{len(missing)} acknowledged message(s) lost"
    queued = {e["message_id"] for e in entries if e["status"] == "queued"}
    assert set(acknowledged) <= queued
    # everything appended after the crashes is intact
    report = _assert_home_check_passes()
    assert report["problems"] == []
    ledger_dir = holon_home / "agents" / "main" / ".holon" / "ledger"
    for led in ledger_dir.glob("*.jsonl"):
        raw = led.read_bytes()
        assert raw.endswith(b"\n"), f"{led} still ends in a torn line after the final appends"
    seqs = [
        json.loads(x)["event_seq"] for x in (ledger_dir / "events.jsonl").read_bytes().splitlines()
    ]
    assert seqs == list(range(1, len(seqs) + 1))


@pytest.mark.slow
def test_sigkilled_cli_enqueue_loop_loses_nothing(holon_home: Path) -> None:
    acknowledged = _kill_cycles(
        lambda tag: ["bash", "-c", CLI_LOOP, "loop", tag], kills=10, delays=(0.1, 0.7), seed=99
    )
    assert acknowledged, "no enqueue completed; the test proves nothing"
    assert len(set(acknowledged)) == len(acknowledged)
    inbox = holon_home / "agents" / "main" / ".holon" / "inbox"
    # enqueue ingests at once when the agent lock is free: new/ or cur/
    present = {p.name[:-5] for d in ("new", "cur") for p in (inbox / d).glob("*.json")}
    assert set(acknowledged) <= present
    for d in ("new", "cur"):
        for p in (inbox / d).glob("*.json"):
            json.loads(p.read_text())  # nothing torn is ever visible
    _assert_home_check_passes()
    admitted, _ = _final_ingest()
    assert set(acknowledged) <= set(admitted) and len(admitted) == len(set(admitted))


KILLED_MID_APPEND = r"""
import os, sys, time
real_write = os.write

def half_write(fd, data):
    n = real_write(fd, bytes(data)[: len(data) // 2])
    sys.stdout.write("torn\n"); sys.stdout.flush()
    time.sleep(60)  # holding the ledger lock until SIGKILL
    return n

from holon_cli.runtime.agents.lifecycle import open_agent
store = open_agent(None)
os.write = half_write
store.emit("doomed", {"pad": "x" * 500})
"""


@pytest.mark.slow
def test_process_killed_mid_ledger_append_then_next_append_is_intact(holon_home: Path) -> None:
    assert subprocess.run([HOLON, "home", "init"], capture_output=True, timeout=30).returncode == 0
    events = holon_home / "agents" / "main" / ".holon" / "ledger" / "events.jsonl"
    before = events.read_bytes()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_MID_APPEND], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"torn\n"
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    torn = events.read_bytes()
    assert torn.startswith(before) and len(torn) > len(before) and not torn.endswith(b"\n")

    # readers ignore the fragment; home check notes it without failing
    res = subprocess.run([HOLON, "tail", "--jsonl"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and [
        json.loads(x)["event_seq"] for x in res.stdout.splitlines()
    ] == [1]
    data = _assert_home_check_passes()
    assert len(data["notes"]) == 1 and "torn" in data["notes"][0]["message"]

    # the next writer waits for the dead holder's lock (released by the kernel), repairs, appends
    res = subprocess.run(
        [HOLON, "agent", "stop", "main"], capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 0, res.stderr
    lines = events.read_bytes().split(b"\n")
    assert lines[-1] == b""
    recs = [json.loads(x) for x in lines[:-1]]
    assert [r["event_seq"] for r in recs] == [1, 2]
    assert recs[1]["kind"] == "agent_state_changed"
    assert b"doomed" in Path(str(events) + ".torn").read_bytes()
    data = _assert_home_check_passes()
    assert data["notes"] == []


def test_partial_line_written_directly_then_next_append_is_intact(holon_home: Path) -> None:
    subprocess.run([HOLON, "enqueue", "one"], capture_output=True, timeout=30, check=True)
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(None)
    with store.lock():
        q.ingest(store, q.load(store))
    qled = store.ledger("queue").path
    with open(qled, "ab") as f:
        f.write(b'{"v":1,"op":"admitted","seq":2,"message":{"id":"msg_half')
    subprocess.run([HOLON, "enqueue", "two"], capture_output=True, timeout=30, check=True)
    with store.lock():
        q.ingest(store, q.load(store))
    recs = [json.loads(x) for x in qled.read_bytes().splitlines()]
    assert [(r["seq"], r["message"]["body"]["text"]) for r in recs] == [(1, "one"), (2, "two")]
    assert _assert_home_check_passes()["notes"] == []
