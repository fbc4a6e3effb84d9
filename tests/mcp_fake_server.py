"""A small MCP server over stdio, standard library only (starts in ~20 ms),
for the behaviours real servers do not show on demand.

Usage: ``python tests/mcp_fake_server.py [--era modern|legacy|both]
[--discover answer|error|silent] [--log FILE] [--pidfile FILE]``

Tools:
- ``echo {text}``: the text back (``isError`` when text is ``"fail"``);
- ``crash``: the process exits in the middle of the call;
- ``flood {chars}``: a result of that many characters (and junk lines on
  stdout before it, which a client must skip);
- ``hang``: never answers;
- ``color``: asks for input: 2026-07-28 ``input_required`` with a
  ``requestState``; 2025-11-25 an ``elicitation/create`` request to the
  client; the answer's color is the result (``declined`` on a decline);
- ``child``: starts a grandchild ``sleep`` that ignores SIGTERM? no: a plain
  ``sleep 600`` in the same process group (orphan tests read its pid from
  ``--pidfile``).

Every request's method (and its ``_meta``) is appended to ``--log`` as a
JSON line, so tests can see what the client sent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

MODERN, LEGACY = "2026-07-28", "2025-11-25"
TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "$defs": {"unused": {"type": "string"}},
        },
    },
    {"name": "crash", "description": "Exit mid-call.", "inputSchema": {"type": "object"}},
    {
        "name": "flood",
        "description": "A very long result.",
        "inputSchema": {"type": "object", "properties": {"chars": {"type": "integer"}}},
    },
    {"name": "hang", "description": "Never answer.", "inputSchema": {"type": "object"}},
    {"name": "noise", "description": "Flood stderr.", "inputSchema": {"type": "object"}},
    {"name": "sample", "description": "Ask for sampling.", "inputSchema": {"type": "object"}},
    {
        "name": "color",
        "description": "Ask the user for a color.",
        "inputSchema": {"type": "object"},
    },
    {"name": "child", "description": "Start a grandchild.", "inputSchema": {"type": "object"}},
    {
        "name": "environ",
        "description": "What the process sees: variable names, cwd, whether a path exists.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
]
SCHEMA = {
    "type": "object",
    "properties": {"color": {"type": "string"}},
    "required": ["color"],
}


def send(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def result(mid, res: dict) -> None:
    send({"jsonrpc": "2.0", "id": mid, "result": res})


def error(mid, code: int, message: str, data=None) -> None:
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    send({"jsonrpc": "2.0", "id": mid, "error": err})


def text(t: str, *, is_error: bool = False, modern: bool = True) -> dict:
    out = {"content": [{"type": "text", "text": t}], "isError": is_error}
    if modern:
        out["resultType"] = "complete"
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--era", default="both")
    ap.add_argument("--discover", default="answer")
    ap.add_argument("--log")
    ap.add_argument("--pidfile")
    a = ap.parse_args()
    era = None  # settled by the first handshake
    pending_elicit = None  # (call id) waiting for a legacy elicitation answer
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method = msg.get("method")
        mid = msg.get("id")
        params = msg.get("params") or {}
        if a.log:
            with open(a.log, "a") as f:
                rec = {"method": method, "meta": params.get("_meta"), "t": time.time()}
                f.write(json.dumps(rec) + "\n")
        if method is None:  # a response: the legacy elicitation's answer
            if pending_elicit is not None:
                res = msg.get("result") or {}
                color = (res.get("content") or {}).get("color")
                answer = color if res.get("action") == "accept" else res.get("action")
                result(pending_elicit, text(f"color: {answer}", modern=False))
                pending_elicit = None
            continue
        if method == "server/discover":
            if a.discover == "silent":
                continue
            if a.discover == "error" or a.era == "legacy":
                error(mid, -32601, "Method not found")
                continue
            era = MODERN
            result(
                mid,
                {
                    "ttlMs": 0,
                    "cacheScope": "public",
                    "supportedVersions": [MODERN],
                    "capabilities": {"tools": {}},
                    "resultType": "complete",
                },
            )
        elif method == "initialize":
            if a.era == "modern":
                error(mid, -32022, "Unsupported protocol version", {"supported": [MODERN]})
                continue
            era = LEGACY
            result(
                mid,
                {
                    "protocolVersion": LEGACY,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake", "version": "1"},
                },
            )
        elif method == "notifications/initialized" or mid is None:
            continue
        elif method == "tools/list":
            res = {"tools": TOOLS}
            if era == MODERN:
                res.update(ttlMs=0, cacheScope="public", resultType="complete")
            result(mid, res)
        elif method == "tools/call":
            modern = era == MODERN
            name = params.get("name")
            args = params.get("arguments") or {}
            if name == "echo":
                t = str(args.get("text"))
                result(mid, text(t, is_error=t == "fail", modern=modern))
            elif name == "crash":
                os._exit(3)
            elif name == "flood":
                for _ in range(5):
                    sys.stdout.write("this is not JSON-RPC\n")
                result(mid, text("x" * int(args.get("chars") or 100000), modern=modern))
            elif name == "hang":
                continue
            elif name == "noise":  # floods stderr, then answers
                chunk = "noise " * 10000 + "\n"
                for _ in range(100):
                    sys.stderr.write(chunk)
                sys.stderr.flush()
                result(mid, text("quiet now", modern=modern))
            elif name == "sample" and modern:
                result(
                    mid,
                    {
                        "resultType": "input_required",
                        "inputRequests": {
                            "s1": {
                                "method": "sampling/createMessage",
                                "params": {"messages": [], "maxTokens": 10},
                            }
                        },
                    },
                )
            elif name == "child":
                p = subprocess.Popen(["sleep", "600"])
                if a.pidfile:
                    with open(a.pidfile, "w") as f:
                        f.write(f"{os.getpid()} {p.pid}\n")
                result(mid, text(f"started {p.pid}", modern=modern))
            elif name == "environ":
                seen = {
                    "names": sorted(os.environ),
                    "env": {k: v for k, v in os.environ.items() if k.startswith("FAKE_")},
                    "cwd": os.getcwd(),
                    "exists": os.path.exists(str(args.get("path") or "/")),
                }
                result(mid, text(json.dumps(seen), modern=modern))
            elif name == "color" and modern:
                responses = params.get("inputResponses") or {}
                if "c1" in responses:
                    r = responses["c1"]
                    answer = (
                        (r.get("content") or {}).get("color")
                        if r.get("action") == "accept"
                        else r.get("action")
                    )
                    result(mid, text(f"color: {answer} (state {params.get('requestState')})"))
                else:
                    result(
                        mid,
                        {
                            "resultType": "input_required",
                            "inputRequests": {
                                "c1": {
                                    "method": "elicitation/create",
                                    "params": {
                                        "mode": "form",
                                        "message": "Which color?",
                                        "requestedSchema": SCHEMA,
                                    },
                                }
                            },
                            "requestState": "state-1",
                        },
                    )
            elif name == "color":
                pending_elicit = mid
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": "elicit-1",
                        "method": "elicitation/create",
                        "params": {"message": "Which color?", "requestedSchema": SCHEMA},
                    }
                )
            else:
                error(mid, -32602, f"Unknown tool: {name}")
        else:
            error(mid, -32601, "Method not found")


if __name__ == "__main__":
    main()
