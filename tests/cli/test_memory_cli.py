"""The memory plane at the CLI (issue 23): ``holon status`` working memory and
``runtime.context_budget_tokens`` as a user types it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.store.layout import HomeLayout
from tests.inprocess_cli import bind_runner, run  # noqa: F401  (bind_runner: autouse)


def script(tmp_path: Path, steps: list[Any]) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def data(res: Any) -> Any:
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["data"]


def write_config(tmp_path: Path, body: str) -> None:
    home = HomeLayout.current().root
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(body)


def test_status_json_shows_working_memory_after_a_settled_turn(tmp_path: Path) -> None:
    run("enqueue", "note that the release is on Friday")
    before = data(run("status", "--json"))["working_memory"]
    assert before["working_memory_revision"] == 0
    assert before["current_working_memory"] is None
    assert before["active_episode_id"] is None and before["archived_episode_count"] == 0
    assert run("turn", "--model", script(tmp_path, ["Noted."])).returncode == 0
    wm = data(run("status", "--json"))["working_memory"]
    assert set(wm) >= {
        "working_memory_revision",
        "current_working_memory",
        "pending_working_memory_delta",
        "active_episode_id",
        "archived_episode_count",
    }
    assert wm["working_memory_revision"] == 1
    assert "release is on Friday" in wm["current_working_memory"]["operator_requests"][0]
    assert wm["pending_working_memory_delta"].startswith("working memory revision 0 -> 1")
    plain = run("status")
    assert "revision 1, 0 episode(s) archived" in plain.stdout


@pytest.mark.parametrize(
    ("value", "says"),
    [('"lots"', "runtime.context_budget_tokens"), ("10", "1000 or more, got 10")],
)
def test_a_bad_budget_is_a_config_error_and_nothing_is_lost(
    tmp_path: Path, value: str, says: str
) -> None:
    write_config(tmp_path, f"runtime:\n  context_budget_tokens: {value}\n")
    run("enqueue", "keep me")
    res = run("turn", "--model", script(tmp_path, ["never"]))
    assert res.returncode == 2, res.stderr
    assert "runtime.context_budget_tokens" in res.stderr and says in res.stderr
    check = run("home", "check")
    assert check.returncode != 0 and "context_budget_tokens" in check.stdout + check.stderr
    write_config(tmp_path, "")
    assert data(run("status", "--json"))["pending"] == 1  # still queued


def test_a_budget_below_the_frame_is_refused_and_nothing_is_consumed(tmp_path: Path) -> None:
    """Issue 36 §6: exit 2 before the dequeue (the message stays queued),
    naming both numbers; `holon run` refuses before admitting; `debug
    prompt` shows the floor."""
    write_config(tmp_path, "runtime:\n  context_budget_tokens: 1000\n")
    run("enqueue", "hello")
    res = run("turn", "--model", script(tmp_path, ["never"]), "--json")
    assert res.returncode == 2, res.stderr
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "config_error"
    assert "runtime.context_budget_tokens is 1000" in err["message"]
    assert "fixed part" in err["message"] and "nothing was dequeued" in err["message"]
    assert data(run("status", "--json"))["pending"] == 1  # still queued
    res = run("run", "--agent", "main", "--model", script(tmp_path, ["never"]), "one more")
    assert res.returncode == 2 and "nothing was run" in res.stderr
    assert data(run("status", "--json"))["pending"] == 1  # nothing admitted
    d = data(run("debug", "prompt", "--json"))
    assert d["context_budget_tokens"] == 1000 and d["fixed_tokens"] > 1000
    assert f"about {d['fixed_tokens']} tokens" in err["message"]


def test_debug_prompt_shows_working_memory_before_the_work_queue(tmp_path: Path) -> None:
    """After a turn the next prompt carries it whole (the history) and the
    delta after it; once the window rolls (a budget the turns outgrow), the
    working memory, with the fact, leads the conversation, before the history
    and the turn's blocks (issue 44)."""
    run("enqueue", "the deploy window is 02:00-04:00 UTC")
    model = script(tmp_path, ["Noted."] * 3)
    assert run("turn", "--model", model).returncode == 0
    d = data(run("debug", "prompt", "--json"))
    titles = [s["title"] for s in d["sections"]]
    delta = d["sections"][titles.index("memory delta")]
    assert delta["placement"] == "after_history" and "working memory" not in titles
    assert any("02:00-04:00 UTC" in i["text"] for i in d["history"]["items"])
    assert d["cache"]["working_memory_revision"] == 0
    budget = d["tokens"]["fixed"] + 150
    write_config(tmp_path, f"runtime:\n  context_budget_tokens: {budget}\n")
    run("enqueue", "anything else?")
    assert run("turn", "--model", model).returncode == 0
    d = data(run("debug", "prompt", "--json"))
    sections = d["sections"]
    titles = [s["title"] for s in sections]
    assert titles.index("working memory") < titles.index("memory delta")
    wm = sections[titles.index("working memory")]
    assert wm["placement"] == "before_history"
    assert "deploy window is 02:00-04:00 UTC" in wm["text"] and wm["text"].startswith(
        "# Working memory"
    )
    assert d["cache"]["working_memory_revision"] == 2 and d["cache"]["compression_epoch"] >= 1
