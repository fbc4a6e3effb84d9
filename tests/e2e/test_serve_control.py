"""Agent control under a real `holon serve` (contract "Agent control"):
the default agent exists from the first request, `holon agent start`
resumes processing at once (queued messages, a pending wake hint, a task
result deferred while stopped), `POST /control/agents/{id}/abort`, and
`holon agent abort` ending a real `holon turn` process within 2 s."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import yaml
from serve_helpers import HOLON, scripted_model, serve_addr, start_serve, stop, wait_for

from holon_cli.runtime.agents.lifecycle import open_agent

pytestmark = pytest.mark.slow


def holon(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOLON, *args], capture_output=True, text=True, timeout=timeout)


def terminals(agent: str = "main") -> list[dict[str, Any]]:
    store = open_agent(agent, create_default=False)
    return [e for e in store.events.records() if e["kind"] == "turn_terminal"]


def completed_kinds(agent: str = "main") -> list[str]:
    store = open_agent(agent, create_default=False)
    started = {
        e["message_id"]: e
        for e in store.events.records()
        if e["kind"] == "message_admitted" and "message_id" in e
    }
    return [
        started[t["message_id"]]["data"]["kind"]
        for t in terminals(agent)
        if t["data"]["status"] == "completed" and t.get("message_id") in started
    ]


def running_run(agent: str = "main") -> str | None:
    from holon_cli.runtime.turn.abort import running_run as rr

    return rr(open_agent(agent, create_default=False))


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    m = scripted_model(tmp_path)
    monkeypatch.setenv("HOLON_MODEL", m)
    return m


def test_serve_on_a_fresh_home_creates_the_default_agent(
    tmp_path: Path, holon_home: Path, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_AGENT_ID", "ops")
    proc = start_serve(tmp_path)
    try:
        addr = serve_addr(holon_home)
        r = httpx.get(addr + "/agents/ops/status", timeout=10)
        assert r.status_code == 200, r.text
        assert r.json()["agent_id"] == "ops"
        r = httpx.post(addr + "/control/agents/ops/prompt", json={"text": "hello"}, timeout=10)
        assert r.status_code == 202
        assert wait_for(lambda: len(terminals("ops")) == 1, 20)
    finally:
        assert stop(proc) == 0
    assert not (holon_home / "agents" / "main").exists()


def test_agent_start_resumes_processing_under_serve_at_once(
    tmp_path: Path, holon_home: Path, model: str
) -> None:
    assert holon("agent", "create", "main").returncode == 0
    url = json.loads(holon("trigger", "show", "--json").stdout)["data"]["trigger_url"]
    assert holon("agent", "pause", "main").returncode == 0
    assert holon("enqueue", "queued while paused").returncode == 0
    res = holon("trigger", "deliver", url, '{"ci": "green"}', "--content-type", "application/json")
    assert res.returncode == 0 and "coalesced" in res.stdout + res.stderr
    proc = start_serve(tmp_path)  # the safety sweep is 300 s away
    try:
        serve_addr(holon_home)
        time.sleep(1.0)
        assert terminals() == []  # paused: nothing ran
        t0 = time.monotonic()
        assert holon("agent", "start", "main").returncode == 0
        assert wait_for(lambda: len(terminals()) >= 2, 10), terminals()
        assert time.monotonic() - t0 < 8
        assert sorted(completed_kinds()) == ["operator_prompt", "system_tick"]
        # a task result deferred while the agent was stopped
        assert holon("agent", "stop", "main").returncode == 0
        res = holon("task", "run", "--json", "--", "echo deferred-result")
        assert res.returncode == 0, res.stderr
        task_id = json.loads(res.stdout)["data"]["task_id"]
        task_json = open_agent("main").layout.tasks_dir / task_id / "task.json"
        assert wait_for(lambda: "result_deferred" in task_json.read_text(), 10)
        t0 = time.monotonic()
        assert holon("agent", "start", "main").returncode == 0
        assert wait_for(lambda: "task_result" in completed_kinds(), 10), completed_kinds()
        assert time.monotonic() - t0 < 8
    finally:
        assert stop(proc) == 0


def _slow_model(tmp_path: Path, steps: list[Any]) -> str:
    p = tmp_path / "slow.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


@pytest.fixture
def slow_serve(tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("HOLON_MODEL", _slow_model(tmp_path, [{"sleep_ms": 60000, "text": "late"}]))
    proc = start_serve(tmp_path)
    try:
        yield serve_addr(holon_home)
    finally:
        assert stop(proc) == 0


def test_abort_route(slow_serve: str) -> None:
    addr = slow_serve
    url = addr + "/control/agents/main/abort"
    r = httpx.post(url, timeout=10)
    assert r.status_code == 202 and r.json()["running"] is False
    r = httpx.post(addr + "/control/agents/main/prompt", json={"text": "think"}, timeout=10)
    mid = r.json()["message_id"]
    assert wait_for(lambda: running_run() is not None, 20)
    run_id = running_run()
    r = httpx.post(url, json={"run_id": "turn_stale"}, timeout=10)
    assert r.status_code == 409 and r.json()["error"]["kind"] == "stale_run_id"
    r = httpx.post(url, json={"run_id": 7}, timeout=10)
    assert r.status_code == 400
    t0 = time.monotonic()
    r = httpx.post(url, json={"run_id": run_id}, timeout=10)
    assert r.status_code == 202, r.text
    assert r.json()["running"] is True and r.json()["status"] == "paused"
    assert wait_for(lambda: len(terminals()) == 1, 10)
    assert time.monotonic() - t0 < 2.0
    (term,) = terminals()
    assert term["message_id"] == mid and term["data"]["reason"] == "operator_aborted"
    assert open_agent("main").read_record()["state"]["status"] == "paused"
    status = httpx.get(addr + "/control/runtime/status", timeout=10).json()
    assert status["failures"] == 0  # an operator's abort is not a runtime failure


def test_abort_ends_a_real_turn_process_within_2_s(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `holon turn` process in a long ExecCommand (`sleep 60` in its yield
    window), then one in a slow provider call: each exits within 2 s of
    `holon agent abort`, and nothing of the command is left running."""
    steps = [
        {
            "tool_calls": [
                {"name": "ExecCommand", "arguments": {"cmd": "sleep 60", "yield_time_ms": 60000}}
            ]
        },
        {"sleep_ms": 60000, "text": "slow provider"},
    ]
    monkeypatch.setenv("HOLON_MODEL", _slow_model(tmp_path, steps))
    assert holon("agent", "create", "main").returncode == 0
    store = open_agent("main")
    for what in ("command", "provider"):
        assert holon("enqueue", f"abort my {what}").returncode == 0
        turn = subprocess.Popen(
            [*HOLON, "turn", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            if what == "command":
                from holon_cli.runtime.tasks.records import iter_records

                def started() -> bool:
                    return any(r.get("process") for _d, r in iter_records(store))

                assert wait_for(started, 20)
                (rec,) = [r for _d, r in iter_records(store)]
                pgid = rec["process"]["pgid"]
            else:
                assert wait_for(lambda: running_run() is not None, 20)
                time.sleep(0.3)  # inside the provider's sleep
            t0 = time.monotonic()
            res = holon("agent", "abort", "main", "--json")
            assert res.returncode == 0, res.stderr
            assert json.loads(res.stdout)["data"]["outcome"] == "aborted"
            code = turn.wait(timeout=10)
            assert time.monotonic() - t0 < 2.0, f"{what}: {time.monotonic() - t0:.2f} s"
        finally:
            if turn.poll() is None:
                turn.kill()
                turn.wait()
        out = json.loads(turn.stdout.read() if turn.stdout else b"{}")
        assert code == 130, out  # interrupted, not a provider failure (5)
        assert out["error"]["kind"] == "interrupted"
        assert out["data"]["status"] == "aborted"
        if what == "command":
            with pytest.raises(ProcessLookupError):
                os.killpg(pgid, 0)
        assert open_agent("main").read_record()["state"]["status"] == "paused"
        assert holon("agent", "start", "main").returncode == 0


def test_abort_ends_a_turn_waiting_on_a_slow_http_provider_within_2_s(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider call blocked in a socket read (a real HTTP endpoint on
    127.0.0.1 that answers after 30 s): the `holon turn` process still ends
    within 2 s of the abort."""
    from loopback import LoopbackServer, Reply

    with LoopbackServer() as srv:
        srv.queue(Reply(status=200, body=b"{}", delay_s=30.0))
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        assert holon("agent", "create", "main").returncode == 0
        assert holon("enqueue", "ask the slow endpoint").returncode == 0
        turn = subprocess.Popen(
            [*HOLON, "turn", "--json", "--model", "openai/gpt-4.1-mini"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert wait_for(lambda: len(srv.requests) == 1, 20)
            t0 = time.monotonic()
            res = holon("agent", "abort", "main", "--json")
            assert res.returncode == 0, res.stderr
            code = turn.wait(timeout=10)
            assert time.monotonic() - t0 < 2.0
        finally:
            if turn.poll() is None:
                turn.kill()
                turn.wait()
        assert code == 130
        assert json.loads(res.stdout)["data"]["outcome"] == "aborted"
