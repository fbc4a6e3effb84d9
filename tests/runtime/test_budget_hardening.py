"""Budgets that cannot be walked around (issue 35 item 9): a temporary
``holon run`` agent's spend stays in the home's record, ``budgets.home``
bounds all agents together, concurrent requests reserve what they may take
(crash-safe), a request's output is capped to what the tightest budget
leaves, and ``holon run --max-tokens`` / ``--max-cost`` bound one run with
its children."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from inprocess_cli import bind_runner as bind_runner  # autouse: holon() runs in-process
from inprocess_cli import run as run_holon

from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
from holon_cli.runtime.budgets import check, reserve
from holon_cli.runtime.budgets import spend as sp
from holon_cli.runtime.budgets.check import BudgetStop
from holon_cli.store.layout import HomeLayout

USAGE = {"input_tokens": 80, "output_tokens": 20}  # 100 tokens a request


def holon(*args: str) -> Any:
    return run_holon(*args)


def script(tmp_path: Path, steps: list[Any], name: str = "model.yaml", **extra: Any) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"loop": True, "steps": steps, **extra}))
    return f"scripted:{path}"


def text(t: str = "done", usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {"text": t, "usage": usage or USAGE}


def config(home: Path, cfg: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    body = yaml.safe_dump(cfg)
    old = path.read_text() if path.exists() else ""
    if len(old) == len(body):
        body += "# again\n"
    path.write_text(body)


def home_records() -> list[dict[str, Any]]:
    led = sp.home_ledger(HomeLayout.current())
    return led.records() if led.path.exists() else []


# ------------------------------------------------------------ the home's record


def test_eight_runs_where_six_fit_send_six_requests(
    tmp_path: Path, holon_home: Path, now: list[float]
) -> None:
    """main: every temporary run agent started with a fresh budget (8 runs
    sent 8 requests where 6 fit). Its spend now stays in the home's record
    after the agent is removed, and budgets.home bounds all agents."""
    model = script(tmp_path, [text()])
    config(holon_home, {"budgets": {"home": {"tokens_per_day": 600}}})
    codes = [holon("run", "--model", model, f"question {i}").returncode for i in range(8)]
    assert codes == [0] * 6 + [4] * 2
    recs = home_records()
    assert len(recs) == 6 and sum(r["input_tokens"] + r["output_tokens"] for r in recs) == 600
    budgets_dir = HomeLayout.current().budgets_dir
    assert budgets_dir.stat().st_mode & 0o777 == 0o700  # whatever the umask
    assert HomeLayout.current().spend_ledger.stat().st_mode & 0o777 == 0o600
    # the six completed run agents are gone; their spend is not
    gone = {r["agent_id"] for r in recs}
    assert len(gone) == 6 and not any((holon_home / "agents" / a).exists() for a in gone)
    res = holon("run", "--json", "--model", model, "one more")
    assert res.returncode == 4
    env = json.loads(res.stdout)
    assert env["ok"] is False and env["error"]["kind"] == "budget_exhausted"
    assert env["data"]["waiting_reason"] == "budget_exhausted"
    assert env["data"]["budget"]["scope"] == "home"
    assert "the home's budget tokens_per_day" in env["data"]["budget_reason"]
    # it resets at midnight UTC, whatever agent asks
    now[0] += 86400
    assert holon("run", "--model", model, "tomorrow").returncode == 0


def test_budgets_home_bounds_the_sum_over_agents(
    tmp_path: Path, holon_home: Path, now: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_MODEL", script(tmp_path, [text()]))
    open_agent()
    create_agent("other")
    config(holon_home, {"budgets": {"tokens_per_day": 10_000, "home": {"tokens_per_day": 300}}})
    for agent in ("main", "other", "main"):
        assert holon("enqueue", "--agent", agent, "hi").returncode == 0
        assert holon("turn", "--agent", agent).returncode == 0
    assert len(home_records()) == 3
    assert holon("enqueue", "--agent", "other", "again").returncode == 0
    res = json.loads(holon("turn", "--agent", "other", "--json").stdout)["data"]
    assert res["closure"]["waiting_reason"] == "budget_exhausted"
    assert len(home_records()) == 3
    (brief,) = [
        b
        for b in open_agent("other", create_default=False).ledger("briefs").records()
        if b["visibility"] == "action_required"
    ]
    assert "budgets.home.tokens_per_day" in brief["text"]
    assert sp.home_status(_cfg())["tokens_per_day"]["used"] == 300
    # holds name the budget, whose it is and when it resets (issue 36 reads these)
    (hold,) = check.holds(open_agent("other", create_default=False), _cfg())
    assert hold["scope"] == "home" and hold["owner"] == "home"
    assert hold["until"] and "the home's budget tokens_per_day" in hold["reason"]


def test_a_damaged_home_record_is_rebuilt_keeping_a_removed_agents_rounds(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The home's record is derivable from the agents' ledgers except for the
    rounds of agents no longer in the home: a damaged line is set aside, the
    lines that read are kept (the removed agent's round among them), and the
    agents' rounds it lacked are added back; budgets.home counts them all."""
    monkeypatch.setenv("HOLON_MODEL", script(tmp_path, [text()]))
    open_agent()
    for _ in range(2):
        assert holon("enqueue", "hi").returncode == 0
        assert holon("turn").returncode == 0
    led = sp.home_ledger(HomeLayout.current())
    first, second = led.path.read_bytes().splitlines(keepends=True)
    gone = {**json.loads(first), "agent_id": "run-gone", "turn_id": "turn_gone", "ts": 1.0}
    led.path.write_bytes(json.dumps(gone).encode() + b"\n" + b"{torn\n" + second)
    assert holon("home", "check").returncode == 1
    res = holon("home", "check", "--repair")
    assert res.returncode == 0, res.stderr
    assert "cannot be recovered" in res.stderr
    assert holon("home", "check").returncode == 0
    got = home_records()
    assert [r["agent_id"] for r in got] == ["run-gone", "main", "main"]
    assert list(led.path.parent.glob("spend.jsonl.damaged-*"))
    assert len(sp.all_records(holon_home)) == 3


def test_a_home_from_before_the_record_is_a_note_that_repair_fills_in(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `budgets/` folder at all (a home an older holon wrote): nothing was
    lost, so `home check` passes with a note; `--repair` adds the rounds. The
    record deleted with its mark, the folder left, stays a finding."""
    import shutil

    monkeypatch.setenv("HOLON_MODEL", script(tmp_path, [text()]))
    open_agent()
    assert holon("enqueue", "hi").returncode == 0
    assert holon("turn").returncode == 0
    budgets = HomeLayout.current().budgets_dir
    shutil.rmtree(budgets)
    res = holon("home", "check", "--json")
    assert res.returncode == 0, res.stdout
    notes = json.loads(res.stdout)["data"]["notes"]
    assert any("never written" in n["message"] for n in notes), notes
    assert holon("home", "check", "--repair").returncode == 0
    assert len(home_records()) == 1
    for f in budgets.glob("spend.*"):
        f.unlink()
    assert holon("home", "check").returncode == 1


def _kid(name: str, parent: str = "main") -> Any:
    return create_agent(
        name,
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id=parent,
    )


def _cfg() -> dict[str, Any]:
    from holon_cli.store.config import load_config

    return load_config()


@pytest.mark.parametrize(
    "bad",
    [
        {"home": {"tokens_per_work_item": 5}},
        {"home": {"tokens_per_day": -1}},
        {"home": 5},
    ],
)
def test_budgets_home_is_checked_on_load(holon_home: Path, bad: Any) -> None:
    from holon_cli.errors import ConfigError
    from holon_cli.store.config_schema import validate_config

    with pytest.raises(ConfigError) as exc:
        validate_config({"budgets": bad})
    assert "budgets.home" in exc.value.message
    with pytest.raises(ConfigError, match="budgets.home"):
        validate_config({"agents": {"a": {"budgets": {"home": {"tokens_per_day": 1}}}}})
    validate_config({"budgets": {"home": {"tokens_per_day": 1, "turns_per_hour": 0}}})


def test_a_home_cost_budget_needs_every_models_price(holon_home: Path) -> None:
    from holon_cli.errors import ConfigError
    from holon_cli.store.config_schema import validate_config

    with pytest.raises(ConfigError, match=r"prices\.openai/gpt-4\.1 is missing"):
        validate_config({"model": "openai/gpt-4.1", "budgets": {"home": {"cost_usd_per_day": 1}}})


# ------------------------------------------------------------ the output cap


def _req(store: Any, cfg: dict[str, Any], est_in: int, **kw: Any) -> reserve.Admission:
    return reserve.admit(
        store,
        cfg,
        round_id=kw.pop("round_id", "rnd_test"),
        new_turn=kw.pop("new_turn", True),
        work_item_id=kw.pop("work_item_id", None),
        est_in=est_in,
        model_ref=kw.pop("model_ref", None),
        max_output=kw.pop("max_output", None),
        **kw,
    )


def test_max_output_tokens_is_capped_to_the_tightest_budget(
    holon_home: Path, now: list[float]
) -> None:
    store = open_agent()
    kid = _kid("kid")
    cfg = {
        "budgets": {"tokens_per_day": 5000, "home": {"tokens_per_day": 3000}},
        "agents": {"main": {"budgets": {"tokens_per_day": 2500}}},
    }
    a = _req(store, cfg, 1000)
    assert a.cap == 1500  # main's own 2500, less the input
    a.release()
    a = _req(store, cfg, 100, max_output=600)
    assert a.cap == 600  # the model's own cap is smaller
    a.release()
    sp.record_spend(
        kid, cfg, turn_id="t", message_id=None, work_item_id=None, model_ref=None,
        input_tokens=2000, output_tokens=400,
    )  # fmt: skip
    a = _req(kid, cfg, 50)  # kid's 5000 - 2400; main's 2500 - 2400; the home's 3000 - 2400
    assert a.cap == 2500 - 2400 - 50
    a.release()
    with pytest.raises(BudgetStop) as stop:
        _req(kid, cfg, 100, wait_s=0)  # no room for the input and one output token
    assert stop.value.hit["agent_id"] == "main" and stop.value.hit["needed"] == 101


def test_no_budget_leaves_the_request_alone(holon_home: Path) -> None:
    a = _req(open_agent(), {}, 10_000)
    assert a.cap is None and a.record is None


def test_a_cost_budget_caps_the_output_at_the_models_price(
    holon_home: Path, now: list[float]
) -> None:
    cfg = {
        "budgets": {"cost_usd_per_day": 1.0},
        "prices": {"x/m": {"input": 100, "output": 1000}},  # $/M tokens
    }
    a = _req(open_agent(), cfg, 1000, model_ref="x/m")  # input: $0.10
    assert a.cap == 900  # $0.90 left at $0.001 a token
    assert a.record is not None and a.record.data["cost_usd"] == pytest.approx(1.0)
    a.release()


def test_a_request_reserves_input_and_output_until_released(
    holon_home: Path, now: list[float]
) -> None:
    store = open_agent()
    cfg = {"budgets": {"tokens_per_day": 1000}}
    a = _req(store, cfg, 100, max_output=300, round_id="r1")
    assert a.record is not None and a.record.data["tokens"] == 400
    b = _req(store, cfg, 100, round_id="r2")
    assert b.cap == 1000 - 400 - 100  # a's reservation counts against b
    with pytest.raises(BudgetStop) as stop:
        _req(store, cfg, 100, round_id="r3", wait_s=0)
    assert stop.value.hit["reserved"] == 1000 and stop.value.hit["used"] == 0
    # another attempt of the same round does not count its own reservation
    c = _req(store, cfg, 100, round_id="r2")
    assert c.cap == 1000 - 400 - 100
    for x in (a, b, c):
        x.release()
    assert reserve.live_reservations(HomeLayout.current()) == []
    assert _req(store, cfg, 100, round_id="r3").cap == 900


def test_a_request_waits_for_others_in_flight_rather_than_stop(
    holon_home: Path, now: list[float]
) -> None:
    store = open_agent()
    cfg = {"budgets": {"tokens_per_day": 1000}}
    a = _req(store, cfg, 100, round_id="r1")  # reserves all of it
    waited: list[float] = []

    def sleep(s: float) -> None:
        waited.append(s)
        if len(waited) == 3:
            a.release()  # the other request ends

    b = _req(store, cfg, 100, round_id="r2", sleep=sleep)
    assert len(waited) == 3 and b.cap == 900
    b.release()


def test_waiting_requests_are_let_through_first_come_first_served(
    holon_home: Path, now: list[float]
) -> None:
    """b waits for a's reservation, then c does; when a ends, c looks again
    at once, before b's next poll, and would take what a freed: it defers
    to b, which has waited longer, and goes once b's request ends."""
    import threading

    store = open_agent()
    cfg = {"budgets": {"tokens_per_day": 1000}}
    home = HomeLayout.current()
    a = _req(store, cfg, 100, round_id="r1")  # reserves all of it
    order: list[str] = []
    got: dict[str, reserve.Admission] = {}

    def places() -> int:
        d = home.budget_waiters_dir
        return len(list(d.glob("*.json"))) if d.exists() else 0

    def run(name: str, sleep: Any) -> None:
        got[name] = _req(store, cfg, 100, round_id=name, sleep=sleep)
        order.append(name)

    b = threading.Thread(target=run, args=("b", lambda s: time.sleep(0.2)))
    b.start()
    end = time.monotonic() + 10
    while places() < 1 and time.monotonic() < end:
        time.sleep(0.005)
    c_slept: list[float] = []

    def c_sleep(s: float) -> None:
        c_slept.append(s)
        if len(c_slept) == 1:
            a.release()  # a ends: c looks again at once, b only after its poll
        else:
            time.sleep(0.02)

    (line,) = home.budget_waiters_dir.glob("*.json")
    assert json.loads(line.read_text())["scopes"] == ["agent:main"]  # what b waits on
    c = threading.Thread(target=run, args=("c", c_sleep))
    c.start()
    while "b" not in got and time.monotonic() < end:
        time.sleep(0.005)
    assert order == ["b"] and len(c_slept) > 1, (order, len(c_slept))
    got["b"].release()
    b.join(10)
    c.join(10)
    assert order == ["b", "c"] and got["c"].cap == 900
    got["c"].release()
    assert places() == 0 and reserve.live_reservations(home) == []


def test_only_a_request_sharing_a_budget_is_waited_for(holon_home: Path, now: list[float]) -> None:
    """A place in line held by a request of another budget does not hold a
    request back; one of the same budget does, until this request has
    waited its whole time."""
    store = open_agent()
    other = _kid("other")
    cfg = {"budgets": {"tokens_per_day": 1000}}
    home = HomeLayout.current()
    keys = reserve.scope_keys(check.scopes(store, cfg, now[0], reservations=[]))
    assert keys == ["agent:main"]

    def never(_s: float) -> None:
        raise AssertionError("deferred")

    # a place of an unrelated budget: no wait
    place = reserve._take_place(home, now[0], "x", "rX", ["agent:somebody-else"])
    try:
        _req(store, cfg, 100, round_id="r1", sleep=never).release()
        # a place of main's budget, from another round: main's request defers ...
        mine = reserve._take_place(home, now[0], "main", "rY", keys)
        with pytest.raises(AssertionError, match="deferred"):
            _req(store, cfg, 100, round_id="r2", sleep=never)
        # ... but not the same round's own earlier attempt, nor after its wait
        _req(store, cfg, 100, round_id="rY", sleep=never).release()
        _req(store, cfg, 100, round_id="r3", sleep=never, wait_s=0).release()
        # a child's request shares its parent's budget
        assert "agent:main" in reserve.scope_keys(check.scopes(other, cfg, now[0], reservations=[]))
        mine.release()
    finally:
        place.release()
    assert reserve.live_reservations(home) == []


def test_a_request_waiting_on_another_agents_budget_holds_no_one_else_back(
    holon_home: Path, now: list[float]
) -> None:
    """p's second request waits on p's own budget; main shares only the
    home's budget with it, which p's request does not wait on: main goes."""
    import threading

    create_agent("p")
    cfg = {
        "budgets": {"home": {"tokens_per_day": 100000}},
        "agents": {"p": {"budgets": {"tokens_per_day": 1000}}},
    }
    home = HomeLayout.current()
    pstore = open_agent("p")
    first = _req(pstore, cfg, 100, round_id="p1")  # all of p's budget
    go = threading.Event()
    second: list[reserve.Admission] = []

    def wait(_s: float) -> None:
        go.wait(10)
        first.release()

    t = threading.Thread(
        target=lambda: second.append(_req(pstore, cfg, 100, round_id="p2", sleep=wait))
    )
    t.start()
    try:
        end = time.monotonic() + 10
        while not list(home.budget_waiters_dir.glob("*.json")) and time.monotonic() < end:
            time.sleep(0.005)
        (line,) = home.budget_waiters_dir.glob("*.json")
        assert json.loads(line.read_text())["scopes"] == ["agent:p"]

        def never(_s: float) -> None:
            raise AssertionError("main waited for p")

        mine = _req(open_agent(), cfg, 100, round_id="m1", sleep=never)
        assert mine.cap is not None
        mine.release()
    finally:
        go.set()
        t.join(10)
    second[0].release()
    assert reserve.live_reservations(home) == []


# ------------------------------------------------------------ crash safety

HOLDER = textwrap.dedent(
    """
    import sys, time
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.budgets import reserve
    a = reserve.admit(open_agent(), {"budgets": {"tokens_per_day": 1000}}, round_id="held",
                      new_turn=True, work_item_id=None, est_in=100, model_ref=None,
                      max_output=None)
    print(a.cap, flush=True)
    time.sleep(120)
    """
)


def test_a_killed_process_holds_no_reservation(holon_home: Path) -> None:
    open_agent()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "900"
        cfg = {"budgets": {"tokens_per_day": 1000}}
        with pytest.raises(BudgetStop) as stop:
            _req(open_agent(), cfg, 100, wait_s=0)
        assert stop.value.hit["reserved"] == 1000  # the live process's reservation
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        a = _req(open_agent(), cfg, 100)  # its flock went with it
        assert a.cap == 900
        a.release()
        assert not list(HomeLayout.current().reservations_dir.iterdir())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_reservation_past_its_lease_is_dropped(holon_home: Path, now: list[float]) -> None:
    store = open_agent()
    cfg = {"budgets": {"tokens_per_day": 1000}}
    a = _req(store, cfg, 100, round_id="hung")  # held by a live but hung owner
    now[0] += reserve.LEASE_S + 1
    b = _req(store, cfg, 100, round_id="next")
    assert b.cap == 900
    a.release()  # the hung owner comes back: nothing to undo
    b.release()


# ------------------------------------------------------------ holon run bounds


def test_run_max_tokens_bounds_the_run(tmp_path: Path, holon_home: Path, now: list[float]) -> None:
    call = {
        "tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "true"}}],
        "usage": USAGE,
    }
    model = script(tmp_path, [call])  # a model that never stops calling tools
    res = holon("run", "--json", "--max-tokens", "250", "--model", model, "loop")
    assert res.returncode == 4, res.stderr
    env = json.loads(res.stdout)
    data = env["data"]
    assert env["error"]["kind"] == "budget_exhausted"
    assert data["final_status"] == "waiting" and data["waiting_reason"] == "budget_exhausted"
    assert data["budget"]["budget"] == "max_tokens" and data["budget"]["scope"] == "run"
    assert data["model_rounds"] == 2 and data["agent_kept"] is True
    assert data["token_usage"]["total_tokens"] <= 250
    # the bound ended with the run: the kept agent is not held by it
    assert check.holds(open_agent(data["agent_id"], create_default=False), {}) == []
    assert not list(HomeLayout.current().run_bounds_dir.glob("*.json"))


def test_run_max_tokens_counts_the_runs_children(
    tmp_path: Path, holon_home: Path, now: list[float]
) -> None:
    spawn = {
        "tool_calls": [
            {"name": "SpawnAgent", "arguments": {"initial_message": "count to a million"}}
        ],
        "usage": USAGE,
    }
    family = tmp_path / "family.yaml"
    family.write_text(
        yaml.safe_dump(
            {
                "agents": {"child-*": {"steps": [text("child: still counting")], "loop": True}},
                "steps": [spawn, text("spawned; waiting"), text("the child answered")],
            },
            sort_keys=False,
        )
    )
    res = holon("run", "--json", "--max-tokens", "320", "--model", f"scripted:{family}", "go")
    data = json.loads(res.stdout)["data"]
    assert res.returncode == 4, res.stderr
    # the parent: spawn + "waiting" = 200; the child's answer: 100 (its output
    # capped to the 40 left after its input); the parent's next request
    # (about 81 of the 20 left) is not sent. Without the child's spend
    # counted it would have been (120 left).
    spent = [(r["agent_id"].split("-")[0], sp.tokens_of(r)) for r in home_records()]
    assert spent == [("run", 100), ("run", 100), ("child", 100)]
    assert data["waiting_reason"] == "budget_exhausted"
    assert data["budget"]["budget"] == "max_tokens" and data["budget"]["used"] == 300


def test_run_max_cost_needs_prices(tmp_path: Path, holon_home: Path) -> None:
    model = script(tmp_path, [text()])
    res = holon("run", "--max-cost", "0.5", "--model", model, "hi")
    assert res.returncode == 2 and "--max-cost" in res.stderr and "prices." in res.stderr
    assert not list((holon_home / "agents").glob("run-*"))  # nothing half-made
    for bad in ("0", "-1", "x", "nan"):
        assert holon("run", "--max-cost", bad, "--model", model, "hi").returncode == 2
    for bad in ("0", "-5", "1.5"):
        assert holon("run", "--max-tokens", bad, "--model", model, "hi").returncode == 2


def test_run_max_cost_bounds_the_run(tmp_path: Path, holon_home: Path, now: list[float]) -> None:
    call = {
        "tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "true"}}],
        "usage": USAGE,
    }
    model = script(tmp_path, [call])
    # 80 x $1000/M + 20 x $5000/M = $0.18 a request
    config(holon_home, {"prices": {model: {"input": 1000, "output": 5000}}})
    res = holon("run", "--json", "--max-cost", "0.5", "--model", model, "loop")
    data = json.loads(res.stdout)["data"]
    assert res.returncode == 4
    assert data["budget"]["budget"] == "max_cost_usd"
    # two whole requests, then one whose output is capped to the $0.14 left
    assert data["model_rounds"] == 3
    spent = sum(r["cost_usd"] for r in home_records())
    assert spent == pytest.approx(0.5)


# ------------------------------------------------------------ concurrency

TURNS = textwrap.dedent(
    """
    import sys
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog
    import os, time
    agent, n, gate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cat = default_catalog()
    open(gate + ".ready", "w").close()  # imported: the start-up skew is behind us
    while not os.path.exists(gate):
        time.sleep(0.005)
    for i in range(n):
        admit(f"q{i}", agent_id=agent, kind="internal_followup", origin="system:delegation",
              delivery_surface="runtime_system", admission_context="runtime_owned")
        run_turn(agent, catalog=cat)
    """
)


@pytest.mark.slow
def test_three_children_at_once_cannot_overshoot_their_parent(
    tmp_path: Path, holon_home: Path
) -> None:
    """main: three children running at once sent 11 requests where 9 fit.
    Here three real processes turn three children of one parent at once,
    started 0.1 s apart and each request slow (0.3 s), so that each check
    happens while the others' requests are in flight."""
    model = script(tmp_path, [{**text(), "sleep_ms": 300}])
    open_agent()
    for k in ("k1", "k2", "k3"):
        _kid(k)
    config(holon_home, {"model": model, "agents": {"main": {"budgets": {"tokens_per_day": 950}}}})
    env = {**os.environ, "HOLON_MODEL": model}
    t0 = time.monotonic()
    gates = {k: tmp_path / f"go-{k}" for k in ("k1", "k2", "k3")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TURNS, k, "6", str(gates[k])], env=env, stderr=subprocess.PIPE
        )
        for k in gates
    ]
    # a loaded machine starts a Python 0.1-1 s late: the children begin once
    # all three have imported, 0.1 s apart (CI once saw k2 begin after the
    # other two had spent the budget)
    try:
        deadline = time.monotonic() + 60
        while not all(Path(f"{g}.ready").exists() for g in gates.values()):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            time.sleep(0.01)
        for g in gates.values():
            g.touch()
            time.sleep(0.1)
        for p in procs:
            _out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()[-2000:]
    finally:
        for p in procs:  # a child still waiting at its gate after a failure
            if p.poll() is None:
                p.kill()
                p.wait()
    recs = open_agent("main").ledger("spend").records()
    spent = sum(r["input_tokens"] + r["output_tokens"] for r in recs)
    assert spent <= 950 and len(recs) == 9, [(r["agent_id"], sp.tokens_of(r)) for r in recs]
    # a request reserves its output cap, which is all the budget leaves, so
    # the others wait; they are let through in the order they began to wait
    # (reserve._ahead), so a child going straight on to its next turn no
    # longer takes most rounds: every child got requests in (before the line,
    # one child in about five got none)
    assert len({r["agent_id"] for r in recs}) == 3, [r["agent_id"] for r in recs]
    assert reserve.live_reservations(HomeLayout.current()) == []
    print(f"three children: {len(recs)} requests where 9 fit, {time.monotonic() - t0:.1f}s")


# ------------------------------------------------------------ on the wire


def test_the_cap_reaches_the_provider_request(
    holon_home: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch, now: list[float]
) -> None:
    """The real Responses transport sends the capped ``max_output_tokens``:
    what the budget leaves after the input estimate (sizes / 4 for the first
    request; scaled by what the provider counted for the next one)."""
    import copy

    from loopback import LoopbackServer, RecordedRequest, Reply

    rec = json.loads((fixtures_dir / "openai_responses" / "text_nonstream.json").read_text())
    body = copy.deepcopy(rec["response"]["body"])
    body["usage"].update(input_tokens=6000, output_tokens=8, total_tokens=6008)
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    with LoopbackServer() as s:

        def always(_req: RecordedRequest) -> Reply:
            return Reply.json_body(body)

        s.check = always
        monkeypatch.setenv("OPENAI_BASE_URL", s.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        monkeypatch.setenv("HOLON_MODEL", "openai/gpt-test")
        open_agent()
        for cfg_limit in (None, 30_000):
            if cfg_limit:
                config(holon_home, {"budgets": {"tokens_per_day": cfg_limit}})
            for i in range(2):
                assert holon("enqueue", f"q{i}").returncode == 0
                assert holon("turn").returncode == 0
        sent = [r.json() for r in s.requests]
    recs = open_agent().ledger("spend").records()
    assert len(sent) == len(recs) == 4
    # no budget: the request is left alone
    assert "max_output_tokens" not in sent[0] and "max_output_tokens" not in sent[1]
    # with one: 30,000 less what was spent today, less the input estimate;
    # 8,192 at most when nothing else sets a cap
    ratio = recs[1]["input_tokens"] / recs[1]["request_est"]  # the provider's count / sizes/4
    used = 2 * 6008
    est = math.ceil(recs[2]["request_est"] * ratio)
    assert 30_000 - used - est > 8192 and sent[2]["max_output_tokens"] == 8192
    used += 6008
    est = math.ceil(recs[3]["request_est"] * 6000 / recs[2]["request_est"])
    assert sent[3]["max_output_tokens"] == 30_000 - used - est < 8192
