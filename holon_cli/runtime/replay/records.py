"""``ledger/turn_records.jsonl``: one line per settled turn, its record
compressed.

A line is ``{"v": 1, "turn_id", "message_id", "at", "codec", "bytes",
"data"}``: ``data`` is the record (a JSON document, ``v`` of its own:
:data:`RECORD_VERSION`) compressed with ``codec`` (``zstd`` where the
standard library has it, Python 3.14's ``compression.zstd``; else ``gzip``)
and base64-encoded; ``bytes`` its size before compression. A turn whose
capture failed has ``broken`` (the reason) instead of ``codec``/``data``.

The ledger is segmented like ``events`` and goes with them
(``retention.events_days``, and ``max_home_bytes`` drops its oldest closed
segments like theirs): what retention dropped is in
``segments/turn_records.trimmed`` (the time of the newest record gone), so a
turn older than that is reported as dropped (exit 4), a turn never recorded
as unknown (exit 3). Lookups search the raw bytes for the turn id (the open
file, then closed segments newest first), so only the line found is parsed.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from holon_cli import clock
from holon_cli.errors import CorruptStateError, NotFoundError, RejectedError
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.turn import TurnRecordLine
    from holon_cli.runtime.replay.shapes import TurnRecordDoc
    from holon_cli.store.ledger import Ledger, Trimmed

LEDGER: Final = "turn_records"
LINE_VERSION = 1
RECORD_VERSION = 1
RETENTION_SETTING = "retention.events_days"


# ----------------------------------------------------------------- codec


_ZSTD: list[Any] = []  # [module or None], once looked up


def _zstd() -> Any:
    if not _ZSTD:
        import importlib

        try:  # the standard library's from Python 3.14 (by name: older ones lack it)
            zstd: Any = importlib.import_module("compression.zstd")
        except ImportError:
            zstd = None
        _ZSTD.append(zstd)
    return _ZSTD[0]


def codec() -> str:
    """The codec new records are written with."""
    return "zstd" if _zstd() is not None else "gzip"


def compress(raw: bytes, name: str | None = None) -> tuple[str, bytes]:
    name = name or codec()
    if name == "zstd":
        return name, bytes(_zstd().compress(raw, level=9))
    import gzip

    return "gzip", gzip.compress(raw, compresslevel=6, mtime=0)


def decompress(name: str, data: bytes) -> bytes:
    if name == "gzip":
        import gzip

        return gzip.decompress(data)
    if name == "zstd":
        z = _zstd()
        if z is None:
            raise ValueError("it is zstd-compressed: reading it needs Python 3.14 or newer")
        return bytes(z.decompress(data))
    raise ValueError(f"unknown codec {name!r}")


def encode_line(turn_id: str, message_id: str, doc: Mapping[str, object]) -> TurnRecordLine:
    raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    name, packed = compress(raw)
    return {
        "v": LINE_VERSION,
        "turn_id": turn_id,
        "message_id": message_id,
        "at": clock.now_iso(),
        "codec": name,
        "bytes": len(raw),
        "data": base64.b64encode(packed).decode("ascii"),
    }


# the blob keys of each open file's first record, by inode (a close makes a new file)
_KEYFRAMES: dict[str, tuple[int, str, frozenset[str]]] = {}


def _keyframe(path: Path) -> tuple[str, frozenset[str]] | None:
    """The first record of the open file (the segment's keyframe): its turn
    id and blob keys. Called under the ledger's lock."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        ino = os.fstat(fd).st_ino
        cached = _KEYFRAMES.get(str(path))
        if cached is not None and cached[0] == ino:
            return cached[1], cached[2]
        head = b""
        while b"\n" not in head:
            chunk = os.pread(fd, 1 << 20, len(head))
            if not chunk:
                return None  # no complete first line yet
            head += chunk
    finally:
        os.close(fd)
    try:
        line = json.loads(head.split(b"\n", 1)[0])
        if line.get("broken") or not line.get("data"):
            return None
        doc = _decode_doc(line, path)
    except Exception:  # noqa: BLE001 - a damaged keyframe: this record stands alone
        return None
    if doc.get("base"):
        return None
    keys = frozenset(_blobs(doc))
    _KEYFRAMES[str(path)] = (ino, str(line["turn_id"]), keys)
    return str(line["turn_id"]), keys


def append(store: AgentStore, turn_id: str, message_id: str, doc: Mapping[str, object]) -> None:
    """One record (deferred when the caller batches: a turn's settle). Blobs
    the open file's first record already holds are left out and the record
    names it as its ``base``: a segment's records share one copy of what
    every turn repeats (instructions, tools), and are dropped together."""
    led = store.ledger(LEDGER)

    def build(_last: TurnRecordLine | None) -> TurnRecordLine:
        d = doc
        base = _keyframe(led.path)
        if base is not None and base[0] != turn_id:
            blobs = doc.get("blobs")
            mine = blobs.items() if isinstance(blobs, dict) else ()
            own = {k: v for k, v in mine if k not in base[1]}
            d = {**doc, "base": base[0], "blobs": own}
        return encode_line(turn_id, message_id, d)

    led.append(build)


def append_broken(store: AgentStore, turn_id: str, message_id: str, reason: str) -> None:
    store.ledger(LEDGER).append(
        {
            "v": LINE_VERSION,
            "turn_id": turn_id,
            "message_id": message_id,
            "at": clock.now_iso(),
            "broken": reason,
        }
    )


def last_turn_id(store: AgentStore) -> str | None:
    last = store.ledger(LEDGER).last()
    return str(last.get("turn_id")) if last else None


# ---------------------------------------------------------------- lookup


def _line_in(data: bytes, turn_id: str) -> bytes | None:
    """The newest line of ``data`` whose ``turn_id`` is ``turn_id`` (found by
    its quoted id: base64 data holds no quote, so only ids match)."""
    needle = json.dumps(turn_id).encode()
    end = len(data)
    while True:
        pos = data.rfind(needle, 0, end)
        if pos < 0:
            return None
        start = data.rfind(b"\n", 0, pos) + 1
        stop = data.find(b"\n", pos)
        line = data[start : stop if stop >= 0 else len(data)]
        if _names(line, turn_id):
            return line
        end = start


def _names(line: bytes, turn_id: str) -> bool:
    try:
        rec = json.loads(line)
    except ValueError:
        return b'"turn_id"' in line  # a damaged line naming it: reported as damaged
    return isinstance(rec, dict) and rec.get("turn_id") == turn_id


def _where(led: Ledger[Any]) -> list[Path]:
    """The open file, then the closed segments newest first."""
    return [led.path, *reversed(led.closed_segments())]


def _read(path: Path) -> bytes:
    from holon_cli.store.ledger_segments import open_segment

    if path.name.endswith(".jsonl") and path.parent.name != "segments":
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return b""
    try:
        with open_segment(path) as f:
            return bytes(f.read())
    except FileNotFoundError:
        return b""


def find_line(store: AgentStore, turn_id: str) -> tuple[dict[str, object], Path] | None:
    """The ledger line of ``turn_id`` (parsed) and the file holding it."""
    led = store.ledger(LEDGER)
    for path in _where(led):
        raw = _read(path)
        line = _line_in(raw, turn_id)
        if line is None:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            raise _damaged(turn_id, path, "the ledger line is not valid JSON") from None
        if not isinstance(rec, dict):
            raise _damaged(turn_id, path, "the ledger line is not an object")
        return rec, path
    return None


def _damaged(turn_id: str, path: Path, why: str) -> CorruptStateError:
    return CorruptStateError(
        f"the record of turn {turn_id} in {path} is damaged: {why}",
        kind="record_damaged",
        hint="this turn cannot be replayed or exported; its events and transcript are "
        "separate and unaffected (`holon transcript`, `holon tail`)",
        details={"turn_id": turn_id, "path": str(path)},
    )


def _decode_doc(line: Mapping[str, object], path: Path) -> dict[str, object]:
    turn_id = str(line.get("turn_id"))
    if line.get("broken"):
        raise CorruptStateError(
            f"turn {turn_id} has no usable record: {line['broken']}",
            kind="record_damaged",
            hint="the turn ran, but capturing it failed (see the reason); "
            "its events and transcript are complete",
            details={"turn_id": turn_id, "path": str(path)},
        )
    v = line.get("v")
    if isinstance(v, int) and v > LINE_VERSION:
        raise CorruptStateError(
            f"the record of turn {turn_id} in {path} is version {v}, newer than this holon reads",
            kind="record_damaged",
            hint="upgrade holon to replay it",
        )
    try:
        packed = base64.b64decode(str(line.get("data") or ""), validate=True)
        raw = decompress(str(line.get("codec")), packed)
        doc = json.loads(raw)
    except Exception as exc:  # noqa: BLE001 - base64, gzip/zlib/zstd or JSON: all mean damaged
        raise _damaged(turn_id, path, f"{type(exc).__name__}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("turn_id") != turn_id:
        raise _damaged(turn_id, path, "its content names another turn")
    dv = doc.get("v")
    if isinstance(dv, int) and dv > RECORD_VERSION:
        raise CorruptStateError(
            f"the record of turn {turn_id} is version {dv}, newer than this holon reads",
            kind="record_damaged",
            hint="upgrade holon to replay it",
        )
    return doc


def decode(line: Mapping[str, object], path: Path) -> TurnRecordDoc:
    """The record a ledger line holds, its base's blobs merged in, checked
    into its type. Raises ``record_damaged``."""
    doc = _decode_doc(line, path)
    base_id = doc.pop("base", None)
    if base_id:
        raw_line = _line_in(_read(path), str(base_id))
        turn_id = str(line.get("turn_id"))
        if raw_line is None:
            raise _damaged(turn_id, path, f"its base record ({base_id}) is not in the same file")
        try:
            base_line = json.loads(raw_line)
        except ValueError:
            why = f"its base record ({base_id}) is not valid JSON"
            raise _damaged(turn_id, path, why) from None
        try:
            base = _decode_doc(base_line, path)
        except CorruptStateError as exc:
            why = f"the record it shares its segment's blobs with ({base_id}) is: {exc.message}"
            raise _damaged(turn_id, path, why) from None
        doc["blobs"] = {**_blobs(base), **_blobs(doc)}
    from holon_cli.model.typed import CheckError, check
    from holon_cli.runtime.replay.shapes import TurnRecordDoc

    try:
        return check(doc, TurnRecordDoc)
    except CheckError as err:
        raise _damaged(str(line.get("turn_id")), path, str(err)) from None


def _blobs(doc: Mapping[str, object]) -> dict[str, object]:
    blobs = doc.get("blobs")
    return blobs if isinstance(blobs, dict) else {}


def id_time(turn_id: str) -> float | None:
    """When an id was made (the sortable ids of :func:`holon_cli.clock.new_id`)."""
    _, _, rest = turn_id.partition("_")
    if len(rest) < 10:
        return None
    ms = 0
    for ch in rest[:10]:
        i = clock._B32.find(ch)
        if i < 0:
            return None
        ms = ms * 32 + i
    return ms / 1000.0


def dropped(store: AgentStore, turn_id: str) -> Trimmed | None:
    """What retention dropped, when it covers ``turn_id``'s time."""
    info = store.ledger(LEDGER).trimmed()
    t = id_time(turn_id)
    if not info or t is None or not info.get("before"):
        return None
    try:
        before = clock.parse_iso(str(info["before"]))
    except ValueError:
        return None
    return info if t <= before else None


def load(store: AgentStore, turn_id: str) -> TurnRecordDoc:
    """The decoded record of ``turn_id`` in ``store``'s agent. Raises
    ``turn_not_found`` (3), ``record_dropped`` (4) or ``record_damaged`` (1)."""
    found = find_line(store, turn_id)
    if found is None:
        raise missing(store, turn_id)
    return decode(*found)


def missing(store: AgentStore, turn_id: str) -> NotFoundError | RejectedError:
    """Why ``turn_id`` has no record in this agent."""
    info = dropped(store, turn_id)
    if info is not None:
        return RejectedError(
            f"the record of turn {turn_id} was dropped by retention "
            f"({RETENTION_SETTING}; records up to {info.get('before')} are gone)",
            kind="record_dropped",
            hint=f"turn records are kept as long as the events: raise {RETENTION_SETTING} "
            "(and retention.max_home_bytes) in config.yaml to keep them longer",
            details={"turn_id": turn_id, "setting": RETENTION_SETTING, "trimmed": info},
        )
    from holon_cli.runtime.turn.journal import Journal

    j = Journal.load(store)
    if j is not None and j.turn_id == turn_id:
        return NotFoundError(
            f"turn {turn_id} of agent {store.agent_id!r} has not settled yet",
            kind="turn_not_found",
            hint="a turn is recorded when it settles: replay it once it has",
            details={"turn_id": turn_id, "agent_id": store.agent_id},
        )
    return NotFoundError(
        f"no record of turn {turn_id} in agent {store.agent_id!r}",
        kind="turn_not_found",
        hint="list recorded turns with `holon tail --agent A` (turn_terminal events); "
        "turns settled before turn records existed have none",
        details={"turn_id": turn_id, "agent_id": store.agent_id},
    )


def locate(turn_id: str, agent_id: str | None) -> AgentStore:
    """The agent holding ``turn_id``'s record: ``agent_id`` when given, else
    the agent whose ledger names it (ids are unique across a home)."""
    from holon_cli.runtime.agents.lifecycle import agent_ids, open_agent

    if agent_id is not None:
        return open_agent(agent_id, create_default=False)
    stores = [open_agent(a, create_default=False) for a in agent_ids()]
    for store in stores:
        for path in _where(store.ledger(LEDGER)):
            if _line_in(_read(path), turn_id) is not None:
                return store
    for store in stores:  # no line anywhere: which agent could have had it
        if dropped(store, turn_id) is not None:
            return store
    raise NotFoundError(
        f"no agent of this home has a record of turn {turn_id}",
        kind="turn_not_found",
        hint="check the id (`holon tail --agent A` shows turn ids) or name the agent with "
        "--agent; turns settled before turn records existed have none",
        details={"turn_id": turn_id},
    )


def turn_ids(store: AgentStore, limit: int = 200) -> list[str]:
    """The newest recorded turn ids of the open file (shell completion)."""
    raw = _read(store.ledger(LEDGER).path)
    out: list[str] = []
    marker = b'"turn_id":"'
    for line in reversed(raw.split(b"\n")):
        i = line.find(marker)
        if i < 0:
            continue
        j = line.find(b'"', i + len(marker))
        if j > i:
            out.append(line[i + len(marker) : j].decode("utf-8", "replace"))
        if len(out) >= limit:
            break
    return out
