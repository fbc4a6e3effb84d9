"""`holon enqueue --json-body` takes standard JSON only (issue 31, item 15):
NaN, Infinity, lone surrogates, deep nesting and huge integers are a usage
error (exit 2) with no traceback, and nothing reaches the inbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inprocess_cli import bind_runner, run  # noqa: F401 - bind_runner is an autouse fixture

from holon_cli.runtime.agents.lifecycle import open_agent


@pytest.mark.parametrize(
    "body",
    ["NaN", '{"x": Infinity}', "[-Infinity]", '{"a": "\\ud800"}', "[" * 5000, "9" * 5000],
)
def test_non_standard_json_body_is_refused(holon_home: Path, body: str) -> None:
    open_agent("main")
    res = run("enqueue", "--json-body", body)
    assert res.returncode == 2, res.stderr
    assert "not valid JSON" in res.stderr and "Traceback" not in res.stderr
    res = run("enqueue", "--json-body", "--json", body)
    assert res.returncode == 2
    assert json.loads(res.stdout)["error"]["kind"] == "usage_error"
    store = open_agent("main", create_default=False)
    assert store.inbox.pending_count() == 0 and store.ledger("queue").records() == []
    check = run("home", "check")
    assert check.returncode == 0, check.stdout


def test_standard_json_body_is_admitted(holon_home: Path) -> None:
    res = run("enqueue", "--json-body", '{"n": 1.5, "s": "\\ud83d\\ude00"}', "--json")
    assert res.returncode == 0, res.stderr
    body = json.loads(res.stdout)["data"]["body"]
    assert body == {"type": "json", "value": {"n": 1.5, "s": "\U0001f600"}}


def test_trigger_show_with_non_utf8_token_file(holon_home: Path) -> None:
    """A damaged token file is like a stale one: re-minted, no traceback."""
    assert run("trigger", "show").returncode == 0
    store = open_agent("main", create_default=False)
    token_file = store.layout.runtime / "secrets" / "trigger_token"
    assert token_file.exists()
    token_file.write_bytes(b"\xff\xfe\x80 not utf-8")
    res = run("trigger", "show", "--json")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    url = json.loads(res.stdout)["data"]["trigger_url"]
    assert url and url.rsplit("/", 1)[-1] in token_file.read_text()


def test_home_check_with_50_mb_of_brackets_in_the_inbox(holon_home: Path) -> None:
    store = open_agent("main")
    store.inbox.ensure()
    bad = store.inbox.new / "msg_bad.json"
    bad.write_bytes(b"[" * 50_000_000)
    res = run("home", "check")
    assert res.returncode != 0 and "Traceback" not in res.stderr + res.stdout
    assert "nested too deeply" in res.stdout + res.stderr
    res = run("tick")  # ingest sets it aside instead of failing
    assert "Traceback" not in res.stderr + res.stdout
