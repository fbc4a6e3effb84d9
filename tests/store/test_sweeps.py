"""Leftovers of killed writers are swept (issue 14 item 10): `.creating-*`
staging folders of an interrupted `agent create`, and `inbox/tmp` files whose
writer's pid is gone (sooner than the one-hour age limit)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from holon_cli.runtime.agents.lifecycle import create_agent, list_agents, stale_staging
from holon_cli.store.inbox import Inbox
from holon_cli.store.layout import HomeLayout
from holon_cli.store.locks import pid_alive


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not pid_alive(p.pid)
    return p.pid


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_pid_alive() -> None:
    assert pid_alive(os.getpid()) and pid_alive(1)
    assert not pid_alive(_dead_pid()) and not pid_alive(0) and not pid_alive(-5)


@pytest.mark.slow
def test_staging_of_a_killed_creation_is_swept_by_the_next_create(holon_home: Path) -> None:
    create_agent("first")
    agents = HomeLayout.current().agents_dir
    dead = agents / f".creating-ghost-{_dead_pid()}"
    (dead / "memory").mkdir(parents=True)
    (dead / "memory" / "self.md").write_text("half made")
    live_old = agents / f".creating-reused-{os.getppid()}"  # pid reused long after
    live_old.mkdir()
    time.sleep(1.2)
    live_young = agents / f".creating-busy-{os.getppid()}"  # a creation in progress
    live_young.mkdir()
    _age(live_young, 7200)  # a copied template's mtime: its age is its ctime's
    assert sorted(p.name for p in stale_staging(HomeLayout.current())) == [dead.name]
    assert sorted(p.name for p in stale_staging(HomeLayout.current(), max_age_s=1.0)) == sorted(
        [dead.name, live_old.name]
    )
    create_agent("second")
    assert not dead.exists()
    assert live_young.exists(), "a creation that may still be running is left alone"
    ids = {a.agent_id for a in list_agents()}
    assert {"first", "second"} <= ids and not any("ghost" in i for i in ids)


def test_inbox_tmp_of_a_dead_writer_is_swept_after_a_minute(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path / "inbox")
    inbox.ensure()
    dead = _dead_pid()
    dead_old = inbox.tmp / f"msg_a.json.{dead}"
    dead_fresh = inbox.tmp / f"msg_b.json.{dead}"
    live_old = inbox.tmp / f"msg_c.json.{os.getpid()}"
    ancient = inbox.tmp / f"msg_d.json.{os.getpid()}"
    for p in (dead_old, dead_fresh, live_old, ancient):
        p.write_text("{")
    _age(dead_old, 120)
    _age(live_old, 120)
    _age(ancient, 7200)
    assert inbox.sweep_tmp() == 2
    assert not dead_old.exists() and not ancient.exists()
    assert dead_fresh.exists(), "a dead writer's file gets a grace minute"
    assert live_old.exists(), "a live writer's file is kept for up to an hour"
