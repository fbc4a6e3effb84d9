"""A loopback model server speaking the three wire APIs holon sends to
(OpenAI Responses, Chat Completions, Anthropic Messages), answering from a
script and keeping every request body exactly as it arrived: what the
prompt-cache figures are measured on (``projection_eval.py``).

- ``POST /v1/responses``: a stored response (``store: true``) can be
  continued with ``previous_response_id`` as the API does (unknown id: 400
  ``previous_response_not_found``); each request's *effective* input (the
  stored chain expanded) is kept beside the bytes, so an incremental request
  is measured on what the provider caches, not only on what was sent.
- ``POST /v1/chat/completions`` and ``POST /v1/messages``: JSON answers.

An answer is the next step of :attr:`WireServer.steps`: a string (a final
answer) or ``{"tool_calls": [{"name", "arguments"}]}``; with no step left,
"done". Tool call ids are ``call_<n>``, n counting every call served.

    with WireServer() as srv:
        srv.steps.extend([{"tool_calls": [...]}, "the answer"])
        ... point a provider at srv.base_url ...
        srv.requests[0].raw   # the bytes sent
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = Any


@dataclass
class WireRequest:
    api: str  # responses | chat | anthropic
    raw: bytes  # the body as sent
    # the request as the provider sees it: for a continued Responses request,
    # the stored chain expanded (``previous_response_id`` gone); else ``raw``
    effective: bytes
    incremental: bool = False
    body: dict[str, Any] = field(default_factory=dict)


class WireServer:
    """127.0.0.1, port 0; a thread serves it. Use as a context manager."""

    def __init__(self) -> None:
        self.steps: deque[Step] = deque()
        self.requests: list[WireRequest] = []
        self.calls = 0
        self.responses = 0
        self.last_step: Step = None  # the step the newest answer came from
        self.stored: dict[str, list[Any]] = {}  # response id -> effective input + output
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> WireServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -------------------------------------------------------------- answers

    def next_step(self) -> tuple[str, list[dict[str, Any]]]:
        """(text, calls) of the next scripted answer."""
        step = self.steps.popleft() if self.steps else "done"
        self.last_step = step
        if isinstance(step, str):
            return step, []
        calls = []
        for c in step.get("tool_calls") or []:
            self.calls += 1
            calls.append({"id": f"call_{self.calls}", **c})
        return str(step.get("text") or ""), calls

    def answer(self, api: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        body = json.loads(raw)
        with self.lock:
            self.responses += 1
            rid = f"resp_{self.responses}"
            if api == "responses":
                return self._responses(body, raw, rid)
            text, calls = self.next_step()
            self.requests.append(WireRequest(api, raw, raw, False, body))
            usage_in = prompt_tokens(raw)
            if api == "chat":
                return 200, _chat(rid, text, calls, usage_in)
            return 200, _anthropic(rid, text, calls, usage_in)

    def _responses(self, body: dict[str, Any], raw: bytes, rid: str) -> tuple[int, dict[str, Any]]:
        prev = body.get("previous_response_id")
        items = list(body.get("input") or [])
        effective = raw
        if prev is not None:
            if prev not in self.stored:
                err = {
                    "message": "Previous response not found.",
                    "code": "previous_response_not_found",
                }
                return 400, {"error": {"type": "invalid_request_error", **err}}
            items = [*self.stored[prev], *items]
            full = {k: v for k, v in body.items() if k != "previous_response_id"}
            full["input"] = items
            effective = json.dumps(full, ensure_ascii=False).encode("utf-8")
        text, calls = self.next_step()
        output: list[dict[str, Any]] = []
        if text:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{rid}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        for c in calls:
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{c['id']}",
                    "call_id": c["id"],
                    "name": c["name"],
                    "arguments": json.dumps(c.get("arguments") or {}),
                    "status": "completed",
                }
            )
        if body.get("store"):
            self.stored[rid] = [*items, *output]
        self.requests.append(WireRequest("responses", raw, effective, prev is not None, body))
        n = prompt_tokens(effective)
        return 200, {
            "id": rid,
            "object": "response",
            "status": "completed",
            "model": str(body.get("model")),
            "output": output,
            "usage": {"input_tokens": n, "output_tokens": 10, "total_tokens": n + 10},
        }


def prompt_tokens(body: bytes) -> int:
    """Input tokens as the runtime estimates them (bytes / 4; here of the
    whole body as the provider holds it, so never fewer than the runtime's
    own estimate: the budget invariant is checked with that estimate)."""
    return len(body) // 4


def _chat(rid: str, text: str, calls: list[dict[str, Any]], n: int) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})},
            }
            for c in calls
        ]
    return {
        "id": rid,
        "object": "chat.completion",
        "model": "bench",
        "choices": [
            {"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": n, "completion_tokens": 10, "total_tokens": n + 10},
    }


def _anthropic(rid: str, text: str, calls: list[dict[str, Any]], n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for c in calls:
        content.append(
            {
                "type": "tool_use",
                "id": c["id"],
                "name": c["name"],
                "input": c.get("arguments") or {},
            }
        )
    return {
        "id": rid,
        "type": "message",
        "role": "assistant",
        "model": "bench",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "usage": {"input_tokens": n, "output_tokens": 10},
    }


def _handler(server: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        wbufsize = 64 * 1024

        def log_message(self, *a: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            path = self.path.rstrip("/")
            api = (
                "responses"
                if path.endswith("/responses")
                else "chat"
                if path.endswith("/chat/completions")
                else "anthropic"
            )
            status, obj = server.answer(api, raw)
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    return Handler


# ------------------------------------------------------------- measuring


def comparable(req: WireRequest) -> bytes:
    """A request's bytes as the provider matches a cached prefix: the
    effective body, Anthropic's ``cache_control`` markers taken out (they mark
    where a prefix ends; they are not prompt content)."""
    data = req.effective
    if req.api == "anthropic":
        data = data.replace(b', "cache_control": {"type": "ephemeral"}', b"")
    return data


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    lo = 0
    # compare in blocks first (requests are tens of KB)
    step = 4096
    while lo + step <= n and a[lo : lo + step] == b[lo : lo + step]:
        lo += step
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


def body_end(data: bytes) -> int:
    """Where a JSON body's content ends: before its closing brackets."""
    end = len(data)
    while end and data[end - 1 : end] in (b"]", b"}", b" ", b"\n"):
        end -= 1
    return end
