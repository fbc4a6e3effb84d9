"""serve's loop: what it watches, what an idle serve costs, and how it backs
off an agent whose turns abort.

The watcher watches three folders (the home, ``agents/``, the wake index's
markers), blocks in the kernel until one changes, and wakes a pass per
agent whose marker a writer closed; an idle serve wakes about once a second
(uvicorn's main loop tick) and nothing else."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import start_serve, stop, wait_log

from holon_cli.runtime.agents.lifecycle import create_agent, open_agent
from holon_cli.serve import loop
from holon_cli.serve.loop import Scheduler


@pytest.fixture
def watcher(holon_home: Path) -> Iterator[Scheduler]:
    create_agent("main")
    sch = Scheduler(concurrency=1)
    sch.start_watching(timeout=10)
    assert sch.watching.is_set()
    try:
        yield sch
    finally:
        sch.stop()  # the watcher thread leaves within a step or two


def _marked(sch: Scheduler, aid: str, timeout: float = 3.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with sch._cv:
            if aid in sch._dirty:
                sch._dirty.discard(aid)
                return True
        time.sleep(0.01)
    return False


def _settle(sch: Scheduler) -> None:
    """Let the events of the last writes arrive, then forget them."""
    time.sleep(0.2)
    with sch._cv:
        sch._dirty.clear()


@pytest.mark.slow
def test_the_watcher_wakes_the_agent_a_writer_marked_and_ignores_workspaces(
    watcher: Scheduler,
) -> None:
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.waiting import timers

    main = Path(open_agent("main").layout.home)
    # a workspace write is not news, and nothing there is watched
    (main / "work" / "scratch.txt").write_text("x")
    (main / "notes" / "n.md").write_text("x")
    assert not _marked(watcher, "main", 0.3)
    # an arrival (the inbox's marker), a timer (its ledger's), the record
    admit("hello", agent_id="main")
    assert _marked(watcher, "main")
    _settle(watcher)
    timers.add_timer(open_agent("main"), after_ms=60_000, purpose="test")
    assert _marked(watcher, "main")
    _settle(watcher)
    # a history write (events) is no news
    open_agent("main").emit("tick_completed", {"actions": []})
    assert not _marked(watcher, "main", 0.3)


def test_the_watcher_sees_a_new_agent(watcher: Scheduler) -> None:
    create_agent("late")
    assert _marked(watcher, "late")
    # ... and its arrivals, with no watcher rebuilt for it
    builds = watcher.watch_builds
    from holon_cli.runtime.enqueue import admit

    admit("hi", agent_id="late")
    assert _marked(watcher, "late")
    assert watcher.watch_builds == builds


def test_a_config_change_marks_every_agent(watcher: Scheduler, holon_home: Path) -> None:
    create_agent("other")
    assert _marked(watcher, "other")
    (holon_home / "config.yaml").write_text("runtime: {}\n")
    assert _marked(watcher, "main") and _marked(watcher, "other")


def test_a_removed_wake_folder_rebuilds_the_watcher(watcher: Scheduler, holon_home: Path) -> None:
    import shutil

    builds = watcher.watch_builds
    shutil.rmtree(holon_home / "run" / "wake")
    end = time.monotonic() + 5
    while watcher.watch_builds == builds and time.monotonic() < end:
        time.sleep(0.02)
    assert watcher.watch_builds > builds
    assert _marked(watcher, "main")  # everyone looked at: anything could have been missed
    from holon_cli.runtime.enqueue import admit

    admit("after", agent_id="main")
    assert _marked(watcher, "main")


@pytest.mark.slow
def test_quiet_uvicorn_ticks_once_a_second_and_stops_at_once() -> None:
    import socket

    from starlette.applications import Starlette

    from holon_cli.serve.http.server import HttpServer

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    srv = HttpServer(Starlette(), [sock])
    ticks: list[int] = []
    orig = srv.server.on_tick

    async def counting(counter: int) -> bool:
        ticks.append(counter)
        return bool(await orig(counter))

    srv.server.on_tick = counting
    srv.start()
    try:
        # uvicorn's own 0.1 s ticks would show as counters 1, 2, 3, 4 here
        time.sleep(0.45)
    finally:
        t0 = time.monotonic()
        srv.stop()
        stopped_in = time.monotonic() - t0
    assert not srv.thread.is_alive()
    assert 1 <= len(ticks) <= 2, ticks
    assert all(c % 10 == 0 for c in ticks)  # every tick refreshes the Date header
    assert stopped_in < 0.9, stopped_in  # woken, not waiting out the tick


@functools.cache
def _benchkit() -> Any:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "benchkit.py"
    spec = importlib.util.spec_from_file_location("bench_benchkit", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _wakeups(pid: int) -> int:
    """The benchmarks' measure (benchmarks/benchkit.py, which
    serve_reaction.py prints), so the budget asserted here and the figure
    the benchmark prints are the same count."""
    return int(_benchkit().proc_wakeups(pid))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_idle_serve_wakes_a_bounded_number_of_times(tmp_path: Path, holon_home: Path) -> None:
    for i in range(20):
        create_agent(f"a{i:02d}")
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching", timeout=30)
        time.sleep(2.0)  # the start-up pass over every agent is not idle time
        w0, t0 = _wakeups(proc.pid), time.monotonic()
        time.sleep(3.0)
        rate = (_wakeups(proc.pid) - w0) / (time.monotonic() - t0)
    finally:
        assert stop(proc) == 0
    # uvicorn's 1 s tick and little else: the watcher blocks in the kernel
    # (before: watchfiles' 15 ms steps, ~70 a second; earlier ~112)
    budget = 8
    assert rate <= budget, f"{rate:.1f} wake-ups/s (budget {budget})"


@pytest.mark.slow
def test_aborting_turns_are_backed_off_not_spun(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider that fails every turn while each tick finds new work (the
    work item re-activated after every failed turn): serve must not spin."""
    import threading

    from holon_cli import clock
    from holon_cli.runtime import tick, turn
    from holon_cli.runtime.turn.result import TurnResult

    create_agent("main")
    calls: list[float] = []

    def failing_turn(aid: str, **_kw: object) -> TurnResult:
        calls.append(time.monotonic())
        return TurnResult(agent_id=aid, ran=True, turn_id=f"t{len(calls)}", status="aborted")

    monkeypatch.setattr(turn, "run_turn", failing_turn)
    monkeypatch.setattr(tick, "tick_agent", lambda store, **_kw: None)
    monkeypatch.setattr(loop, "FAIL_BACKOFF_S", 0.1)
    # a deadline due before the hold ends (a recheck, a timer): the agent
    # becomes runnable while held and must run when the hold ends
    from holon_cli.store.wake import Entry

    monkeypatch.setattr(
        Scheduler, "_entry", lambda self, aid, at: Entry(at, clock.now() + 0.1, False, "")
    )
    sch = Scheduler(concurrency=1, sweep_s=3600)
    th = threading.Thread(target=sch.run, daemon=True)
    th.start()
    try:
        time.sleep(0.55)
    finally:
        t0 = time.monotonic()
        sch.stop()
        th.join(5)
    assert time.monotonic() - t0 < 1.0  # stop() wakes the main loop
    # without the backoff: thousands of turns; with it: at 0, 0.1, 0.3 s (+0.2 doubling)
    assert 2 <= len(calls) <= 4, len(calls)
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    assert all(g >= 0.08 for g in gaps), gaps
    assert sch.stats.failures == len(calls)
    assert sch.stats.last_failure is not None
    assert "aborted" in sch.stats.last_failure["summary"]


def test_stop_wakes_an_idle_main_loop(holon_home: Path) -> None:
    import threading

    create_agent("main")
    sch = Scheduler(concurrency=1, sweep_s=3600)
    th = threading.Thread(target=sch.run, daemon=True)
    th.start()
    assert sch.ready.wait(10)
    # the start-up pass is over: nothing is due for an hour
    end = time.monotonic() + 10
    while (sch.stats.passes < 1 or sch.running()) and time.monotonic() < end:
        time.sleep(0.02)
    time.sleep(0.1)  # the main loop is back in its wait
    t0 = time.monotonic()
    sch.stop()
    th.join(5)
    assert not th.is_alive() and time.monotonic() - t0 < 0.5


def test_a_stop_between_the_loops_look_and_its_wait_is_not_lost(holon_home: Path) -> None:
    """SIGTERM's handler runs on the main thread, maybe while the main loop
    holds the lock after it looked at ``stopping`` and before it waits: the
    loop's wait must still end at once (a notify with no waiter is lost)."""
    sch = Scheduler(concurrency=1)
    with sch._cv:  # the loop's state between its look and its wait
        sch.stop()  # as the handler does, on the main thread
        t0 = time.monotonic()
        sch._cv.wait(timeout=10)
    assert time.monotonic() - t0 < 5


def test_warm_up_loads_what_the_first_turn_needs() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from holon_cli.serve.host import warm_up; warm_up(); "
        "print(all(m in sys.modules for m in ('holon_cli.providers.http_common', "
        "'holon_cli.providers.chain', 'holon_cli.runtime.turn')), 'httpx2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_serve_freezes_what_its_warm_up_left_out_of_the_collectors_reach() -> None:
    """A full cycle collection re-scanned every module and template serve
    holds: 15-57 ms on whichever thread it landed, the tail of the reaction
    to a message. After the warm-up they are frozen; later objects are not."""
    import subprocess
    import sys

    code = (
        "import gc; from holon_cli.serve import host; host._warm_up_then_freeze(None); "
        "frozen = gc.get_freeze_count(); later = [[] for _ in range(1000)]; gc.collect(); "
        "print(frozen > 10000, gc.get_freeze_count() == frozen)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "base_url", "built"),
    [
        ("openai/gpt-test", None, ["True", "True"]),  # https://api.openai.com
        ("openai/gpt-test", "http://127.0.0.1:9/v1", ["True", "False"]),
        ("scripted:/nonexistent.yaml", None, ["False", "False"]),
    ],
)
def test_warm_up_builds_the_http_client_for_an_http_model_and_its_trust_for_https(
    model: str, base_url: str | None, built: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    monkeypatch.setenv("HOLON_MODEL", model)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    if base_url:
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    else:  # the default endpoint, https://api.openai.com (nothing is sent)
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code = (
        "from holon_cli.serve.host import warm_up; warm_up(); "
        "from holon_cli.providers import http_session as hs; "
        "print(hs._client is not None, hs._trust is not None and hs._trust.loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == built


def test_an_agent_started_again_is_a_resume_but_not_its_own_record_writes(
    holon_home: Path,
) -> None:
    """`holon agent start` changes only agent.json: the dbos engine enqueues
    a pass named by that resume (the queued messages of a paused agent are
    not new), while the record writes of a turn (status running/idle,
    totals) are no resume."""
    from holon_cli.runtime.agents.lifecycle import set_lifecycle, set_model_override

    store = create_agent("main")
    sch = Scheduler(concurrency=1)
    sch._remember_statuses()
    set_lifecycle("main", "pause")
    assert sch._resumed(["main"]) == set()
    set_model_override("main", None)  # a write that leaves the status alone
    assert sch._resumed(["main"]) == set()
    set_lifecycle("main", "start")
    assert sch._resumed(["main"]) == {"main"}
    assert sch._resumed(["main"]) == set()  # seen once
    # a turn's own writes: idle -> running -> idle
    store.update_state(lambda s: s.update({"status": "awake_running"}))
    assert sch._resumed(["main"]) == set()
    store.update_state(lambda s: s.update({"status": "awake_idle"}))
    assert sch._resumed(["main"]) == set()
    set_lifecycle("main", "stop")
    assert sch._resumed(["main"]) == set()
    set_lifecycle("main", "start")
    assert sch._resumed(["main"]) == {"main"}


def test_the_watcher_marks_a_started_agent_at_once(watcher: Scheduler) -> None:
    """Every write of the record is its marker's (a paused agent's pass
    finds it paused and ends); the start is seen at once, not at the sweep."""
    from holon_cli.runtime.agents.lifecycle import set_lifecycle

    set_lifecycle("main", "pause")
    assert _marked(watcher, "main")
    _settle(watcher)
    set_lifecycle("main", "start")
    assert _marked(watcher, "main")


def test_a_stop_before_the_watcher_is_up_ends_start_up_at_once(holon_home: Path) -> None:
    """A shutdown request that lands between serve writing run/serve.json and
    its watcher coming up (a loaded machine) made start-up wait for the
    watcher's 30 s timeout twice: `test_shutdown_route_drains_and_exits`
    failed under load. Start-up waits on the watcher's state, not a time."""
    create_agent("main")
    sch = Scheduler(concurrency=1, sweep_s=3600)
    sch.stop()
    t0 = time.monotonic()
    sch.start_watching(timeout=20)
    sch.run()
    assert time.monotonic() - t0 < 2.0
    assert sch.drain() == []


def _run(sch: Scheduler) -> Any:
    import threading

    th = threading.Thread(target=sch.run, daemon=True)
    th.start()
    assert sch.ready.wait(10)
    return th


def _idle(sch: Scheduler, passes: int, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while (sch.stats.passes < passes or sch.running()) and time.monotonic() < end:
        time.sleep(0.02)
    time.sleep(0.1)


@pytest.mark.slow
def test_a_serve_starting_on_a_sound_index_passes_only_agents_with_work(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start-up takes from the wake index: the first serve (index in doubt)
    passes everyone and writes it whole; the next one passes only the agent
    with a queued message, and puts a sleeper's deadline in its heap."""
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.waiting.scheduler import after_turn
    from holon_cli.serve import index_batch
    from holon_cli.store import wake as W

    monkeypatch.setattr(index_batch, "FLUSH_S", 0.05)
    for aid in ("a", "b", "c"):
        create_agent(aid)
    sleeper = open_agent("c")
    sleeper.update_state(lambda s: s.update(status="asleep"))
    after_turn(sleeper, sleep_ms=1500)
    sch = Scheduler(concurrency=2, sweep_s=3600)
    th = _run(sch)
    _idle(sch, 3)
    sch.stop()
    th.join(10)
    sch.drain()
    raw = W.read_raw(holon_home)
    assert raw is not None and set(raw["agents"]) == {"a", "b", "c"}
    assert W.marked(holon_home) == {}  # every claim released

    seen: list[str] = []
    real = loop.run_pass_turn

    def counting(aid: str, **kw: Any) -> Any:
        seen.append(aid)
        return real(aid, **kw)

    monkeypatch.setattr(loop, "run_pass_turn", counting)
    from holon_cli.runtime.agents.lifecycle import set_lifecycle

    set_lifecycle("a", "pause")  # a marker: the next serve looks at "a"
    sch2 = Scheduler(concurrency=2, sweep_s=3600)
    th2 = _run(sch2)
    try:
        _idle(sch2, 1)
        assert set(seen) == {"a"}
        admit("hello", agent_id="b")  # an arrival wakes "b" alone
        end = time.monotonic() + 10
        while "b" not in seen and time.monotonic() < end:
            time.sleep(0.02)
        assert "b" in seen and "c" not in seen
        # the sleeper's timer, from the index into the heap: its pass comes
        end = time.monotonic() + 10
        while "c" not in seen and time.monotonic() < end:
            time.sleep(0.05)
        assert "c" in seen
        # its pass has started (``seen`` is noted before the tick): the tick wakes it
        end = time.monotonic() + 10
        while open_agent("c").read_record()["state"]["status"] == "asleep":
            assert time.monotonic() < end, "the sleeper's pass did not wake it"
            time.sleep(0.05)
    finally:
        sch2.stop()
        th2.join(10)
        sch2.drain()


def test_the_retention_pacer_keeps_to_its_share_of_a_cpu() -> None:
    import threading

    stopping = threading.Event()
    pace = loop._Pacer(0.5, stopping)
    t0 = time.monotonic()
    end = time.thread_time() + 0.05
    while time.thread_time() < end:  # 50 ms of CPU
        pass
    pace()  # owes ~50 ms of sleep at a 50 % share
    assert time.monotonic() - t0 >= 0.09
    stopping.set()
    end = time.thread_time() + 0.02
    while time.thread_time() < end:
        pass
    with pytest.raises(loop._Stopped):
        pace()  # stopping: no more work


def test_pass_entries_release_their_claims_only_once_in_the_index(holon_home: Path) -> None:
    """A claim keeps its agent marked until the entry it led to (or a newer
    one) is in wake.json; while the index is in doubt at most one claim per
    agent is kept; entries made before a config change are void."""
    from holon_cli.store import wake as W

    create_agent("a")

    def one_pass(sch: Scheduler) -> str:
        W.unmark(W.mark(holon_home / "agents" / "a"))
        valid = W.Validity.now(holon_home)
        at = time.monotonic_ns()
        claim = W.claim(holon_home, "a")
        assert claim.path is not None
        with sch._cv:
            sch._index.add("a", W.Entry(at, None, False, "idle"), valid, claim)
        return os.path.basename(claim.path)

    sch = Scheduler(concurrency=1)
    first = one_pass(sch)
    assert not sch.flush()  # in doubt (no wake.json), and no pass over everyone
    assert set(W.marked(holon_home)["a"]) == {first}
    second = one_pass(sch)
    assert set(W.marked(holon_home)["a"]) == {second}  # the older claim went
    W.merge(holon_home, {}, W.Validity.now(holon_home), full=True)  # sound now
    assert sch.flush()
    assert W.marked(holon_home) == {}
    raw = W.read_raw(holon_home)
    assert raw is not None and raw["agents"]["a"]["why"] == "idle"
    # an entry from before a config change is void: its claim stays
    third = one_pass(sch)
    (holon_home / "config.yaml").write_text("runtime: {}\n")
    assert not sch.flush()
    assert set(W.marked(holon_home)["a"]) == {third}


def test_a_writer_killed_after_its_write_still_wakes_the_agent(watcher: Scheduler) -> None:
    """The kernel closes a killed writer's marker: serve sees the close."""
    from holon_cli.store import wake as W

    store = open_agent("main")
    _settle(watcher)
    pid = os.fork()
    if pid == 0:
        try:
            W.mark(store.layout.home)
            store.inbox._deliver("msg_01killedwriter0000001", {"v": 2, "id": "x"})
            os.kill(os.getpid(), 9)
        finally:
            os._exit(1)
    os.waitpid(pid, 0)
    assert _marked(watcher, "main")
