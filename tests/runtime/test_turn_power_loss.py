"""A power loss at every fsync of a turn (issue 44 item 4: the fsyncs a turn
still makes are the ones its promises need).

A kill (``tests/e2e/test_turn_kill_loop.py``) loses nothing the kernel
holds; a power loss keeps only what was fsync'd. :class:`Disk` models that
in the test process: it watches every ``os.fsync`` of a turn, remembers
each file as of its last fsync and each folder's names as of its last
fsync, and at the chosen fsync (before it happens) the power goes: the home
is rebuilt as the disk may then hold it, three ways:

- ``synced``: only what was fsync'd (a new file whose data was never
  synced is empty: its name may be durable, its blocks not);
- ``all``: everything written (what a kill leaves);
- ``mixed-N``: each unsynced change independently kept or lost (a file's
  unsynced appends all or none; a folder's unsynced renames and unlinks all
  or none), by seed N.

Then the next turns run on it, and the promises must hold: the message,
acknowledged by ``enqueue`` before the turn, is processed once, with one
completed ``turn_terminal`` event, one transcript terminal and one result
brief; its one tool call ran at most once in all (a round is durable before
its tools run, so a replay never runs a recorded call again); the agent is
idle and no turn is left running.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, RecordedRequest, Reply

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.catalog import default_catalog


class PowerLoss(BaseException):
    """The power went: no handler of the turn runs, only ``finally``."""


Tree = tuple[dict[str, dict[str, int]], dict[int, bytes]]  # folders' names, files' bytes


def _walk(root: Path) -> Tree:
    dirs: dict[str, dict[str, int]] = {}
    files: dict[int, bytes] = {}
    for folder, subdirs, names in os.walk(root):
        entries: dict[str, int] = {}
        for name in (*subdirs, *names):
            p = os.path.join(folder, name)
            st = os.lstat(p)
            entries[name] = st.st_ino
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    files[st.st_ino] = f.read()
        dirs[folder] = entries
    return dirs, files


class Disk:
    """What a power loss would leave of ``root`` (see the module docstring)."""

    def __init__(self, root: Path, crash_at: int | None) -> None:
        self.root = root
        self.crash_at = crash_at
        self.count = 0
        # all durable before the turn: each folder's names, each file's bytes
        self.dirs, self.files = _walk(root)
        self.now: Tree | None = None  # the home when the power went
        self._real = os.fsync

    def fsync(self, fd: int) -> None:
        if self.now is not None:
            return  # the power is off: nothing more reaches the disk
        self.count += 1
        if self.count == self.crash_at:
            self.now = _walk(self.root)
            raise PowerLoss
        self._real(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        if not path.startswith(str(self.root)):
            return
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            self.dirs[path] = {n: os.lstat(os.path.join(path, n)).st_ino for n in os.listdir(path)}
        elif stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:  # the fd may be write-only
                self.files[st.st_ino] = f.read()

    def restore(self, mode: str) -> None:
        """Rebuild ``root`` as the disk holds it after the power loss."""
        assert self.now is not None
        now_dirs, now_files = self.now
        rng = random.Random(mode)

        def new(changed: bool) -> bool:
            """Whether a change not fsync'd reached the disk anyway."""
            if not changed or mode == "all":
                return True
            return mode != "synced" and rng.random() < 0.5

        dirs = {
            d: dict(now_dirs[d] if new(self.dirs.get(d) != now_dirs[d]) else self.dirs.get(d, {}))
            for d in sorted(now_dirs)
        }
        # a rename from one folder to another (inbox/new to inbox/cur) is one
        # operation on the disk: the file is in one place or the other
        before, after = _places(self.dirs), _places(now_dirs)
        for ino in sorted(set(before) & set(after)):
            if {d for d, _ in before[ino]} == {d for d, _ in after[ino]}:
                continue
            keep = after[ino] if new(True) else before[ino]
            for listing in dirs.values():
                for name in [n for n, i in listing.items() if i == ino]:
                    del listing[name]
            for d, name in keep:
                if d in dirs:
                    dirs[d][name] = ino
        content = {
            ino: data if new(self.files.get(ino) != data) else self.files.get(ino, b"")
            for ino, data in sorted(now_files.items())
        }
        for ino, data in self.files.items():  # removed since: its last durable bytes
            content.setdefault(ino, data)
        shutil.rmtree(self.root)
        self._build(str(self.root), dirs, content)

    def _build(
        self, folder: str, dirs: dict[str, dict[str, int]], content: dict[int, bytes]
    ) -> None:
        os.makedirs(folder, exist_ok=True)
        for name, ino in dirs.get(folder, {}).items():
            path = os.path.join(folder, name)
            if path in dirs:
                self._build(path, dirs, content)
            elif ino in content:
                with open(path, "wb") as f:
                    f.write(content[ino])
                os.chmod(path, 0o600)


def _places(dirs: dict[str, dict[str, int]]) -> dict[int, set[tuple[str, str]]]:
    out: dict[int, set[tuple[str, str]]] = {}
    for d, listing in dirs.items():
        for name, ino in listing.items():
            out.setdefault(ino, set()).add((d, name))
    return out


WORLD: list[Path] = []  # where the command leaves its effects (outside the home)


def _responder(req: RecordedRequest) -> Reply:
    """A stateless model: one ExecCommand until its result is back, then an
    answer (decided from the request alone, so a replay asks the same)."""
    body = req.json()
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    users = [n for n, i in enumerate(items) if i.get("role") == "user"]
    after = items[users[-1] + 1 :] if users else items
    if any(i.get("type") == "function_call_output" for i in after):
        output: list[dict[str, Any]] = [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "all done", "annotations": []}],
            }
        ]
    else:
        output = [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "ExecCommand",
                "arguments": json.dumps({"cmd": f"echo ran >> {WORLD[0] / 'effects'}"}),
                "status": "completed",
            }
        ]
    usage = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    return Reply.json_body(
        {"id": "resp_1", "status": "completed", "output": output, "usage": usage}
    )


@pytest.fixture
def provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The model, and the world the command changes (outside the home: a
    power loss of the home's disk does not take it back)."""
    world = tmp_path / "world"
    world.mkdir()
    WORLD[:] = [world]
    with LoopbackServer() as srv:
        srv.check = _responder
        monkeypatch.setenv("OPENAI_BASE_URL", f"{srv.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield world


def _turn(store: AgentStore) -> Any:
    return run_turn(store=store, cli_model="openai/bench", catalog=default_catalog())


def _base(tmp_path: Path, world: Path, warm: bool) -> tuple[Path, Path, str]:
    """The home before the measured turn, kept as a copy: a named agent
    (``warm``: after one turn of its own, so its ledgers, folders and trigger
    capability exist) with the message admitted (acknowledged, durable)."""
    home = Path(os.environ["HOLON_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text("execution:\n  sandbox: none\n")
    store = create_agent("named")
    if warm:
        admit("warm up", store=store)
        assert _turn(store).status == "completed"
        (world / "effects").unlink()
    env = admit("do it", store=store)
    base = tmp_path / "base"
    shutil.copytree(home, base, symlinks=True)
    return home, base, env["id"]


def _fresh_copy(home: Path, base: Path) -> AgentStore:
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(base, home, symlinks=True)
    return open_agent("named", create_default=False)


def _check_after_power_loss(
    home: Path, base: Path, world: Path, mid: str, crash_at: int, mode: str
) -> None:
    store = _fresh_copy(home, base)
    (world / "effects").unlink(missing_ok=True)
    disk = Disk(home, crash_at)
    os.fsync = disk.fsync  # type: ignore[assignment]
    try:
        with pytest.raises(PowerLoss):
            _turn(store)
    finally:
        os.fsync = disk._real
    disk.restore(mode)
    store = open_agent("named", create_default=False)
    for _ in range(4):  # the next turns finish the message (a replay, a repair)
        if not _turn(store).ran:
            break
    ran = (world / "effects").read_text().count("ran") if (world / "effects").exists() else 0
    where = f"power loss at fsync {crash_at}, disk {mode}"
    assert ran <= 1, f"{where}: the recorded tool call ran again"
    st = q.load(store)
    assert st.entries == {}, f"{where}: {st.entries}"
    assert mid in st.recent_final, where
    done = [
        e for e in store.events.records()
        if e["kind"] == "turn_terminal" and e["data"]["status"] == "completed"
        and e["message_id"] == mid
    ]  # fmt: skip
    tr = [
        t for t in store.ledger("transcript").records()
        if t["kind"] == "turn_terminal" and t["message_id"] == mid
    ]  # fmt: skip
    briefs = [
        b for b in store.ledger("briefs").records()
        if b["kind"] == "result" and b.get("related_message_id") == mid
    ]  # fmt: skip
    assert (len(done), len(tr), len(briefs)) == (1, 1, 1), where
    state = store.read_record()["state"]
    assert state["status"] == "awake_idle" and state["current_run_id"] is None, where


@pytest.mark.slow
@pytest.mark.parametrize(
    ("warm", "modes"),
    [(True, ("synced", "all", "mixed-1", "mixed-2")), (False, ("synced", "mixed-3"))],
    ids=["agent-with-a-past-turn", "first-turn"],
)
def test_a_power_loss_at_any_fsync_of_a_turn_keeps_its_promises(
    tmp_path: Path, provider: Path, warm: bool, modes: tuple[str, ...]
) -> None:
    home, base, mid = _base(tmp_path, provider, warm)
    # the measured turn's fsyncs, counted once without a power loss
    store = _fresh_copy(home, base)
    disk = Disk(home, None)
    os.fsync = disk.fsync  # type: ignore[assignment]
    try:
        assert _turn(store).status == "completed"
    finally:
        os.fsync = disk._real
    assert disk.count >= 10  # two rounds (one with a tool call), its settle
    for k in range(1, disk.count + 1):
        for mode in modes:
            _check_after_power_loss(home, base, provider, mid, k, mode)
