"""Escape sequences from external content never reach the terminal (issue 8
item 6): every human-readable view shows control characters as visible
symbols; ``--json`` output keeps the exact text."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

EVIL = "A\033[2JB\033]0;evil\007C"
SHOWN = "A␛[2JB␛]0;evil␇C"


def holon(script_runner: Any, *args: str, stdin: str | None = None) -> Any:
    res = script_runner.run(["holon", *args], stdin=io.StringIO(stdin or ""), print_result=False)
    assert res.returncode == 0, res.stderr
    return res


def raw_controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


@pytest.fixture
def evil_history(script_runner: Any, tmp_path: Path) -> None:
    """`printf 'A\\033[2JB\\033]0;evil\\007C' | holon enqueue - --origin channel:x`,
    then one turn whose model repeats the text and a tool prints it."""
    model = tmp_path / "s.yaml"
    model.write_text(
        yaml.safe_dump(
            {
                "steps": [
                    {
                        "text": "echoing",
                        "tool_calls": [
                            {
                                "name": "ExecCommand",
                                "arguments": {"cmd": "printf 'x\\033[31mred\\007\\n'"},
                            }
                        ],
                    },
                    {"text": f"you said {EVIL}"},
                ]
            }
        )
    )
    holon(script_runner, "enqueue", "-", "--origin", "channel:x", stdin=EVIL)
    res = holon(script_runner, "turn", "--model", f"scripted:{model}")
    assert raw_controls(res.stdout) == [] and "you said " + SHOWN in res.stdout


def test_visible_keeps_text_and_shows_controls() -> None:
    from holon_cli.cli.output import visible

    assert visible(EVIL) == SHOWN
    assert visible("line\n\ttab") == "line\n\ttab"
    assert visible("\x9b2J\x7f\u202eabc") == "\\x9b2J␡\\u202eabc"
    assert visible("ünïcødé ✓") == "ünïcødé ✓"


def test_transcript_shows_controls_visibly(script_runner: Any, evil_history: None) -> None:
    out = holon(script_runner, "transcript").stdout
    assert raw_controls(out) == []
    # ExecCommand's result is JSON, which escapes the controls itself
    assert SHOWN in out and ("x␛[31mred␇" in out or "x\\u001b[31mred\\u0007" in out)


def test_tail_shows_controls_visibly(script_runner: Any, evil_history: None) -> None:
    out = holon(script_runner, "tail", "-n", "100").stdout
    assert raw_controls(out) == []


def test_json_output_stays_exact(script_runner: Any, evil_history: None) -> None:
    entries = json.loads(holon(script_runner, "transcript", "--json").stdout)["data"]["entries"]
    msg = next(e for e in entries if e["kind"] == "message")
    assert msg["text"] == EVIL
    jsonl = holon(script_runner, "tail", "--jsonl").stdout
    assert (
        any(EVIL in json.dumps(json.loads(line), ensure_ascii=False) for line in jsonl.splitlines())
        or "\\u001b" in jsonl
    )


def test_status_workitem_and_debug_prompt_show_controls_visibly(
    script_runner: Any, evil_history: None
) -> None:
    holon(script_runner, "workitem", "create", f"fix {EVIL}", "--todo", f"todo {EVIL}")
    wid = json.loads(holon(script_runner, "workitem", "list", "--json").stdout)["data"][
        "work_items"
    ][0]["id"]
    for args in (
        ("status",),
        ("workitem", "list"),
        ("workitem", "show", wid),
        ("debug", "prompt", "--full"),
        ("debug", "prompt", "--full", "--message", EVIL),
    ):
        out = holon(script_runner, *args).stdout
        assert raw_controls(out) == [], args
    show = holon(script_runner, "workitem", "show", wid).stdout
    assert f"fix {SHOWN}" in show and f"todo {SHOWN}" in show


def test_error_messages_show_controls_visibly(script_runner: Any) -> None:
    res = script_runner.run(
        ["holon", "enqueue", "hi", "--origin", f"bogus{EVIL}"], print_result=False
    )
    assert res.returncode == 2 and raw_controls(res.stderr) == []
