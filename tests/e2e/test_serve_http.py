"""The HTTP surface of `holon serve`: every route and each refusal, against
a real serve process on 127.0.0.1 (httpx2)."""

from __future__ import annotations

import collections
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from serve_helpers import HOLON, scripted_model, serve_addr, start_serve, stop, wait_for

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent

TOKEN = "s3cret-token"


def _completed(agent: str = "main") -> collections.Counter[str]:
    store = open_agent(agent, create_default=False)
    return collections.Counter(
        e["message_id"]
        for e in store.events.records()
        if e["kind"] == "turn_terminal" and e["data"]["status"] == "completed"
    )


def _admitted_kinds(agent: str = "main") -> list[str]:
    store = open_agent(agent, create_default=False)
    return [e["data"]["kind"] for e in store.events.records() if e["kind"] == "message_admitted"]


def _inbox_count(agent: str = "main") -> int:
    store = open_agent(agent, create_default=False)
    return q.pending_count(store) + store.inbox.pending_count()


@pytest.fixture
def served(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    monkeypatch.setenv("HOLON_MODEL", scripted_model(tmp_path))
    subprocess.run([*HOLON, "agent", "create", "main"], check=True, capture_output=True)
    proc = start_serve(tmp_path, env={"HOLON_CONTROL_TOKEN": TOKEN})
    try:
        addr = serve_addr(holon_home)
        yield addr, proc
    finally:
        stop(proc)


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.slow
def test_routes_with_token(served: tuple[str, subprocess.Popen[bytes]]) -> None:
    addr, _ = served
    with httpx2.Client(base_url=addr, timeout=10) as c:
        assert c.get("/healthz").json() == {"ok": True}
        # control routes need the bearer, loopback included
        for path in ("/agents/list", "/control/runtime/status", "/agents/main/status"):
            r = c.get(path)
            assert r.status_code == 401, path
            assert r.json()["error"]["kind"] == "unauthorized"
            assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/agents/list", headers=_auth()).json()["agents"][0]["agent_id"] == "main"
        st = c.get("/control/runtime/status", headers=_auth()).json()
        assert st["pid"] > 0 and st["activity"] in ("idle", "processing", "waiting")
        # status has the same data as `holon status --json`
        status = c.get("/agents/main/status", headers=_auth()).json()
        cli = json.loads(
            subprocess.run([*HOLON, "status", "--json"], capture_output=True, text=True).stdout
        )["data"]
        assert status["agent_id"] == cli["agent_id"] and set(status) == set(cli)
        state = c.get("/agents/main/state", headers=_auth()).json()
        assert state["agent"]["agent_id"] == "main" and "state" in state
        assert c.get("/agents/nobody/status", headers=_auth()).status_code == 404
        # control prompt: 202 + completed by the loop
        r = c.post("/control/agents/main/prompt", json={"text": "hello"}, headers=_auth())
        assert r.status_code == 202
        mid = r.json()["message_id"]
        assert wait_for(lambda: mid in _completed(), 10)
        queued = [json.dumps(r) for r in open_agent("main").ledger("queue").records()]
        admitted = [r for r in queued if mid in r]
        assert admitted and all("http_control_prompt" in r for r in admitted[:1])
        assert "control_authenticated" in admitted[0]
        # work item: 201, no message admitted by the route (serve's own tick
        # may activate the new runnable item at once: a system_tick)
        before = len(_admitted_kinds())
        r = c.post("/control/agents/main/work-items", json={"objective": "tidy"}, headers=_auth())
        assert r.status_code == 201
        assert set(_admitted_kinds()[before:]) <= {"system_tick"}
        r = c.post("/control/agents/main/work-items", json={"objective": " "}, headers=_auth())
        assert r.status_code == 400 and r.json()["error"]["kind"]
        # events page
        page = c.get("/agents/main/events?after=0&limit=2", headers=_auth()).json()
        assert [e["event_seq"] for e in page["events"]] == [1, 2] and page["next_after"] == 2
        nxt = c.get(f"/agents/main/events?after={page['next_after']}&limit=1", headers=_auth())
        assert nxt.json()["events"][0]["event_seq"] == 3
        assert c.get("/agents/main/events?after=x", headers=_auth()).status_code == 400


@pytest.mark.slow
def test_sse_resumes_from_last_event_id(served: tuple[str, subprocess.Popen[bytes]]) -> None:
    addr, _ = served
    with httpx2.Client(base_url=addr, timeout=10) as c:
        c.post("/control/agents/main/prompt", json={"text": "make events"}, headers=_auth())
        assert wait_for(lambda: len(_completed()) == 1, 10)
        last = open_agent("main").events.last()
        assert last is not None and last["event_seq"] >= 3
        ids: list[int] = []
        headers = {**_auth(), "Last-Event-ID": "2"}
        with c.stream("GET", "/agents/main/events/stream", headers=headers) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if line.startswith("id: "):
                    ids.append(int(line[4:]))
                if ids and ids[-1] >= last["event_seq"]:
                    break
        assert ids[0] == 3 and ids == sorted(ids)


@pytest.mark.slow
def test_refusals(served: tuple[str, subprocess.Popen[bytes]]) -> None:
    addr, _ = served
    with httpx2.Client(base_url=addr, timeout=10) as c:
        # DNS rebinding: a foreign Host is refused before anything else
        r = c.get("/agents/list", headers={**_auth(), "Host": "evil.example"})
        assert r.status_code == 403 and r.json()["error"]["kind"] == "forbidden_host"
        assert c.get("/healthz", headers={"Host": "localhost:1"}).status_code == 200
        before = _inbox_count()
        # public ingress policy
        for body in (
            {"text": "x", "origin": "operator"},
            {"text": "x", "origin": "system:cron"},
            {"text": "x", "origin": "timer:t1"},
            {"text": "x", "origin": "task:t1"},
            {"text": "x", "origin": "channel:slack", "priority": "interject"},
            {"text": "x", "origin": "channel:slack", "trust": "trusted_operator"},
            {"text": "x", "origin": "webhook:gh", "authority": "operator_instruction"},
            {"text": "x", "origin": "webhook:gh", "kind": "operator_prompt"},
            {"text": "x"},
        ):
            r = c.post("/agents/main/enqueue", json=body)
            assert r.status_code == 403, body
            assert set(r.json()["error"]) == {"kind", "message", "hint"}
        # 413 on an oversized prompt, 400 on bad JSON
        big = {"text": "x" * (1 << 20) + "y", "origin": "channel:slack"}
        assert c.post("/agents/main/enqueue", json=big).status_code == 413
        r = c.post(
            "/control/agents/main/prompt",
            content=b"{not json",
            headers={**_auth(), "Content-Type": "application/json"},
        )
        assert r.status_code == 400
        assert _inbox_count() == before  # nothing persisted on any refusal
        # accepted public ingress
        r = c.post("/agents/main/enqueue", json={"json": {"a": 1}, "origin": "webhook:github"})
        assert r.status_code == 202 and r.json()["message_id"].startswith("msg_")
        # stopped agent: 409
        subprocess.run([*HOLON, "agent", "stop", "main"], check=True, capture_output=True)
        r = c.post("/agents/main/enqueue", json={"text": "x", "origin": "channel:slack"})
        assert r.status_code == 409 and r.json()["error"]["kind"] == "agent_stopped"
        r = c.post("/control/agents/main/prompt", json={"text": "x"}, headers=_auth())
        assert r.status_code == 409


@pytest.mark.slow
def test_unix_socket_is_token_free_and_0600(
    served: tuple[str, subprocess.Popen[bytes]], holon_home: Path
) -> None:
    sock = holon_home / "run" / "holon.sock"
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(sock)), timeout=10) as c:
        assert c.get("http://serve/agents/list").status_code == 200


@pytest.mark.slow
def test_shutdown_route_drains_and_exits(
    served: tuple[str, subprocess.Popen[bytes]], holon_home: Path
) -> None:
    addr, proc = served
    r = httpx2.post(addr + "/control/runtime/shutdown", headers=_auth(), timeout=10)
    assert r.status_code == 202
    assert proc.wait(timeout=20) == 0
    assert not (holon_home / "run" / "holon.sock").exists()
    assert open_agent("main").read_record()["state"]["status"] != "stopped"


@pytest.mark.slow
def test_non_loopback_without_token_refuses_to_start(tmp_path: Path) -> None:
    out = subprocess.run(
        [*HOLON, "serve", "--listen", "0.0.0.0:0"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 4, out.stderr
    assert "token" in out.stderr


def test_bad_listen_is_a_usage_error(tmp_path: Path) -> None:
    out = subprocess.run(
        [*HOLON, "serve", "--listen", "nope"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "HOST:PORT" in out.stderr


@pytest.mark.slow
def test_no_token_serves_loopback_without_auth(tmp_path: Path, holon_home: Path) -> None:
    proc = start_serve(tmp_path)
    try:
        addr = serve_addr(holon_home)
        assert httpx2.get(addr + "/agents/list", timeout=10).status_code == 200
    finally:
        assert stop(proc) == 0


@pytest.mark.slow
def test_callback_wake(served: tuple[str, subprocess.Popen[bytes]]) -> None:
    addr, _ = served
    out = subprocess.run([*HOLON, "trigger", "show", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    url = json.loads(out.stdout)["data"]["trigger_url"]
    token = url.rstrip("/").rsplit("/", 1)[-1]
    with httpx2.Client(base_url=addr, timeout=10) as c:
        before = _inbox_count()
        r = c.post("/callbacks/wake/cb_" + "0" * 32, json={"x": 1})
        assert r.status_code == 403 and r.json()["error"]["message"] == "invalid callback token"
        r = c.post(f"/callbacks/wake/{token}", content=b"x" * (256 * 1024 + 1))
        assert r.status_code == 413
        r = c.post(
            f"/callbacks/wake/{token}",
            content=b"{bad",
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 400
        assert _inbox_count() == before  # nothing persisted on a refusal
        r = c.post(f"/callbacks/wake/{token}", json={"build": "green"})
        assert r.status_code == 202 and r.json()["disposition"]
        subprocess.run([*HOLON, "agent", "stop", "main"], check=True, capture_output=True)
        r = c.post(f"/callbacks/wake/{token}", json={"build": "red"})
        assert r.status_code == 409
