"""Holds and waits are visible (issue 36 §4): `holon status` (text and
`--json` `holds[]`) names every hold, `home audit` reports a held agent with
runnable work (`held`, `--allow-held`), `holon turn` on a held agent is
refused by policy (exit 4), and `enqueue --wait` says on stderr, within
2 s, when nothing would run its turn (no serve, a hold) and keeps waiting."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from inprocess_cli import bind_runner as bind_runner  # autouse: run() in-process
from inprocess_cli import run

from holon_cli.runtime.agents.holds import agent_holds
from holon_cli.runtime.agents.lifecycle import open_agent, set_lifecycle
from holon_cli.runtime.workitems import create_work_item

MIDNIGHT = "2026-05-29T00:00:00.000Z"


def script(tmp_path: Path, steps: list[Any]) -> str:
    p = tmp_path / "model.yaml"
    p.write_text(yaml.safe_dump({"loop": True, "steps": steps}))
    return f"scripted:{p}"


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    ref = script(tmp_path, [{"text": "ok", "usage": {"input_tokens": 80, "output_tokens": 20}}])
    monkeypatch.setenv("HOLON_MODEL", ref)
    open_agent()
    return ref


def ok(*args: str) -> Any:
    res = run(*args)
    assert res.returncode == 0, (args, res.returncode, res.stdout, res.stderr)
    return res


def status() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ok("status", "--json").stdout)["data"]
    return data


def budget_held(holon_home: Path) -> None:
    """One turn spends 100 of 100 tokens; the next one stops at its request:
    the agent is held by the day budget until midnight UTC."""
    (holon_home / "config.yaml").write_text("budgets:\n  tokens_per_day: 100\n")
    for text in ("one", "two"):
        ok("enqueue", text)
        ok("turn")


# ----------------------------------------------------------------- status


def test_status_names_no_hold_on_a_free_agent(model: str) -> None:
    assert status()["holds"] == []
    assert "held:" not in ok("status").stdout


def test_status_names_operator_holds(model: str) -> None:
    set_lifecycle("main", "pause")
    (h,) = status()["holds"]
    assert h["kind"] == "paused" and h["until"] is None
    assert "`holon agent start main`" in h["reason"]
    set_lifecycle("main", "stop")
    assert [h["kind"] for h in status()["holds"]] == ["stopped"]
    assert "held: stopped" in ok("status").stdout


def test_status_names_a_budget_hold_and_when_it_ends(
    model: str, holon_home: Path, now: list[float]
) -> None:
    budget_held(holon_home)
    ok("enqueue", "three")
    (h,) = status()["holds"]
    assert h["kind"] == "budget" and h["until"] == MIDNIGHT
    assert "budget tokens_per_day is exhausted: 100 used of 100" in h["reason"]
    assert "budgets.tokens_per_day" in h["reason"]
    text = ok("status").stdout
    assert "held: budget" in text and MIDNIGHT in text


def test_status_names_the_no_progress_guard(model: str) -> None:
    store = open_agent()
    wid = create_work_item(store, "stuck", plan_status="ready")["work_item"]["id"]

    def trip(st: Any) -> None:
        st["no_progress"] = {
            "activation": f"continue_active:{wid}",
            "turns": 3,
            "work_item_id": wid,
            "since": "2026-01-01T00:00:00.000Z",
            "last_turn_id": "turn_x",
        }

    store.update_state(trip)
    (h,) = status()["holds"]
    assert h["kind"] == "no_progress" and h["until"] is None
    assert wid in h["reason"] and "holon enqueue --agent main" in h["reason"]


def test_a_budget_the_next_request_would_pass_is_a_hold_with_the_truth(
    model: str, holon_home: Path, now: list[float]
) -> None:
    """200 of 250 used: not spent, but the next request (about 100) would
    pass it. The hold says so, never "exhausted"."""
    (holon_home / "config.yaml").write_text("budgets:\n  tokens_per_day: 250\n")
    for text in ("one", "two", "three"):  # the third stops before its request
        ok("enqueue", text)
        ok("turn")
    (h,) = agent_holds(open_agent())
    assert "would be passed by the next request" in h["reason"]
    assert "200 used of 250" in h["reason"] and "exhausted" not in h["reason"]


# ------------------------------------------------------------------ audit


def test_audit_reports_a_held_agent_and_allow_held_passes(model: str) -> None:
    ok("enqueue", "waits behind the pause")
    set_lifecycle("main", "pause")
    res = run("home", "audit")
    assert res.returncode == 1
    assert res.stdout.startswith("held") and "1 queued message(s)" in res.stdout
    assert "paused by the operator" in res.stdout
    doc = json.loads(run("home", "audit", "--json").stdout)
    assert doc["ok"] is False and [f["kind"] for f in doc["data"]["findings"]] == ["held"]
    res = run("home", "audit", "--allow-held")
    assert res.returncode == 0, res.stderr
    assert "held" in res.stdout and "1 held agent(s) allowed" in res.stdout
    doc = json.loads(run("home", "audit", "--allow-held", "--json").stdout)
    assert doc["ok"] is True and doc["data"]["ok"] is True
    assert [f["kind"] for f in doc["data"]["findings"]] == ["held"]
    set_lifecycle("main", "start")
    assert run("home", "audit").returncode == 0


def test_a_paused_agent_without_work_is_no_finding(model: str) -> None:
    set_lifecycle("main", "pause")
    assert run("home", "audit").returncode == 0


# ------------------------------------------------------------------- turn


def test_turn_on_a_budget_held_agent_is_refused_by_policy(
    model: str, holon_home: Path, now: list[float]
) -> None:
    budget_held(holon_home)
    assert ok("turn").stderr.strip() == "main: nothing queued"  # held, nothing held back
    ok("enqueue", "three")
    res = run("turn")
    assert res.returncode == 4, res.stderr
    assert "no turn: budget tokens_per_day is exhausted" in res.stderr and MIDNIGHT in res.stderr
    res = run("turn", "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 4 and doc["error"]["kind"] == "budget_exhausted"
    assert doc["data"]["ran"] is False and doc["data"]["budget"]["resets_at"] == MIDNIGHT
    # a cron pass over every agent does not fail on a hold
    res = run("turn", "--all")
    assert res.returncode == 0 and "budget tokens_per_day is exhausted" in res.stderr


def test_turn_on_a_paused_agent_is_refused_by_policy(model: str) -> None:
    ok("enqueue", "later")
    set_lifecycle("main", "pause")
    res = run("turn")
    assert res.returncode == 4 and "paused" in res.stderr


# ------------------------------------------------------------ enqueue --wait


@pytest.mark.slow
def test_wait_without_a_serve_says_so_within_2s_then_times_out(model: str) -> None:
    t0 = time.monotonic()
    res = run("enqueue", "anyone there?", "--wait", "--timeout", "2s")
    took = time.monotonic() - t0
    assert res.returncode == 75, res.stderr
    assert "waits: no `holon serve` runs for this home" in res.stderr
    assert "holon turn --agent main" in res.stderr and "Still waiting" in res.stderr
    error = [ln for ln in res.stderr.splitlines() if ln.startswith("Error:")]
    assert error and "no `holon serve` runs" in error[-1]  # the timeout says why too
    assert took < 30  # a loaded machine; the notice itself is asserted by the 2 s timeout


@pytest.mark.slow
def test_wait_on_a_paused_agent_names_the_hold(model: str) -> None:
    set_lifecycle("main", "pause")
    res = run("enqueue", "hello", "--wait", "--timeout", "2s", "--json")
    assert res.returncode == 75
    notice = [ln for ln in res.stderr.splitlines() if ln.startswith("holon enqueue:")]
    assert len(notice) == 1 and "agent main is held: paused by the operator" in notice[0]
    assert notice[0].count("holon agent start main") == 1  # said once, by the hold
    doc = json.loads(res.stdout)
    assert "paused" in doc["error"]["message"] and "holon agent start main" in doc["error"]["hint"]


@pytest.mark.slow
def test_wait_on_a_budget_held_agent_names_the_budget_and_its_reset(
    model: str, holon_home: Path, now: list[float]
) -> None:
    budget_held(holon_home)
    res = run("enqueue", "three", "--wait", "--timeout", "2s")
    assert res.returncode == 75
    assert "held: budget tokens_per_day is exhausted: 100 used of 100" in res.stderr
    assert f"until {MIDNIGHT}" in res.stderr


@pytest.mark.slow
def test_wait_with_a_serve_listening_says_nothing_of_the_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A serve (here: a socket that accepts, as a DBOS worker's would, under
    its worker name) could run the turn: no notice, only the timeout."""
    short = Path(tempfile.mkdtemp(prefix="h"))  # the socket path must fit AF_UNIX's 108 bytes
    monkeypatch.setenv("HOLON_HOME", str(short / "home"))
    run_dir = short / "home" / "run"
    run_dir.mkdir(parents=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(run_dir / "holon-worker-a.sock"))
    sock.listen(4)
    try:
        res = run("enqueue", "hello", "--wait", "--timeout", "2s")
    finally:
        sock.close()
        shutil.rmtree(short, ignore_errors=True)
    assert res.returncode == 75
    assert "waits:" not in res.stderr
    assert "or a running `holon serve` settles it" in res.stderr
