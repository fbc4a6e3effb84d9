"""``holon run``'s temporary agent is written without fsyncs while the run
lasts: a completed run removes it and never paid for them; a kept one
(failed, waiting, interrupted, ``--keep-agent``) is made durable, file by file,
before ``run_once`` returns or raises. Named agents sync as they go."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from holon_cli.errors import InterruptedError_
from holon_cli.runtime import run as run_mod
from holon_cli.runtime.agents.lifecycle import ensure_home
from holon_cli.runtime.run import run_once
from holon_cli.store import fsio
from holon_cli.tools.catalog import default_catalog

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="names fsync'd files through /proc/self/fd"
)


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every fsync'd file or folder, in order (nothing waits for a disk)."""
    paths: list[str] = []

    def fsync(fd: int) -> None:
        os.fstat(fd)
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))

    monkeypatch.setattr(os, "fsync", fsync)
    ensure_home()  # the home's own folders exist already, as on every run but the first
    paths.clear()
    return paths


@pytest.fixture(autouse=True)
def _no_deferral_left_over() -> object:
    yield None
    assert fsio._DEFERRED == (), "a run left fsyncs deferred for the rest of the process"


def script(tmp_path: Path, *steps: object) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(json.dumps({"steps": list(steps)}))
    return f"scripted:{p}"


def everything_under(home: Path) -> set[str]:
    found = {str(home)}
    for folder, dirs, files in os.walk(home):
        found.update(os.path.join(folder, n) for n in dirs + files)
    return {p for p in found if not os.path.islink(p)}


def test_a_completed_temporary_run_makes_no_fsync(tmp_path: Path, synced: list[str]) -> None:
    for i in range(2):
        synced.clear()
        data = run_once(
            "hi",
            model=script(tmp_path, {"text": "ok"}),
            workspace_root=str(tmp_path),
            catalog=default_catalog(),
        )
        assert data["final_status"] == "completed" and data["agent_kept"] is False
        assert not Path(data["agent_home"]).exists()
        if i == 0:
            # the home's spend record (budgets/spend.jsonl, which keeps a removed
            # agent's spend) is created durably once, by the first run of a home
            home = Path(data["agent_home"]).parent.parent / "budgets"
            assert set(synced) <= {str(home), str(home / "spend.mark")}, synced
        else:
            assert synced == []


@pytest.mark.parametrize("how", ["failed", "keep_agent"])
def test_a_kept_temporary_agent_is_durable_when_the_run_returns(
    tmp_path: Path, synced: list[str], how: str
) -> None:
    step = {"fail": {"kind": "auth"}} if how == "failed" else {"text": "ok"}
    data = run_once(
        "hi",
        model=script(tmp_path, step),
        workspace_root=str(tmp_path),
        keep_agent=how == "keep_agent",
        catalog=default_catalog(),
    )
    home = Path(data["agent_home"])
    assert data["agent_kept"] is True and home.is_dir()
    assert everything_under(home) <= set(synced)
    assert str(home.parent) == synced[-1]  # the agent's entry in agents/, last


def test_an_interrupted_temporary_run_is_durable_when_it_raises(
    tmp_path: Path, synced: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(**kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod.turn_mod, "run_turn", interrupted)
    with pytest.raises(InterruptedError_) as ei:
        run_once(
            "hi",
            model=script(tmp_path, {"text": "ok"}),
            workspace_root=str(tmp_path),
            catalog=default_catalog(),
        )
    (home,) = [p for p in (ensure_home().agents_dir).iterdir() if p.name.startswith("run-")]
    assert str(home) in str(ei.value)  # kept, and named in the message
    model = script(tmp_path, {"text": "ok"})
    assert f"holon turn --agent {home.name} --model {model}" in (ei.value.hint or "")
    assert everything_under(home) <= set(synced)
    inbox = [p for p in everything_under(home) if "/inbox/" in p and p.endswith(".json")]
    assert inbox, "the admitted message is on disk"


def test_a_run_that_fails_its_preflight_leaves_nothing_deferred(
    tmp_path: Path, synced: list[str]
) -> None:
    from holon_cli.errors import HolonError

    with pytest.raises(HolonError):
        run_once(
            "hi", model="nosuchprovider/x", workspace_root=str(tmp_path), catalog=default_catalog()
        )
    assert [p for p in ensure_home().agents_dir.iterdir() if p.name.startswith("run-")] == []


def test_a_named_agent_run_syncs_as_it_goes(tmp_path: Path, synced: list[str]) -> None:
    data = run_once(
        "hi",
        agent_id="named",
        create=True,
        model=script(tmp_path, {"text": "ok"}),
        workspace_root=str(tmp_path),
        catalog=default_catalog(),
    )
    home = str(Path(data["agent_home"]))
    during = [p for p in synced if p.startswith(home + os.sep)]
    assert len(during) >= 10  # ledgers, inbox, snapshots: each write, as it happens


# ------------------------------------------------------------ fsio itself


def test_deferral_covers_exactly_the_named_trees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsio.defer_fsyncs(tmp_path / "run-1", tmp_path / ".creating-run-1-7")
    try:
        assert fsio.deferred(tmp_path / "run-1")
        assert fsio.deferred(tmp_path / "run-1" / "state" / "agent.json", tmp_path / "run-1")
        assert fsio.deferred(tmp_path / ".creating-run-1-7" / "x")
        assert not fsio.deferred(tmp_path / "run-10" / "x")  # a prefix of the name is not the tree
        assert not fsio.deferred(tmp_path)
        assert not fsio.deferred(tmp_path / "run-1" / "x", tmp_path)  # all of them, or none
        monkeypatch.chdir(tmp_path)
        assert fsio.deferred(Path("run-1") / "x")  # relative paths resolve first
    finally:
        fsio.defer_fsyncs()
    assert not fsio.deferred(tmp_path / "run-1" / "x")


def test_atomic_writes_and_ledger_appends_skip_fsync_only_inside(
    tmp_path: Path, synced: list[str]
) -> None:
    from holon_cli.store.ledger import Ledger

    inside, outside = tmp_path / "run-1", tmp_path / "other"
    fsio.defer_fsyncs(inside)
    try:
        for root in (inside, outside):
            fsio.write_snapshot(root / "snap.json", {"a": 1})
            Ledger(root / "events.jsonl", root / "events.lock").append({"kind": "x"})
    finally:
        fsio.defer_fsyncs()
    assert synced and all(p.startswith(str(outside)) for p in synced)
    assert any(p.startswith(str(outside / ".snap.json.")) for p in synced)  # its temp file
    assert str(outside / "events.jsonl") in synced and str(outside) in synced


def test_end_deferred_fsyncs_syncs_what_is_left_and_skips_what_is_gone(
    tmp_path: Path, synced: list[str]
) -> None:
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    (kept / "sub").mkdir(parents=True)
    (kept / "sub" / "f").write_text("x")
    (kept / "link").symlink_to("/etc/hostname")  # not followed
    (kept / "dirlink").symlink_to(tmp_path)  # not followed
    os.mkfifo(kept / "sub" / "stdin.fifo")  # opening it would block: never opened
    fsio.defer_fsyncs(kept, gone)
    assert fsio.end_deferred_fsyncs() == 4  # f, sub, kept, and tmp_path (kept's entry)
    assert synced == [str(kept / "sub" / "f"), str(kept / "sub"), str(kept), str(tmp_path)]
    assert fsio.end_deferred_fsyncs() == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_syncs_everything(tmp_path: Path) -> None:
    fsio.defer_fsyncs(tmp_path)
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (a task supervisor, say)
            os._exit(1 if fsio.deferred(tmp_path / "x") else 0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert fsio.deferred(tmp_path / "x")  # the parent still defers
    finally:
        fsio.defer_fsyncs()


@pytest.mark.slow
def test_a_temporary_run_killed_mid_turn_is_finished_by_holon_turn(tmp_path: Path) -> None:
    """SIGKILL loses nothing of the unsynced agent (the page cache outlives
    the process): its next turn replays the message and completes it once."""
    import signal
    import subprocess
    import time

    holon = [sys.executable, "-m", "holon_cli"]
    model = script(
        tmp_path,
        {
            "text": "working",
            "tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "sleep 5"}}],
        },
        {"text": "finished"},
    )
    agents = ensure_home().agents_dir
    proc = subprocess.Popen(
        [*holon, "run", "--model", model, "hi"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the command is running: mid-turn
            if any(agents.glob("run-*/.holon/tasks/*/stdout.log")):
                break
            time.sleep(0.02)
        else:
            pytest.fail("the run never started its command")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    (home,) = [p for p in agents.iterdir() if p.name.startswith("run-")]
    assert proc.returncode == -signal.SIGKILL
    out = subprocess.run(
        [*holon, "turn", "--agent", home.name, "--model", model, "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(home.name)
    done = [
        e
        for e in store.events.records()
        if e["kind"] == "turn_terminal" and e["data"]["status"] == "completed"
    ]
    assert len(done) == 1


def test_the_temporary_run_agent_has_one_coherent_identity(tmp_path: Path) -> None:
    """Runtime spec (Agent Identity And Visibility): `holon run` without
    --agent uses a temporary private agent. Its identity is the private_child
    profile throughout (private, parent-supervised: the run that made it
    settles and removes it; no parent agent), never private_child and
    self_owned at once; it gets no external trigger of its own."""
    from holon_cli.model.agent import profile_is_coherent
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.inspect import agent_summary

    data = run_once(
        "hi",
        model=script(tmp_path, {"text": "ok"}),
        workspace_root=str(tmp_path),
        keep_agent=True,
        catalog=default_catalog(),
    )
    store = open_agent(data["agent_id"], create_default=False)
    ident = store.read_record()["identity"]
    assert {k: ident.get(k) for k in ("kind", "visibility", "ownership", "profile_preset")} == {
        "kind": "child",
        "visibility": "private",
        "ownership": "parent_supervised",
        "profile_preset": "private_child",
    }
    assert ident.get("lineage_parent_agent_id") is None
    assert profile_is_coherent(ident)
    assert agent_summary(store)["external_trigger"] is None
    built = [e for e in store.events.records() if e["kind"] == "turn_context_built"][-1]
    assert "external trigger" not in [s["title"] for s in built["data"]["sections"]]
