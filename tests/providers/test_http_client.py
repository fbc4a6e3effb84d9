"""http_client, the stdlib HTTP/1.1 client of the model transports, against
servers that misbehave on purpose: raw sockets on 127.0.0.1 only (never the
network), every byte of the answers scripted by the test (``http_servers``).

Covers framing, line splitting, content codings, keep-alive and its retry,
timeouts, proxies (environment rules, a real forward proxy, ``CONNECT``
tunnels to a TLS server), TLS verification, bad input, fork safety, and the
path through a transport.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import ssl
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from http_servers import (
    ForwardProxy,
    Peer,
    ScriptedServer,
    make_cert,
    response,
    server_context,
)
from loopback import LoopbackServer, Reply, closed_port
from provider_helpers import build_request

from holon_cli.providers import http_client as hc
from holon_cli.providers.base import ProviderFailure
from holon_cli.providers.openai_responses import OpenAIResponsesTransport

T = 0.3  # the short timeout the timeout tests wait for


def no_tls() -> Any:
    raise AssertionError("tls() must not be called for a plain http request")


@pytest.fixture
def pool() -> Iterator[hc.Pool]:
    p = hc.Pool()
    yield p
    p.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(handler: Callable[[Peer], None], tls: ssl.SSLContext | None = None) -> ScriptedServer:
        srv = ScriptedServer(handler, tls=tls)
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.close()
        assert not srv.errors


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    with ForwardProxy() as p:
        yield p


def answering(*replies: bytes, close: bool = False) -> Callable[[Peer], None]:
    """A handler answering each request with the next of ``replies`` (in
    order across connections; once they run out it reads on and answers
    nothing); the connection stays open until the client closes it, or is
    closed after each answer with ``close``."""
    pending = list(replies)
    lock = threading.Lock()

    def handle(peer: Peer) -> None:
        while peer.read_request() is not None:
            with lock:
                if not pending:
                    continue
                data = pending.pop(0)
            peer.send(data)
            if close:
                return

    return handle


def silent(peer: Peer) -> None:
    """Reads requests and never answers, until the client closes."""
    while peer.read_request() is not None:
        pass


def get(pool: hc.Pool, url: str, **kw: Any) -> hc.Response:
    kw.setdefault("timeout", 2.0)
    kw.setdefault("tls", no_tls)
    kw.setdefault("environ", {})
    return pool.request(kw.pop("method", "GET"), url, **kw)


def fetch(pool: hc.Pool, url: str, **kw: Any) -> bytes:
    with get(pool, url, **kw) as r:
        return r.read()


def chunked(*pieces: bytes, headers: str = "") -> bytes:
    """A chunked response with one chunk per piece (the client sees each
    piece as one read: the chunk framing keeps the boundaries)."""
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p)
    head = f"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n{headers}\r\n"
    return head.encode() + body + b"0\r\n\r\n"


# ---------------------------------------------------------------- framing


def test_content_length_body(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"hello", headers={"x-a": "1"})))
    with get(pool, srv.url + "/p?q=1") as r:
        assert (r.status_code, r.reason, r.http_version) == (200, "OK", "HTTP/1.1")
        assert r.headers["x-a"] == "1"
        assert r.read() == b"hello"
    req = srv.requests[0]
    assert (req.method, req.target) == ("GET", "/p?q=1")
    assert req.headers["host"] == f"127.0.0.1:{srv.port}"


def test_post_sends_body_and_length(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"ok")))
    assert fetch(pool, srv.url, method="POST", body=b'{"a": 1}') == b"ok"
    assert srv.requests[0].body == b'{"a": 1}'
    assert srv.requests[0].headers["content-length"] == "8"


def test_chunked_with_extensions_and_trailers_then_reused(pool: hc.Pool, serve: Any) -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n"
        b"6 ; ext\r\n world\r\n"
        b"0;last\r\nx-trailer: t\r\nx-other: u\r\n\r\n"
    )
    srv = serve(answering(raw, response(b"again")))
    assert fetch(pool, srv.url) == b"hello world"
    assert pool.idle_count() == 1
    assert fetch(pool, srv.url) == b"again"
    assert srv.accepted == 1


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.0 200 OK\r\n\r\nall of it until close",
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it until close",
        # HTTP/1.0 keep-alive needs a length to be kept
        b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\n\r\nall of it until close",
    ],
)
def test_body_delimited_by_close_is_not_reused(pool: hc.Pool, serve: Any, raw: bytes) -> None:
    srv = serve(answering(raw, raw, close=True))
    assert fetch(pool, srv.url) == b"all of it until close"
    assert pool.idle_count() == 0
    assert fetch(pool, srv.url) == b"all of it until close"
    assert srv.accepted == 2


def test_http10_with_length_and_keep_alive_is_reused(pool: hc.Pool, serve: Any) -> None:
    raw = b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nok"
    srv = serve(answering(raw, raw))
    assert fetch(pool, srv.url) == b"ok"
    assert fetch(pool, srv.url) == b"ok"
    assert srv.accepted == 1


@pytest.mark.parametrize("status", [b"204 No Content", b"304 Not Modified"])
def test_no_body_statuses(pool: hc.Pool, serve: Any, status: bytes) -> None:
    # no length, no chunking, and the connection stays open: still no body to wait for
    srv = serve(answering(b"HTTP/1.1 " + status + b"\r\n\r\n", response(b"next")))
    with get(pool, srv.url, timeout=T) as r:
        assert r.read() == b""
    assert fetch(pool, srv.url) == b"next"
    assert srv.accepted == 1


def test_interim_1xx_responses_are_skipped(pool: hc.Pool, serve: Any) -> None:
    raw = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
        + response(b"final", "201 Created")
    )
    srv = serve(answering(raw))
    with get(pool, srv.url) as r:
        assert r.status_code == 201
        assert "link" not in r.headers
        assert r.read() == b"final"


@pytest.mark.parametrize(
    "lengths", [b"content-length: 2\r\ncontent-length: 2\r\n", b"content-length: 2, 2\r\n"]
)
def test_duplicate_identical_content_length_is_accepted(
    pool: hc.Pool, serve: Any, lengths: bytes
) -> None:
    srv = serve(answering(b"HTTP/1.1 200 OK\r\n" + lengths + b"\r\nok"))
    assert fetch(pool, srv.url) == b"ok"


@pytest.mark.parametrize(
    "lengths",
    [
        b"content-length: 2\r\ncontent-length: 3\r\n",
        b"content-length: 2, 3\r\n",
        b"content-length: -1\r\n",
        b"content-length: +2\r\n",
        b"content-length: 0x2\r\n",
        # Latin-1 superscript digits are str.isdigit() but not int()-able
        "content-length: \u00b2\r\n".encode("latin-1"),
    ],
)
def test_bad_content_length_is_a_protocol_error(pool: hc.Pool, serve: Any, lengths: bytes) -> None:
    srv = serve(answering(b"HTTP/1.1 200 OK\r\n" + lengths + b"\r\nok"))
    with pytest.raises(hc.RemoteProtocolError, match="content-length"):
        get(pool, srv.url)
    assert pool.idle_count() == 0


def test_truncated_content_length_body(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"0123456789")[:-7], close=True))
    with get(pool, srv.url) as r, pytest.raises(hc.RemoteProtocolError, match="7 body bytes"):
        r.read()
    assert pool.idle_count() == 0


def test_truncated_chunked_body(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(chunked(b"hello", b"world")[:-12], close=True))
    with get(pool, srv.url) as r, pytest.raises(hc.RemoteProtocolError):
        r.read()


@pytest.mark.parametrize("size", [b"zz", b"", b"-5", b"0x5", b"5_0", b" "])
def test_bad_chunk_size(pool: hc.Pool, serve: Any, size: bytes) -> None:
    # the server keeps the connection open: a lenient parser would wait for more
    raw = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + size + b"\r\nhello\r\n0\r\n\r\n"
    )
    srv = serve(answering(raw))
    with get(pool, srv.url, timeout=T) as r, pytest.raises(hc.RemoteProtocolError, match="chunk"):
        r.read()


def test_chunk_not_followed_by_crlf(pool: hc.Pool, serve: Any) -> None:
    raw = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n"
    srv = serve(answering(raw))
    with get(pool, srv.url, timeout=T) as r, pytest.raises(hc.RemoteProtocolError, match="CRLF"):
        r.read()


@pytest.mark.parametrize(
    "head",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n",
        b"HTTP/1.1 OK\r\n\r\n",
        b"HTTP/2 200\r\n\r\n",
        b"HTTP/1.1\r\n\r\n",
        "HTTP/1.1 \u00b200 OK\r\n\r\n".encode("latin-1"),
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded-first: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nspace before : colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n",  # closes inside the headers
        b"HTTP/1.1 200 OK\r\nx: " + b"a" * 70000 + b"\r\n\r\n",
    ],
)
def test_garbage_heads_are_protocol_errors(pool: hc.Pool, serve: Any, head: bytes) -> None:
    srv = serve(answering(head, close=True))
    with pytest.raises(hc.RemoteProtocolError):
        get(pool, srv.url, timeout=T)


def test_too_many_headers(pool: hc.Pool, serve: Any) -> None:
    head = b"HTTP/1.1 200 OK\r\n" + b"x: y\r\n" * (hc.MAX_HEADERS + 1) + b"\r\n"
    srv = serve(answering(head, close=True))
    with pytest.raises(hc.RemoteProtocolError, match="headers"):
        get(pool, srv.url)


def test_header_folding_and_repeats(pool: hc.Pool, serve: Any) -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nX-Folded: one\r\n  two\r\n\tthree\r\n"
        b"x-repeat: a\r\nX-Repeat: b\r\ncontent-length: 0\r\n\r\n"
    )
    srv = serve(answering(raw))
    with get(pool, srv.url) as r:
        assert r.headers["x-folded"] == "one two three"
        assert r.headers["x-repeat"] == "a, b"


def test_no_answer_at_all(pool: hc.Pool, serve: Any) -> None:
    srv = serve(lambda peer: peer.read_request() and None)
    with pytest.raises(hc.RemoteProtocolError, match="without answering"):
        get(pool, srv.url)


# ------------------------------------------------------------- iter_lines


@pytest.mark.parametrize(
    ("pieces", "lines"),
    [
        ([b"a\nb\n"], ["a", "b"]),
        ([b"a\r\nb\r\n"], ["a", "b"]),
        ([b"a\rb\r"], ["a", "b"]),
        ([b"a\r", b"\nb\r\n"], ["a", "b"]),  # a CRLF split across chunks: one terminator
        ([b"a\r", b"\r\n"], ["a", ""]),
        ([b"a\n\n", b"\r\n"], ["a", "", ""]),
        ([b"caf\xc3", b"\xa9\n"], ["caf\u00e9"]),
        ([b"\xf0", b"\x9f\x98", b"\x80!\n"], ["\U0001f600!"]),
        (["a\u2028b\u0085c\x0cd\x0be\n".encode()], ["a\u2028b\u0085c\x0cd\x0be"]),
        ([b"a\n", b"last"], ["a", "last"]),
        ([b"a\n", b"last\r"], ["a", "last"]),
        ([b"bad \xff byte\n"], ["bad \ufffd byte"]),
        ([b"cut \xc3"], ["cut \ufffd"]),
        ([], []),
    ],
)
def test_iter_lines(pool: hc.Pool, serve: Any, pieces: list[bytes], lines: list[str]) -> None:
    srv = serve(answering(chunked(*pieces)))
    with get(pool, srv.url) as r:
        assert list(r.iter_lines()) == lines


def test_iter_lines_sees_each_chunk_as_it_arrives(pool: hc.Pool, serve: Any) -> None:
    # a line is yielded before the next chunk exists (an event stream must not be held back)
    go = threading.Event()

    def handle(peer: Peer) -> None:
        peer.read_request()
        peer.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nfirst\n\r\n")
        go.wait(5)
        peer.send(b"7\r\nsecond\n\r\n0\r\n\r\n")
        peer.read_request()

    srv = serve(handle)
    with get(pool, srv.url) as r:
        lines = r.iter_lines()
        assert next(lines) == "first"
        go.set()
        assert list(lines) == ["second"]


# ------------------------------------------------------------ content codings

PAYLOAD = b"".join(b"line %d of the body\n" % i for i in range(300))


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


CODINGS = {
    "gzip": gzip.compress(PAYLOAD),
    "x-gzip": gzip.compress(PAYLOAD),
    "deflate": zlib.compress(PAYLOAD),  # zlib-wrapped, as the RFC says
    "raw-deflate": _raw_deflate(PAYLOAD),  # raw, as some servers send it
}


def _split(data: bytes, first: int, size: int) -> list[bytes]:
    return [data[:first]] + [data[i : i + size] for i in range(first, len(data), size)]


@pytest.mark.parametrize("coding", sorted(CODINGS))
@pytest.mark.parametrize("split", ["whole", "pieces", "one-byte-first", "byte-by-byte-start"])
def test_content_codings_decoded(pool: hc.Pool, serve: Any, coding: str, split: str) -> None:
    data = CODINGS[coding]
    name = "deflate" if coding == "raw-deflate" else coding
    if split == "whole":
        raw = response(data, headers={"content-encoding": name})
    else:
        first, size = {"pieces": (7, 7), "one-byte-first": (1, 50)}.get(split, (1, 1))
        pieces = _split(data, first, size)
        if split == "byte-by-byte-start":
            pieces = [data[:1], data[1:2], data[2:3], data[3:]]
        raw = chunked(*pieces, headers=f"content-encoding: {name}\r\n")
    srv = serve(answering(raw))
    with get(pool, srv.url) as r:
        assert r.read() == PAYLOAD
    assert srv.requests[0].headers["accept-encoding"] == "gzip, deflate"


def test_identity_coding_is_no_coding(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"plain", headers={"content-encoding": "identity"})))
    assert fetch(pool, srv.url) == b"plain"


def test_gzip_lines(pool: hc.Pool, serve: Any) -> None:
    data = gzip.compress(b"data: one\n\ndata: two\n\n")
    srv = serve(answering(chunked(*_split(data, 3, 5), headers="content-encoding: gzip\r\n")))
    with get(pool, srv.url) as r:
        assert list(r.iter_lines()) == ["data: one", "", "data: two", ""]


@pytest.mark.parametrize("coding", ["br", "gzip, br", "zstd", "compress"])
def test_unsupported_coding_is_a_protocol_error(pool: hc.Pool, serve: Any, coding: str) -> None:
    srv = serve(answering(response(b"xx", headers={"content-encoding": coding})))
    with pytest.raises(hc.RemoteProtocolError, match="content-encoding"):
        get(pool, srv.url)
    assert pool.idle_count() == 0


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_corrupt_compressed_body(pool: hc.Pool, serve: Any, coding: str) -> None:
    srv = serve(
        answering(response(b"this is not compressed", headers={"content-encoding": coding}))
    )
    with get(pool, srv.url) as r, pytest.raises(hc.RemoteProtocolError, match="decompress"):
        r.read()
    assert pool.idle_count() == 0


# ------------------------------------------------------------- keep-alive


def _key(srv: ScriptedServer) -> tuple[str, ...]:
    return ("http", "127.0.0.1", str(srv.port), "")


def test_sequential_requests_share_one_connection(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"one"), chunked(b"two"), response(b"three")))
    assert [fetch(pool, srv.url) for _ in range(3)] == [b"one", b"two", b"three"]
    assert srv.accepted == 1
    assert len(srv.requests) == 3


def test_connection_close_response_is_not_reused(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"one", headers={"connection": "close"}), response(b"two")))
    assert fetch(pool, srv.url) == b"one"
    assert pool.idle_count() == 0
    assert fetch(pool, srv.url) == b"two"
    assert srv.accepted == 2


def test_idle_connection_closed_by_server_is_noticed(pool: hc.Pool, serve: Any) -> None:
    closed = threading.Event()

    def handle(peer: Peer) -> None:
        peer.read_request()
        peer.send(response(b"one" if peer.index == 0 else b"two"))
        if peer.index == 0:
            peer.close()  # the server's idle timeout, right away
            closed.set()
        else:
            silent(peer)

    srv = serve(handle)
    assert fetch(pool, srv.url) == b"one"
    assert pool.idle_count() == 1
    assert closed.wait(5)
    # the FIN makes the idle connection readable: it is dropped, not handed out
    assert pool.get(_key(srv)) is None
    assert pool.idle_count() == 0
    assert fetch(pool, srv.url) == b"two"
    assert srv.accepted == 2
    assert len(srv.requests) == 2  # nothing was sent on the closed connection


@pytest.mark.parametrize("how", ["close", "reset"])
def test_reused_connection_dropped_mid_request_is_retried_once(
    pool: hc.Pool, serve: Any, how: str
) -> None:
    # the server closes the kept-alive connection as the next request
    # arrives (after the client's stale check): it is sent again, on a new one
    def handle(peer: Peer) -> None:
        peer.read_request()
        if peer.index == 0:
            peer.send(response(b"one"))
            peer.read_request()
            if how == "reset":
                peer.reset()
            return
        peer.send(response(b"two"))
        peer.read_request()

    srv = serve(handle)
    assert fetch(pool, srv.url) == b"one"
    assert fetch(pool, srv.url, method="POST", body=b"x") == b"two"
    assert srv.accepted == 2
    assert [r.method for r in srv.requests] == ["GET", "POST", "POST"]


@pytest.mark.parametrize("how", ["close", "reset"])
def test_fresh_connection_dropped_is_not_retried(pool: hc.Pool, serve: Any, how: str) -> None:
    def handle(peer: Peer) -> None:
        peer.read_request()
        if how == "reset":
            peer.reset()

    srv = serve(handle)
    with pytest.raises(hc.RemoteProtocolError):
        get(pool, srv.url, method="POST", body=b"x")
    assert srv.accepted == 1
    assert len(srv.requests) == 1


def test_reused_connection_timing_out_is_not_retried(pool: hc.Pool, serve: Any) -> None:
    # a timeout is not "the server had closed it": the request may be running
    srv = serve(answering(response(b"one")))
    assert fetch(pool, srv.url, timeout=5.0) == b"one"
    start = time.monotonic()
    with pytest.raises(hc.ReadTimeout):
        get(pool, srv.url, method="POST", body=b"x", timeout=T)
    # this request's timeout, not the one of the request that opened the connection
    assert time.monotonic() - start < T + 0.7
    assert srv.accepted == 1
    assert len(srv.requests) == 2


def test_reused_connection_answering_garbage_is_not_retried(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"one"), b"garbage\r\n\r\n"))
    assert fetch(pool, srv.url) == b"one"
    with pytest.raises(hc.RemoteProtocolError, match="status line"):
        get(pool, srv.url)
    assert len(srv.requests) == 2


@pytest.mark.parametrize("read", ["nothing", "part"])
def test_response_closed_before_its_end_is_not_pooled(pool: hc.Pool, serve: Any, read: str) -> None:
    big = b"x" * 300_000
    srv = serve(answering(response(big), chunked(big, big), response(b"next"), response(b"n2")))
    for _ in range(2):
        with get(pool, srv.url) as r:
            if read == "part":
                assert next(r.iter_bytes())
        assert pool.idle_count() == 0
    assert fetch(pool, srv.url) == b"next"
    assert srv.accepted == 3


def test_unasked_bytes_after_a_response_are_not_read_as_the_next_answer(
    pool: hc.Pool, serve: Any
) -> None:
    # a server that sends more than the framing says (a stray response, or
    # junk) must not have those bytes taken as the answer to the next request
    srv = serve(
        answering(
            response(b"first") + response(b"stale"),
            response(b"fresh"),
            response(b"fresh"),
        )
    )
    assert fetch(pool, srv.url) == b"first"
    assert fetch(pool, srv.url) == b"fresh"


def test_unsolicited_answer_on_an_idle_connection(pool: hc.Pool, serve: Any) -> None:
    # servers that time an idle connection out may say so (408) before closing
    sent = threading.Event()

    def handle(peer: Peer) -> None:
        peer.read_request()
        if peer.index == 0:
            peer.send(response(b"one"))
            peer.send(response(b"", "408 Request Timeout", {"connection": "close"}))
            sent.set()
            silent(peer)
            return
        peer.send(response(b"two"))
        silent(peer)

    srv = serve(handle)
    assert fetch(pool, srv.url) == b"one"
    assert sent.wait(5)
    assert fetch(pool, srv.url) == b"two"
    assert srv.accepted == 2


def _head_only(answer: bytes) -> Callable[[Peer], None]:
    """Reads a request's head but not its body, answers, and closes (a reset:
    the unread body is still in the socket)."""

    def handle(peer: Peer) -> None:
        while peer.reader.readline() not in (b"\r\n", b""):
            pass
        if answer:
            peer.send(answer)
        time.sleep(0.02)  # the answer reaches the client before the reset

    return handle


BIG = b"x" * 16_000_000  # more than the socket buffers hold


@pytest.mark.parametrize("headers", [{"connection": "close"}, {}])
def test_early_answer_while_the_body_is_sent(
    pool: hc.Pool, serve: Any, headers: dict[str, str]
) -> None:
    # a server (or its proxy) refusing a too-large body answers before reading
    # it and closes: the send fails, but the answer is what the caller needs
    srv = serve(_head_only(response(b'{"error": "too large"}', "413 Payload Too Large", headers)))
    with get(pool, srv.url, method="POST", body=BIG) as r:
        assert r.status_code == 413
        assert r.read() == b'{"error": "too large"}'
    assert pool.idle_count() == 0  # the request was never sent whole
    assert srv.accepted == 1


def test_send_failing_without_an_answer(pool: hc.Pool, serve: Any) -> None:
    srv = serve(_head_only(b""))
    with pytest.raises(hc.RemoteProtocolError, match="sending the request failed"):
        get(pool, srv.url, method="POST", body=BIG)
    assert srv.accepted == 1


def test_pool_keeps_at_most_max_idle(serve: Any) -> None:
    pool = hc.Pool(max_idle_per_key=1)
    try:
        srv = serve(answering(*[response(b"ok")] * 4))
        a, b = get(pool, srv.url), get(pool, srv.url)
        assert a.read() == b.read() == b"ok"
        a.close()
        b.close()
        assert pool.idle_count() == 1
    finally:
        pool.close()


def test_keys_keep_servers_apart(pool: hc.Pool, serve: Any) -> None:
    one = serve(answering(response(b"one"), response(b"one")))
    two = serve(answering(response(b"two"), response(b"two")))
    assert [fetch(pool, s.url) for s in (one, two, one, two)] == [b"one", b"two"] * 2
    assert (one.accepted, two.accepted) == (1, 1)


# --------------------------------------------------------------- timeouts


def test_server_that_never_answers_times_out(pool: hc.Pool, serve: Any) -> None:
    srv = serve(silent)
    start = time.monotonic()
    with pytest.raises(hc.ReadTimeout):
        get(pool, srv.url, timeout=T)
    assert T * 0.9 <= time.monotonic() - start < T + 0.7
    assert pool.idle_count() == 0


def test_stall_mid_body_times_out_in_read(pool: hc.Pool, serve: Any) -> None:
    def handle(peer: Peer) -> None:
        peer.read_request()
        peer.send(response(b"0123456789" * 10)[:-90])
        silent(peer)

    srv = serve(handle)
    with get(pool, srv.url, timeout=T) as r:
        start = time.monotonic()
        with pytest.raises(hc.ReadTimeout):
            r.read()
        assert time.monotonic() - start < T + 0.7
    assert pool.idle_count() == 0


def test_stall_mid_stream_times_out_in_iter_lines(pool: hc.Pool, serve: Any) -> None:
    def handle(peer: Peer) -> None:
        peer.read_request()
        peer.send(chunked(b"data: 1\n\n")[:-5])
        silent(peer)

    srv = serve(handle)
    with get(pool, srv.url, timeout=T) as r:
        lines = r.iter_lines()
        assert next(lines) == "data: 1"
        with pytest.raises(hc.ReadTimeout):
            list(lines)


def test_tls_handshake_that_never_completes_is_a_connect_timeout(pool: hc.Pool, serve: Any) -> None:
    def mute(peer: Peer) -> None:
        while peer.sock.recv(4096):  # takes the ClientHello, says nothing
            pass

    srv = serve(mute)
    start = time.monotonic()
    with pytest.raises(hc.ConnectTimeout):
        get(
            pool,
            f"https://127.0.0.1:{srv.port}/",
            timeout=5.0,
            connect_timeout=T,
            tls=ssl.create_default_context,
        )
    assert time.monotonic() - start < T + 0.7


def test_read_timeout_is_not_the_connect_timeout(pool: hc.Pool, serve: Any) -> None:
    def slow(peer: Peer) -> None:
        peer.read_request()
        time.sleep(0.15)
        peer.send(response(b"late"))
        silent(peer)

    srv = serve(slow)
    assert fetch(pool, srv.url, timeout=2.0, connect_timeout=0.05) == b"late"


def test_refused_connection(pool: hc.Pool) -> None:
    with pytest.raises(hc.ConnectError) as ei:
        get(pool, f"http://127.0.0.1:{closed_port()}/")
    assert not isinstance(ei.value, hc.ConnectTimeout)


# ------------------------------------------------------ proxy environment


@pytest.mark.parametrize(
    ("env", "url", "expected"),
    [
        ({}, "http://example.com", None),
        ({"http_proxy": "http://lower:1", "HTTP_PROXY": "http://upper:1"}, "http://example.com",
         "http://lower:1"),
        ({"HTTP_PROXY": "http://upper:1"}, "http://example.com", "http://upper:1"),
        ({"https_proxy": "http://s:1", "http_proxy": "http://p:1"}, "https://example.com",
         "http://s:1"),
        ({"https_proxy": "http://s:1", "http_proxy": "http://p:1"}, "http://example.com",
         "http://p:1"),
        ({"http_proxy": "http://p:1"}, "https://example.com", None),
        ({"all_proxy": "http://a:1"}, "https://example.com", "http://a:1"),
        ({"ALL_PROXY": "http://a:1"}, "http://example.com", "http://a:1"),
        ({"http_proxy": "http://p:1", "all_proxy": "http://a:1"}, "http://example.com",
         "http://p:1"),
        ({"http_proxy": "http://p:1", "all_proxy": "http://a:1"}, "https://example.com",
         "http://a:1"),
        ({"http_proxy": "proxy.corp:3128"}, "http://example.com", "http://proxy.corp:3128"),
        ({"http_proxy": "  http://p:1  "}, "http://example.com", "http://p:1"),
        ({"https_proxy": "https://p:1"}, "https://example.com", "https://p:1"),
    ],
)  # fmt: skip
def test_proxy_for_chooses_by_scheme(env: dict[str, str], url: str, expected: str | None) -> None:
    assert hc.proxy_for(url, env) == expected


P = "http://p:1"


@pytest.mark.parametrize(
    ("no_proxy", "url", "bypassed"),
    [
        ("*", "https://api.example.com", True),
        ("example.com", "https://example.com/v1", True),
        ("example.com", "https://api.example.com", True),
        ("example.com", "https://notexample.com", False),
        ("example.com", "https://example.com.evil.net", False),
        (".example.com", "https://api.example.com", True),
        (".example.com", "https://example.com", True),
        ("*.example.com", "https://deep.api.example.com", True),
        ("EXAMPLE.com.", "https://Api.Example.COM", True),
        ("other.org, example.com", "https://example.com", True),
        ("other.org example.com", "https://example.com", True),
        ("other.org,,", "https://example.com", False),
        ("example.com:8443", "https://example.com:8443", True),
        ("example.com:8443", "https://example.com", False),
        ("example.com:443", "https://example.com", True),
        ("127.0.0.1", "http://127.0.0.1:9000", True),
        ("10.0.0.1", "http://10.0.0.2", False),
        ("0.1", "http://10.0.0.1", False),  # an address is not a name suffix
        ("0.0.1", "http://10.0.0.1", False),
        ("10.0.0.0/8", "http://10.20.30.40", True),
        ("10.0.0.0/8", "http://11.0.0.1", False),
        ("10.0.0.0/8", "https://ten.example.com", False),
        ("fd00::/8", "http://[fd12::1]:8080", True),
        ("::1", "http://[::1]:8080", True),
        ("[::1]:8080", "http://[::1]:8080", True),
        ("[::1]:8080", "http://[::1]:9090", False),
        ("http://example.com", "https://example.com", True),
        ("", "https://example.com", False),
    ],
)
def test_no_proxy(no_proxy: str, url: str, bypassed: bool) -> None:
    env = {"http_proxy": P, "https_proxy": P, "no_proxy": no_proxy}
    assert hc.proxy_for(url, env) == (None if bypassed else P)


def test_upper_case_http_proxy_is_ignored_under_cgi() -> None:
    # httpoxy: under CGI, HTTP_PROXY is the client's "Proxy:" request header
    cgi = {"REQUEST_METHOD": "GET", "HTTP_PROXY": "http://evil:1"}
    assert hc.proxy_for("http://example.com", cgi) is None
    assert hc.proxy_for("http://example.com", {**cgi, "http_proxy": P}) == P
    assert hc.proxy_for("http://example.com", {"HTTP_PROXY": P}) == P
    assert hc.proxy_for("https://example.com", {**cgi, "HTTPS_PROXY": P}) == P


def test_lower_case_no_proxy_wins() -> None:
    env = {"https_proxy": P, "no_proxy": "other.org", "NO_PROXY": "example.com"}
    assert hc.proxy_for("https://example.com", env) == P
    assert hc.proxy_for("https://example.com", {"https_proxy": P, "NO_PROXY": "*"}) is None


def test_proxy_for_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", P)
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("NO_PROXY", "")
    assert hc.proxy_for("https://example.com") == P


# ------------------------------------------------------- a forward proxy


def test_http_target_through_proxy_in_absolute_form(
    pool: hc.Pool, serve: Any, proxy: ForwardProxy
) -> None:
    srv = serve(answering(response(b"via proxy")))
    env = {"http_proxy": proxy.url("user:p%40ss")}
    assert fetch(pool, srv.url + "/v1/x?q=1", environ=env, method="POST", body=b"b") == b"via proxy"
    seen = proxy.requests[0]
    assert (seen.method, seen.target) == ("POST", f"{srv.url}/v1/x?q=1")
    assert seen.headers["host"] == f"127.0.0.1:{srv.port}"
    assert seen.headers["proxy-authorization"] == "Basic " + base64.b64encode(b"user:p@ss").decode()
    assert srv.requests[0].target == "/v1/x?q=1"
    assert srv.requests[0].body == b"b"


def test_no_credentials_no_proxy_authorization(
    pool: hc.Pool, serve: Any, proxy: ForwardProxy
) -> None:
    srv = serve(answering(response(b"ok")))
    assert fetch(pool, srv.url, environ={"http_proxy": proxy.url()}) == b"ok"
    assert "proxy-authorization" not in proxy.requests[0].headers


def test_proxy_down_is_a_connect_error(pool: hc.Pool) -> None:
    env = {"http_proxy": f"http://user:hunter2@127.0.0.1:{closed_port()}"}
    with pytest.raises(hc.ConnectError) as ei:
        get(pool, "http://example.invalid/", environ=env)
    assert "hunter2" not in str(ei.value)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl CLI")
    d = tmp_path_factory.mktemp("certs")
    return {
        "good": make_cert(d, "localhost", "DNS:localhost,IP:127.0.0.1"),
        "wrong": make_cert(d, "elsewhere", "DNS:elsewhere.invalid"),
    }


def trusting(cert: Path) -> Callable[[], ssl.SSLContext]:
    return lambda: ssl.create_default_context(cafile=str(cert))


@pytest.fixture
def tls_server(serve: Any, certs: dict[str, tuple[Path, Path]]) -> ScriptedServer:
    replies = [response(b"secret %d" % i) for i in range(3)]
    srv: ScriptedServer = serve(answering(*replies), tls=server_context(*certs["good"]))
    return srv


def test_https_direct(pool: hc.Pool, tls_server: ScriptedServer, certs: Any) -> None:
    calls: list[int] = []

    def tls() -> ssl.SSLContext:
        calls.append(1)
        return ssl.create_default_context(cafile=str(certs["good"][0]))

    for host in ("127.0.0.1", "localhost"):
        url = f"https://{host}:{tls_server.port}/s"
        assert fetch(pool, url, tls=tls).startswith(b"secret")
    assert calls
    assert tls_server.requests[1].headers["host"] == f"localhost:{tls_server.port}"


def test_https_through_connect_tunnel(
    pool: hc.Pool, tls_server: ScriptedServer, proxy: ForwardProxy, certs: Any
) -> None:
    env = {"https_proxy": proxy.url("u:pw")}
    url = f"https://127.0.0.1:{tls_server.port}/secure"
    tls = trusting(certs["good"][0])
    assert fetch(pool, url, environ=env, tls=tls) == b"secret 0"
    assert fetch(pool, url, environ=env, tls=tls) == b"secret 1"  # the tunnel is kept
    assert proxy.server.accepted == 1
    (seen,) = proxy.requests
    assert (seen.method, seen.target) == ("CONNECT", f"127.0.0.1:{tls_server.port}")
    assert seen.headers["host"] == f"127.0.0.1:{tls_server.port}"
    assert seen.headers["proxy-authorization"] == "Basic " + base64.b64encode(b"u:pw").decode()
    inner = tls_server.requests[0]
    assert (inner.method, inner.target) == ("GET", "/secure")
    assert "proxy-authorization" not in inner.headers


def test_proxy_silent_on_connect_is_a_connect_timeout(pool: hc.Pool, serve: Any) -> None:
    silent_proxy = serve(silent)
    start = time.monotonic()
    with pytest.raises(hc.ConnectTimeout, match="proxy"):
        get(
            pool,
            "https://127.0.0.1:1/",
            environ={"https_proxy": silent_proxy.url},
            timeout=5.0,
            connect_timeout=T,
            tls=no_tls,
        )
    assert time.monotonic() - start < T + 0.7
    assert silent_proxy.requests[0].method == "CONNECT"


def test_connect_refused_by_proxy(pool: hc.Pool, tls_server: ScriptedServer, certs: Any) -> None:
    with ForwardProxy(refuse="407 Proxy Authentication Required") as p:
        with pytest.raises(hc.ConnectError, match="407 Proxy Authentication Required"):
            get(
                pool,
                f"https://127.0.0.1:{tls_server.port}/",
                environ={"https_proxy": p.url("u:pw")},
                tls=trusting(certs["good"][0]),
            )
    assert tls_server.accepted == 0


def test_https_through_an_https_proxy_is_tls_inside_tls(
    pool: hc.Pool, tls_server: ScriptedServer, certs: Any
) -> None:
    tls = trusting(certs["good"][0])  # the proxy and the endpoint both use this certificate
    with ForwardProxy(tls=server_context(*certs["good"])) as p:
        env = {"https_proxy": p.url("u:pw")}
        assert env["https_proxy"].startswith("https://")
        url = f"https://127.0.0.1:{tls_server.port}/inner"
        assert fetch(pool, url, environ=env, tls=tls) == b"secret 0"
        assert fetch(pool, url, environ=env, tls=tls) == b"secret 1"  # kept, inside and out
        assert p.server.accepted == 1
        (seen,) = p.requests
    assert (seen.method, seen.target) == ("CONNECT", f"127.0.0.1:{tls_server.port}")
    assert seen.headers["proxy-authorization"] == "Basic " + base64.b64encode(b"u:pw").decode()
    assert tls_server.requests[0].target == "/inner"


def test_tls_inside_tls_checks_the_endpoints_certificate(
    pool: hc.Pool, serve: Any, certs: Any
) -> None:
    wrong = serve(answering(response(b"x")), tls=server_context(*certs["wrong"]))
    with ForwardProxy(tls=server_context(*certs["good"])) as p:
        with pytest.raises(hc.ConnectError, match="TLS handshake with 127.0.0.1 failed"):
            get(
                pool,
                f"https://127.0.0.1:{wrong.port}/",
                environ={"https_proxy": p.url()},
                tls=trusting(certs["good"][0]),
            )
    assert wrong.requests == []


def test_tls_inside_tls_reads_a_large_streamed_body(pool: hc.Pool, serve: Any, certs: Any) -> None:
    lines = [b"data: %d %s\n\n" % (i, b"y" * 300) for i in range(400)]
    srv = serve(answering(chunked(*lines)), tls=server_context(*certs["good"]))
    with ForwardProxy(tls=server_context(*certs["good"])) as p:
        url = f"https://127.0.0.1:{srv.port}/stream"
        with get(pool, url, environ={"https_proxy": p.url()}, tls=trusting(certs["good"][0])) as r:
            got = [line for line in r.iter_lines() if line]
    assert len(got) == 400 and got[-1].startswith("data: 399 ")


# -------------------------------------------------------------------- TLS


def test_unasked_bytes_over_tls_are_not_the_next_answer(
    pool: hc.Pool, serve: Any, certs: Any
) -> None:
    replies = [response(b"first") + response(b"stale"), response(b"fresh")]
    srv = serve(answering(*replies), tls=server_context(*certs["good"]))
    url, tls = f"https://127.0.0.1:{srv.port}/", trusting(certs["good"][0])
    assert fetch(pool, url, tls=tls) == b"first"
    assert fetch(pool, url, tls=tls) == b"fresh"


def test_untrusted_certificate(pool: hc.Pool, tls_server: ScriptedServer) -> None:
    with pytest.raises(hc.ConnectError, match="certificate verify failed"):
        get(pool, f"https://127.0.0.1:{tls_server.port}/", tls=ssl.create_default_context)
    assert tls_server.requests == []


def test_hostname_mismatch(pool: hc.Pool, serve: Any, certs: Any) -> None:
    srv = serve(answering(response(b"no")), tls=server_context(*certs["wrong"]))
    with pytest.raises(hc.ConnectError, match="mismatch|doesn't match|not valid"):
        get(pool, f"https://127.0.0.1:{srv.port}/", tls=trusting(certs["wrong"][0]))
    assert srv.requests == []


def test_plain_http_never_builds_tls(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"plain")))
    assert fetch(pool, srv.url, tls=no_tls) == b"plain"


# -------------------------------------------------------------- bad input


@pytest.fixture
def counting(serve: Any) -> ScriptedServer:
    srv: ScriptedServer = serve(answering(response(b"ok")))
    return srv


def _nothing_sent(pool: hc.Pool, srv: ScriptedServer) -> None:
    # one good request afterwards is the only one the server ever saw
    assert fetch(pool, srv.url) == b"ok"
    assert srv.accepted == 1
    assert len(srv.requests) == 1


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1:{port}/",
        "127.0.0.1:{port}/x",
        "localhost:{port}/x",
        "//127.0.0.1:{port}/x",
        "http:///x",
        "http://:{port}/x",
        "http://127.0.0.1:abc/",
        "http://127.0.0.1:99999/",
        "http://127.0.0.1:-1/",
        "http://127.0.0.1:0/",
        "http://[::1/",
    ],
)
def test_bad_urls(pool: hc.Pool, counting: ScriptedServer, url: str) -> None:
    with pytest.raises(hc.InvalidURL):
        get(pool, url.format(port=counting.port))
    _nothing_sent(pool, counting)


@pytest.mark.parametrize(
    "headers",
    [
        {"x-a": "v\r\nx-injected: 1"},
        {"x-a": "v\nx-injected: 1"},
        {"x-a": "v\r"},
        {"bad name": "v"},
        {"x-a:b": "v"},
        {"x-a\r\nx-b": "v"},
        {"x-a": "\u20ac"},
        {"x-a": "\u65e5\u672c"},
        {"x-\u00e9\u20ac": "v"},
    ],
)
def test_bad_headers(pool: hc.Pool, counting: ScriptedServer, headers: dict[str, str]) -> None:
    with pytest.raises(hc.InvalidURL):
        get(pool, counting.url, headers=headers)
    _nothing_sent(pool, counting)


@pytest.mark.parametrize(
    ("proxy", "message"),
    [
        ("socks5://127.0.0.1:1", "unsupported proxy scheme 'socks5'"),
        ("socks5h://user:pw@127.0.0.1:1", "unsupported proxy scheme 'socks5h'"),
        ("http://127.0.0.1:notaport", "invalid proxy URL"),
        ("http://:8080", "invalid proxy URL"),
    ],
)
def test_bad_proxy_url(pool: hc.Pool, counting: ScriptedServer, proxy: str, message: str) -> None:
    with pytest.raises(hc.InvalidURL, match=message) as ei:
        get(pool, counting.url, environ={"http_proxy": proxy})
    assert "pw" not in str(ei.value)
    _nothing_sent(pool, counting)


def test_latin1_header_value_is_sent(pool: hc.Pool, counting: ScriptedServer) -> None:
    assert fetch(pool, counting.url, headers={"x-a": "caf\u00e9"}) == b"ok"
    assert b"x-a: caf\xe9\r\n" in counting.requests[0].raw_head


def test_path_is_quoted(pool: hc.Pool, counting: ScriptedServer) -> None:
    assert fetch(pool, counting.url + "/a b/%41?q=a b#frag") == b"ok"
    assert counting.requests[0].target == "/a%20b/%41?q=a%20b"


# ------------------------------------------------------------------- fork


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_reuse_the_parents_connections(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"one"), response(b"two")))
    assert fetch(pool, srv.url) == b"one"
    assert pool.idle_count() == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            code = 0 if pool.get(_key(srv)) is None else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert fetch(pool, srv.url) == b"two"  # the parent's connection is intact
    assert srv.accepted == 1


# -------------------------------------------------------- through a transport

KEY = "sk-test-key-123"
PROXY_PASSWORD = "proxy-PASSWORD-s3cret"
TEXT_OK = {
    "id": "resp_1",
    "status": "completed",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
    ],
}


@pytest.fixture
def global_pool() -> Iterator[None]:
    yield
    hc.POOL.close()  # no connection to this test's servers outlives it


def _proxy_env(monkeypatch: pytest.MonkeyPatch, proxy_url: str) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("NO_PROXY", "")


def test_transport_through_proxy(
    monkeypatch: pytest.MonkeyPatch,
    loopback: LoopbackServer,
    proxy: ForwardProxy,
    global_pool: None,
) -> None:
    _proxy_env(monkeypatch, proxy.url(f"user:{PROXY_PASSWORD}"))
    loopback.queue(Reply.json_body(TEXT_OK))
    t = OpenAIResponsesTransport(model="m", base_url=f"{loopback.url}/v1", api_key=KEY)
    assert t.complete(build_request()).text == "hi"
    seen = proxy.requests[0]
    assert seen.target == f"{loopback.url}/v1/responses"
    token = base64.b64encode(f"user:{PROXY_PASSWORD}".encode()).decode()
    assert seen.headers["proxy-authorization"] == f"Basic {token}"
    assert loopback.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "proxy-authorization" not in loopback.requests[0].headers


def test_transport_over_https_through_an_https_proxy_with_a_corporate_ca(
    monkeypatch: pytest.MonkeyPatch, serve: Any, certs: Any, global_pool: None
) -> None:
    """The whole stack: SSL_CERT_FILE names the CA (the transports' one TLS
    context), HTTPS_PROXY is an https:// proxy, the endpoint is https: TLS
    inside TLS through CONNECT."""
    from holon_cli.providers import http_common

    body = json.dumps(TEXT_OK).encode()
    endpoint = serve(
        answering(response(body, headers={"content-type": "application/json"})),
        tls=server_context(*certs["good"]),
    )
    # a fresh context from the test CA; monkeypatch puts the process's own back after
    monkeypatch.setattr(http_common, "_SSL_CONTEXT", None)
    monkeypatch.setenv("SSL_CERT_FILE", str(certs["good"][0]))
    with ForwardProxy(tls=server_context(*certs["good"])) as p:
        monkeypatch.setenv("HTTPS_PROXY", p.url(f"user:{PROXY_PASSWORD}"))
        monkeypatch.setenv("NO_PROXY", "")
        t = OpenAIResponsesTransport(
            model="m", base_url=f"https://127.0.0.1:{endpoint.port}/v1", api_key=KEY
        )
        assert t.complete(build_request()).text == "hi"
        assert p.requests[0].method == "CONNECT"
    assert endpoint.requests[0].headers["authorization"] == f"Bearer {KEY}"


def _failure_through_proxy(
    monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer, proxy_url: str
) -> ProviderFailure:
    """The transport's failure with ``proxy_url`` set: nothing reached the
    endpoint, and the proxy password shows nowhere in what is reported."""
    _proxy_env(monkeypatch, proxy_url)
    t = OpenAIResponsesTransport(model="m", base_url=f"{loopback.url}/v1", api_key=KEY)
    with pytest.raises(ProviderFailure) as ei:
        t.complete(build_request())
    f = ei.value
    shown = [str(f), f.message, f.hint or "", f.url or "", *f.source_chain]
    assert not [s for s in shown if PROXY_PASSWORD in s]
    assert loopback.requests == []
    return f


def test_transport_with_proxy_down(
    monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer, global_pool: None
) -> None:
    down = f"http://user:{PROXY_PASSWORD}@127.0.0.1:{closed_port()}"
    f = _failure_through_proxy(monkeypatch, loopback, down)
    assert (f.kind, f.stage) == ("connection", "connect")


def test_transport_with_a_socks_proxy_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer, global_pool: None
) -> None:
    socks = f"socks5://user:{PROXY_PASSWORD}@127.0.0.1:1080"
    f = _failure_through_proxy(monkeypatch, loopback, socks)
    assert f.kind == "client_error" and not f.retryable
    assert "unsupported proxy scheme 'socks5'" in f.message
    assert "cannot send a request to" in f.message


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_while_another_thread_holds_the_pool_lock_does_not_deadlock_the_child(
    serve: Any,
) -> None:
    srv = serve(answering(response(b"child")))
    pool = hc.POOL  # the process-wide pool: it is the one reset after a fork
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool._lock:
            held.set()
            release.wait(5)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    held.wait(5)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 3
            try:
                code = 0 if fetch(pool, srv.url, timeout=2.0) == b"child" else 1
            finally:
                os._exit(code)
        deadline = time.monotonic() + 5
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        if done[0] == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child hung on the pool lock its parent's thread held at the fork")
        assert os.waitstatus_to_exitcode(done[1]) == 0
    finally:
        release.set()
        t.join(5)


# ------------------------------------------------------------ odds and ends


def test_head_response_has_no_body(pool: hc.Pool, serve: Any) -> None:
    head_only = b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n"
    srv = serve(answering(head_only, response(b"next")))
    with get(pool, srv.url, method="HEAD") as r:
        assert (r.status_code, r.read()) == (200, b"")
    assert fetch(pool, srv.url) == b"next"  # the connection was reused, in step
    assert srv.accepted == 1


def test_credentials_in_the_url_become_basic_authorization(pool: hc.Pool, serve: Any) -> None:
    srv = serve(answering(response(b"a"), response(b"b")))
    url = f"http://me:p%40ss@127.0.0.1:{srv.port}/x"
    assert fetch(pool, url) == b"a"
    token = base64.b64encode(b"me:p@ss").decode()
    assert srv.requests[0].headers["authorization"] == f"Basic {token}"
    assert fetch(pool, url, headers={"Authorization": "Bearer k"}) == b"b"  # the caller's wins
    assert srv.requests[1].headers["authorization"] == "Bearer k"


def test_a_long_line_in_many_small_reads(pool: hc.Pool, serve: Any) -> None:
    line = b"data: " + b"x" * 20000
    pieces = [line[i : i + 7] for i in range(0, len(line), 7)] + [b"\n\nlast"]
    srv = serve(answering(chunked(*pieces)))
    with get(pool, srv.url) as r:
        assert list(r.iter_lines()) == [line.decode(), "", "last"]


def test_an_ascii_host_is_looked_up_without_the_idna_codec() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from holon_cli.providers import http_client as hc\n"
        "from loopback import closed_port\n"
        "try:\n"
        "    hc.Pool().request('GET', f'http://localhost:{closed_port()}/', timeout=1, "
        "tls=None, environ={})\n"
        "except hc.ConnectError:\n"
        "    pass\n"
        "print('encodings.idna' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "False"


def test_https_to_a_plain_http_server_says_so(pool: hc.Pool, loopback: LoopbackServer) -> None:
    plain = r"does not speak TLS there \(a plain http:// endpoint"
    with pytest.raises(hc.ConnectError, match=plain):
        get(pool, f"https://127.0.0.1:{loopback.port}/v1", tls=ssl.create_default_context)


def test_threads_share_one_pool_without_crossing_answers(pool: hc.Pool) -> None:
    """``holon serve`` runs turns on several threads through the one pool:
    each request gets its own answer, and idle connections are reused."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Echo(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            body = self.path.encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    wrong: list[str] = []

    def client(n: int) -> None:
        for i in range(15):
            path = f"/t{n}/r{i}"
            got = fetch(pool, url + path).decode()
            if got != path:
                wrong.append(f"{path} got {got}")

    try:
        threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
        assert wrong == []
        assert 1 <= pool.idle_count() <= pool.max_idle_per_key
    finally:
        server.shutdown()
        server.server_close()
