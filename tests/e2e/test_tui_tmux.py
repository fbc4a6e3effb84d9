"""``holon tui`` in a real terminal (tmux: ``send-keys``, ``capture-pane``)
against a running daemon whose model is the loopback OpenAI Responses
server: type a prompt, see the reply, open and close an overlay, quit; the
daemon is still running afterwards. The captured screen is checked for the
console's layout. Everything started here is stopped by its own handle."""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback import LoopbackServer, Reply
from serve_helpers import HOLON

pytest.importorskip("textual", reason="textual (the tui extra) is not installed")
if shutil.which("tmux") is None:
    pytest.skip("tmux is not installed", allow_module_level=True)

REPLY = "pong from the loopback model"


def _reply(fixtures_dir: Path) -> Reply:
    rec = json.loads((fixtures_dir / "openai_responses" / "text_nonstream.json").read_text())
    body = copy.deepcopy(rec["response"]["body"])
    (msg,) = [o for o in body["output"] if o["type"] == "message"]
    msg["content"][0]["text"] = REPLY
    return Reply.json_body(body)


def _holon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOLON, *args], capture_output=True, text=True, timeout=60)


class Tmux:
    """One private tmux server (its own socket), killed at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.base = ["tmux", "-S", str(tmp_path / "tmux.sock")]

    def __call__(self, *args: str) -> str:
        res = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=10)
        return res.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "tui")

    def wait(self, needle: str, timeout: float = 20.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.screen()
            if needle in text:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} not on the screen:\n{self.screen()}")

    def gone(self, needle: str, timeout: float = 10.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.screen()
            if needle not in text:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} still on the screen:\n{self.screen()}")

    def keys(self, *keys: str, literal: bool = False) -> None:
        for k in keys:  # one at a time: a burst would arrive as a paste
            self("send-keys", "-t", "tui", *(["-l"] if literal else []), k)
            time.sleep(0.15)


@pytest.fixture
def daemon(
    holon_home: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LoopbackServer]:
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    with LoopbackServer() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        monkeypatch.setenv("HOLON_MODEL", "openai/gpt-test")
        srv.queue(*(_reply(fixtures_dir) for _ in range(3)))
        assert _holon("agent", "create", "main").returncode == 0
        started = _holon("daemon", "start", "--listen", "127.0.0.1:0", "--json")
        assert started.returncode == 0, started.stderr
        pid = json.loads(started.stdout)["data"]["pid"]
        try:
            yield srv
        finally:
            _holon("daemon", "stop")
            try:
                os.kill(pid, signal.SIGKILL)  # only if the stop above did not end it
            except ProcessLookupError:
                pass


@pytest.mark.slow
def test_console_in_a_real_terminal(
    daemon: LoopbackServer, holon_home: Path, tmp_path: Path
) -> None:
    tmux = Tmux(tmp_path)
    cmd = f"{sys.executable} -m holon_cli tui; echo TUI-EXIT=$?; sleep 30"
    env = [f"HOLON_HOME={holon_home}", "TERM=xterm-256color", "LANG=C.UTF-8"]
    tmux("new-session", "-d", "-s", "tui", "-x", "100", "-y", "30", "env", *env, "sh", "-c", cmd)
    try:
        tmux.wait("connected")
        # the state line is a read of its own, after the history: "connected"
        # comes first, the line a moment later (right after it, on a loaded
        # machine, it still showed its placeholders)
        screen = tmux.wait("workspace agent home")
        for element in ("agent main", "projection", "press Enter"):
            assert element in screen, screen  # the layout: agent bar, state line, composer
        tmux.keys("hello from tmux", literal=True)
        tmux.keys("Enter")
        screen = tmux.wait(f"Result: {REPLY}")
        assert "Operator: hello from tmux" in screen
        assert len(daemon.requests) == 1  # the daemon's turn asked the loopback model
        tmux.keys("F2")
        screen = tmux.wait("Esc closes")
        assert "* main" in screen  # the agents overlay
        tmux.keys("Escape")
        tmux.gone("Esc closes")
        tmux.keys("C-q")
        tmux.wait("TUI-EXIT=0")
    finally:
        tmux("kill-server")
    status = _holon("daemon", "status")
    assert status.returncode == 0, status.stdout + status.stderr  # closing it stopped nothing


@pytest.mark.slow
def test_no_alt_screen_leaves_the_conversation_in_the_scrollback(
    daemon: LoopbackServer, holon_home: Path, tmp_path: Path
) -> None:
    tmux = Tmux(tmp_path)
    tui = f"{sys.executable} -m holon_cli tui --no-alt-screen"
    cmd = f"echo BEFORE; {tui}; echo TUI-EXIT=$?; sleep 30"
    env = [f"HOLON_HOME={holon_home}", "TERM=xterm-256color", "LANG=C.UTF-8"]
    tmux("new-session", "-d", "-s", "tui", "-x", "100", "-y", "40", "env", *env, "sh", "-c", cmd)
    try:
        tmux.wait("connected")
        tmux.keys("inline hello", literal=True)
        tmux.keys("Enter")
        tmux.wait(f"Result: {REPLY}")
        tmux.keys("C-q")
        screen = tmux.wait("TUI-EXIT=0")
    finally:
        tmux("kill-server")
    # drawn below the shell's output, and still there after the console left
    assert screen.index("BEFORE") < screen.index("Operator: inline hello")
    assert screen.index(f"Result: {REPLY}") < screen.index("TUI-EXIT=0")
