"""The fake OpenAI Responses server the benchmarks share (127.0.0.1, in the
benchmark's own process).

It answers like a real API server: keep-alive (HTTP/1.1), ``TCP_NODELAY``,
and the status line, headers and body in one write. Without the last two,
Nagle's algorithm and the client's delayed ACK stall a round by ~40 ms
(``tests/benchmarks/test_benchmark_tools.py`` pins this). A benchmark
subclasses :class:`ResponsesHandler` and answers each POST with :meth:`reply`.

A request with ``"stream": true`` (what ``codex exec`` sends) gets the same
response as an event stream (``response.created``, one
``response.output_item.done`` per output item, ``response.completed``), also
in one write, so holon and Codex CLI can be measured on one fake.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def start(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """A server of ``handler`` on 127.0.0.1 (a free port), serving on a
    daemon thread; ``shutdown()`` it when done."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    return server


def base_url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def use(server: ThreadingHTTPServer, model: str | None = None) -> None:
    """Point this process (and what it starts) at ``server`` as the OpenAI
    provider; ``model`` becomes ``HOLON_MODEL`` (else none is set)."""
    os.environ["OPENAI_BASE_URL"] = base_url(server)
    os.environ["OPENAI_API_KEY"] = "bench-key"
    os.environ.pop("HOLON_FALLBACK_MODELS", None)
    if model is None:
        os.environ.pop("HOLON_MODEL", None)
    else:
        os.environ["HOLON_MODEL"] = model


def function_call(n: int, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses ``output`` of one function call (id and call id numbered ``n``)."""
    return [
        {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": name,
            "arguments": json.dumps(arguments),
            "status": "completed",
        }
    ]


def message(text: str) -> list[dict[str, Any]]:
    """A Responses ``output`` of one assistant message."""
    return [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    ]


def this_turn(items: list[Any]) -> list[Any]:
    """The input items of the current turn: from holon's newest message (a
    user item starting ``[message ``) on. holon's input also carries the
    agent's earlier turns, whole (issue 44); another client's (Codex) is one
    turn: all of it."""
    start = 0
    for i, it in enumerate(items):
        parts = it.get("content") if isinstance(it, dict) and it.get("role") == "user" else None
        if isinstance(parts, list) and parts and isinstance(parts[0], dict):
            if str(parts[0].get("text", "")).startswith("[message "):
                start = i
    return items[start:]


def this_turns_results(items: list[Any]) -> int:
    """Tool results (``function_call_output``) the current turn sent."""
    return sum(
        1
        for it in this_turn(items)
        if isinstance(it, dict) and it.get("type") == "function_call_output"
    )


class ResponsesHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    wbufsize = 64 * 1024  # buffered: everything leaves at the one flush in reply()

    def log_message(self, *a: object) -> None:  # quiet
        pass

    stream = False

    def read_json(self) -> Any:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.stream = isinstance(body, dict) and body.get("stream") is True
        return body

    def reply(
        self,
        output: list[dict[str, Any]],
        input_tokens: int,
        output_tokens: int,
        resp_id: str = "resp_bench",
    ) -> None:
        resp = {
            "id": resp_id,
            "object": "response",
            "status": "completed",
            "model": "bench",
            "output": output,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            },
        }
        if self.stream:
            self._reply_stream(resp)
            return
        data = json.dumps(resp).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _reply_stream(self, resp: dict[str, Any]) -> None:
        created = {**resp, "status": "in_progress", "output": []}
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": created}),
        ]
        for i, item in enumerate(resp["output"]):
            events.append(("response.output_item.done", {"output_index": i, "item": item}))
        events.append(("response.completed", {"response": resp}))
        data = b"".join(
            f"event: {name}\ndata: {json.dumps({'type': name, **fields})}\n\n".encode()
            for name, fields in events
        )
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
