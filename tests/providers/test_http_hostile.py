"""Hostile and broken servers, as a user meets them through the one door
(``http_common.post_json`` / ``post_stream`` over httpx2): every framing
error, stall, flood or oversized answer becomes a classified
``ProviderFailure``, never a traceback, a hang or unbounded memory.

The servers are raw sockets on 127.0.0.1 (``http_servers.ScriptedServer``),
so a test writes every byte of the answer and counts the connections.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from http_servers import Peer, ScriptedServer, response

from holon_cli.providers import http_common, http_session
from holon_cli.providers.base import ProviderFailure
from holon_cli.providers.http_common import HttpTarget, post_json, post_stream
from holon_cli.providers.sse import SSEEvent

MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def _fresh_client() -> Iterator[None]:
    """Each test starts without pooled connections from another test's server."""
    http_session.reset()
    yield
    http_session.reset()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Peer], None]], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(handler: Callable[[Peer], None]) -> ScriptedServer:
        srv = ScriptedServer(handler)
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.close()


def target(srv: ScriptedServer, **kw: Any) -> HttpTarget:
    kw.setdefault("timeout_s", 5.0)
    return HttpTarget(provider="p", model_ref="p/m", url=f"{srv.url}/v1/x", **kw)


def fail_json(srv: ScriptedServer, **kw: Any) -> ProviderFailure:
    with pytest.raises(ProviderFailure) as ei:
        post_json(target(srv, **kw), {"q": 1}, lambda obj: obj)
    return ei.value


def collect(events: Any) -> Any:
    return [(e.event, e.data) for e in events]


def fail_stream(srv: ScriptedServer, **kw: Any) -> ProviderFailure:
    with pytest.raises(ProviderFailure) as ei:
        post_stream(target(srv, **kw), {"q": 1}, collect)
    return ei.value


def answer_every(body: bytes = b'{"ok": 1}', **headers: str) -> Callable[[Peer], None]:
    def handler(peer: Peer) -> None:
        while peer.read_request() is not None:
            peer.send(response(body, headers={"content-type": "application/json", **headers}))

    return handler


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


# ------------------------------------------------------------- framing


@pytest.mark.parametrize(
    ("raw", "stage"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"ok\"", "body"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{\"ok\"", "body"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", "body"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\nhello", "request"),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", "request"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "request"),
        (b"HTTP/1.1 200 OK\r\nbad header line\r\n\r\n", "request"),
        (b"", "request"),  # the connection closes without an answer
    ],
    ids=["short-length", "short-chunked", "bad-chunk-size", "two-lengths", "bad-status",
         "not-http", "bad-header", "no-answer"],
)  # fmt: skip
def test_framing_errors_are_classified_connection_failures(
    serve: Any, raw: bytes, stage: str
) -> None:
    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(raw)

    srv = serve(handler)
    f = fail_json(srv)
    assert f.kind == "connection" and f.retryable and f.stage == stage
    assert f.url == f"{srv.url}/v1/x" and f.source_chain
    assert srv.accepted == 1  # a fresh connection that failed is not tried again


def test_corrupt_gzip_body_is_a_classified_failure(serve: Any) -> None:
    srv = serve(answer_every(b"\x1f\x8b\x08\x00garbage-not-gzip", **{"content-encoding": "gzip"}))
    f = fail_json(srv)
    assert f.kind == "connection" and f.stage == "body"


def test_interim_1xx_answers_are_skipped(serve: Any) -> None:
    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n")
        peer.send(response(b'{"ok": 2}'))

    assert post_json(target(serve(handler)), {}, lambda obj: obj) == {"ok": 2}


def test_a_body_of_gzip_and_deflate_is_decoded(serve: Any) -> None:
    srv = serve(answer_every(gzip.compress(b'{"ok": "gz"}'), **{"content-encoding": "gzip"}))
    assert post_json(target(srv), {}, lambda obj: obj) == {"ok": "gz"}
    assert srv.requests[0].headers["accept-encoding"] == "gzip, deflate"


# ----------------------------------------------------- reused connections


def drop_second_request(how: str) -> Callable[[Peer], None]:
    """Connection 0 answers one request, then takes the next and goes away
    without a word (a server's idle timeout racing the client's reuse);
    later connections answer everything."""

    def handler(peer: Peer) -> None:
        if peer.index == 0:
            peer.read_request()
            peer.send(response(b'{"n": 1}'))
            peer.read_request()
            peer.reset() if how == "reset" else peer.close()
            return
        answer_every(b'{"n": 2}')(peer)

    return handler


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_reused_connection_that_never_answers_is_sent_once_more(serve: Any, how: str) -> None:
    srv = serve(drop_second_request(how))
    t = target(srv)
    assert post_json(t, {}, lambda obj: obj) == {"n": 1}
    assert post_json(t, {}, lambda obj: obj) == {"n": 2}
    assert srv.accepted == 2 and len(srv.requests) == 3


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_fresh_connection_that_never_answers_is_not_sent_again(serve: Any, how: str) -> None:
    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.reset() if how == "reset" else peer.close()

    srv = serve(handler)
    f = fail_json(srv)
    assert f.kind == "connection" and srv.accepted == 1 and len(srv.requests) == 1


def test_a_reused_connection_answering_garbage_is_not_sent_again(serve: Any) -> None:
    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(response(b'{"n": 1}'))
        peer.read_request()
        peer.send(b"garbage\r\n\r\n")

    srv = serve(handler)
    assert post_json(target(srv), {}, lambda obj: obj) == {"n": 1}
    f = fail_json(srv)
    assert f.kind == "connection" and srv.accepted == 1 and len(srv.requests) == 2


def test_a_reused_connection_timing_out_is_not_sent_again(serve: Any) -> None:
    stop = threading.Event()

    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(response(b'{"n": 1}'))
        peer.read_request()
        stop.wait(5)

    srv = serve(handler)
    assert post_json(target(srv), {}, lambda obj: obj) == {"n": 1}
    f = fail_json(srv, timeout_s=0.3)
    stop.set()
    assert f.kind == "timeout" and "0.3s" in f.message and srv.accepted == 1


def test_sequential_requests_share_one_connection(serve: Any) -> None:
    srv = serve(answer_every())
    for _ in range(3):
        assert post_json(target(srv), {}, lambda obj: obj) == {"ok": 1}
    assert srv.accepted == 1


def test_an_idle_connection_the_server_closed_is_not_reused(serve: Any) -> None:
    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(response(b'{"ok": 1}'))  # keep-alive by default, then gone

    srv = serve(handler)
    post_json(target(srv), {}, lambda obj: obj)
    time.sleep(0.1)  # the close reaches the client's socket
    assert post_json(target(srv), {}, lambda obj: obj) == {"ok": 1}
    assert srv.accepted == 2 and len(srv.requests) == 2


# -------------------------------------------------------------- deadline


def test_a_body_dripping_a_byte_at_a_time_ends_at_the_deadline(serve: Any) -> None:
    stop = threading.Event()

    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n")
        while not stop.wait(0.02):  # each byte well inside the 5 s read timeout
            peer.send(b" ")

    srv = serve(handler)
    t0 = time.monotonic()
    f = fail_json(srv, deadline_s=0.25)
    stop.set()
    assert time.monotonic() - t0 < 3
    assert f.kind == "timeout" and f.retryable and f.stage == "body"
    assert "within the attempt's deadline of 0.25s" in f.message
    assert f.hint is not None and "without finishing its answer" in f.hint


def test_a_flood_of_1xx_answers_ends_at_the_deadline(serve: Any) -> None:
    stop = threading.Event()

    def handler(peer: Peer) -> None:
        peer.read_request()
        while not stop.wait(0.005):
            peer.send(b"HTTP/1.1 102 Processing\r\n\r\n")

    srv = serve(handler)
    t0 = time.monotonic()
    f = fail_json(srv, deadline_s=0.25)
    stop.set()
    assert time.monotonic() - t0 < 3
    assert f.kind == "timeout" and f.stage == "request" and "deadline" in f.message


def test_a_stream_of_keepalive_comments_ends_at_the_deadline(serve: Any) -> None:
    stop = threading.Event()

    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(SSE_HEAD)
        while not stop.wait(0.02):
            peer.send(chunk(b": ping\n\n"))

    srv = serve(handler)
    t0 = time.monotonic()
    f = fail_stream(srv, deadline_s=0.25)
    stop.set()
    assert time.monotonic() - t0 < 3
    assert f.kind == "timeout" and f.stage == "stream" and "deadline" in f.message


def test_the_default_deadline_is_generous_and_never_below_the_read_timeout() -> None:
    t = HttpTarget(provider="p", model_ref="p/m", url="http://x", timeout_s=120)
    assert t.attempt_deadline_s == http_common.ATTEMPT_DEADLINE_S == 900
    assert HttpTarget("p", "p/m", "http://x", timeout_s=3600).attempt_deadline_s == 3600


def test_a_deadline_left_behind_does_not_touch_the_next_request(serve: Any) -> None:
    srv = serve(answer_every())
    post_json(target(srv, deadline_s=0.1), {}, lambda obj: obj)
    time.sleep(0.15)  # past the first attempt's deadline: the pooled socket is reused
    assert post_json(target(srv), {}, lambda obj: obj) == {"ok": 1}
    assert srv.accepted == 1


# ---------------------------------------------------------------- caps


def test_a_body_over_the_cap_fails_without_reading_it_all(serve: Any) -> None:
    size = http_common.MAX_BODY_BYTES + MiB

    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(f"HTTP/1.1 200 OK\r\ncontent-length: {size}\r\n\r\n".encode())
        block = b"a" * 65536
        try:
            for _ in range(size // len(block)):
                peer.send(block)
        except OSError:
            pass

    srv = serve(handler)
    f = fail_json(srv)
    assert f.kind == "invalid_response" and not f.retryable and f.stage == "body"
    assert "body exceeded 32 MiB" in f.message
    assert f.hint is not None and "32 MiB per body" in f.hint


def test_a_gzip_bomb_fails_at_the_decompressed_cap(serve: Any) -> None:
    bomb = gzip.compress(b"\0" * (40 * MiB), compresslevel=9)
    assert len(bomb) < MiB
    srv = serve(answer_every(bomb, **{"content-encoding": "gzip"}))
    f = fail_json(srv)
    assert f.kind == "invalid_response" and f.stage == "body"
    assert "decompressed body exceeded 32 MiB" in f.message


def test_an_error_answer_is_read_only_as_far_as_its_message(serve: Any) -> None:
    body = json.dumps({"error": {"message": "overloaded", "type": "server_error"}}).encode()
    body += b" " * (40 * MiB)

    def handler(peer: Peer) -> None:
        peer.read_request()
        try:
            peer.send(response(body, "503 Service Unavailable"))
        except OSError:
            pass  # the client stopped reading: what it needed was at the start

    f = fail_json(serve(handler))
    assert f.kind == "server_error" and f.status == 503 and "overloaded" in f.message


def test_an_event_over_8_mib_fails_the_attempt(serve: Any) -> None:
    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(SSE_HEAD + chunk(b'data: {"type": "start"}\n\n'))
        block = b"x" * 65536
        try:
            peer.send(chunk(b'data: {"big": "'))
            for _ in range(9 * 16):  # 9 MiB without a line end
                peer.send(chunk(block))
        except OSError:
            pass

    f = fail_stream(serve(handler))
    assert f.kind == "invalid_response" and not f.retryable and f.stage == "stream"
    assert "exceeded 8 MiB" in f.message


def test_an_event_that_never_ends_fails_at_8_mib(serve: Any) -> None:
    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(SSE_HEAD)
        lines = b"data: 0123456789abcdef0123456789abcdef\n" * 2000  # no blank line, ever
        try:
            for _ in range(9 * MiB // len(lines) + 1):
                peer.send(chunk(lines))
        except OSError:
            pass

    f = fail_stream(serve(handler))
    assert f.kind == "invalid_response" and "an event of the stream exceeded 8 MiB" in f.message


def test_an_event_just_under_the_cap_is_delivered(serve: Any) -> None:
    payload = json.dumps({"x": "y" * (8 * MiB - 100)}).encode()

    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(SSE_HEAD + chunk(b"data: " + payload + b"\n\n") + b"0\r\n\r\n")

    events = post_stream(target(serve(handler)), {}, lambda evs: [e.json() for e in evs])
    assert len(events) == 1 and len(events[0]["x"]) == 8 * MiB - 100


def test_a_stream_cut_mid_way_is_stream_interrupted(serve: Any) -> None:
    def handler(peer: Peer) -> None:
        peer.read_request()
        peer.send(SSE_HEAD + chunk(b'data: {"a": 1}\n\n') + b"40\r\npartial")

    def parse(events: Any) -> Any:
        for _ in events:
            pass
        raise AssertionError("the stream cannot end normally")

    with pytest.raises(ProviderFailure) as ei:
        post_stream(target(serve(handler)), {}, parse)
    assert ei.value.kind == "stream_interrupted" and ei.value.retryable


# ------------------------------------------------------- stream lines


def test_event_lines_split_on_cr_lf_only_not_on_unicode_line_breaks(serve: Any) -> None:
    text = "a\u2028b\u2029c\x85d\x0be\x0cf"  # all legal inside a JSON string
    payload = json.dumps({"t": text}, ensure_ascii=False).encode()

    def handler(peer: Peer) -> None:
        peer.read_request()
        body = b"event: one\r\ndata: " + payload + b"\r\n\r\nevent: two\rdata: " + payload
        peer.send(SSE_HEAD + chunk(body + b"\r\r") + b"0\r\n\r\n")

    def parse(events: Any) -> list[SSEEvent]:
        return list(events)

    events = post_stream(target(serve(handler)), {}, parse)
    assert [(e.event, e.json()["t"]) for e in events] == [("one", text), ("two", text)]


@pytest.mark.parametrize(
    ("pieces", "lines"),
    [
        ([b"a\r\nb\nc\rd"], ["a", "b", "c", "d"]),
        ([b"a\r", b"\nb"], ["a", "b"]),  # a CRLF split across reads is one line end
        ([b"a\r", b"b"], ["a", "b"]),
        ([b"a\r"], ["a"]),
        ([b"\n\n"], ["", ""]),
        ([b"x" * 10, b"y" * 10, b"\n"], ["x" * 10 + "y" * 10]),
        ([b"caf\xc3", b"\xa9\n"], ["caf\u00e9"]),  # a character split across reads
        ([b"bad \xff\n"], ["bad \ufffd"]),
    ],
)
def test_iter_lines(pieces: list[bytes], lines: list[str]) -> None:
    assert list(http_session.iter_lines(iter(pieces))) == lines


def test_iter_lines_caps_the_whole_stream() -> None:
    def endless_small_events() -> Iterator[bytes]:
        while True:
            yield b'data: {"delta": "x"}\n\n' * 100

    it = http_session.iter_lines(endless_small_events(), total=MiB)
    with pytest.raises(http_session.TooLarge, match="event stream exceeded 1 MiB"):
        for _ in it:
            pass
    assert http_session.MAX_STREAM_BYTES == 256 * MiB


def test_every_pool_of_the_client_is_under_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline is wired into httpx2's pools (its private network backend,
    reached through providers/httpx2_seam.py): the direct one and each env
    proxy's. A new httpx2 that moved it fails here."""
    from holon_cli.providers.httpx2_seam import ClientPools

    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    backends = ClientPools(http_session.client()).backends()
    assert len(backends) >= 3
    assert all(isinstance(b, http_session._DeadlineBackend) for b in backends)


def test_an_endless_event_is_refused_with_memory_bounded_by_the_cap() -> None:
    import tracemalloc

    def endless() -> Iterator[bytes]:
        while True:
            yield b"data: " + b"q" * 65530 + b"\n"  # lines, never a blank one

    tracemalloc.start()
    try:
        with pytest.raises(http_session.TooLarge):
            for _ in http_session.iter_lines(endless(), limit=4 * MiB):
                pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * MiB  # each line is handed on; nothing of the event is kept here


def test_an_endless_line_is_refused_with_memory_bounded_by_the_cap() -> None:
    import tracemalloc

    def endless() -> Iterator[bytes]:
        while True:
            yield b"z" * 65536  # one line that never ends

    tracemalloc.start()
    try:
        with pytest.raises(http_session.TooLarge):
            for _ in http_session.iter_lines(endless(), limit=4 * MiB):
                pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * 4 * MiB  # the line's buffer, at most the cap and a read


def test_iter_lines_holds_at_most_one_event() -> None:
    def endless() -> Iterator[bytes]:
        while True:
            yield b"z" * 1000

    it = http_session.iter_lines(endless(), limit=10_000)
    with pytest.raises(http_session.TooLarge):
        next(it)


# ----------------------------------------------------------- misc


def test_unreachable_port_is_a_connect_failure() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = HttpTarget(provider="p", model_ref="p/m", url=f"http://127.0.0.1:{port}/v1", timeout_s=5)
    with pytest.raises(ProviderFailure) as ei:
        post_json(t, {}, lambda obj: obj)
    assert ei.value.kind == "connection" and ei.value.stage == "connect"


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/v1", "http:///v1", "http://127.0.0.1:99999/v1", "nonsense"]
)
def test_an_url_that_cannot_be_sent_is_a_client_error(url: str) -> None:
    t = HttpTarget(provider="p", model_ref="p/m", url=url, timeout_s=5)
    with pytest.raises(ProviderFailure) as ei:
        post_json(t, {}, lambda obj: obj)
    assert ei.value.kind == "client_error" and not ei.value.retryable


@pytest.mark.parametrize("headers", [{"x-bad": "a\r\nb"}, {"x-bad": "\u2603"}, {"bad name": "v"}])
def test_a_header_that_cannot_be_sent_is_a_client_error(
    serve: Any, headers: dict[str, str]
) -> None:
    srv = serve(answer_every())
    f = fail_json(srv, headers=headers)
    assert f.kind == "client_error" and srv.requests == []


def test_threads_share_the_client_without_crossing_answers(serve: Any) -> None:
    def handler(peer: Peer) -> None:
        while (req := peer.read_request()) is not None:
            peer.send(response(req.body))

    srv = serve(handler)
    results: dict[int, Any] = {}

    def worker(i: int) -> None:
        results[i] = [post_json(target(srv), {"i": i, "k": k}, lambda o: o) for k in range(5)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert results == {i: [{"i": i, "k": k} for k in range(5)] for i in range(4)}


# ------------------------------------------------- what a user sees: exit 5


def test_a_run_ending_on_an_oversized_event_exits_5_with_a_clear_message(
    serve: Any, script_runner: Any
) -> None:
    """``holon run`` against a streaming endpoint whose event passes 8 MiB:
    the attempt fails as invalid_response (no retry: it would come back the
    same), the run ends with exit 5 and says what happened, no traceback."""

    def handler(peer: Peer) -> None:
        while peer.read_request() is not None:
            try:
                peer.send(SSE_HEAD + chunk(b"data: " + b"x" * (9 * MiB) + b"\n\n"))
            except OSError:
                return

    srv = serve(handler)
    home = Path(os.environ["HOLON_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        "providers:\n"
        f"  big:\n    transport: openai_responses\n    base_url: {srv.url}/v1\n"
        "    stream: true\n"
    )
    res = script_runner.run(["holon", "run", "--model", "big/m", "hi"], print_result=False)
    assert res.returncode == 5, res.stderr
    assert "exceeded 8 MiB" in res.stderr and "Traceback" not in res.stderr
    assert len(srv.requests) == 1
