"""Open connections cannot stop the turns (issue 31, item 25): serve raises
its soft fd limit, caps connections, closes idle ones and logs a repeated
failure once with a count."""

from __future__ import annotations

import logging
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from holon_cli.serve.server import CAP_MARGIN, RepeatFilter, connection_cap, raise_fd_limit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from serve_helpers import HOLON, scripted_model, serve_addr, stop, wait_for  # noqa: E402


def test_connection_cap_leaves_half_the_descriptors() -> None:
    assert connection_cap(1024) == (1024 - 128) // 2 - CAP_MARGIN
    assert connection_cap(1 << 20) == 1000
    assert connection_cap(100) == 8
    for limit in (256, 1024, 4096):
        assert connection_cap(limit) + CAP_MARGIN <= limit // 2


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
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


@pytest.mark.slow
def test_many_idle_connections_do_not_stop_turns(tmp_path: Path, holon_home: Path) -> None:
    import httpx

    from holon_cli.runtime.agents import open_agent
    from holon_cli.runtime.enqueue import admit

    store = open_agent("main")
    log = tmp_path / "serve.log"
    env = {"HOLON_MODEL": scripted_model(tmp_path), "HOLON_HOME": str(holon_home)}
    with open(log, "ab") as f:
        proc = subprocess.Popen(
            [*HOLON, "serve", "--listen", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL,
            stderr=f,
            env={**__import__("os").environ, **env},
            preexec_fn=_low_fd_limit,  # a hard limit serve cannot raise
        )
    idle: list[socket.socket] = []
    try:
        addr = serve_addr(holon_home)
        host, port = addr.removeprefix("http://").rsplit(":", 1)
        for _ in range(400):  # more than the 256 descriptors serve has
            try:
                idle.append(socket.create_connection((host, int(port)), timeout=5))
            except OSError:
                break
        time.sleep(0.5)
        mids = [admit(f"while flooded {i}", store=store)["id"] for i in range(3)]

        def completed() -> bool:
            done = {
                e.get("message_id")
                for e in store.events.records()
                if e["kind"] == "turn_terminal" and e["data"]["status"] == "completed"
            }
            return set(mids) <= done

        assert wait_for(completed, 30), log.read_text()[-3000:]
        # idle connections are closed after the keep-alive timeout; serve answers again
        assert wait_for(lambda: _healthy(httpx, addr), 20), log.read_text()[-3000:]
        text = log.read_text()
        assert text.count("Traceback") <= 2 and len(text) < 50_000, text[-3000:]
    finally:
        for s in idle:
            s.close()
        stop(proc)


def _healthy(httpx: object, addr: str) -> bool:
    try:
        return httpx.get(addr + "/healthz", timeout=2).status_code == 200  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return False
