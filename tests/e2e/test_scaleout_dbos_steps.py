"""`serve --engine dbos`, issue 30: each provider round and each tool call is
a DBOS step of the agent's pass workflow, and DBOS's steps agree with the turn
journal, also across a SIGKILL of the worker mid-turn and a crash between the
journal write and the step record (real Postgres 15, real DBOS)."""

from __future__ import annotations

import copy
import json
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, RecordedRequest, Reply
from pgcluster import PgCluster
from serve_helpers import stop, wait_for
from test_scaleout_dbos import (  # noqa: F401 - short_home: autouse, worker sockets need a short home
    completed,
    events,
    make_agents,
    needs_dbos,
    needs_pg,
    sh,
    short_home,
    start_workers,
)

from holon_cli.runtime.agents.lifecycle import open_agent

MODEL = "openai/gpt-test"
TOOL_ROUNDS = 2  # rounds 1 and 2 call a tool, round 3 answers


class ToolRounds:
    """A Responses server: for message ``steps-<tag>``, rounds 1-2 answer with
    one ExecCommand call (appending a line to ``ran.log`` in the agent home),
    round 3 with text. ``hold`` delays the first round-3 request."""

    def __init__(self, text_body: dict[str, Any]) -> None:
        self.text_body = text_body
        self.seen: list[tuple[str, int]] = []  # (tag, round) per request
        self.hold_s = 0.0
        self.round3 = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        body = req.json()
        tags = re.findall(r"steps-(\w+)", json.dumps(body["input"]))
        assert tags, body["input"]
        tag = [None, tags[-1]]  # the message being answered comes last
        # this turn's rounds: the input also carries the agent's earlier turns
        # whole (issue 44), so count the results after the message answered
        items = body["input"]
        start = max(
            i
            for i, it in enumerate(items)
            if it.get("role") == "user" and f"steps-{tag[1]}" in json.dumps(it)
        )
        n = 1 + sum(1 for i in items[start:] if i.get("type") == "function_call_output")
        with self.lock:
            first3 = n == 3 and (tag[1], 3) not in self.seen
            self.seen.append((tag[1], n))
        out = copy.deepcopy(self.text_body)
        out["id"] = f"resp_{tag[1]}_{n}"
        if n <= TOOL_ROUNDS:
            out["output"] = [
                {
                    "type": "function_call",
                    "id": f"fc_{tag[1]}_{n}",
                    "call_id": f"call_{tag[1]}_{n}",
                    "name": "ExecCommand",
                    "arguments": json.dumps({"cmd": f"echo {tag[1]}-{n} >> ran.log"}),
                    "status": "completed",
                }
            ]
        reply = Reply.json_body(out)
        if first3:
            self.round3.set()
            reply.delay_s = self.hold_s
        return reply


@pytest.fixture
def pg() -> Iterator[PgCluster]:
    with PgCluster() as cluster:
        yield cluster


@pytest.fixture
def tool_provider(
    monkeypatch: pytest.MonkeyPatch, fixtures_dir: Path
) -> Iterator[tuple[LoopbackServer, ToolRounds]]:
    rec = json.loads((fixtures_dir / "openai_responses" / "text_nonstream.json").read_text())
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    rounds = ToolRounds(rec["response"]["body"])
    with LoopbackServer() as s:
        s.check = rounds
        monkeypatch.setenv("OPENAI_BASE_URL", s.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        monkeypatch.setenv("HOLON_MODEL", MODEL)
        yield s, rounds


def dbos_steps(url: str, agent: str) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """pass workflow id -> its round/tool steps (name, output), in order."""
    import psycopg
    from dbos._serialization import DefaultSerializer, deserialize_value

    ser = DefaultSerializer()
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT o.workflow_uuid, o.function_name, o.output, o.serialization "
            "FROM dbos.operation_outputs o JOIN dbos.workflow_status w "
            "ON w.workflow_uuid = o.workflow_uuid "
            "WHERE w.name = 'holon.agent_pass' AND o.workflow_uuid LIKE %s "
            "AND o.function_name IN ('holon.round', 'holon.tool', 'holon.turn') "
            "AND o.function_id < 900 "  # fenced_by_the_owner's rows
            "ORDER BY o.workflow_uuid, o.function_id",
            (f"{agent}:%",),
        ).fetchall()
    for wfid, name, output, serialization in rows:
        out.setdefault(wfid, []).append((name, deserialize_value(output, serialization, ser)))
    return out


def journal_steps(agent: str, message_id: str) -> list[tuple[str, str]]:
    """What the turn journal held, as the transcript keeps it: each round's
    tool call ids and each tool result, in order."""
    store = open_agent(agent, create_default=False)
    out: list[tuple[str, str]] = []
    for e in store.ledger("transcript").records():
        if e.get("message_id") != message_id:
            continue
        if e["kind"] == "assistant_round":
            out.append(("holon.round", ",".join(c["id"] for c in e.get("tool_calls") or [])))
        elif e["kind"] == "tool_result":
            out.append(("holon.tool", str(e["call_id"])))
    return out


def as_pairs(steps: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    """Rounds and tool calls; a turn's end as ("holon.turn", its status)."""
    out = []
    for n, o in steps:
        if n == "holon.round":
            out.append((n, ",".join(o["calls"])))
        elif n == "holon.tool":
            out.append((n, o["call_id"]))
        else:
            out.append((n, o["status"]))
    return out


def ran_lines(agent: str) -> list[str]:
    path = open_agent(agent, create_default=False).layout.home / "ran.log"
    return path.read_text().split() if path.exists() else []


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_each_round_and_tool_call_is_a_dbos_step(
    tmp_path: Path, pg: PgCluster, tool_provider: tuple[LoopbackServer, ToolRounds]
) -> None:
    _srv, rounds = tool_provider
    (agent,) = make_agents(1)
    procs = start_workers(tmp_path, pg.url, 1)
    try:
        mid = sh("enqueue", "--agent", agent, "steps-one")["id"]
        assert wait_for(lambda: len(completed([agent])) >= 1, timeout=60)
    finally:
        for p in procs:
            stop(p)
    expected = [
        ("holon.round", "call_one_1"),
        ("holon.tool", "call_one_1"),
        ("holon.round", "call_one_2"),
        ("holon.tool", "call_one_2"),
        ("holon.round", ""),
    ]
    assert journal_steps(agent, mid) == expected
    by_wf = dbos_steps(pg.url, agent)
    (steps,) = [s for s in by_wf.values() if s]  # the pass that ran the turn
    assert as_pairs(steps) == [*expected, ("holon.turn", "completed")]
    assert [o["round"] for _n, o in steps[:-1]] == [1, 1, 2, 2, 3]
    assert all(o["ok"] for n, o in steps if n == "holon.tool")
    assert all(o["usage"]["input_tokens"] > 0 for n, o in steps if n == "holon.round")
    assert rounds.seen == [("one", 1), ("one", 2), ("one", 3)]
    assert ran_lines(agent) == ["one-1", "one-2"]
    assert "disagrees" not in (tmp_path / "w0.log").read_text()
    assert_replays(agent)


def assert_replays(agent: str) -> None:
    """The worker's turns were recorded and replay offline (issue 40)."""
    from holon_cli.runtime.replay.replay import replay_turn
    from holon_cli.tools.catalog import default_catalog

    turns = [e["turn_id"] for e in completed([agent])]
    assert turns
    for tid in turns:
        out = replay_turn(tid, catalog=default_catalog())
        assert out["match"] and out["rounds"] == 3, out


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_sigkill_after_round_two_resumes_after_the_last_step(
    tmp_path: Path, pg: PgCluster, tool_provider: tuple[LoopbackServer, ToolRounds]
) -> None:
    _srv, rounds = tool_provider
    rounds.hold_s = 30.0  # round 3 hangs: the worker dies waiting for it
    (agent,) = make_agents(1)
    procs = start_workers(tmp_path, pg.url, 2)
    try:
        mid = sh("enqueue", "--agent", agent, "steps-kill")["id"]
        assert rounds.round3.wait(60), rounds.seen
        (started,) = events(agent, "message_processing_started")
        worker = started["data"]["worker"]
        victim = next(p for p in procs if worker.endswith(f"-{p.pid}"))
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        assert wait_for(lambda: len(completed([agent])) >= 1, timeout=90)
        time.sleep(1.0)  # a doubled turn would show up now
    finally:
        for p in procs:
            stop(p)
    assert Counter(e["message_id"] for e in completed([agent])) == {mid: 1}
    # rounds 1-2 were sent once; round 3 (in flight at the kill) again
    assert rounds.seen == [("kill", 1), ("kill", 2), ("kill", 3), ("kill", 3)]
    assert ran_lines(agent) == ["kill-1", "kill-2"]  # no completed call ran again
    expected = [
        ("holon.round", "call_kill_1"),
        ("holon.tool", "call_kill_1"),
        ("holon.round", "call_kill_2"),
        ("holon.tool", "call_kill_2"),
        ("holon.round", ""),
    ]
    assert journal_steps(agent, mid) == expected
    by_wf = dbos_steps(pg.url, agent)
    (steps,) = [s for s in by_wf.values() if s]  # one pass, recovered and resumed
    assert as_pairs(steps) == [*expected, ("holon.turn", "completed")]
    logs = "".join(p.read_text() for p in tmp_path.glob("w*.log"))
    assert "disagrees" not in logs
    assert "dead worker(s)" in logs
    assert_replays(agent)  # round 3 was sent by the worker that resumed the turn


class Crash(BaseException):
    """A process dying at this point: nothing above catches it, nothing is recorded."""


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_a_crash_between_journal_write_and_step_record_replays_without_resending(
    pg: PgCluster,
    tool_provider: tuple[LoopbackServer, ToolRounds],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In-process: the recorder dies once round 3's answer is journaled,
    before DBOS has the steps of round 2, its tool call and round 3 (the
    batch written then); DBOS recovers the pass; the replay records the
    missing steps from the journal, sends nothing twice, runs no call again."""
    from dbos import DBOS

    from holon_cli.runtime.agents.lifecycle import create_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.serve.dbos import engine as engine_dbos
    from holon_cli.tools.catalog import default_catalog

    _srv, rounds = tool_provider
    monkeypatch.setenv("HOLON_WORKER_ID", "")  # launch() sets it; restored afterwards
    create_agent("c1")
    mid = admit("steps-crash", agent_id="c1")["id"]
    logs: list[str] = []
    records = [0]
    real = engine_dbos.DbosSteps.record

    def record(self: engine_dbos.DbosSteps, rows: list[Any], owner_xid: str | None) -> None:
        records[0] += 1
        if records[0] == 2:  # [round 1, call 1] written; [round 2, call 2] never
            raise Crash()
        real(self, rows, owner_xid)

    monkeypatch.setattr(engine_dbos.DbosSteps, "record", record)
    eng = engine_dbos.DbosScheduler(
        database_url=pg.url, executor_id="inproc-1", catalog=default_catalog(), log=logs.append
    )
    eng.launch()
    try:
        assert eng.enqueue_pass("c1", f"msg:{mid}")
        assert wait_for(lambda: records[0] >= 2, timeout=60), rounds.seen
        time.sleep(0.5)
        assert rounds.seen == [("crash", 1), ("crash", 2), ("crash", 3)]
        assert [n for n, _o in dbos_steps(pg.url, "c1")[f"c1:msg:{mid}"]] == [
            "holon.round",
            "holon.tool",
        ]
        assert completed(["c1"]) == []
        recovered = DBOS._recover_pending_workflows(["inproc-1"])
        assert [h.get_workflow_id() for h in recovered] == [f"c1:msg:{mid}"]
        assert wait_for(lambda: len(completed(["c1"])) >= 1, timeout=60), logs
        assert wait_for(
            lambda: DBOS.get_workflow_status(f"c1:msg:{mid}").status == "SUCCESS", timeout=30
        )
        fenced_by_the_owner(pg.url, f"c1:msg:{mid}")
    finally:
        eng.shutdown()
    # no round was sent again (round 3's answer too was in the journal), no call run again
    assert rounds.seen == [("crash", 1), ("crash", 2), ("crash", 3)]
    assert ran_lines("c1") == ["crash-1", "crash-2"]
    steps = dbos_steps(pg.url, "c1")[f"c1:msg:{mid}"]
    assert as_pairs(steps) == [
        ("holon.round", "call_crash_1"),
        ("holon.tool", "call_crash_1"),
        ("holon.round", "call_crash_2"),  # these three recorded by the replay, from the journal
        ("holon.tool", "call_crash_2"),
        ("holon.round", ""),
        ("holon.turn", "completed"),
    ]
    assert steps[3][1]["ok"] is True
    assert "usage" in steps[0][1]  # recorded live
    assert "usage" not in steps[2][1] and "usage" not in steps[4][1]  # from the journal
    assert not [m for m in logs if "disagrees" in m], logs
    assert Counter(e["message_id"] for e in completed(["c1"])) == {mid: 1}


def fenced_by_the_owner(url: str, wfid: str) -> None:
    """Step rows land only while the writer owns the workflow (DBOS's own
    fence); a retried batch that already landed is no error."""
    import psycopg
    from dbos._error import DBOSWorkflowConflictIDError

    from holon_cli.serve.dbos.engine import DbosSteps

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE dbos.workflow_status SET owner_xid = 'me' WHERE workflow_uuid = %s", (wfid,)
        )
    steps = DbosSteps.__new__(DbosSteps)
    steps.workflow_id = wfid
    row = {
        "function_id": 900,
        "function_name": "holon.turn",
        "output": None,
        "started_at_epoch_ms": 1,
        "serialization": None,
    }
    with pytest.raises(DBOSWorkflowConflictIDError):
        steps.record([row], "someone-else")
    steps.record([row, {**row, "function_id": 901}], "me")
    steps.record([row], "me")  # already there: left alone
    with psycopg.connect(url, autocommit=True) as conn:
        got = conn.execute(
            "SELECT function_id, completed_at_epoch_ms > 0, retention_timestamp > 0 "
            "FROM dbos.operation_outputs WHERE workflow_uuid = %s AND function_id >= 900 "
            "ORDER BY function_id",
            (wfid,),
        ).fetchall()
    assert got == [(900, True, True), (901, True, True)]


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_a_recovered_pass_skips_its_finished_turns(
    pg: PgCluster,
    tool_provider: tuple[LoopbackServer, ToolRounds],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One pass runs two messages' turns; it dies in the second (after the
    second round's batch); the recovered pass takes the first turn's recorded
    end instead of running it, and the second resumes at its own steps."""
    from dbos import DBOS

    from holon_cli.runtime.agents.lifecycle import create_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.serve.dbos import engine as engine_dbos
    from holon_cli.tools.catalog import default_catalog

    _srv, rounds = tool_provider
    monkeypatch.setenv("HOLON_WORKER_ID", "")
    create_agent("c2")
    first = admit("steps-aa", agent_id="c2")["id"]
    second = admit("steps-bb", agent_id="c2")["id"]
    logs: list[str] = []
    records = [0]
    real = engine_dbos.DbosSteps.record

    def record(self: engine_dbos.DbosSteps, rows: list[Any], owner_xid: str | None) -> None:
        records[0] += 1
        if records[0] == 5:  # turn 1: 3 batches; turn 2: [r1, t1], then this one
            raise Crash()
        real(self, rows, owner_xid)

    monkeypatch.setattr(engine_dbos.DbosSteps, "record", record)
    eng = engine_dbos.DbosScheduler(
        database_url=pg.url, executor_id="inproc-2", catalog=default_catalog(), log=logs.append
    )
    eng.launch()
    wfid = f"c2:msg:{first}"
    try:
        assert eng.enqueue_pass("c2", f"msg:{first}")
        assert wait_for(lambda: records[0] >= 5, timeout=60), rounds.seen
        time.sleep(0.5)
        assert [e["message_id"] for e in completed(["c2"])] == [first]
        DBOS._recover_pending_workflows(["inproc-2"])
        assert wait_for(lambda: DBOS.get_workflow_status(wfid).status == "SUCCESS", timeout=60)
    finally:
        eng.shutdown()
    done = Counter(e["message_id"] for e in completed(["c2"]))
    assert done == {first: 1, second: 1}
    assert rounds.seen == [("aa", 1), ("aa", 2), ("aa", 3), ("bb", 1), ("bb", 2), ("bb", 3)]
    assert ran_lines("c2") == ["aa-1", "aa-2", "bb-1", "bb-2"]
    one = [
        ("holon.round", "call_{}_1"),
        ("holon.tool", "call_{}_1"),
        ("holon.round", "call_{}_2"),
        ("holon.tool", "call_{}_2"),
        ("holon.round", ""),
        ("holon.turn", "completed"),
    ]
    expected = [(n, v.format(t)) for t in ("aa", "bb") for n, v in one]
    assert as_pairs(dbos_steps(pg.url, "c2")[wfid]) == expected
    assert not [m for m in logs if "disagrees" in m], logs


@pytest.mark.slow
@needs_pg
@needs_dbos
def test_a_waiting_pass_is_seen_in_postgres(pg: PgCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_pass_waiting`` against real DBOS rows: an enqueued, not started pass
    of the agent and of this release counts (this worker has no slots, so
    it stays enqueued); another agent's, a delayed one, one of another
    release (no worker of this release would run it) or a finished one
    does not; a database that is away says no (a pass is enqueued then)."""
    from dbos import DBOS, SetEnqueueOptions, SetWorkflowID

    from holon_cli.serve.dbos import engine as engine_dbos

    monkeypatch.setenv("HOLON_WORKER_ID", "")  # launch() sets it; restored afterwards
    logs: list[str] = []
    eng = engine_dbos.DbosScheduler(
        database_url=pg.url, executor_id="inproc-w", log=logs.append, concurrency=0
    )
    # a scheduler keeps at least one slot (max(1, concurrency)): with one, the
    # pass was dequeued and ran whenever DBOS's queue thread listed the queue
    # within the sleep below (under load, or after an earlier worker in this
    # process: CI saw SUCCESS); a worker of no slots dequeues nothing
    eng.concurrency = 0
    eng.launch()
    try:
        assert not eng._pass_waiting("w1")
        assert eng.enqueue_pass("w1", "msg:waiting")
        with (
            SetWorkflowID("w3:msg:other-release"),
            SetEnqueueOptions(queue_partition_key="w3", app_version="holon-other"),
        ):
            eng._queue.enqueue(eng._workflow, "w3", 0.0)
        assert eng.enqueue_pass("w2", "at:1", delay=600.0)  # delayed: not waiting to start
        # past the queue thread's next listing (every 1 s) and a few polls: nothing
        # is dequeued without a slot
        time.sleep(1.5)
        assert DBOS.get_workflow_status("w1:msg:waiting").status == "ENQUEUED"
        assert DBOS.get_workflow_status("w2:at:1").status == "DELAYED"
        assert eng._pass_waiting("w1")
        assert not eng._pass_waiting("w2")
        assert not eng._pass_waiting("w3")
        assert not eng._pass_waiting("w4")
        DBOS.cancel_workflow("w1:msg:waiting")
        assert not eng._pass_waiting("w1")
        pg.stop()
        assert not eng._pass_waiting("w1")
        assert any("cannot look for a waiting pass" in line for line in logs)
        pg.start()
    finally:
        eng.shutdown()
