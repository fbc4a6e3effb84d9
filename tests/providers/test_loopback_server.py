"""The loopback test server itself: it must not add latency a real API
server would not (Nagle + delayed ACK), and its validating hook must answer
instead of the queued reply without consuming it."""

from __future__ import annotations

import socket
import statistics
import time

from loopback import LoopbackServer, RecordedRequest, Reply


def _keepalive_round_trips(srv: LoopbackServer, n: int) -> list[float]:
    """``n`` small POSTs on one keep-alive connection from a client that, like
    httpcore, sets TCP_NODELAY: any stall left is the server's."""
    out: list[float] = []
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(5)
        f = s.makefile("rb")
        for _ in range(n):
            body = b'{"x": 1}'
            head = (
                "POST /v1/x HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n"
            ).encode()
            t0 = time.perf_counter()
            s.sendall(head + body)
            status = f.readline()
            length = 0
            while (line := f.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            f.read(length)
            out.append((time.perf_counter() - t0) * 1000)
            assert status.startswith(b"HTTP/1.1 200")
    return out


def test_no_nagle_delayed_ack_stall(loopback: LoopbackServer) -> None:
    n = 30
    loopback.queue(*[Reply.json_body({"ok": i}) for i in range(n)])
    times = _keepalive_round_trips(loopback, n)
    # a stall is 40 ms (the delayed-ACK timer); an unstalled loopback request
    # takes well under a millisecond even on a loaded machine
    assert statistics.median(times) < 20, [round(t, 1) for t in times]


def test_check_answers_instead_of_the_queued_reply(loopback: LoopbackServer) -> None:
    import httpx2

    def strict(req: RecordedRequest) -> Reply | None:
        return Reply.json_body({"error": "bad"}, status=500) if b"bad" in req.body else None

    loopback.check = strict
    loopback.queue(Reply.json_body({"ok": True}))
    with httpx2.Client() as c:
        assert c.post(f"{loopback.url}/x", content=b"bad").status_code == 500
        assert loopback.pending == 1
        r = c.post(f"{loopback.url}/x", content=b"good")
        assert r.status_code == 200 and r.json() == {"ok": True}
    assert len(loopback.requests) == 2
