"""`holon run --agent A TEXT` reports the outcome of its own message, after
turning what was queued before it; `holon run -` reads TEXT from stdin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.store.layout import HomeLayout


def script(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def test_run_on_a_named_agent_answers_its_own_message(script_runner: Any, tmp_path: Path) -> None:
    script_runner.run(["holon", "enqueue", "older one"], check=True)
    script_runner.run(["holon", "enqueue", "older two"], check=True)
    model = script(tmp_path, [{"text": "to older one"}, {"text": "to older two"}, {"text": "mine"}])
    res = script_runner.run(
        ["holon", "run", "--agent", "main", "--model", model, "--max-turns", "1", "my question"]
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == "mine\n"
    st = q.load(open_agent(None))
    assert st.entries == {} and st.processed == 3  # the older ones were turned first


def test_run_json_names_its_message_and_the_older_turns(script_runner: Any, tmp_path: Path) -> None:
    older = script_runner.run(["holon", "enqueue", "older"], check=True).stdout.strip()
    model = script(tmp_path, [{"text": "to older"}, {"text": "to mine"}])
    res = script_runner.run(["holon", "run", "-a", "main", "-m", model, "mine", "--json"])
    d = json.loads(res.stdout)["data"]
    assert res.returncode == 0 and d["final_status"] == "completed"
    assert d["final_text"] == "to mine" and d["message_id"] != older
    assert d["turns"] == 1 and d["older_turns"] == 1


def test_run_prints_its_own_outcome_past_an_older_background_message(
    script_runner: Any, tmp_path: Path
) -> None:
    """Issue 36 §7: an older normal and an older *background* message are
    queued; the run's own message (normal) is turned before the background
    one, and the run prints its own answer, never the background one's."""
    script_runner.run(["holon", "enqueue", "older normal"], check=True)
    bg = script_runner.run(
        ["holon", "enqueue", "older background", "--priority", "background"], check=True
    ).stdout.strip()
    model = script(
        tmp_path, [{"text": "to older normal"}, {"text": "mine"}, {"text": "to background"}]
    )
    res = script_runner.run(
        ["holon", "run", "--agent", "main", "--model", model, "my question", "--json"]
    )
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)["data"]
    assert d["final_text"] == d["raw_final_text"] == "mine"
    assert d["turns"] == 1 and d["older_turns"] == 1
    # an older message the run did not need to pass stays queued for the agent
    st = q.load(open_agent(None))
    assert list(st.entries) == [bg]


def test_a_failing_older_message_does_not_end_the_run(script_runner: Any, tmp_path: Path) -> None:
    script_runner.run(["holon", "enqueue", "older"], check=True)
    model = script(
        tmp_path, [{"fail": {"kind": "client_error", "status": 400}}, {"text": "mine is fine"}]
    )
    res = script_runner.run(["holon", "run", "--agent", "main", "--model", model, "mine"])
    assert res.returncode == 0, res.stderr
    assert res.stdout == "mine is fine\n"


def test_run_dash_reads_the_text_from_stdin(script_runner: Any, tmp_path: Path) -> None:
    model = script(tmp_path, [{"text": "read it"}])
    res = script_runner.run(
        ["holon", "run", "--agent", "main", "--create-agent", "-m", model, "--json", "-"],
        stdin=__import__("io").StringIO("the question from stdin\n"),
    )
    assert res.returncode == 0, res.stderr
    from holon_cli.runtime.idempotency import find_envelope

    env = find_envelope(open_agent(None), json.loads(res.stdout)["data"]["message_id"])
    assert env is not None and env["body"]["text"] == "the question from stdin\n"


@pytest.mark.script_launch_mode("subprocess")
@pytest.mark.parametrize("data", [b"\xff\xfe not utf-8", b"caf\xe9", b"\x7fELF\x02\x00\x00"])
def test_run_dash_refuses_non_utf8_stdin(script_runner: Any, tmp_path: Path, data: bytes) -> None:
    import subprocess
    import sys

    model = script(tmp_path, [{"text": "never"}])
    res = subprocess.run(
        [sys.executable, "-m", "holon_cli", "run", "--model", model, "-"],
        input=data,
        capture_output=True,
    )
    assert res.returncode == 2, res.stderr
    assert b"not valid UTF-8" in res.stderr or b"binary data" in res.stderr
    assert b"Traceback" not in res.stderr
    agents = HomeLayout.current().agents_dir
    assert not agents.exists() or not any(p.name.startswith("run-") for p in agents.iterdir())


def test_run_dash_refuses_empty_stdin(script_runner: Any, tmp_path: Path) -> None:
    import io

    model = script(tmp_path, [{"text": "never"}])
    res = script_runner.run(["holon", "run", "--model", model, "-"], stdin=io.StringIO(""))
    assert res.returncode == 2 and "empty" in res.stderr


def test_run_help_documents_dash(script_runner: Any) -> None:
    res = script_runner.run(["holon", "run", "--help"])
    assert "TEXT|-" in res.stdout and "stdin" in res.stdout
