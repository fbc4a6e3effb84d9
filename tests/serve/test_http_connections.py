"""Open connections cannot stop the turns (issue 31, item 25): serve raises
its soft fd limit, caps connections, closes idle ones and logs a repeated
failure once with a count."""

from __future__ import annotations

import logging
import os
import resource
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from holon_cli.serve.http.server import (
    ACCEPT_BACKLOG,
    CAP_MARGIN,
    RepeatFilter,
    connection_cap,
    raise_fd_limit,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from serve_helpers import HOLON, scripted_model, serve_addr, stop, wait_for  # noqa: E402


def test_connection_cap_leaves_half_the_descriptors() -> None:
    assert connection_cap(1024) == (1024 - 128 - 2 * ACCEPT_BACKLOG) // 2 - CAP_MARGIN
    assert connection_cap(1 << 20) == 1000
    assert connection_cap(1 << 20, 2) == 1000
    assert connection_cap(1024, 2) == connection_cap(1024) // 2
    assert connection_cap(100) == 8
    for limit in (1024, 4096, 65536):
        # what HTTP can hold at worst: the cap, its margin, two accept batches
        in_flight = connection_cap(limit) + CAP_MARGIN + 2 * ACCEPT_BACKLOG
        # the rest of the process has at least as many, plus the reserve
        assert limit - in_flight >= connection_cap(limit) + 128


def test_raise_fd_limit_goes_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
        got = raise_fd_limit()
        assert got == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert got == (hard if hard != resource.RLIM_INFINITY else got) and got >= 256
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_repeat_filter_logs_once_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("holon-test-repeats")
    f = RepeatFilter()
    logger.addFilter(f)
    try:
        with caplog.at_level(logging.WARNING, logger=logger.name):
            for _ in range(500):
                try:
                    raise OSError(24, "Too many open files")
                except OSError:
                    logger.error("socket.accept() out of system resource", exc_info=True)
            logger.error("something else")
            for _ in range(3):
                logger.error("third")
            f.last -= 10  # the repeats stopped a while ago
            f.flush(logger)
    finally:
        logger.removeFilter(f)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4, messages
    assert messages[0] == "socket.accept() out of system resource"
    assert "repeated 499 more times" in messages[1] and messages[1].endswith("something else")
    assert messages[2] == "third" and "repeated 2 more times" in messages[3]
    assert sum(1 for r in caplog.records if r.exc_info) == 1


def _low_fd_limit() -> None:
    # the machine: 1,024 descriptors, and a hard limit serve cannot raise
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


@pytest.mark.slow
def test_many_idle_connections_do_not_stop_turns(tmp_path: Path, holon_home: Path) -> None:
    import httpx2 as httpx

    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit

    store = open_agent("main")
    log = tmp_path / "serve.log"
    env = {"HOLON_MODEL": scripted_model(tmp_path), "HOLON_HOME": str(holon_home)}
    with open(log, "ab") as f:
        proc = subprocess.Popen(
            [*HOLON, "serve", "--listen", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL,
            stderr=f,
            env={**os.environ, **env},
            preexec_fn=_low_fd_limit,
        )
    stop_flood = threading.Event()
    try:
        addr = serve_addr(holon_home)
        host, port = addr.removeprefix("http://").rsplit(":", 1)
        flood = threading.Thread(target=_flood, args=(host, int(port), stop_flood), daemon=True)
        flood.start()

        def fds() -> int:
            return len(os.listdir(f"/proc/{proc.pid}/fd"))

        peak = [0]

        def at_cap() -> bool:  # serve holds idle connections up to its cap
            peak[0] = max(peak[0], fds())
            return peak[0] >= 250

        assert wait_for(at_cap, 20), peak
        mids = [admit(f"while flooded {i}", store=store)["id"] for i in range(3)]

        def completed() -> bool:
            peak[0] = max(peak[0], fds())
            done = {
                e.get("message_id")
                for e in store.events.records()
                if e["kind"] == "turn_terminal" and e["data"]["status"] == "completed"
            }
            return set(mids) <= done

        assert wait_for(completed, 30), log.read_text()[-3000:]
        assert peak[0] < 1000, peak  # the cap held: descriptors are left for turns
        stop_flood.set()
        flood.join()
        # idle connections are closed after the keep-alive timeout; serve answers again
        assert wait_for(lambda: _healthy(httpx, addr), 20), log.read_text()[-3000:]
        text = log.read_text()
        assert text.count("Traceback") <= 2 and len(text) < 50_000, text[-3000:]
    finally:
        stop_flood.set()
        stop(proc)


def _flood(host: str, port: int, stop_flood: threading.Event, live: int = 1100) -> None:
    """Hold ``live`` idle connections (never a request), replacing each one
    serve closes or resets, until told to stop."""
    import selectors

    sel = selectors.DefaultSelector()

    def open_one() -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)  # the kernel completes it as serve accepts
        s.connect_ex((host, port))
        sel.register(s, selectors.EVENT_READ)

    for _ in range(live):
        open_one()
    while not stop_flood.is_set():
        for key, _ev in sel.select(timeout=0.05):  # readable: closed or reset by serve
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            sel.unregister(sock)
            sock.close()
            open_one()
    for key in list(sel.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]
    sel.close()


def _healthy(httpx: object, addr: str) -> bool:
    try:
        return httpx.get(addr + "/healthz", timeout=2).status_code == 200  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return False


def test_serve_log_line_writes_a_repeated_message_once(capsys: pytest.CaptureFixture[str]) -> None:
    from holon_cli.serve.host import log_line

    for _ in range(200):
        log_line("main: error: Too many open files")
    log_line("main: turn t1 completed")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3, err
    assert err[0].endswith("serve: main: error: Too many open files")
    assert err[1].endswith("(the line before was repeated 199 more times)")
    assert err[2].endswith("serve: main: turn t1 completed")
