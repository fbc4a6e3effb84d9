"""Many concurrent `holon enqueue` processes: every message admitted exactly once.

Admission takes no lock (Maildir), so the only shared state the writers race
on is the first-use creation of the default agent; a concurrent ingester
moves messages into the queue ledger while the writers are still running.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

HOLON = str(Path(sys.executable).parent / "holon")
WRITERS = 8
PER_WRITER = 100


WRITER_LOOP = r"""
w="$1"; n="$2"
for i in $(seq 1 "$n"); do
  "$HOLON_BIN" enqueue "writer-$w message-$i" || { echo "FAILED $w $i" >&2; exit 1; }
done
"""

INGESTER = r"""
import sys, time
from pathlib import Path
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.store.layout import HomeLayout

stop = Path(sys.argv[1])
rounds = 0
while not stop.exists():
    if HomeLayout.current().agent("main").exists:
        store = open_agent("main", create_default=False)
        with store.lock():
            q.ingest(store, q.load(store))
        rounds += 1
    time.sleep(0.05)
print(rounds)
"""


def ingest_everything() -> None:
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent("main", create_default=False)
    with store.lock():
        q.ingest(store, q.load(store))


@pytest.mark.slow
def test_concurrent_enqueue_admits_every_message_once(holon_home: Path, tmp_path: Path) -> None:
    import os

    env = {**os.environ, "HOLON_BIN": HOLON}
    stop = tmp_path / "stop-ingester"
    ingester = subprocess.Popen(
        [sys.executable, "-c", INGESTER, str(stop)], stdout=subprocess.PIPE, text=True, env=env
    )
    writers = [
        subprocess.Popen(
            ["bash", "-c", WRITER_LOOP, "writer", str(w), str(PER_WRITER)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(WRITERS)
    ]
    printed: list[str] = []
    try:
        for w, p in enumerate(writers):
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, f"writer {w} failed: {err}"
            assert "Traceback" not in err
            lines = out.splitlines()
            assert len(lines) == PER_WRITER, f"writer {w} printed {len(lines)} ids"
            printed += lines
    finally:
        stop.touch()
        for p in writers:
            if p.poll() is None:
                p.kill()
                p.wait()
        try:
            ingester_rounds, _ = ingester.communicate(timeout=60)
        finally:
            if ingester.poll() is None:
                ingester.kill()
                ingester.wait()
    assert ingester.returncode == 0
    assert int(ingester_rounds) > 0  # it really ran concurrently with the writers

    total = WRITERS * PER_WRITER
    assert len(printed) == total and len(set(printed)) == total
    assert all(m.startswith("msg_") for m in printed)

    agents = sorted(p.name for p in (holon_home / "agents").iterdir())
    assert agents == ["main"], (
        f"default agent created more than once or staging left behind: {agents}"
    )

    # every message present once: still in the inbox (new/) or already ingested
    # into the queue ledger (whose files are retired), none torn
    inbox = holon_home / "agents" / "main" / ".holon" / "inbox"
    files = list((inbox / "new").glob("*.json"))
    envs = [json.loads(f.read_text()) for f in files]
    for f, env_ in zip(files, envs, strict=True):
        assert f.name == f"{env_['id']}.json"
    qled = holon_home / "agents" / "main" / ".holon" / "ledger" / "queue.jsonl"
    if qled.exists():
        envs += [
            json.loads(line)["message"]
            for line in qled.read_bytes().splitlines()
            if json.loads(line)["op"] == "admitted"
        ]
    assert sorted(e["id"] for e in envs) == sorted(printed)
    texts = set()
    for env_ in envs:
        assert env_["agent_id"] == "main"
        texts.add(env_["body"]["text"])
    assert texts == {
        f"writer-{w} message-{i}" for w in range(WRITERS) for i in range(1, PER_WRITER + 1)
    }
    assert list((inbox / "tmp").iterdir()) == []

    # after a final ingest the queue ledger holds each message exactly once
    ingest_everything()
    assert list((inbox / "new").iterdir()) == []
    ledger = holon_home / "agents" / "main" / ".holon" / "ledger" / "queue.jsonl"
    raw = ledger.read_bytes()
    assert raw.endswith(b"\n")
    recs = [json.loads(line) for line in raw.splitlines()]
    admitted = [r for r in recs if r["op"] == "admitted"]
    assert sorted(r["message"]["id"] for r in admitted) == sorted(printed)
    assert [r["seq"] for r in admitted] == list(range(1, total + 1))

    events = [json.loads(x) for x in (ledger.parent / "events.jsonl").read_text().splitlines()]
    assert [e["event_seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["kind"] for e in events].count("agent_created") == 1
    assert [e["kind"] for e in events].count("message_admitted") == total

    t0 = time.monotonic()
    res = subprocess.run(
        [HOLON, "home", "check", "--json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)["data"]
    assert report["ok"] and report["notes"] == []
    assert time.monotonic() - t0 < 30

    res = subprocess.run(
        [HOLON, "status", "--json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert json.loads(res.stdout)["data"]["pending"] == total
