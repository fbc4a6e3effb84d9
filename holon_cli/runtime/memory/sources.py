"""The sources of the memory index, as :class:`~holon_cli.store.memory_index.Doc`.

Each source has a stable ``source_key`` (``memory:self``, ``brief:<id>``,
``work_item:<id>``, ``episode:<id>``) and a fingerprint that changes when
its content does. Workspace attribution is the record's own
``workspace_id`` (``agent_home`` when it has none): never inferred later.
The agent's memory files are agent-scoped (found from every workspace).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from holon_cli.digest import sha256_hex
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.memory_index import Doc

MEMORY_FILES = ("self", "operator")
MAX_BODY_CHARS = 200_000  # a source larger than this is indexed (and returned) cut
# what of a memory file is hashed before every search: all that is indexed
# (MAX_BODY_CHARS characters are at most 4 bytes each) and no more
MAX_HASH_BYTES = 4 * MAX_BODY_CHARS
AGENT_HOME = "agent_home"


def memory_file(store: AgentStore, name: str) -> Path:
    return store.layout.home / "memory" / f"{name}.md"


def memory_file_stat(store: AgentStore, name: str) -> tuple[int, ...] | None:
    """Device, inode, size, mtime and ctime of a memory file (``None``: no
    file). The ctime is the kernel's: every write moves it, and no call a
    user can make sets it back (``touch -d`` and ``os.utime`` set mtime and
    move ctime to now), so an unchanged tuple means an unchanged file,
    except for a write within the same timestamp tick as the one recorded
    (see ``runtime.memory.sync``)."""
    path = _MEMORY_PATHS.get((store.layout, name))
    if path is None:
        path = _MEMORY_PATHS[(store.layout, name)] = str(memory_file(store, name))
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_MEMORY_PATHS: dict[tuple[Any, str], str] = {}


def memory_file_signature(
    store: AgentStore, name: str
) -> tuple[tuple[int, ...] | None, list[Any] | None]:
    """What a memory file holds: its :func:`memory_file_stat` (of the open
    file, taken before reading) and its size and a hash of its first
    :data:`MAX_HASH_BYTES` (all the index keeps of it). An edit that keeps
    the size and the timestamp (within one tick, or put back) still changes
    the hash. ``(None, None)``: no file."""
    try:
        with open(memory_file(store, name), "rb") as f:
            st = os.fstat(f.fileno())
            head = f.read(MAX_HASH_BYTES)
    except OSError:  # missing, a folder, unreadable: memory_file_doc says the same
        return None, None
    stat = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return stat, [st.st_size, sha256_hex(head)]


def memory_file_doc(store: AgentStore, name: str) -> Doc | None:
    path = memory_file(store, name)
    try:
        raw = path.read_bytes()
        st = path.stat()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    body = raw.decode("utf-8", errors="replace")[:MAX_BODY_CHARS]
    from holon_cli.clock import iso

    return Doc(
        source_key=f"memory:{name}",
        kind="memory_file",
        scope_kind="agent",
        workspace_id=None,
        agent_id=store.agent_id,
        source_path=f"memory/{name}.md",
        title=f"memory/{name}.md",
        body=body,
        updated_at=iso(st.st_mtime),
        metadata={"bytes": len(raw)},
        fingerprint=sha256_hex(raw),
    )


def _first_line(text: str, limit: int = 120) -> str:
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:limit]
    return ""


def brief_doc(store: AgentStore, rec: Mapping[str, Any]) -> Doc | None:
    bid, text = rec.get("id"), rec.get("text")
    if not isinstance(bid, str) or not isinstance(text, str):
        return None
    meta = {k: rec[k] for k in ("kind", "visibility", "work_item_id", "turn_id") if rec.get(k)}
    return Doc(
        source_key=f"brief:{bid}",
        kind="brief",
        scope_kind="workspace",
        workspace_id=rec.get("workspace_id") or AGENT_HOME,
        agent_id=store.agent_id,
        source_path=None,
        title=str(rec.get("title") or _first_line(text) or f"brief {bid}"),
        body=text[:MAX_BODY_CHARS],
        updated_at=rec.get("at"),
        metadata=meta,
        fingerprint=sha256_hex(text.encode("utf-8", "replace")),
    )


def episode_doc(store: AgentStore, rec: Mapping[str, Any]) -> Doc | None:
    eid = rec.get("episode_id")
    if not isinstance(eid, str):
        return None
    parts = [str(rec.get("summary") or "")]
    for label, key in (("files", "touched_files"), ("commands", "commands")):
        vals = rec.get(key)
        if isinstance(vals, list) and vals:
            parts.append(f"{label}: " + ", ".join(str(v) for v in vals[:50]))
    body = "\n".join(p for p in parts if p)
    meta = {k: rec[k] for k in ("work_item_id", "turn_range") if rec.get(k) is not None}
    return Doc(
        source_key=f"episode:{eid}",
        kind="episode",
        scope_kind="workspace",
        workspace_id=rec.get("workspace_id") or AGENT_HOME,
        agent_id=store.agent_id,
        source_path=None,
        title=_first_line(str(rec.get("summary") or "")) or f"episode {eid}",
        body=body[:MAX_BODY_CHARS],
        updated_at=rec.get("finalized_at") or rec.get("at"),
        metadata=meta,
        fingerprint=sha256_hex(body.encode("utf-8", "replace")),
    )


def plan_signature(home: str, work_item_id: str) -> str:
    """Size, mtime and ctime of a plan file (a string path: this runs for
    every item of a full pass)."""
    try:
        st = os.stat(f"{home}/work-items/{work_item_id}/plan.md")
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def plan_signature_at(dir_fd: int, work_item_id: str) -> str:
    """:func:`plan_signature` relative to an open ``work-items`` folder (the
    check of every open item's plan before every search: no path walk from /)."""
    try:
        st = os.stat(f"{work_item_id}/plan.md", dir_fd=dir_fd)
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def work_item_fingerprint_parts(rec: Mapping[str, Any], report_id: str | None) -> tuple[str, str]:
    """What of a work item's fingerprint comes before and after its plan signature."""
    return f"{rec.get('rev')}|{rec.get('updated_at')}|", f"|{report_id or '-'}"


def work_item_fingerprint(home: str, rec: Mapping[str, Any], report_id: str | None) -> str:
    """Changes with the record's revision, its plan file and its report (a
    delivery summary is immutable: its id names its text)."""
    head, tail = work_item_fingerprint_parts(rec, report_id)
    return head + plan_signature(home, rec["id"]) + tail


def work_item_doc(
    store: AgentStore, rec: Mapping[str, Any], report: str | None, fingerprint: str
) -> Doc:
    from holon_cli.store.workitem_index import plan_path

    wid = rec["id"]
    objective = str(rec.get("objective") or "")
    parts = [objective]
    try:
        plan = plan_path(store, wid).read_text(encoding="utf-8", errors="replace")
    except OSError:
        plan = ""
    if plan.strip():
        parts.append("## Plan\n" + plan)
    if report:
        parts.append("## Completion report\n" + report)
    elif rec.get("result_summary"):
        parts.append("## Result\n" + str(rec["result_summary"]))
    return Doc(
        source_key=f"work_item:{wid}",
        kind="work_item",
        scope_kind="workspace",
        workspace_id=rec.get("workspace_id") or AGENT_HOME,
        agent_id=store.agent_id,
        source_path=f"work-items/{wid}/plan.md" if plan else None,
        title=_first_line(objective) or wid,
        body="\n\n".join(parts)[:MAX_BODY_CHARS],
        updated_at=rec.get("updated_at"),
        metadata={"state": rec.get("state"), "work_item_id": wid},
        fingerprint=fingerprint,
    )


def reports_by_item(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The newest completion report text per work item."""
    out: dict[str, str] = {}
    for r in records:
        wid = r.get("work_item_id")
        text = r.get("text")
        if isinstance(wid, str) and isinstance(text, str):
            out[wid] = text
    return out


PROFILE_INSTRUCTION_CHARS = 4000


def workspace_profile_docs(store: AgentStore) -> list[Doc]:
    """One profile per attached workspace (not AgentHome): its id, anchor and
    the head of the instructions found there (``AGENTS.md``, else
    ``CLAUDE.md``), so "which repository was the billing service?" has an
    answer. Scoped to that workspace."""
    from holon_cli.runtime.workspace.plane import list_workspaces

    out: list[Doc] = []
    for row in list_workspaces(store):
        wid, anchor = row["workspace_id"], row.get("workspace_anchor")
        if wid == AGENT_HOME or not anchor:
            continue
        parts = [f"Workspace {wid}", f"anchor: {anchor}"]
        for name in ("AGENTS.md", "CLAUDE.md"):
            try:
                text = (Path(anchor) / name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            parts.append(f"## {name}\n" + text[:PROFILE_INSTRUCTION_CHARS])
            break
        body = "\n".join(parts)
        out.append(
            Doc(
                source_key=f"workspace:{wid}",
                kind="workspace_profile",
                scope_kind="workspace",
                workspace_id=wid,
                agent_id=store.agent_id,
                source_path=None,
                title=f"workspace {Path(anchor).name}",
                body=body,
                updated_at=None,
                metadata={"workspace_anchor": anchor, "exists": bool(row.get("exists"))},
                fingerprint=sha256_hex(body.encode("utf-8", "replace")),
            )
        )
    return out


CHANGED = ("changed",)  # equals no stat: the record moved on since it was indexed


def plan_part(fingerprint: str, head: str, tail: str) -> Any:
    """The plan signature a work item's fingerprint holds, as a stat tuple
    (``None``: no plan file) for the record ``head``/``tail`` describe."""
    if not (fingerprint.startswith(head) and fingerprint.endswith(tail)):
        return CHANGED
    mid = fingerprint[len(head) : len(fingerprint) - len(tail)]
    if mid == "-":
        return None
    try:
        size, mtime, ctime = (int(x) for x in mid.split(":"))
    except ValueError:
        return CHANGED
    return (size, mtime, ctime)


# ---------------------------------------------------- references


def ref_key(store: AgentStore) -> bytes:
    """The agent's secret for source refs: made once, kept with its state
    (not the disposable index), so refs survive a rebuild."""
    from holon_cli.store.fsio import create_new_bytes

    path = store.layout.state_dir / "memory_ref.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        create_new_bytes(path, os.urandom(32))  # a concurrent first use: one key wins
        return path.read_bytes()


def source_ref(key: bytes, source_key: str) -> str:
    import hashlib
    import hmac

    return "mem_" + hmac.new(key, source_key.encode(), hashlib.sha256).hexdigest()[:24]
