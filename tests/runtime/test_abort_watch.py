"""The turn's calls run on worker threads (``runtime/turn/abort.py``): a
thread is reused from call to call, one given up on is not reused before
its call ends, an idle one ends, and each call sees its caller's context."""

from __future__ import annotations

import contextvars
import threading
import time
from pathlib import Path

import pytest

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.turn import abort
from holon_cli.store.agent_store import AgentStore


@pytest.fixture
def watch(holon_home: Path) -> abort.AbortWatch:
    store: AgentStore = open_agent(None)
    return abort.AbortWatch(store, "run_test", poll_s=0.01)


def idle(thread: threading.Thread) -> bool:
    return any(w._thread is thread for w in abort._idle_workers)


def settled(thread: threading.Thread, within: float = 2.0) -> None:
    """Until ``thread``, which just ran a call, is idle again (other tests
    of this process may have left idle call threads of their own)."""
    end = time.monotonic() + within
    while not idle(thread) and time.monotonic() < end:
        time.sleep(0.001)
    assert idle(thread)


def test_calls_run_one_after_another_on_one_thread(watch: abort.AbortWatch) -> None:
    threads = []
    for _ in range(4):
        threads.append(watch.call(threading.current_thread))
        settled(threads[-1])
    assert len(set(threads)) == 1
    assert threads[0] is not threading.current_thread()
    assert threads[0].name == "holon-call-run_test"


def test_a_call_given_up_on_keeps_its_thread_until_it_ends(
    watch: abort.AbortWatch,
) -> None:
    """An abort while a call runs: the turn stops waiting, the call goes on
    on its thread; the next call gets another thread; the first rejoins
    the idle ones once its call has returned."""
    release = threading.Event()
    started = threading.Event()
    ran_on: list[threading.Thread] = []

    def stuck() -> None:
        ran_on.append(threading.current_thread())
        started.set()
        release.wait(10)

    def abort_soon() -> None:
        started.wait(5)
        watch.aborted = True

    threading.Thread(target=abort_soon).start()
    with pytest.raises(abort.TurnAborted):
        watch.call(stuck)
    (busy,) = ran_on
    watch.aborted = False
    other = watch.call(threading.current_thread)
    assert other is not busy and not idle(busy)  # the stuck call still holds its thread
    release.set()
    settled(busy)  # idle again once its call returned
    settled(other)


def test_an_idle_call_thread_ends(watch: abort.AbortWatch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abort, "WORKER_IDLE_S", 0.05)  # read at each wait
    thread = watch.call(threading.current_thread)
    thread.join(5)
    assert not thread.is_alive() and not idle(thread)


def test_each_call_sees_its_callers_context(watch: abort.AbortWatch) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("span", default="none")
    seen = []
    for value in ("first", "second"):
        var.set(value)
        seen.append(watch.call(var.get))
    assert seen == ["first", "second"]


def test_an_error_of_the_call_is_raised_on_the_turns_thread(watch: abort.AbortWatch) -> None:
    def fails() -> None:
        raise ValueError("from the call")

    with pytest.raises(ValueError, match="from the call"):
        watch.call(fails)
    assert watch.call(lambda: 7) == 7  # the thread is fine for the next
