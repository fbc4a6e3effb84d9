"""`holon serve` end to end against a real model API over 127.0.0.1: a real
serve process, the loopback OpenAI Responses server replaying recorded
payloads (``provider-fixtures/openai_responses``), and each way an agent is
woken: an enqueue, a timer's deadline, a background task's exit and a
trigger delivery (wake hint). Nothing else runs turns here: every provider
request is serve's doing."""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from loopback import LoopbackServer, Reply
from scenarios import WAIT_ON_CI
from serve_helpers import HOLON, start_serve, stop, wait_for, wait_log

from holon_cli.runtime.agents.lifecycle import open_agent

MODEL = "openai/gpt-test"


def sh(*args: str) -> Any:
    """``holon ARGS --json`` -> its data (fails the test on a non-zero exit)."""
    res = subprocess.run([*HOLON, *args, "--json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"holon {' '.join(args)} -> {res.returncode}\n{res.stderr}"
    return json.loads(res.stdout)["data"]


def recorded(fixtures_dir: Path, case: str) -> dict[str, Any]:
    rec = json.loads((fixtures_dir / "openai_responses" / f"{case}.json").read_text())
    body = rec["response"]["body"]
    assert isinstance(body, dict)
    return body


def text_reply(fixtures_dir: Path, text: str) -> Reply:
    """The recorded text reply, saying ``text``."""
    body = copy.deepcopy(recorded(fixtures_dir, "text_nonstream"))
    (msg,) = [o for o in body["output"] if o["type"] == "message"]
    msg["content"][0]["text"] = text
    return Reply.json_body(body)


def call_reply(fixtures_dir: Path, name: str, args: dict[str, Any]) -> Reply:
    """The recorded single function call, calling one of holon's tools."""
    body = copy.deepcopy(recorded(fixtures_dir, "function_call_single"))
    (call,) = [o for o in body["output"] if o["type"] == "function_call"]
    call["name"] = name
    call["arguments"] = json.dumps(args)
    return Reply.json_body(body)


def completed_turns(agent: str | None = None) -> list[dict[str, Any]]:
    store = open_agent(agent, create_default=False)
    return [
        e
        for e in store.events.records()
        if e["kind"] == "turn_terminal" and e["data"]["status"] == "completed"
    ]


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    with LoopbackServer() as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        monkeypatch.setenv("HOLON_MODEL", MODEL)
        sh("agent", "create", "main")
        yield s


@pytest.fixture
def serving(srv: LoopbackServer, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A serve process on the home, idle after its start-up pass; stopped by pid."""
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching", timeout=30)
        time.sleep(0.3)
        yield proc
    finally:
        assert stop(proc) == 0, (tmp_path / "serve.log").read_text()[-3000:]


def _log(tmp_path: Path) -> str:
    return (tmp_path / "serve.log").read_text()[-3000:]


@pytest.mark.slow
def test_enqueue_turn(
    srv: LoopbackServer, serving: subprocess.Popen[bytes], fixtures_dir: Path, tmp_path: Path
) -> None:
    srv.queue(text_reply(fixtures_dir, "Paris, as recorded."))
    mid = subprocess.run(
        [*HOLON, "enqueue", "what is the capital of France?"], capture_output=True, text=True
    ).stdout.strip()
    assert wait_for(lambda: len(completed_turns()) == 1, 10), _log(tmp_path)
    (req,) = srv.requests
    assert req.path == "/v1/responses"
    assert req.headers["authorization"] == "Bearer sk-test-openai"
    assert "what is the capital of France?" in json.dumps(req.json())
    (turn,) = completed_turns()
    assert turn["message_id"] == mid
    assert sh("status")["pending"] == 0


@pytest.mark.slow
def test_timer_turn(
    srv: LoopbackServer, serving: subprocess.Popen[bytes], fixtures_dir: Path, tmp_path: Path
) -> None:
    srv.queue(text_reply(fixtures_dir, "deploy checked"))
    added = time.monotonic()
    sh("timer", "add", "--after", "2s", "--message", "time to check the deploy")
    # no inbox arrival: serve sleeps until the timer's deadline, then turns it
    assert wait_for(lambda: len(srv.requests) == 1, 15), _log(tmp_path)
    assert time.monotonic() - added >= 1.9, "the timer fired early"
    assert "time to check the deploy" in json.dumps(srv.requests[0].json())
    assert wait_for(lambda: len(completed_turns()) == 1, 10), _log(tmp_path)
    assert sh("status")["last_continuation"]["trigger_kind"] == "timer_fire"


@pytest.mark.slow
def test_task_exit_turn(
    srv: LoopbackServer, serving: subprocess.Popen[bytes], fixtures_dir: Path, tmp_path: Path
) -> None:
    srv.queue(
        call_reply(
            fixtures_dir,
            "ExecCommand",
            # the output (build-ok-7731) is not in the command text
            {"cmd": "sleep 1.5; echo build-ok-$((7000 + 731))", "yield_time_ms": 200},
        ),
        text_reply(fixtures_dir, "the build runs in the background"),
        text_reply(fixtures_dir, "the build finished"),
    )
    sh("enqueue", "build it")
    # the first turn promotes the command to a task and ends
    assert wait_for(lambda: len(completed_turns()) == 1, 15), _log(tmp_path)
    assert len(srv.requests) == 2
    out = json.dumps(srv.requests[1].json())
    assert "promoted_to_task" in out and "build-ok-7731" not in out
    # the task's exit wakes the agent: a second turn carries its result
    assert wait_for(lambda: len(srv.requests) == 3, 20), _log(tmp_path)
    assert "build-ok-7731" in json.dumps(srv.requests[2].json())
    assert wait_for(lambda: len(completed_turns()) == 2, 10), _log(tmp_path)
    store = open_agent(None)
    (task,) = sh("task", "list", "--all")["tasks"]
    assert task["status"] == "completed"
    triggers = [
        e["data"]["trigger_kind"]
        for e in store.events.records()
        if e["kind"] == "message_processing_started"
    ]
    assert triggers == ["operator_input", "task_result"]


@pytest.mark.slow
def test_wake_hint_turn(srv: LoopbackServer, fixtures_dir: Path, tmp_path: Path) -> None:
    # before serve: a turn (scripted) that leaves the agent waiting on CI
    setup = tmp_path / "setup.yaml"
    setup.write_text(yaml.safe_dump(WAIT_ON_CI))
    sh("enqueue", "release v2 once CI is green")
    first = sh("turn", "--model", f"scripted:{setup}")
    assert first["closure"]["waiting_reason"] == "awaiting_external_change"
    url = sh("trigger", "show")["trigger_url"]
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching", timeout=30)
        time.sleep(0.5)
        assert srv.requests == []  # nothing runnable: serve waits
        # CI's delivery, bound to the recorded wait, wakes the agent: the
        # woken turn, then the review of the work item that the next
        # tick asks for, in which the model rests
        srv.queue(
            text_reply(fixtures_dir, "CI is green; releasing."),
            call_reply(fixtures_dir, "Sleep", {"reason": "released; nothing left to do"}),
        )
        d = sh(
            "trigger",
            "deliver",
            url,
            '{"conclusion": "success", "run": 77}',
            "--content-type",
            "application/json",
            "--source",
            "github-actions",
        )
        assert d["disposition"] == "system_tick_admitted"
        assert wait_for(lambda: len(srv.requests) >= 1, 10), _log(tmp_path)
        req = json.dumps(srv.requests[0].json())
        assert "integration_signal" in req and '\\"conclusion\\": \\"success\\"' in req
        assert wait_for(lambda: sh("status")["status"] == "asleep", 10), _log(tmp_path)
        time.sleep(0.5)
        assert len(srv.requests) == 2 and "aborted" not in _log(tmp_path)
    finally:
        assert stop(proc) == 0, _log(tmp_path)
    # the woken turn continued the recorded wait, and the model saw it
    woken = [
        e["data"]
        for e in open_agent(None).events.records()
        if e["kind"] == "continuation_resolved" and e["data"]["trigger_kind"] == "system_tick"
    ][0]
    assert woken["resolution"] == "local_continuation" and woken["model_visible"] is True
    assert any(ev.startswith("wake_hint:") for ev in woken["evidence"])
