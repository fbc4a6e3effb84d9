"""An MCP tool result as the model sees it.

The result's ``content`` blocks become text (text as is; images, audio and
binary resources saved as files under ``.holon/outputs/`` and named by
path; resource links by URI), then its ``structured_content`` when the text
does not already carry it. That text is bounded like ``ExecCommand`` output
(``runtime.default_tool_output_tokens``; its head and tail kept, the whole
text saved as an artifact whose path the model is given) and fenced as
evidence: a server's words are information, never instructions.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from holon_cli import clock

if TYPE_CHECKING:
    from holon_cli.store.agent_store import AgentStore

CHARS_PER_TOKEN = 4
DEFAULT_OUTPUT_TOKENS = 8_000
_EXT = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "audio/wav": ".wav",
    "audio/mpeg": ".mp3",
    "application/pdf": ".pdf",
}


class Rendered(NamedTuple):
    text: str  # fenced, bounded: what goes into the envelope
    is_error: bool
    truncated: bool
    total_chars: int
    artifacts: list[dict[str, object]]


def outputs_dir(store: AgentStore) -> Path:
    return Path(store.layout.runtime) / "outputs"


def _save(store: AgentStore, stem: str, suffix: str, data: bytes) -> str:
    from holon_cli.store.fsio import atomic_write_bytes

    path = outputs_dir(store) / f"{stem}{suffix}"
    atomic_write_bytes(path, data)
    return str(path)


def _blob(store: AgentStore, stem: str, n: int, mime: str, b64: str) -> tuple[str, int]:
    try:
        data = base64.b64decode(b64, validate=False)
    except (ValueError, TypeError):
        data = b64.encode()
    return _save(store, f"{stem}.{n}", _EXT.get(mime, ".bin"), data), len(data)


def content_text(
    store: AgentStore, stem: str, result: Mapping[str, object], artifacts: list[dict[str, object]]
) -> str:
    parts: list[str] = []
    content = result.get("content")
    for n, block in enumerate(content if isinstance(content, list) else [], 1):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text") or ""))
        elif kind in ("image", "audio"):
            mime = str(block.get("mimeType") or "application/octet-stream")
            path, size = _blob(store, stem, n, mime, str(block.get("data") or ""))
            artifacts.append({"kind": kind, "path": path, "bytes": size, "mime_type": mime})
            parts.append(f"[{kind} {mime}, {size} bytes, saved to {path}]")
        elif kind == "resource_link":
            desc = f": {block['description']}" if block.get("description") else ""
            parts.append(f"[resource link {block.get('uri')} ({block.get('name')}){desc}]")
        elif kind == "resource":
            res = block.get("resource") or {}
            uri = res.get("uri")
            if "text" in res:
                parts.append(f"[resource {uri}]\n{res.get('text')}")
            else:
                mime = str(res.get("mimeType") or "application/octet-stream")
                path, size = _blob(store, stem, n, mime, str(res.get("blob") or ""))
                artifacts.append({"kind": "resource", "path": path, "bytes": size, "uri": uri})
                parts.append(f"[resource {uri} {mime}, {size} bytes, saved to {path}]")
        else:
            parts.append(json.dumps(block, ensure_ascii=False))
    structured = result.get("structuredContent")
    if structured is not None and not _carried(parts, structured):
        parts.append("structured content:\n" + json.dumps(structured, ensure_ascii=False, indent=1))
    return "\n".join(parts)


def _carried(parts: list[str], structured: Any) -> bool:
    """Whether a text block already is the structured content as JSON (the
    spec asks servers to send both; showing it twice spends tokens)."""
    for p in parts:
        try:
            if json.loads(p) == structured:
                return True
        except ValueError:
            continue
    return False


def render(
    store: AgentStore,
    result: Mapping[str, object],
    *,
    server: str,
    tool: str,
    salt: str,
    budget: int = DEFAULT_OUTPUT_TOKENS * CHARS_PER_TOKEN,
    fenced: bool = True,
) -> Rendered:
    """``budget``: characters shown (the tool output budget in tokens x 4);
    ``fenced=False``: the bounded text only (a message's renderer fences it)."""
    from holon_cli.runtime.prompt import fence

    stem = f"mcp-{clock.new_id('out')}"
    artifacts: list[dict[str, object]] = []
    text = content_text(store, stem, result, artifacts)
    truncated = len(text) > budget
    shown = text
    if truncated:
        path = _save(store, stem, ".txt", text.encode("utf-8", "replace"))
        artifacts.insert(0, {"kind": "output", "path": path, "bytes": len(text.encode())})
        head, tail = text[: budget // 2], text[-(budget - budget // 2) :]
        omitted = len(text) - len(head) - len(tail)
        shown = (
            f"{head}\n[... {omitted} chars omitted; the full result ({len(text)} chars) was "
            f"saved to {path} (inspect it with `sed -n 'START,ENDp'`, `rg -n` or `tail`) ...]\n"
            f"{tail}"
        )
    if fenced:
        shown = fence(shown, authority="mcp_tool_result", source=f"mcp:{server}/{tool}", salt=salt)
    return Rendered(shown, bool(result.get("isError")), truncated, len(text), artifacts)
