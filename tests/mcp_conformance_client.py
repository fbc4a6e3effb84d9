"""holon as the client under the official MCP conformance suite.

``@modelcontextprotocol/conformance client --command "python this.py"`` runs
this with the test server's URL as the last argument and the scenario in
``MCP_CONFORMANCE_SCENARIO``. It drives holon's own MCP plane (nothing of
the SDK directly): a throwaway home whose config names the server, then
what an agent would do: list the tools (``check``), call each one with
arguments made from its schema, and when a call asks for input, open the
operator request and answer it (content made from the requested schema),
which re-sends the call with ``inputResponses`` and the ``requestState``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

TEXT = "x"


def sample(schema: dict[str, Any]) -> Any:
    """A value a schema accepts (first enum value, else a plain one per type)."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "string")
    if t == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: sample(v) for k, v in props.items()}
    if t == "array":
        return [sample(schema.get("items") or {"type": "string"})]
    return {"number": 2, "integer": 2, "boolean": True, "null": None}.get(str(t), TEXT)


def main() -> int:
    global TEXT
    url = sys.argv[-1]
    if os.environ.get("MCP_CONFORMANCE_SCENARIO") == "http-custom-headers":
        TEXT = "Zürich"  # a header value that must travel base64-encoded
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or "auto"
    home = Path(tempfile.mkdtemp(prefix="holon-conformance-"))
    os.environ["HOLON_HOME"] = str(home)
    import yaml

    protocol = version if version in ("2026-07-28", "2025-11-25") else "auto"
    (home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "mcp_servers": {
                    # the suite starts its scenarios at once: a loaded machine is slow
                    "conf": {"url": url, "protocol": protocol, "startup_timeout": "90s"}
                }
            }
        )
    )
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.mcp import calls
    from holon_cli.runtime.mcp.config import find
    from holon_cli.runtime.mcp.requests import answer, open_request
    from holon_cli.store.config import load_config

    store, cfg = open_agent(None), load_config()
    spec = find(cfg, store.agent_id, "conf")
    rows = calls.check(store, cfg)
    if rows[0].get("error"):
        print(f"holon: {rows[0]['error']}", file=sys.stderr)
        return 1
    from holon_cli.runtime.mcp.records import cached_tools

    code = 0
    tools = cached_tools(spec) or []
    schemas = {str(t["name"]): t.get("inputSchema") or {} for t in tools}
    for tool in tools:
        name = str(tool["name"])
        args = sample(tool.get("inputSchema") or {"type": "object"})
        if name == "json_schema_echo":  # the scenario: the schema as holon keeps it, echoed
            args = {"schema": next(v for k, v in schemas.items() if k != name)}
        elif name.endswith("_null") and isinstance(args, dict):  # null parameters stay null
            args = {k: (None if k == "verbose" else v) for k, v in args.items()}
        out = calls.call_tool(store, cfg, spec, name, args if isinstance(args, dict) else {})
        while out.kind == "input_required":
            req = open_request(store, spec, name, args, out)
            schema = next(
                (
                    (q.get("params") or {}).get("requestedSchema") or {}
                    for q in (out.input_requests or {}).values()
                    if q.get("method") == "elicitation/create"
                ),
                {},
            )
            row = answer([store], req["id"], content=sample(schema) or {}, cfg=cfg)
            print(f"holon: {name}: answered {req['id']}: {row['outcome']}", file=sys.stderr)
            break
        if out.kind == "error":
            print(f"holon: {name}: {out.error_kind}: {out.error}", file=sys.stderr)
            code = 1
        elif out.kind == "result":
            print(f"holon: {name}: {out.result}", file=sys.stderr)
    calls.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
