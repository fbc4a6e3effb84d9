"""A provider request, a response and a tool result as plain JSON documents;
packing them content-addressed; the volatile fields; the diff form.

Documents are built from the values' own fields (``vars`` of the
:class:`~holon_cli.model.value.Value` classes, ``dataclasses.asdict`` of the
tool effects), so whatever today's code puts in a prompt frame, in the
conversation or in the tool specs is recorded and compared: nothing here
knows the prompt's layout. The request's routing fields (``state_dir``,
``agent_id``, ``turn_id``: where a transport keeps state, never sent) are
left out.

Packing (:func:`pack`): every string of at least :data:`MIN_BLOB` characters
and every list element whose packed JSON is that long is stored once under a
digest of its content (``{"$blob": key}``); a turn's rounds repeat the
instructions, the tools and the conversation so far, so a round adds only
what is new. A literal key starting with ``$`` is escaped (``$$``).

Normalisation (:func:`normalise`), applied to both sides of a comparison:
the home's and the workspace's absolute paths become ``$HOLON_HOME`` and
``$WORKSPACE`` (a home moved or copied elsewhere replays the same),
ISO-8601 timestamps become ``<time>``, the trigger URL's token becomes
``<trigger-token>`` (it is also never written to a record: a capability
secret), and the frame's ``prompt_cache_key`` and ``context_fingerprint``
(hashes over the blocks, paths included; its cache record's too) become
``<derived>``: a change behind them shows in the blocks themselves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli.digest import sha256_hex
from holon_cli.model.typed_base import Json

if TYPE_CHECKING:
    from holon_cli.model.provider import ModelResponse
    from holon_cli.model.tool import ToolResult
    from holon_cli.model.typed import JsonObject
    from holon_cli.providers.base import ProviderRequest

# packed values by key (see :func:`pack`): what the record's ``blobs`` holds
Blobs = dict[str, Json]

BLOB = "$blob"
MIN_BLOB = 64
REQUEST_SKIP = frozenset({"state_dir", "agent_id", "turn_id"})
DERIVED = frozenset({"prompt_cache_key", "context_fingerprint"})
TIME_RE = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
TRIGGER_RE = re.compile(r"(/callbacks/wake/)[A-Za-z0-9_\-.~%]+")
TIME_TOKEN = "<time>"
TRIGGER_TOKEN = r"\1<trigger-token>"
HOME_TOKEN = "$HOLON_HOME"
WORKSPACE_TOKEN = "$WORKSPACE"


# ------------------------------------------------------------ documents


def plain(value: Any) -> Any:
    """A value as JSON: value classes by their fields, paths as text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict):
        return {k: plain(v) for k, v in fields.items() if not k.startswith("_")}
    return str(value)


def redact(value: Any) -> Any:
    """The trigger token out of every string (it must never reach a record)."""
    return map_strings(value, lambda s: TRIGGER_RE.sub(TRIGGER_TOKEN, s) if "/wake/" in s else s)


def request_doc(request: ProviderRequest, memo: Memo | None = None) -> JsonObject:
    """What the model is sent, transport-neutral (see the module docstring)."""
    memo = memo or Memo()
    out: JsonObject = {}
    for k, v in vars(request).items():
        if k in REQUEST_SKIP:
            continue
        out[k] = [memo.doc(x) for x in v] if isinstance(v, list) else redact(plain(v))
    return out


def packed_request(request: ProviderRequest, memo: Memo, blobs: Blobs) -> JsonObject:
    """``pack(request_doc(request))``, the lists' elements packed once per turn."""
    out: JsonObject = {}
    for k, v in vars(request).items():
        if k in REQUEST_SKIP:
            continue
        out[k] = (
            [memo.packed(x, blobs) for x in v]
            if isinstance(v, list)
            else pack(redact(plain(v)), blobs)
        )
    return out


class Memo:
    """The documents (and packed forms) of a request's list elements, by
    identity: the tool specs and the conversation so far are the same
    objects round after round, so each is converted once.

    Entries live by generation: :meth:`next_generation` (a new turn) keeps
    only what the last generation used, so a process running turn after
    turn (``serve``) converts its tool specs once and lets finished turns'
    conversation go. Each entry keeps its object, so an id is never reused
    while it is remembered."""

    def __init__(self) -> None:
        self._docs: dict[int, tuple[Any, Any]] = {}
        self._packed: dict[int, tuple[Any, Any, Blobs]] = {}
        self._used: set[int] = set()

    def next_generation(self) -> None:
        used, self._used = self._used, set()
        self._docs = {k: v for k, v in self._docs.items() if k in used}
        self._packed = {k: v for k, v in self._packed.items() if k in used}

    def doc(self, obj: Any) -> Any:
        key = id(obj)
        self._used.add(key)
        hit = self._docs.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        d = redact(plain(obj))
        self._docs[key] = (obj, d)
        return d

    def packed(self, obj: Any, blobs: Blobs) -> Any:
        key = id(obj)
        self._used.add(key)
        hit = self._packed.get(key)
        if hit is None or hit[0] is not obj:
            own: Blobs = {}
            hit = (obj, pack([self.doc(obj)], own)[0], own)
            self._packed[key] = hit
        blobs.update(hit[2])
        return hit[1]


# one per process: the turns of one process share their tool specs' conversion
SHARED = Memo()


def response_doc(response: ModelResponse) -> JsonObject:
    out = plain(response)
    assert isinstance(out, dict)
    return out


def _known(cls: Any, d: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``d`` that ``cls.__init__`` takes (a record of a newer
    holon may carry fields this one does not know)."""
    code = cls.__init__.__code__
    names = set(code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount])
    return {k: v for k, v in d.items() if k in names}


def response_from_doc(d: dict[str, Any]) -> ModelResponse:
    from holon_cli.model.provider import ModelResponse, TokenUsage, ToolCall

    blocks: list[dict[str, Any]] = []
    for b in d.get("blocks") or []:
        if b.get("type") == "tool_call" and isinstance(b.get("call"), dict):
            blocks.append({**b, "call": ToolCall(**_known(ToolCall, b["call"]))})
        else:
            blocks.append(dict(b))
    fields = _known(ModelResponse, d)
    fields["blocks"] = blocks
    usage = d.get("usage")
    fields["usage"] = TokenUsage(**_known(TokenUsage, usage)) if isinstance(usage, dict) else None
    fields.setdefault("stop_reason", "end_turn")
    return ModelResponse(**fields)


def tool_doc(result: ToolResult) -> JsonObject:
    """A tool result as the turn loop reads it (content, error, warnings and
    the typed effects; the tool's own ``data`` is not read by the loop)."""
    import dataclasses

    return {
        "ok": result.ok,
        "content": result.content,
        "error": plain(result.error),
        "warnings": plain(result.warnings),
        "effects": plain(dataclasses.asdict(result.effects)),
    }


def tool_from_doc(d: dict[str, Any]) -> ToolResult:
    import dataclasses

    from holon_cli.model.tool import SleepRequest, ToolEffects, ToolResult

    raw = dict(d.get("effects") or {})
    names = {f.name for f in dataclasses.fields(ToolEffects)}
    fx = {k: v for k, v in raw.items() if k in names}
    if isinstance(fx.get("sleep"), dict):
        sleep_names = {f.name for f in dataclasses.fields(SleepRequest)}
        fx["sleep"] = SleepRequest(**{k: v for k, v in fx["sleep"].items() if k in sleep_names})
    return ToolResult(
        ok=bool(d.get("ok")),
        content=str(d.get("content") or ""),
        error=d.get("error"),
        warnings=list(d.get("warnings") or []),
        effects=ToolEffects(**fx),
    )


# -------------------------------------------------------------- packing


def _key(tag: str, text: str) -> str:
    return sha256_hex((tag + text).encode("utf-8", "surrogatepass"))[:20]


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def pack(value: Any, blobs: Blobs) -> Any:
    """``value`` with its long strings and list elements moved into ``blobs``."""
    if isinstance(value, str):
        if len(value) < MIN_BLOB:
            return value
        key = _key("s", value)
        blobs.setdefault(key, value)
        return {BLOB: key}
    if isinstance(value, list):
        out = []
        for item in value:
            p = pack(item, blobs)
            if isinstance(p, (dict, list)) and not _is_ref(p):
                text = _dump(p)
                if len(text) >= MIN_BLOB:
                    key = _key("j", text)
                    blobs.setdefault(key, p)
                    p = {BLOB: key}
            out.append(p)
        return out
    if isinstance(value, dict):
        return {("$" + k if k.startswith("$") else k): pack(v, blobs) for k, v in value.items()}
    return value


def _is_ref(v: Any) -> bool:
    return isinstance(v, dict) and len(v) == 1 and BLOB in v


def unpack(value: Any, blobs: Mapping[str, object], cache: dict[str, object] | None = None) -> Any:
    """The inverse of :func:`pack`. Raises ``KeyError`` for a missing blob.
    With ``cache`` (blob key -> unpacked value, shared: not to be mutated)
    a blob repeated across requests is unpacked once."""
    if isinstance(value, dict):
        if _is_ref(value):
            key = value[BLOB]
            if cache is None:
                return unpack(blobs[key], blobs)
            if key not in cache:
                cache[key] = unpack(blobs[key], blobs, cache)
            return cache[key]
        return {
            (k[1:] if k.startswith("$$") else k): unpack(v, blobs, cache) for k, v in value.items()
        }
    if isinstance(value, list):
        return [unpack(v, blobs, cache) for v in value]
    return value


# --------------------------------------------------------- normalising


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [map_strings(v, fn) for v in value]
    return value


def path_subs(pairs: Iterable[tuple[str | Path | None, str]]) -> list[tuple[str, str]]:
    """Substitutions of absolute paths, longest first (a workspace inside
    the home is named as the workspace)."""
    out: dict[str, str] = {}
    for p, token in pairs:
        if p is None:
            continue
        s = str(p).rstrip("/")
        if len(s) > 1 and s not in out:
            out[s] = token
    return sorted(out.items(), key=lambda kv: len(kv[0]), reverse=True)


def path_text(doc: Mapping[str, object], subs: list[tuple[str, str]]) -> str:
    """The document as one JSON text, its paths substituted and its derived
    hashes blanked: equal texts mean equal normalised documents (the quick
    test before :func:`normalise` walks them; timestamps and the trigger
    token are equal on both sides of a match already)."""
    frame = doc.get("frame")
    if isinstance(frame, dict) and DERIVED & frame.keys():
        doc = {**doc, "frame": _blank_derived(frame)}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    for path, token in subs:
        text = text.replace(path, token)
    return text


def normalise(doc: Any, subs: list[tuple[str, str]]) -> Any:
    """Both sides of a comparison through the same rules (module docstring)."""

    def fix(s: str) -> str:
        for path, token in subs:
            if path in s:
                s = s.replace(path, token)
        if "/wake/" in s:
            s = TRIGGER_RE.sub(TRIGGER_TOKEN, s)
        if "T" in s and ":" in s:
            s = TIME_RE.sub(TIME_TOKEN, s)
        return s

    out = map_strings(doc, fix)
    frame = out.get("frame") if isinstance(out, dict) else None
    if isinstance(frame, dict):
        out["frame"] = _blank_derived(frame)
    return out


def _blank_derived(frame: Mapping[str, object]) -> dict[str, object]:
    """The frame with its derived hashes blanked, its cache record's too."""
    out = {k: ("<derived>" if k in DERIVED else v) for k, v in frame.items()}
    cache = out.get("cache")
    if isinstance(cache, dict):
        out["cache"] = {k: ("<derived>" if k in DERIVED else v) for k, v in cache.items()}
    return out


# ---------------------------------------------------------------- diffs


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` in document order: ``frame.system_blocks[2]``."""
    if isinstance(value, dict):
        if not value:
            yield path, {}
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        if not value:
            yield path, []
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def text_lines(doc: Any) -> list[str]:
    """The document as lines to diff: one line per scalar, a text's lines
    indented under its path (so a changed line of AGENTS.md is one line)."""
    out: list[str] = []
    for path, v in leaves(doc):
        if isinstance(v, str) and ("\n" in v or len(v) > 100):
            out.append(f"{path}:")
            out.extend("  " + line for line in v.split("\n"))
        else:
            out.append(f"{path}: {json.dumps(v, ensure_ascii=False)}")
    return out


def first_difference(recorded: Any, replayed: Any) -> tuple[str, Any, Any] | None:
    """The first leaf (in the recorded document's order) that differs:
    ``(path, recorded value, replayed value)``, a missing side ``None``."""
    if recorded == replayed:
        return None
    a, b = list(leaves(recorded)), list(leaves(replayed))
    bmap = dict(b)
    amap = dict(a)
    for i in range(max(len(a), len(b))):
        pa = a[i] if i < len(a) else None
        pb = b[i] if i < len(b) else None
        if pa == pb:
            continue
        path = pa[0] if pa is not None else pb[0] if pb is not None else ""
        return path, amap.get(path), bmap.get(path)
    return "", recorded, replayed  # pragma: no cover - equal leaves, unequal documents


def unified(recorded: Any, replayed: Any, *, context: int = 3) -> str:
    import difflib

    return "\n".join(
        difflib.unified_diff(
            text_lines(recorded) if recorded is not None else [],
            text_lines(replayed) if replayed is not None else [],
            "recorded",
            "replayed",
            n=context,
            lineterm="",
        )
    )
