"""``holon usage`` (issue 39 item 6): requests, input/output/cached tokens and
cost from the spend records, by agent, model or UTC day; a removed child's
rounds still count (its parent's ledger keeps them), copies up the lineage
count once; bad input is a usage error (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from inprocess_cli import bind_runner as bind_runner  # autouse: holon() runs in-process
from inprocess_cli import run as run_holon

from holon_cli import clock
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent, set_lifecycle
from holon_cli.runtime.agents.removal import remove_agent
from holon_cli.runtime.budgets import spend

DAY1 = 1_780_000_000.0  # 2026-05-28T20:26:40Z
DAY2 = DAY1 + 86_400


def holon(*args: str) -> Any:
    return run_holon(*args)


def data(*args: str) -> dict[str, Any]:
    res = holon(*args, "--json")
    assert res.returncode == 0, (args, res.stderr)
    out: dict[str, Any] = json.loads(res.stdout)["data"]
    return out


def spent(agent: str, model: str, tin: int, tout: int, cached: int = 0, **cfg: Any) -> None:
    spend.record_spend(
        open_agent(agent),
        cfg or {"prices": {"openai/a": {"input": 1.0, "output": 2.0}}},
        turn_id=f"turn_{agent}_{tin}",
        message_id=None,
        work_item_id=None,
        model_ref=model,
        input_tokens=tin,
        output_tokens=tout,
        cached_input_tokens=cached,
    )


@pytest.fixture
def history(now: list[float], holon_home: Path) -> None:
    open_agent(None)
    create_agent("child-1", lineage_parent_agent_id="main")
    now[0] = DAY1
    spent("main", "openai/a", 1_000_000, 500_000, cached=400_000)
    spent("child-1", "openai/a", 2_000_000, 0)
    now[0] = DAY2
    spent("main", "anthropic/b", 300, 30)
    set_lifecycle("child-1", "stop")
    remove_agent("child-1", force=True)  # its rounds stay in main's ledger


def test_by_agent_counts_each_round_once_and_keeps_removed_agents(history: None) -> None:
    d = data("usage")
    rows = {r["key"]: r for r in d["rows"]}
    assert set(rows) == {"main", "child-1"}
    assert rows["child-1"] == {
        "key": "child-1",
        "requests": 1,
        "input_tokens": 2_000_000,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "cost_usd": 2.0,
    }
    assert rows["main"]["requests"] == 2 and rows["main"]["cached_input_tokens"] == 400_000
    assert rows["main"]["cost_usd"] == 2.0  # 1M in at $1 + 0.5M out at $2; b unpriced
    assert d["total"]["requests"] == 3 and d["total"]["key"] == "total"
    assert d["total"]["input_tokens"] == 3_000_300 and d["total"]["cost_usd"] == 4.0
    assert d["by"] == "agent" and d["since"] is None and d["agent_id"] is None


def test_by_model_and_day(history: None) -> None:
    models = {r["key"]: r["requests"] for r in data("usage", "--by", "model")["rows"]}
    assert models == {"openai/a": 2, "anthropic/b": 1}
    days = {r["key"]: r["input_tokens"] for r in data("usage", "--by", "day")["rows"]}
    assert days == {"2026-05-28": 3_000_000, "2026-05-29": 300}


def test_since_and_agent_filter(history: None, now: list[float]) -> None:
    now[0] = DAY2 + 60
    d = data("usage", "--since", "1h")
    assert [r["key"] for r in d["rows"]] == ["main"] and d["total"]["requests"] == 1
    assert d["since"] == clock.iso(DAY2 + 60 - 3600)
    d = data("usage", "--agent", "child-1", "--by", "model")
    assert d["rows"] == [{**d["total"], "key": "openai/a"}] and d["total"]["requests"] == 1


def test_an_unpriced_round_is_priced_by_todays_prices(
    history: None, holon_home: Path, now: list[float]
) -> None:
    (holon_home / "config.yaml").write_text(
        "prices:\n  anthropic/b: {input: 1000000, output: 1000000}\n"
    )
    rows = {r["key"]: r for r in data("usage", "--by", "model")["rows"]}
    assert rows["anthropic/b"]["cost_usd"] == 330.0
    assert rows["openai/a"]["cost_usd"] == 4.0  # recorded cost kept


def test_text_output_is_a_table(history: None) -> None:
    res = holon("usage", "--by", "model")
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["MODEL", "REQUESTS", "INPUT"]
    assert lines[-1].startswith("total")
    assert "$4.0000" in res.stdout


def test_nothing_recorded() -> None:
    res = holon("usage")
    assert res.returncode == 0 and "no provider requests recorded" in res.stdout
    d = data("usage")
    assert d["rows"] == [] and d["total"]["requests"] == 0


@pytest.mark.parametrize(
    "args",
    [
        ("--by", "week"),
        ("--since", "soon"),
        ("--since", "-1h"),
        ("--agent", "../x"),
    ],
)
def test_bad_input_is_a_usage_error(args: tuple[str, ...]) -> None:
    res = holon("usage", *args, "--json")
    assert res.returncode == 2, res.stdout
    assert json.loads(res.stdout)["ok"] is False


def test_the_homes_spend_record_keeps_a_removed_temporary_agent(
    history: None, holon_home: Path, now: list[float]
) -> None:
    """A home that keeps every agent's rounds in ``budgets/spend.jsonl`` (a
    temporary ``holon run`` agent, gone with its ledger, is still there):
    its rounds count, and copies of rounds the agents' ledgers hold count once."""
    from holon_cli.store.ledger import Ledger

    main_rec = open_agent("main").ledger("spend").records()[0]
    led = Ledger(holon_home / "budgets" / "spend.jsonl", holon_home / "run" / "spend.lock")
    led.append(dict(main_rec))  # a copy: counted once
    gone = {**main_rec, "agent_id": "run-1", "turn_id": "turn_run", "ts": DAY2 + 1}
    led.append(gone)
    rows = {r["key"]: r["requests"] for r in data("usage")["rows"]}
    assert rows == {"main": 2, "child-1": 1, "run-1": 1}
