"""``holon tui --script`` and the checks every ``holon tui`` makes first,
against serve's real HTTP surface on ``run/holon.sock`` (in this process,
``tui_serve.Surface``) with the scripted model answering."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
import yaml
from inprocess_cli import bind_runner, run  # noqa: F401
from tui_serve import Surface, Turner

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent


def _model(tmp_path: Path, *texts: str) -> str:
    script = tmp_path / "model.yaml"
    steps = [{"text": t} for t in texts or ("hello back",)]
    script.write_text(yaml.safe_dump({"loop": True, "steps": steps}))
    return f"scripted:{script}"


@pytest.fixture
def surface(holon_home: Path) -> Iterator[Surface]:
    open_agent(None)  # serve creates the default agent on a fresh home
    s = Surface().start()
    try:
        yield s
    finally:
        s.stop()


def private_child(agent_id: str, parent: str = "main") -> None:
    create_agent(
        agent_id,
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id=parent,
    )


def _script(text: str, *args: str) -> tuple[int, str, str]:
    res = run("tui", "--script", *args, stdin=io.StringIO(text))
    return res.returncode, res.stdout, res.stderr


def _operator_messages(agent: str = "main") -> list[str]:
    store = open_agent(agent, create_default=False)
    return [
        e["data"]["text_preview"]
        for e in store.events.records()
        if e["kind"] == "message_admitted" and e.get("authority_class") == "operator_instruction"
    ]


def test_no_serve_is_exit_1_with_the_daemon_hint(holon_home: Path) -> None:
    for args in (("tui",), ("tui", "--script")):
        res = run(*args, stdin=io.StringIO("hello\n"))
        assert res.returncode == 1, res.stderr
        assert "no serve is running" in res.stderr and "holon daemon start" in res.stderr
    assert not (holon_home / "agents").exists() or _operator_messages() == []


def test_a_stale_socket_file_is_no_serve(holon_home: Path) -> None:
    run_dir = holon_home / "run"
    run_dir.mkdir(parents=True)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(run_dir / "holon.sock"))
    s.close()  # the file stays, nobody listens (a serve killed with -9)
    res = run("tui", "--script", stdin=io.StringIO(""))
    assert res.returncode == 1 and "holon daemon start" in res.stderr


def test_a_bad_display_mode_is_a_usage_error(holon_home: Path) -> None:
    res = run("tui", "--display", "loud")
    assert res.returncode == 2
    assert "unknown display mode 'loud'" in res.stderr


def test_interactive_without_textual_says_how_to_install_it(
    holon_home: Path, surface: Surface, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "textual" else real(name, *a)
    )
    res = run("tui")
    assert res.returncode == 1
    assert "pip install 'holon-cli[tui]'" in res.stderr


def test_interactive_unknown_or_private_agent_is_exit_3(holon_home: Path, surface: Surface) -> None:
    private_child("kid")
    for agent in ("nobody", "kid"):
        res = run("tui", "--agent", agent)
        assert res.returncode == 3, res.stderr
        assert f"unknown agent '{agent}'" in res.stderr


def test_interactive_needs_a_terminal(holon_home: Path, surface: Surface) -> None:
    res = run("tui", stdin=io.StringIO(""))
    assert res.returncode == 2 and "--script" in res.stderr


def test_script_prints_the_presented_conversation_reply_included(
    holon_home: Path, surface: Surface, tmp_path: Path
) -> None:
    with Turner(_model(tmp_path, "hello back")) as turner:
        code, out, err = _script("hi there\n/display verbose\nand again\n/quit\nnever sent\n")
    assert turner.errors == []
    assert code == 0, err
    assert out.splitlines() == [
        "Operator: hi there",
        "Result: hello back",
        "Operator: and again",
        "Assistant: Assistant progress: hello back",  # verbose adds progress rows
        "Result: hello back",
    ]
    assert _operator_messages() == ["hi there", "and again"]  # /quit stopped the rest
    store = open_agent(None)
    surfaces = {
        e.get("delivery_surface") for e in store.events.records() if e["kind"] == "message_admitted"
    }
    assert surfaces == {"http_control_prompt"}


def test_script_bad_lines_are_reported_and_skipped(
    holon_home: Path, surface: Surface, tmp_path: Path
) -> None:
    private_child("kid")
    text = "/bogus\n/agent nobody\n/agent kid\n/display 7\nstill main\n"
    with Turner(_model(tmp_path, "ok")):
        code, out, err = _script(text)
    assert "unknown command '/bogus'" in err and "/display, /agent, /quit" in err
    assert "unknown agent 'nobody'" in err
    assert "unknown agent 'kid'" in err  # a private child is not reachable here
    assert "unknown display mode '7'" in err
    assert out.splitlines() == ["Operator: still main", "Result: ok"]
    assert code == 2  # the worst: a usage error
    assert _operator_messages() == ["still main"]  # nothing else admitted, nothing lost


def test_script_switches_agent(holon_home: Path, surface: Surface, tmp_path: Path) -> None:
    create_agent("helper", kind="named")
    with Turner(_model(tmp_path, "from helper"), agents=("main", "helper")):
        code, out, _ = _script("/agent helper\nwho are you\n")
    assert code == 0
    assert out.splitlines() == ["Operator: who are you", "Result: from helper"]
    assert _operator_messages("helper") == ["who are you"] and _operator_messages() == []


def test_script_control_characters_are_shown_not_executed(
    holon_home: Path, surface: Surface, tmp_path: Path
) -> None:
    with Turner(_model(tmp_path, "bell\x07 and \x1b[2J clear")):
        code, out, _ = _script("red \x1b[31mtext\n")
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out
    assert "Operator: red ␛[31mtext" in out and "Result: bell␇ and ␛[2J clear" in out


def test_script_times_out_with_the_message_still_queued(holon_home: Path, surface: Surface) -> None:
    code, _, err = _script("nobody answers\n", "--timeout", "0.2")  # no turner: nothing runs
    assert code == 1
    assert "was not settled within 0.2 s" in err and "holon tail --presented" in err
    store = open_agent(None)
    assert q.pending_count(store) == 1  # admitted and still queued: nothing lost


def test_http_aliases_are_the_default_agents_routes(
    holon_home: Path, surface: Surface, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_agent("other", kind="named")
    monkeypatch.setenv("HOLON_AGENT_ID", "other")
    transport = httpx.HTTPTransport(uds=str(surface.path))
    with httpx.Client(transport=transport, base_url="http://x") as c:
        status = c.get("/status").json()
        assert status["agent_id"] == "other"
        assert status == c.get("/agents/other/status").json()
        assert c.get("/state").json()["agent"]["agent_id"] == "other"
        page = c.get("/events", params={"limit": 1}).json()
        assert [e["kind"] for e in page["events"]] == ["agent_created"]
        assert page["events"][0]["agent_id"] == "other"
        assert c.get("/events", params={"after": "x"}).status_code == 400
        with c.stream("GET", "/events", headers={"Accept": "text/event-stream"}) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if line.startswith("data:"):
                    assert json.loads(line[5:])["kind"] == "agent_created"
                    break
            surface.stopping.set()
        assert c.post("/status").status_code == 405


BLOCK_TEXTUAL = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "textual" or name.startswith("textual."):
            raise ImportError("textual is not installed (blocked by the test)")
sys.meta_path.insert(0, Block())
from holon_cli.cli import main
main(sys.argv[1:])
"""


def test_script_runs_on_the_base_install_without_textual(
    holon_home: Path, surface: Surface, tmp_path: Path
) -> None:
    import subprocess
    import sys

    with Turner(_model(tmp_path, "no textual needed")):
        res = subprocess.run(
            [sys.executable, "-c", BLOCK_TEXTUAL, "tui", "--script"],
            input="hello\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["Operator: hello", "Result: no textual needed"]
