"""Spend budgets (issue 21 §3): checked before every provider request against
the durable spend ledger, rolled up the lineage chain; a refused request is
never sent, the turn closes ``waiting``/``budget_exhausted`` with an
``action_required`` brief, and tick, turn and serve hold the agent until the
budget resets or is raised. Bad budget config is a clear error naming the key
(``home check``, ``turn``, ``serve`` start-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from inprocess_cli import bind_runner as bind_runner  # autouse: holon() runs in-process
from inprocess_cli import run as run_holon

from holon_cli import clock
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
from holon_cli.runtime.budgets import spend as budgets
from holon_cli.store.agent_store import AgentStore

T0 = 1_780_000_000.0  # 2026-05-28T20:26:40Z
MIDNIGHT = 1_780_012_800.0  # 2026-05-29T00:00:00Z


def holon(*args: str) -> Any:
    return run_holon(*args)


def ok(*args: str) -> Any:
    res = holon(*args)
    assert res.returncode == 0, (args, res.returncode, res.stderr)
    return res


def data(*args: str) -> Any:
    return json.loads(ok(*args, "--json").stdout)["data"]


def held_turn(*args: str) -> Any:
    """``holon turn`` on an agent a budget holds: refused by policy (exit 4),
    the failure envelope still carrying the turn's data."""
    res = holon("turn", *args, "--json")
    assert res.returncode == 4, (res.returncode, res.stdout, res.stderr)
    out = json.loads(res.stdout)
    assert out["ok"] is False and out["error"]["kind"] == "budget_exhausted"
    return out["data"]


def script(tmp_path: Path, steps: list[Any], name: str = "model.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"loop": True, "steps": steps}))
    return f"scripted:{path}"


TEXT = {"text": "I will think about it.", "usage": {"input_tokens": 80, "output_tokens": 20}}


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    ref = script(tmp_path, [TEXT])
    monkeypatch.setenv("HOLON_MODEL", ref)
    open_agent()  # the default agent exists before config names it
    return ref


def config(home: Path, cfg: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    text = yaml.safe_dump(cfg)
    # the loader caches by (mtime, size): a rewrite must not look unchanged
    old = path.read_text() if path.exists() else ""
    if len(old) == len(text):
        text += "# again\n"
    path.write_text(text)


def rounds(agent: str | None = None) -> int:
    store = open_agent(agent, create_default=False)
    return sum(1 for e in store.events.records() if e["kind"] == "provider_round_completed")


def briefs(agent: str | None = None) -> list[dict[str, Any]]:
    return open_agent(agent, create_default=False).ledger("briefs").records()


def prompt_and_turn(n: int, agent: str = "main") -> list[Any]:
    out = []
    for i in range(n):
        if agent in ("kid", "grandkid"):
            # a supervised child takes no operator ingress: its work comes from the runtime
            from holon_cli.runtime.enqueue import admit

            admit(
                f"question {i}",
                agent_id=agent,
                kind="internal_followup",
                origin="system:delegation",
                delivery_surface="runtime_system",
                admission_context="runtime_owned",
            )
        else:
            ok("enqueue", "--agent", agent, f"question {i}")
        out.append(json.loads(ok("turn", "--agent", agent, "--json").stdout)["data"])
    return out


# ------------------------------------------------------------ tokens per day


def test_tokens_per_day_stops_exactly_at_the_limit(
    model: str, holon_home: Path, now: list[float]
) -> None:
    config(holon_home, {"budgets": {"tokens_per_day": 300}})
    results = prompt_and_turn(3)
    assert [r["closure"]["outcome"] for r in results] == ["completed"] * 3
    assert rounds() == 3
    # the fourth request would pass the limit: not sent, the turn closes waiting
    (stopped,) = prompt_and_turn(1)
    assert rounds() == 3
    assert stopped["ran"] and stopped["model_rounds"] == 0
    assert stopped["closure"] == {
        "outcome": "waiting",
        "waiting_reason": "budget_exhausted",
        "runtime_posture": "awake",
    }
    assert stopped["budget"]["budget"] == "tokens_per_day"
    last = briefs()[-1]
    assert last["visibility"] == "action_required"
    assert "tokens_per_day" in last["text"] and "2026-05-29T00:00:00.000Z" in last["text"]
    assert "budgets.tokens_per_day" in last["text"]
    # later messages stay queued: no turn, no request, nothing lost
    ok("enqueue", "still there?")
    res = holon("turn")
    assert res.returncode == 4  # refused by policy: the agent is held
    assert "budget tokens_per_day is exhausted: 300 used of 300" in res.stderr
    assert "queued messages wait" in res.stderr
    assert rounds() == 3
    st = data("status")
    assert st["pending"] == 1
    assert st["budget"] == {
        "tokens_per_day": {"limit": 300, "used": 300, "resets_at": "2026-05-29T00:00:00.000Z"}
    }


def test_the_next_request_is_estimated_by_the_previous_one(
    model: str, holon_home: Path, now: list[float]
) -> None:
    config(holon_home, {"budgets": {"tokens_per_day": 250}})
    results = prompt_and_turn(3)
    assert rounds() == 2  # 200 spent; 200 + 100 would pass 250
    assert results[2]["closure"]["waiting_reason"] == "budget_exhausted"
    assert data("status")["budget"]["tokens_per_day"]["used"] == 200
    # 200 of 250 is not spent: the brief says the next request would pass it
    text = briefs()[-1]["text"]
    assert "is exhausted" not in text
    assert "would be passed by the next request" in text and "200 used of 250" in text


def test_every_request_of_a_turn_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holon_home: Path, now: list[float]
) -> None:
    call = {
        "text": "looking",
        "tool_calls": [{"name": "AgentGet", "arguments": {}}],
        "usage": {"input_tokens": 80, "output_tokens": 20},
    }
    monkeypatch.setenv("HOLON_MODEL", script(tmp_path, [call, call, call, TEXT]))
    open_agent()
    config(holon_home, {"budgets": {"tokens_per_day": 200}})
    (res,) = prompt_and_turn(1)
    assert res["model_rounds"] == 2 and rounds() == 2
    assert res["closure"]["waiting_reason"] == "budget_exhausted"


def test_the_day_budget_resets_at_midnight_utc_and_serve_wakes_then(
    model: str, holon_home: Path, now: list[float]
) -> None:
    from holon_cli.serve.loop import agent_deadline

    config(holon_home, {"budgets": {"tokens_per_day": 100}})
    prompt_and_turn(2)
    assert rounds() == 1
    ok("enqueue", "after midnight")
    assert agent_deadline("main") == MIDNIGHT
    now[0] = MIDNIGHT - 1
    assert not held_turn()["ran"]
    now[0] = MIDNIGHT + 1
    res = data("turn")
    assert res["ran"] and res["model_rounds"] == 1
    assert data("status")["budget"]["tokens_per_day"] == {
        "limit": 100,
        "used": 100,
        "resets_at": "2026-05-30T00:00:00.000Z",
    }


def test_raising_the_limit_lifts_the_hold(model: str, holon_home: Path, now: list[float]) -> None:
    config(holon_home, {"budgets": {"tokens_per_day": 100}})
    prompt_and_turn(2)
    ok("enqueue", "more")
    assert not held_turn()["ran"]
    config(holon_home, {"budgets": {"tokens_per_day": 1000}, "agents": {}})
    assert data("turn")["model_rounds"] == 1
    assert rounds() == 2


def test_spend_is_durable_across_processes(model: str, holon_home: Path) -> None:
    config(holon_home, {"budgets": {"tokens_per_day": 100}})
    prompt_and_turn(2)
    ok("enqueue", "from a fresh process")
    res = subprocess.run(
        [sys.executable, "-m", "holon_cli", "turn", "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=60,
    )
    assert res.returncode == 4, res.stderr
    out = json.loads(res.stdout)["data"]
    assert not out["ran"] and out["budget"]["budget"] == "tokens_per_day"
    assert rounds() == 1


def test_an_agent_override_takes_precedence_key_by_key(
    model: str, holon_home: Path, now: list[float]
) -> None:
    config(
        holon_home,
        {
            "budgets": {"tokens_per_day": 100, "turns_per_hour": 50},
            "agents": {"main": {"budgets": {"tokens_per_day": 200}}},
        },
    )
    prompt_and_turn(3)
    assert rounds() == 2
    assert set(data("status")["budget"]) == {"tokens_per_day", "turns_per_hour"}
    assert data("status")["budget"]["tokens_per_day"]["limit"] == 200


# ------------------------------------------------------------ turns per hour


def test_turns_per_hour_is_a_rolling_hour(model: str, holon_home: Path, now: list[float]) -> None:
    config(holon_home, {"budgets": {"turns_per_hour": 2}})
    prompt_and_turn(1)
    now[0] += 600
    prompt_and_turn(1)
    now[0] += 600
    (res,) = prompt_and_turn(1)
    assert res["closure"]["waiting_reason"] == "budget_exhausted"
    assert rounds() == 2
    assert data("status")["budget"]["turns_per_hour"] == {
        "limit": 2,
        "used": 2,
        "resets_at": clock.iso(T0 + 3600),
    }
    ok("enqueue", "later")
    now[0] = T0 + 3601  # the first turn left the window
    assert data("turn")["model_rounds"] == 1
    assert rounds() == 3


# ---------------------------------------------------------------- cost per day


def test_cost_per_day_is_priced_per_model(model: str, holon_home: Path, now: list[float]) -> None:
    # 80 in x 1000 $/M + 20 out x 5000 $/M = 0.18 $ a request
    config(
        holon_home,
        {
            "model": model,
            "budgets": {"cost_usd_per_day": 0.5},
            "prices": {model: {"input": 1000, "output": 5000}},
        },
    )
    prompt_and_turn(4)
    # the third request fits with its output capped to what is left:
    # (0.5 - 0.36 - 80 x 0.001) / 0.005 = 12 output tokens (issue 35 item 9)
    assert rounds() == 3
    used = data("status")["budget"]["cost_usd_per_day"]
    assert used["used"] == pytest.approx(0.5) and used["limit"] == 0.5
    assert "cost_usd_per_day" in briefs()[-1]["text"]


def test_a_cost_budget_without_a_price_is_a_clear_error(
    model: str, holon_home: Path, now: list[float]
) -> None:
    config(holon_home, {"budgets": {"cost_usd_per_day": 1.0}})
    check = holon("home", "check")
    assert check.returncode == 1
    assert f"prices.{model} is missing" in check.stdout + check.stderr
    ok("enqueue", "hello")
    res = holon("turn")
    assert res.returncode == 2
    assert f"prices.{model}" in res.stderr and "nothing was dequeued" in res.stderr
    assert rounds() == 0 and data("status")["pending"] == 1


def test_a_configured_model_without_a_price_is_a_schema_error(model: str, holon_home: Path) -> None:
    config(holon_home, {"model": "openai/gpt-4.1", "budgets": {"cost_usd_per_day": 1.0}})
    res = holon("turn")
    assert res.returncode == 2
    assert "prices.openai/gpt-4.1 is missing" in res.stderr


# --------------------------------------------------------------- bad config


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        ({"budgets": {"tokens_per_day": "lots"}}, "budgets.tokens_per_day must be an integer"),
        ({"budgets": {"tokens_per_day": -5}}, "budgets.tokens_per_day must be 0 or more"),
        ({"budgets": {"cost_usd_per_day": "1$"}}, "budgets.cost_usd_per_day must be a number"),
        ({"budgets": {"tokens_per_week": 5}}, "unknown key 'budgets.tokens_per_week'"),
        (
            {"agents": {"main": {"budgets": {"turns_per_hour": 1.5}}}},
            "agents.main.budgets.turns_per_hour must be an integer",
        ),
        ({"agents": {"main": {"budget": {}}}}, "unknown key 'agents.main.budget'"),
        ({"prices": {"openai/gpt-4.1": {"input": 2}}}, "prices.openai/gpt-4.1.output is required"),
        ({"prices": {"openai/gpt-4.1": {"input": -2, "output": 1}}}, "must be 0 or more"),
    ],
)
def test_bad_budget_config_names_the_key(
    model: str, holon_home: Path, cfg: dict[str, Any], needle: str
) -> None:
    config(holon_home, cfg)
    check = holon("home", "check")
    assert check.returncode == 1 and needle in check.stdout + check.stderr
    ok("enqueue", "hello")
    res = holon("turn")
    assert res.returncode == 2 and needle in res.stderr
    os.remove(holon_home / "config.yaml")
    assert data("status")["pending"] == 1  # nothing was consumed


def test_serve_refuses_to_start_on_bad_budget_config(model: str, holon_home: Path) -> None:
    for cfg, needle in (
        ({"budgets": {"turns_per_hour": "ten"}}, "budgets.turns_per_hour must be an integer"),
        ({"budgets": {"cost_usd_per_day": 2}}, f"prices.{model} is missing"),
    ):
        config(holon_home, cfg)
        res = subprocess.run(
            [sys.executable, "-m", "holon_cli", "serve", "--listen", "127.0.0.1:0"],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=60,
        )
        assert res.returncode == 2, res.stderr
        assert needle in res.stderr
        assert not (holon_home / "run" / "serve.json").exists()


# ------------------------------------------------------------ lineage rollup


def _child(parent: str = "main", name: str = "kid") -> AgentStore:
    return create_agent(
        name,
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id=parent,
    )


def test_a_childs_spend_counts_against_its_parent_and_outlives_it(
    model: str, holon_home: Path, now: list[float]
) -> None:
    _child()
    _child("kid", "grandkid")
    config(holon_home, {"budgets": {"tokens_per_day": 10_000}, "agents": {}})
    config(holon_home, {"agents": {"main": {"budgets": {"tokens_per_day": 250}}}})
    prompt_and_turn(1, "grandkid")
    prompt_and_turn(1, "kid")
    assert data("status")["budget"]["tokens_per_day"]["used"] == 200
    # the parent's budget binds its whole subtree: the child's next request
    # (estimated at 100) would pass it, and the brief says whose budget it is
    (res,) = prompt_and_turn(1, "kid")
    assert res["closure"]["waiting_reason"] == "budget_exhausted"
    assert res["budget"]["agent_id"] == "main"
    assert "of its ancestor main" in briefs("kid")[-1]["text"]
    assert rounds("kid") == 1
    ok("agent", "stop", "grandkid")
    ok("agent", "rm", "grandkid", "--force")
    ok("agent", "stop", "kid")
    ok("agent", "rm", "kid", "--force")
    assert data("status")["budget"]["tokens_per_day"]["used"] == 200
    spent = open_agent("main", create_default=False).ledger("spend").records()
    assert [r["agent_id"] for r in spent] == ["grandkid", "kid"]


def test_lineage_stops_at_a_cycle_or_a_missing_parent(model: str) -> None:
    kid = _child()
    main = open_agent("main", create_default=False)
    rec = main.read_record()
    rec["identity"]["lineage_parent_agent_id"] = "kid"  # a hand-made cycle
    main.write_record(rec)
    assert [s.agent_id for s in budgets.lineage(kid)] == ["kid", "main"]
    rec["identity"]["lineage_parent_agent_id"] = "gone"
    main.write_record(rec)
    assert [s.agent_id for s in budgets.lineage(kid)] == ["kid", "main"]


# ------------------------------------------------------------ work item budget


def test_tokens_per_work_item_binds_the_current_item(
    model: str, holon_home: Path, now: list[float]
) -> None:
    store = open_agent()
    wid = wi.create_work_item(store, "Upgrade httpx")["work_item"]["id"]
    wi.pick_work_item(store, wid)
    config(holon_home, {"budgets": {"tokens_per_work_item": 150}})
    prompt_and_turn(2)
    assert rounds() == 1
    use = data("status")["budget"]["tokens_per_work_item"]
    assert use == {"limit": 150, "used": 100, "resets_at": None, "work_item_id": wid}
    assert f"on work item {wid}" in briefs()[-1]["text"]
    assert "does not reset" in briefs()[-1]["text"]
    # tick does not continue that item while its budget is spent
    tick = data("tick")["agents"][0]
    assert tick["actions"] == [] and "tokens_per_work_item" in tick["idle_reason"]
    # other work is not bound by that item's budget
    other = wi.create_work_item(store, "Write the changelog")["work_item"]["id"]
    ok("workitem", "pick", other)
    (res,) = prompt_and_turn(1)
    assert res["model_rounds"] == 1 and rounds() == 2
    assert data("status")["budget"]["tokens_per_work_item"]["work_item_id"] == other


def test_status_without_budgets_is_an_empty_map(model: str) -> None:
    assert data("status")["budget"] == {}


def test_tick_does_not_reactivate_an_agent_a_budget_stopped(
    model: str, holon_home: Path, now: list[float]
) -> None:
    wi.create_work_item(open_agent(), "never picked")
    config(holon_home, {"budgets": {"tokens_per_day": 100}})
    for _ in range(4):
        ok("tick")
        ok("turn")
    assert rounds() == 1
    tick = data("tick")["agents"][0]
    assert tick["actions"] == []
    assert "budget tokens_per_day is exhausted: 100 used of 100" in tick["idle_reason"]
    assert "2026-05-29T00:00:00.000Z" in tick["idle_reason"]


def test_a_long_history_is_read_from_the_end(
    model: str, holon_home: Path, now: list[float]
) -> None:
    """Day and hour budgets read back only as far as they look: months of
    spend do not make every request's check slower."""
    store = open_agent()
    old = [
        {
            "v": 1,
            "at": clock.iso(T0 - 2 * 86400 + i),
            "ts": T0 - 2 * 86400 + i,
            "agent_id": "main",
            "turn_id": f"turn_{i}",
            "message_id": None,
            "work_item_id": None,
            "model_ref": model,
            "input_tokens": 1000,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "estimated": False,
        }
        for i in range(5000)
    ]
    path = store.layout.ledger_path("spend")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    config(holon_home, {"budgets": {"tokens_per_day": 1000, "turns_per_hour": 5}})
    prompt_and_turn(1)
    recent = budgets._records(store, budgets._window(now[0]))
    assert len(recent) < 1000
    assert recent[-1]["turn_id"] != "turn_4999"
    assert data("status")["budget"]["tokens_per_day"]["used"] == 100
    assert data("status")["budget"]["turns_per_hour"]["used"] == 1


def test_status_text_shows_each_budget(model: str, holon_home: Path, now: list[float]) -> None:
    config(holon_home, {"budgets": {"tokens_per_day": 300}})
    prompt_and_turn(1)
    out = ok("status").stdout
    assert "budget tokens_per_day" in out
    assert "100 of 300 (resets 2026-05-29T00:00:00.000Z)" in out


def test_a_damaged_spend_record_is_reported_by_home_check(model: str, now: list[float]) -> None:
    prompt_and_turn(1)
    path = open_agent().layout.ledger_path("spend")
    with path.open("a") as f:
        f.write(json.dumps({"v": 1, "ts": "yesterday", "agent_id": "main"}) + "\n")
    res = holon("home", "check")
    assert res.returncode == 1
    assert "spend.jsonl" in res.stdout + res.stderr
    assert "`ts` must be" in res.stdout + res.stderr


class Killed(BaseException):
    pass


def test_a_crash_mid_turn_keeps_the_spend_and_the_replay_adds_only_new_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holon_home: Path, now: list[float]
) -> None:
    from holon_cli.runtime.turn import run_turn
    from holon_cli.tools.catalog import default_catalog

    call = {
        "text": "looking",
        "tool_calls": [{"name": "AgentGet", "arguments": {}}],
        "usage": {"input_tokens": 80, "output_tokens": 20},
    }
    monkeypatch.setenv("HOLON_MODEL", script(tmp_path, [call, TEXT]))
    open_agent()
    config(holon_home, {"budgets": {"tokens_per_day": 150}})
    ok("enqueue", "go")
    catalog = default_catalog()
    real = catalog.execute

    def killed(*a: Any, **k: Any) -> Any:
        raise Killed  # the process dies while the first round's call is in flight

    monkeypatch.setattr(catalog, "execute", killed)
    with pytest.raises(Killed):
        run_turn(None, catalog=catalog)
    monkeypatch.setattr(catalog, "execute", real)
    assert data("status")["budget"]["tokens_per_day"]["used"] == 100
    # the replay finishes the turn; its next request (100 more) would pass 150
    res = run_turn(None, catalog=catalog)
    assert res.replayed and res.closure is not None
    assert res.closure.get("waiting_reason") == "budget_exhausted"
    assert rounds() == 1
    assert len(open_agent().ledger("spend").records()) == 1


@pytest.mark.parametrize("name", ["tokens_per_day", "turns_per_hour", "cost_usd_per_day"])
def test_a_zero_budget_sends_nothing_and_never_resets(
    model: str, holon_home: Path, now: list[float], name: str
) -> None:
    prompt_and_turn(1)
    config(
        holon_home,
        {"model": model, "budgets": {name: 0}, "prices": {model: {"input": 1, "output": 1}}},
    )
    (res,) = prompt_and_turn(1)
    assert res["closure"]["waiting_reason"] == "budget_exhausted"
    assert rounds() == 1
    assert data("status")["budget"][name]["resets_at"] is None
    assert "does not reset" in briefs()[-1]["text"]


def test_status_still_answers_with_a_broken_budget_config(model: str, holon_home: Path) -> None:
    config(holon_home, {"budgets": {"tokens_per_day": "lots"}})
    st = data("status")
    assert st["budget"] == {}
    assert "budgets.tokens_per_day must be an integer" in st["budget_error"]


def test_a_provider_without_usage_is_counted_by_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holon_home: Path, now: list[float]
) -> None:
    monkeypatch.setenv("HOLON_MODEL", script(tmp_path, [{"text": "no usage reported " * 40}]))
    open_agent()
    config(holon_home, {"budgets": {"tokens_per_day": 1_000_000}})
    prompt_and_turn(1)
    (rec,) = open_agent().ledger("spend").records()
    assert rec["estimated"] is True
    assert rec["output_tokens"] == len("no usage reported " * 40) // 4
    assert rec["input_tokens"] > 100  # the system prompt alone is far more than 400 chars
    assert data("status")["budget"]["tokens_per_day"]["used"] == (
        rec["input_tokens"] + rec["output_tokens"]
    )


def _old_spend(store: AgentStore, n: int, wid: str | None, ts: float) -> None:
    path = store.layout.ledger_path("spend")
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = {
        "v": 1,
        "agent_id": store.agent_id,
        "message_id": None,
        "work_item_id": wid,
        "model_ref": "m",
        "input_tokens": 10,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "estimated": False,
    }
    with path.open("a") as f:
        for i in range(n):
            f.write(json.dumps({**rec, "at": clock.iso(ts), "ts": ts, "turn_id": f"t{i}"}) + "\n")


def test_work_item_totals_are_folded_and_rebuilt_from_the_ledger(
    model: str, now: list[float]
) -> None:
    store = open_agent()
    fold = store.layout.state_dir / budgets.FOLD_FILE
    _old_spend(store, 100, "wi_a", T0 - 40 * 86400)
    _old_spend(store, 10, "wi_b", T0 - 40 * 86400)
    assert budgets.work_item_tokens(store, "wi_a") == 1000
    snap = json.loads(fold.read_text())
    assert snap["totals"] == {"wi_a": 1000, "wi_b": 100}
    # appended since the fold: read from its offset, counted once
    _old_spend(store, 3, "wi_a", T0)
    assert budgets.work_item_tokens(store, "wi_a") == 1030
    assert budgets.work_item_tokens(store, "wi_b") == 100
    # a damaged or stale fold is rebuilt from the ledger, never trusted
    fold.write_text("not json")
    assert budgets.work_item_tokens(store, "wi_a") == 1030
    fold.write_text(json.dumps({"v": 1, "inode": -1, "offset": 5, "totals": {"wi_a": 1}}))
    assert budgets.work_item_tokens(store, "wi_a") == 1030
    assert budgets.work_item_tokens(store, "wi_none") == 0
