"""The agent as it was before a recorded turn, in a temporary home.

:class:`Scratch` builds ``<tmp>/`` with the real home's ``home.json``,
``config.yaml`` (today's) and ``workspaces.json``, and
``agents/<id>/`` holding:

- today's files of the agent home (``AGENTS.md``, ``skills/``, ``memory/``,
  ``notes/``, ``work/``, ...) as symbolic links to the real ones (read
  through, never written: the replayed turn runs no tool), except
  ``work-items/``, which is copied (the runtime reads its ``plan.md`` files
  and may write beside them) with the ``plan.md`` files the record kept put
  back;
- ``.holon/state/agent.json``: the agent record as the turn started it, its
  paths moved to the scratch home (a record made in another home, or
  before the home was moved, reads the same);
- the agent's ledgers cut where they stood when the turn started (the
  record's sizes; ``queue`` and ``spend`` are left empty: a replay takes
  interjected messages from the record and checks no budget), the trigger
  capability as its ledger had it then, and the last transcript records
  before the turn (what the recent conversation and a work item's trace
  read), and the prompt history as the turn found it (while its epoch
  lasts: runtime/memory/history.py).

After each recorded tool result :meth:`Scratch.after_tool` moves the
ledgers, the agent record and the plans to where the live turn had them
after that call, so the next round's prompt is built from the same state.
Nothing is ever written under the real home; the folder is removed by
:meth:`Scratch.close`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli.errors import RejectedError
from holon_cli.runtime.replay import docs
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import write_snapshot
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.runtime.replay.shapes import HistoryPosition, RecordStart, TurnRecordDoc
    from holon_cli.store.ledger import Ledger

# ledgers the replayed turn never reads from the past (see the module docstring)
NOT_COPIED = frozenset({"queue", "spend"})
TRANSCRIPT_TAIL = 512  # transcript records put back (the readers scan at most 200)
HOME_FILES = ("home.json", "config.yaml", "workspaces.json")


class Scratch:
    def __init__(self, real: AgentStore, record: TurnRecordDoc) -> None:
        self.real = real
        self.record = record
        self.blobs: Mapping[str, object] = record.get("blobs") or {}
        self.start: RecordStart = record["start"]
        self.real_root = real.layout.home.parent.parent
        self.rec_root = Path(self.start["home"])
        self.rec_agent_home = Path(self.start["agent_home"])
        self.root = Path(tempfile.mkdtemp(prefix="holon-replay-", dir=_scratch_parent()))
        self.home = HomeLayout(self.root)
        self.layout = self.home.agent(real.agent_id)
        self.store: AgentStore | None = None
        # per ledger: how much of the real one is copied, and the copy's size then
        self.src_done: dict[str, int] = {}
        self.dst_sizes: dict[str, int] = {}
        self._byte_moves = [
            (str(self.rec_agent_home).encode(), str(self.layout.home).encode()),
            (str(self.rec_root).encode(), str(self.real_root).encode()),
        ]

    # ------------------------------------------------------------ paths

    def moved(self, value: Any) -> Any:
        """Recorded absolute paths moved to where replay finds them: the
        agent home to the scratch one, the rest of the recorded home to
        the real home as it is now."""
        agent_home = str(self.rec_agent_home)
        root = str(self.rec_root)

        def fix(s: str) -> str:
            if s == agent_home or s.startswith(agent_home + "/"):
                return str(self.layout.home) + s[len(agent_home) :]
            if s == root or s.startswith(root + "/"):
                return str(self.real_root) + s[len(root) :]
            return s

        return docs.map_strings(value, fix)

    def subs(self, record_agent: Mapping[str, object]) -> list[tuple[str, str]]:
        """The path substitutions both sides of a comparison go through."""
        raw = record_agent.get("state")
        state = raw if isinstance(raw, dict) else {}
        pairs: list[tuple[str | Path | None, str]] = [
            (self.rec_root, docs.HOME_TOKEN),
            (self.real_root, docs.HOME_TOKEN),
            (self.root, docs.HOME_TOKEN),
        ]
        for key in ("workspace_anchor", "execution_root"):
            p = state.get(key)
            if isinstance(p, str) and p and not _under(p, self.rec_root):
                pairs.append((p, docs.WORKSPACE_TOKEN))
        pairs.append((Path.home(), "~"))
        return docs.path_subs(pairs)

    # ------------------------------------------------------------ build

    def build(self) -> AgentStore:
        for name in HOME_FILES:
            src = self.real_root / name
            if src.is_file():
                shutil.copyfile(src, self.root / name)
        (self.root / "agents").mkdir()
        (self.root / "run").mkdir()
        home = self.layout.home
        home.mkdir()
        real_home = self.real.layout.home
        for e in os.scandir(real_home):
            if e.name in (".holon", "work-items"):
                continue
            os.symlink(e.path, home / e.name)
        if (real_home / "work-items").is_dir():
            shutil.copytree(real_home / "work-items", home / "work-items", symlinks=True)
        for d in (self.layout.state_dir, self.layout.ledger_dir, self.layout.locks_dir):
            d.mkdir(parents=True)
        store = AgentStore(self.layout)
        agent = self.moved(docs.unpack(self.start["agent"], self.blobs))
        write_snapshot(self.layout.agent_file, agent)
        # and a forked child's inherited context (derived once, at its spawn)
        for name in ("template.json", "inherited_context.json"):
            src = self.real.layout.state_dir / name
            if src.is_file():
                shutil.copyfile(src, self.layout.state_dir / name)
        for name, size in (self.start.get("ledgers") or {}).items():
            if name not in NOT_COPIED:
                self._cut(name, int(size))
        self._trigger()
        self._prompt_history(self.start.get("prompt_history"))
        self._transcript(self.start.get("transcript") or {})
        self.put_plans(self.start.get("plans") or {})
        self.store = store
        return store

    def _cut(self, name: str, size: int) -> None:
        """``name`` in the scratch home: the real ledger's first ``size``
        bytes, the recorded home's paths moved (:meth:`moved_bytes`), only
        what is missing appended when the scratch copy is still ours."""
        src = self.real.layout.ledger_path(name)
        dst = self.layout.ledger_path(name)
        done = self.src_done.get(name, 0)
        dst_size = dst.stat().st_size if dst.exists() else 0
        if dst_size != self.dst_sizes.get(name, 0) or done > size:
            done = 0  # the replayed turn wrote to it meanwhile: rewrite it whole
        try:
            real_size = src.stat().st_size
        except FileNotFoundError:
            real_size = 0
        if real_size < size:
            raise RejectedError(
                f"{src} holds {real_size} bytes, less than the {size} it held when the turn ran: "
                "the ledger was cut or replaced, so the agent's state then cannot be rebuilt",
                kind="record_damaged",
                hint="`holon home check` reports a cut ledger; restore it from a backup to replay",
            )
        with open(src, "rb") as f:
            f.seek(done)
            data = f.read(size - done)
        with open(dst, "ab" if done else "wb") as out:
            out.write(self.moved_bytes(data))
        os.chmod(dst, 0o600)
        self.src_done[name] = size
        self.dst_sizes[name] = dst.stat().st_size

    def _prompt_history(self, pos: HistoryPosition | None) -> None:
        """The earlier turns the turn's requests carried: the prompt history
        of the epoch the turn saw (today's file, or the one before it) cut to
        its recorded size. Two epochs later it is gone: the replayed turn
        then starts a new window, and its requests differ from the record's
        there."""
        from holon_cli.digest import sha256_hex
        from holon_cli.runtime.memory.history import history_path, previous_path

        if not pos:
            return
        size = int(pos["size"])
        current = history_path(self.real)
        for src in (current, previous_path(current)):  # this epoch, or the one before
            try:
                with src.open("rb") as f:
                    head = f.readline()
                    f.seek(0)
                    data = f.read(size)
            except FileNotFoundError:
                continue
            if sha256_hex(head)[:24] == pos.get("epoch_line") and len(data) == size:
                dst = self.layout.state_dir / current.name
                dst.write_bytes(self.moved_bytes(data))
                os.chmod(dst, 0o600)
                return

    def moved_bytes(self, data: bytes) -> bytes:
        """:meth:`moved` on JSON lines as bytes (paths are plain in them)."""
        for old, new in self._byte_moves:
            if old != new and old in data:
                data = re.sub(re.escape(old) + rb"(?![A-Za-z0-9._-])", _const(new), data)
        return data

    def _trigger(self) -> None:
        """The trigger capability as its ledger had it when the turn started
        (the token file is today's: the URL's token is normalised anyway)."""
        led = AgentStore(self.layout).ledger("triggers")
        last = led.last() if led.path.exists() else None
        trig = last.get("trigger") if last else None
        if isinstance(trig, dict):
            write_snapshot(self.layout.state_dir / "trigger.json", trig)
        secret = self.real.layout.runtime / "secrets" / "trigger_token"
        if secret.is_file():
            d = self.layout.runtime / "secrets"
            d.mkdir(mode=0o700, exist_ok=True)
            shutil.copyfile(secret, d / "trigger_token")
            os.chmod(d / "trigger_token", 0o600)

    def _transcript(self, pos: Mapping[str, int]) -> None:
        """The last :data:`TRANSCRIPT_TAIL` transcript records before the turn."""
        led = self.real.ledger("transcript")
        size = int(pos.get("size") or 0)
        number = int(pos.get("segment") or 1)
        lines: list[bytes] = []
        # the file the turn appended to: still open, or closed since as segment `number`
        segs = {_seg_no(p, led): p for p in led.closed_segments()}
        if number in segs:
            data = _read_all(segs[number])[:size]
        else:
            try:
                with open(led.path, "rb") as f:
                    data = f.read(size)
            except FileNotFoundError:
                data = b""
        lines = _whole_lines(data)
        n = number - 1
        while len(lines) < TRANSCRIPT_TAIL and n in segs:
            lines = _whole_lines(_read_all(segs[n])) + lines
            n -= 1
        lines = lines[-TRANSCRIPT_TAIL:]
        dst = self.layout.ledger_path("transcript")
        dst.write_bytes(b"".join(ln + b"\n" for ln in lines))
        os.chmod(dst, 0o600)

    # ------------------------------------------------------ after a tool

    def put_plans(self, plans: dict[str, str]) -> None:
        for wid, key in plans.items():
            text = self.blobs.get(key)
            if not isinstance(text, str) or "/" in wid or wid in ("", ".", ".."):
                continue
            d = self.layout.work_items_dir / wid
            d.mkdir(parents=True, exist_ok=True)
            (d / "plan.md").write_text(text, encoding="utf-8", errors="surrogateescape")

    def after_tool(self, step: Mapping[str, object]) -> None:
        """Where the live turn's state was after this tool call (or, for a
        request, once its prompt was built)."""
        raw = step.get("ledgers")
        ledgers = raw if isinstance(raw, dict) else {}
        for name, size in ledgers.items():
            if name not in NOT_COPIED:
                self._cut(name, int(size))
        if "triggers" in ledgers:
            self._trigger()
        agent = step.get("agent")
        if agent is not None:
            write_snapshot(self.layout.agent_file, self.moved(docs.unpack(agent, self.blobs)))
        plans = step.get("plans")
        self.put_plans(plans if isinstance(plans, dict) else {})

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _scratch_parent() -> str | None:
    """Where the scratch home goes: memory (``/dev/shm``) when the system
    has it and ``TMPDIR`` does not say otherwise (the tree is small and
    thrown away; a loaded disk made creating and removing it the slowest
    part of a replay), else the temp folder."""
    if os.environ.get("TMPDIR"):
        return None
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def _const(value: bytes) -> Any:
    """A ``re.sub`` replacement taken literally (no backslash escapes)."""

    def repl(_m: re.Match[bytes]) -> bytes:
        return value

    return repl


def _under(p: str, root: Path) -> bool:
    r = str(root).rstrip("/")
    return p == r or p.startswith(r + "/")


def _seg_no(path: Path, led: Ledger[Any]) -> int:
    from holon_cli.store.ledger_segments import segment_number

    return segment_number(path.name, led.path.stem) or 0


def _read_all(path: Path) -> bytes:
    from holon_cli.store.ledger_segments import open_segment

    try:
        with open_segment(path) as f:
            return bytes(f.read())
    except FileNotFoundError:
        return b""


def _whole_lines(data: bytes) -> list[bytes]:
    """Complete lines only (a torn tail is not a record)."""
    if not data:
        return []
    parts = data.split(b"\n")
    return [p for p in parts[:-1] if p.strip()]
