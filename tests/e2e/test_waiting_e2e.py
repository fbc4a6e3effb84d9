"""The waiting plane through the `holon` CLI: concurrent ticks (real
processes), rest -> timer -> turn, rest -> plain hint -> no provider
request, and a recorded wait re-entered by a JSON delivery (provider over
127.0.0.1). Commands run in-process (pytest-console-scripts) except the
concurrent ticks, where separate processes are the point."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from inprocess_cli import bind_runner as bind_runner  # noqa: E402  (autouse fixture)
from inprocess_cli import run as run_holon  # noqa: E402
from loopback import LoopbackServer, Reply  # noqa: E402
from scenarios import WAIT_ON_CI  # noqa: E402

HOLON = [sys.executable, "-m", "holon_cli"]


def sh(*args: str, check: bool = True) -> Any:
    """``holon ARGS`` in-process; the result has ``returncode``, ``stdout``, ``stderr``."""
    res = run_holon(*args)
    if check and res.returncode != 0:
        raise AssertionError(f"holon {' '.join(args)} -> {res.returncode}\n{res.stderr}")
    return res


def data(*args: str) -> Any:
    return json.loads(sh(*args, "--json").stdout)["data"]


def events(kind: str) -> list[dict[str, Any]]:
    out = sh("tail", "--jsonl").stdout
    return [e for e in map(json.loads, out.splitlines()) if e["kind"] == kind]


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    with LoopbackServer() as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        yield s


def response(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-test",
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12},
    }


def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return response(
        [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        ]
    )


def text(t: str) -> dict[str, Any]:
    return response(
        [
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": t, "annotations": []}],
            }
        ]
    )


MODEL = "openai/gpt-test"


def rest(srv: LoopbackServer) -> None:
    """One turn in which the model calls open-ended Sleep."""
    srv.queue(Reply.json_body(call("Sleep", {"reason": "nothing to do"})))
    sh("enqueue", "nothing to do right now; rest")
    sh("turn", "--model", MODEL)
    assert data("status")["status"] == "asleep" and len(srv.requests) == 1


@pytest.mark.slow
def test_concurrent_ticks_fire_each_due_timer_exactly_once() -> None:
    ids = [sh("timer", "add", "--after", "100ms").stdout.strip() for _ in range(6)]
    ids.append(sh("timer", "add", "--after", "100ms", "--every", "1h").stdout.strip())
    time.sleep(0.3)
    procs = [
        subprocess.Popen(
            [*HOLON, "tick", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [o[1] for o in outs]
    fired = [
        a["timer_id"]
        for out, _ in outs
        for a in json.loads(out)["data"]["agents"][0]["actions"]
        if a["action"] == "timer_fired"
    ]
    assert sorted(fired) == sorted(ids)  # each exactly once across the four processes
    timers = {t["id"]: t for t in data("timer", "list", "--all")["timers"]}
    assert all(timers[i]["fire_count"] == 1 for i in ids)
    assert data("status")["pending"] == len(ids)
    assert len(events("timer_fired")) == len(ids)


def test_rest_then_timer_then_model_visible_turn(srv: LoopbackServer) -> None:
    rest(srv)
    tick = data("tick")["agents"][0]
    assert tick["actions"] == [] and data("status")["status"] == "asleep"  # rest holds
    sh("timer", "add", "--after", "200ms", "--message", "time to check the deploy")
    time.sleep(0.3)
    acts = data("tick")["agents"][0]["actions"]
    assert [a["action"] for a in acts] == ["timer_fired"]
    srv.queue(Reply.json_body(text("deploy checked")))
    out = sh("turn", "--model", MODEL)
    assert out.stdout.strip() == "deploy checked" and len(srv.requests) == 2
    assert "time to check the deploy" in json.dumps(srv.requests[1].json())
    st = data("status")
    assert st["status"] == "awake_idle" and st["last_continuation"]["trigger_kind"] == "timer_fire"
    assert st["last_continuation"]["model_visible"] is True


def test_rest_then_plain_hint_makes_no_provider_request(srv: LoopbackServer) -> None:
    rest(srv)
    url = data("trigger", "show")["trigger_url"]
    d = data("trigger", "deliver", url)
    assert d["disposition"] == "system_tick_admitted"
    turn = data("turn", "--model", MODEL)
    assert turn["ran"] is True and turn["status"] == "settled" and turn["model_rounds"] == 0
    assert len(srv.requests) == 1  # no provider request
    st = data("status")
    assert st["status"] == "asleep" and st["pending"] == 0
    assert st["last_continuation"]["model_visible"] is False
    assert "trigger:system_tick" in st["last_continuation"]["evidence"]


def test_recorded_wait_then_json_delivery_reenters_the_bound_item(
    srv: LoopbackServer, tmp_path: Path
) -> None:
    setup = tmp_path / "setup.yaml"
    setup.write_text(yaml.safe_dump(WAIT_ON_CI))
    sh("enqueue", "release v2 once CI is green")
    first = data("turn", "--model", f"scripted:{setup}")
    assert first["closure"]["outcome"] == "waiting"
    assert first["closure"]["waiting_reason"] == "awaiting_external_change"
    (item,) = data("workitem", "list")["work_items"]
    wid = item["id"] if "id" in item else item["work_item_id"]
    url = data("trigger", "show")["trigger_url"]
    body = '{"conclusion": "success", "run": 77}'
    d = data(
        "trigger",
        "deliver",
        url,
        body,
        "--content-type",
        "application/json",
        "--source",
        "github-actions",
    )
    assert d["disposition"] == "system_tick_admitted" and len(d["waiting_intent_ids"]) == 1
    shown = data("workitem", "show", wid)["work_item"]
    assert shown["blocked_by"] == "waiting for CI" and shown["state"] == "open"  # not cleared
    assert shown["has_triggered_waits"] is True
    srv.queue(Reply.json_body(text("CI is green; releasing.")))
    out = sh("turn", "--model", MODEL)
    assert out.returncode == 0 and len(srv.requests) == 1
    req = json.dumps(srv.requests[0].json())
    assert "integration_signal" in req and '\\"conclusion\\": \\"success\\"' in req
    assert wid in req
    st = data("status")
    assert st["last_continuation"]["resolution"] == "local_continuation"
    assert st["last_continuation"]["model_visible"] is True
