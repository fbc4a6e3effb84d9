"""The runaway of issue 21 §3 under a real ``holon serve``: the README's own
steps (a work item the model never picks, a model that answers in text) used
to make serve send ~200 provider requests in 25 s. Here a real serve process
talks to the loopback OpenAI Responses server (which answers every request
with the recorded text reply: 14 input + 8 output tokens) and every provider
request is counted at that server, not by holon's own bookkeeping."""

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
from loopback import LoopbackServer, RecordedRequest, Reply
from serve_helpers import HOLON, start_serve, stop, wait_for, wait_log

from holon_cli.runtime.agents.lifecycle import open_agent

MODEL = "openai/gpt-test"
# the recorded reply, with the input a request of this size really takes (the
# recording's 14 input tokens were a one-line prompt: a budget check that
# estimates the next request by its size would never send one here)
INPUT_TOKENS = 6000
TOKENS_PER_REQUEST = INPUT_TOKENS + 8
# how long serve is watched after it went quiet: its start-up pass, a
# config-change pass and the watcher's debounce all fit many times over
QUIET_S = 6.0


def sh(*args: str) -> Any:
    res = subprocess.run([*HOLON, *args, "--json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"holon {' '.join(args)} -> {res.returncode}\n{res.stderr}"
    return json.loads(res.stdout)["data"]


def text_reply(fixtures_dir: Path) -> Reply:
    rec = json.loads((fixtures_dir / "openai_responses" / "text_nonstream.json").read_text())
    body = copy.deepcopy(rec["response"]["body"])
    (msg,) = [o for o in body["output"] if o["type"] == "message"]
    msg["content"][0]["text"] = "I will think about the httpx upgrade."
    body["usage"].update(input_tokens=INPUT_TOKENS, total_tokens=TOKENS_PER_REQUEST)
    return Reply.json_body(body)


@pytest.fixture
def provider(
    monkeypatch: pytest.MonkeyPatch, fixtures_dir: Path, holon_home: Path
) -> Iterator[LoopbackServer]:
    """A model that answers in text, forever; a work item nobody picks."""
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    reply = text_reply(fixtures_dir)
    with LoopbackServer() as s:

        def always(_req: RecordedRequest) -> Reply:
            return reply

        s.check = always
        monkeypatch.setenv("OPENAI_BASE_URL", s.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        monkeypatch.setenv("HOLON_MODEL", MODEL)
        sh("agent", "create", "main")
        sh("workitem", "create", "Upgrade httpx to 0.28")
        yield s


def _briefs() -> list[dict[str, Any]]:
    return open_agent("main", create_default=False).ledger("briefs").records()


def _run_serve(tmp_path: Path, until: Any, timeout: float = 20.0) -> tuple[float, str]:
    """Serve until ``until()`` holds, then QUIET_S more; returns when it held."""
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching", timeout=30)
        t0 = time.monotonic()
        assert wait_for(until, timeout), (tmp_path / "serve.log").read_text()[-3000:]
        held = time.monotonic() - t0
        time.sleep(QUIET_S)
    finally:
        assert stop(proc) == 0
    return held, (tmp_path / "serve.log").read_text()


@pytest.mark.slow
def test_the_guard_bounds_the_runaway_under_serve(provider: LoopbackServer, tmp_path: Path) -> None:
    def tripped() -> bool:
        return any(b.get("title") == "no_progress_guard" for b in _briefs())

    _held, log = _run_serve(tmp_path, tripped)
    # three activation turns, one request each; none after the guard
    assert len(provider.requests) == 3, log[-3000:]
    turns = [e for e in open_agent("main").events.records() if e["kind"] == "turn_terminal"]
    assert len(turns) == 3
    st = sh("status")
    assert st["pending"] == 0
    assert st["token_usage"]["total"]["total_tokens"] == 3 * TOKENS_PER_REQUEST
    # new operator input lifts it (and is answered)
    proc = start_serve(tmp_path, name="serve2")
    try:
        wait_log(tmp_path, "watching", timeout=30, name="serve2")
        sh("enqueue", "please pick the httpx item")
        assert wait_for(lambda: len(provider.requests) >= 4, 15)
        # the guard counts again from zero: 3 more activations at most
        time.sleep(QUIET_S)
    finally:
        assert stop(proc) == 0
    assert len(provider.requests) == 4 + 3


@pytest.mark.slow
def test_a_token_budget_stops_serve_exactly_at_the_limit(
    provider: LoopbackServer, tmp_path: Path, holon_home: Path
) -> None:
    # two requests fit, with room for the prompt's growth, not a third
    limit = 2 * TOKENS_PER_REQUEST + 500
    (holon_home / "config.yaml").write_text(yaml.safe_dump({"budgets": {"tokens_per_day": limit}}))

    def stopped() -> bool:
        return any("tokens_per_day" in b["text"] for b in _briefs())

    _held, log = _run_serve(tmp_path, stopped)
    assert len(provider.requests) == 2, log[-3000:]
    st = sh("status")
    use = st["budget"]["tokens_per_day"]
    assert use["used"] == 2 * TOKENS_PER_REQUEST and use["limit"] == limit
    assert st["last_closure"]["waiting_reason"] == "budget_exhausted"
    (brief,) = [b for b in _briefs() if b["visibility"] == "action_required"]
    assert use["resets_at"] in brief["text"]
    assert "stopped before a provider request: budget tokens_per_day of main" in log
    # the operator raises the limit: serve sees config.yaml change and goes on
    proc = start_serve(tmp_path, name="serve2")
    try:
        wait_log(tmp_path, "watching", timeout=30, name="serve2")
        time.sleep(1.0)
        assert len(provider.requests) == 2, "a restart resets nothing"
        (holon_home / "config.yaml").write_text(
            yaml.safe_dump({"budgets": {"tokens_per_day": 3 * TOKENS_PER_REQUEST + 500}})
        )
        assert wait_for(lambda: len(provider.requests) == 3, 15)
        time.sleep(QUIET_S)
    finally:
        assert stop(proc) == 0
    assert len(provider.requests) == 3
