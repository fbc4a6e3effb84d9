"""Issue 29 item 3: the free-disk breaker. Below ``retention.min_free_bytes``
new commands are refused with a clear tool error (nothing started), and a
running command's output capture stops with a note instead of filling the
disk (a real small tmpfs)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holon_cli.providers.base import ToolCall
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.tasks import plane as tasks
from holon_cli.store.layout import HomeLayout
from holon_cli.tools.base import ToolContext, ToolResult, execute
from holon_cli.tools.catalog import registry

HUGE = 1 << 62


def run(c: ToolContext, **arguments: Any) -> ToolResult:
    tool = registry()["ExecCommand"]
    return execute(tool, c, ToolCall(id="call_1", name="ExecCommand", arguments=arguments))


def test_a_new_command_is_refused_below_the_floor(ctx: ToolContext, root: Path) -> None:
    c = dataclasses.replace(ctx, config={"retention": {"min_free_bytes": HUGE}})
    r = run(c, cmd="touch ran.txt")
    assert not r.ok and r.error is not None and r.error["kind"] == "disk_full"
    assert "retention.min_free_bytes" in r.error["message"]
    assert "holon home gc" in (r.error["recovery_hint"] or "")
    assert not (root / "ran.txt").exists()
    assert not list(tasks.tasks_root(c.store).glob("task_*"))
    # a floor of 0 turns the breaker off
    off = dataclasses.replace(ctx, config={"retention": {"min_free_bytes": 0}})
    assert run(off, cmd="touch ran.txt").ok and (root / "ran.txt").exists()


def test_holon_task_run_is_refused_below_the_floor(script_runner: Any, tmp_path: Path) -> None:
    cfg = HomeLayout.current().config
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f"retention:\n  min_free_bytes: {HUGE}\n")
    res = script_runner.run(
        ["holon", "task", "run", "--workdir", str(tmp_path), "--json", "--", "true"]
    )
    assert res.returncode == 4
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "disk_full" and "min_free_bytes" in err["message"]


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    got = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", str(mnt)],
        capture_output=True,
    )
    if got.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {got.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_output_capture_stops_before_the_disk_fills(
    small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_HOME", str(small_fs / "home"))
    store = open_agent(None)
    root = tmp_path / "work"
    root.mkdir()
    c = ToolContext(
        store=store,
        agent_id=store.agent_id,
        execution_root=root,
        cwd=root,
        workspace_anchor=root,
        turn_id="turn_test",
        config={"retention": {"min_free_bytes": 1536 * 1024}},
    )
    # 6 MB of output on a 3 MB disk: without the breaker the disk fills up
    r = run(
        c,
        cmd="head -c 6000000 /dev/zero | tr '\\0' a; echo finished > done.txt",
        yield_time_ms=20000,
    )
    assert r.ok, r.content
    assert r.data["exit_status"] == 0
    assert (root / "done.txt").read_text() == "finished\n"  # the command ran to its end
    assert "output capture stopped" in r.data["stderr_preview"]
    assert "retention.min_free_bytes" in r.data["stderr_preview"]
    assert len(r.data["stdout_preview"]) < 6_000_000
    import os

    st = os.statvfs(small_fs)
    assert st.f_bavail * st.f_frsize > 1024 * 1024  # the floor held: space is left
