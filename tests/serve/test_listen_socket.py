"""`holon serve --socket PATH` (issue 31, item 30): only a stale socket at
PATH is removed; a regular file, a folder, a symlink or a live socket is
refused (exit 4) and left as it was."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from holon_cli.errors import RejectedError
from holon_cli.serve.http.listen import bind_unix


def test_regular_file_is_refused_and_kept(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("precious")
    with pytest.raises(RejectedError) as info:
        bind_unix(str(f))
    assert "not a socket" in info.value.message and "does not delete" in info.value.message
    assert f.read_text() == "precious"


def test_folder_and_symlink_are_refused(tmp_path: Path) -> None:
    d = tmp_path / "dir"
    d.mkdir()
    with pytest.raises(RejectedError, match="a folder"):
        bind_unix(str(d))
    target = tmp_path / "target"
    target.write_text("x")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(RejectedError):
        bind_unix(str(link))
    assert link.is_symlink() and target.read_text() == "x"


def test_stale_socket_is_replaced_live_one_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)
    dead.close()  # bound, never listening: what a killed serve leaves
    sock = bind_unix(path)
    try:
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        with pytest.raises(RejectedError, match="live process"):
            bind_unix(path)
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        sock.close()


def test_too_long_path_hint(tmp_path: Path) -> None:
    with pytest.raises(RejectedError) as info:
        bind_unix(str(tmp_path / ("x" * 120)))
    assert "shorter --socket" in (info.value.hint or "")


def test_serve_socket_on_a_regular_file_exits_4(tmp_path: Path, holon_home: Path) -> None:
    f = tmp_path / "f"
    f.write_text("keep me")
    out = subprocess.run(
        [sys.executable, "-m", "holon_cli", "serve", "--socket", str(f), "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 4, out.stderr
    assert "not a socket" in out.stderr and "Traceback" not in out.stderr
    assert f.read_text() == "keep me"


def test_tcp_listener_gives_nodelay_connections() -> None:
    """issue 31, item 28: accepted connections have TCP_NODELAY, and their
    proto is TCP (asyncio sets TCP_NODELAY itself only then)."""
    from holon_cli.serve.http.listen import bind_tcp

    listener = bind_tcp("127.0.0.1", 0)
    client = socket.create_connection(listener.getsockname()[:2])
    conn, _ = listener.accept()
    try:
        assert conn.proto == socket.IPPROTO_TCP
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        for s in (conn, client, listener):
            s.close()


@pytest.mark.slow
def test_keepalive_tcp_requests_are_not_delayed(tmp_path: Path, holon_home: Path) -> None:
    """A kept-alive TCP request to a real serve took 44 ms (Nagle + delayed ACK)."""
    import statistics
    import time

    import httpx2 as httpx

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
    from serve_helpers import serve_addr, start_serve, stop

    proc = start_serve(tmp_path)
    try:
        with httpx.Client(base_url=serve_addr(holon_home), timeout=10) as c:
            c.get("/healthz")
            lat = []
            for _ in range(30):
                t0 = time.perf_counter()
                assert c.get("/healthz").status_code == 200
                lat.append((time.perf_counter() - t0) * 1000)
        assert statistics.median(lat) < 25, sorted(lat)
    finally:
        stop(proc)
