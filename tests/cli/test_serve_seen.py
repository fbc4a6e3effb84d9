"""Every serve is seen (issue 36 §5): `holon daemon status` reports a
foreground `holon serve` of the home (`state: foreground`, exit 0, its pid
and socket), so `holon daemon status || holon daemon start` works; `holon
tui` and `daemon status` find a DBOS worker's socket (`run/holon-*.sock`,
`run/w-*.sock`), and `holon tui --socket PATH` picks one. Serve's real HTTP
surface runs in this process (``tui_serve.Surface``) with a real ``Host``'s
runtime status."""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from inprocess_cli import bind_runner as bind_runner  # autouse: run() in-process
from inprocess_cli import run
from tui_serve import Surface, Turner

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.serve.host import Host, ServeOptions
from holon_cli.tools.catalog import default_catalog


def _model(tmp_path: Path) -> str:
    p = tmp_path / "model.yaml"
    p.write_text(yaml.safe_dump({"loop": True, "steps": [{"text": "hello back"}]}))
    return f"scripted:{p}"


def serve_on(path: Path, home_dir: str | None = None) -> Surface:
    """A serve's HTTP surface on ``path``, answering runtime status as a
    real serve of this home does (``home_dir``: pretend another home's)."""
    open_agent(None)
    host = Host(ServeOptions(listen=None, socket_path=str(path)), catalog=default_catalog())
    host.socket_path = str(path)

    def status() -> dict[str, Any]:
        rt = host.runtime_status()
        return rt if home_dir is None else {**rt, "home_dir": home_dir}

    path.parent.mkdir(parents=True, exist_ok=True)
    return Surface(path, status).start()


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home with a short path: worker sockets (``run/holon-<executor
    id>.sock``) must fit AF_UNIX's 108 bytes wherever the temp root is."""
    d = Path(tempfile.mkdtemp(prefix="h"))
    monkeypatch.setenv("HOLON_HOME", str(d / "home"))
    yield d / "home"
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def run_dir(home: Path) -> Path:
    return home / "run"


@pytest.fixture
def fg(run_dir: Path) -> Iterator[Surface]:
    s = serve_on(run_dir / "holon.sock")
    try:
        yield s
    finally:
        s.stop()


def status_json() -> tuple[int, dict[str, Any]]:
    res = run("daemon", "status", "--json")
    data: dict[str, Any] = json.loads(res.stdout)["data"]
    return res.returncode, data


def test_a_foreground_serve_is_reported_and_exit_0(fg: Surface, home: Path) -> None:
    code, d = status_json()
    assert code == 0
    assert d["state"] == "foreground" and d["healthy"] is True
    assert d["pid"] == os.getpid() and d["socket_path"] == str(fg.path)
    assert d["home_dir"] == str(home) and d["activity"] == "idle"
    res = run("daemon", "status")
    assert res.returncode == 0
    assert "state: foreground" in res.stdout and str(fg.path) in res.stdout
    assert "foreground `holon serve`" in res.stderr


def test_daemon_start_beside_a_foreground_serve_names_it(fg: Surface) -> None:
    res = run("daemon", "start", "--listen", "127.0.0.1:0")
    assert res.returncode == 4
    assert f"a foreground `holon serve` (pid {os.getpid()}) already serves this home" in (
        res.stderr
    )
    assert not (fg.path.parent / "daemon.json").exists()


@pytest.mark.slow
def test_a_dbos_worker_socket_is_found(run_dir: Path, tmp_path: Path) -> None:
    for name in ("holon-host-1234.sock", "w-0123456789.sock"):
        worker = serve_on(run_dir / name)
        try:
            code, d = status_json()
            assert code == 0 and d["state"] == "foreground"
            assert d["socket_path"] == str(run_dir / name)
            with Turner(_model(tmp_path)):
                res = run("tui", "--script", stdin=io.StringIO("hi\n/quit\n"))
            assert res.returncode == 0, res.stderr
            assert "hello back" in res.stdout
        finally:
            worker.stop()


def test_tui_socket_picks_one(run_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "s" / "w.sock"
    s = serve_on(elsewhere)
    try:
        res = run("tui", "--script", stdin=io.StringIO("/quit\n"))
        assert res.returncode == 1 and "--socket PATH" in res.stderr  # not a home socket
        with Turner(_model(tmp_path)):
            res = run("tui", "--script", "--socket", str(elsewhere), stdin=io.StringIO("hi\n"))
        assert res.returncode == 0, res.stderr
        assert "hello back" in res.stdout
    finally:
        s.stop()
    res = run("tui", "--script", "--socket", str(elsewhere), stdin=io.StringIO("hi\n"))
    assert res.returncode == 1 and f"nothing answers on {elsewhere}" in res.stderr


def test_a_serve_of_another_home_on_our_socket_is_not_ours(run_dir: Path) -> None:
    s = serve_on(run_dir / "holon-x.sock", home_dir="/somewhere/else")
    try:
        code, d = status_json()
    finally:
        s.stop()
    assert code == 3 and d["state"] == "stopped"


def test_nothing_listening_is_stopped(run_dir: Path) -> None:
    import socket

    run_dir.mkdir(parents=True)
    left = socket.socket(socket.AF_UNIX)
    left.bind(str(run_dir / "holon-gone.sock"))
    left.close()  # a killed worker's socket file: nobody answers
    code, d = status_json()
    assert code == 3 and d["state"] == "stopped"


def test_display_trace_points_to_the_raw_events(fg: Surface) -> None:
    res = run("tui", "--script", stdin=io.StringIO("/display trace\n/quit\n"))
    assert res.returncode == 2
    assert "not a display mode" in res.stderr and "/events" in res.stderr
    res = run("tui", "--script", "--display", "trace", stdin=io.StringIO(""))
    assert res.returncode == 2
    assert "--display 'trace'" in res.stderr and "holon tail" in res.stderr
