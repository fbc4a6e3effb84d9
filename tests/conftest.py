"""Shared fixtures, in one place.

- Every test gets its own HOLON_HOME and HOME under tmp_path, and no provider
  credentials or endpoints leak in from the environment.
- CLI tests run ``holon`` in-process by default (pytest-console-scripts'
  ``inprocess`` launch mode, set in pyproject); tests where a real process is
  the point (signals, locks across processes, crashes, real shells) say
  ``@pytest.mark.script_launch_mode("subprocess")`` or start one themselves.
- Real child processes find the console script next to this interpreter.
  Compiled modules (ours and pytest's rewritten tests, in this process and in
  children) are cached in one temp dir per user, reused across runs and never
  in the repo, even when PYTHONDONTWRITEBYTECODE is set (every run would
  otherwise recompile everything: ~5 s of CPU).
- ``now``: a frozen, steppable clock (``now[0] += 60`` moves time on).
- Children that a test will SIGINT are started with
  ``preexec_fn=default_sigint`` (from ``tests/child_signals.py``): a shell
  starts background jobs with SIGINT ignored, the child would inherit that
  and never see the test's Ctrl-C.
  The ``sigint_ignored`` fixture puts the test in exactly that situation, so
  such a test passes in a background job because it always runs as one.
- Property tests take their example count from ``property_budget.examples``:
  the full count under ``.ci/run``, fewer in the default ``-m "not slow"`` run.
- ``os.fsync`` in the test process checks its fd but does not wait for the
  disk (``REAL_FSYNC`` is the real one): ~10,000 calls were a third of the
  run, and no test can observe what they buy (a killed process loses nothing
  the kernel already holds; only a power cut needs the fsync). Tests that
  count or order fsyncs still see every call; child processes fsync for real.
- ``tmp_path`` (and so every test's home) lives on tmpfs (``/dev/shm``) when
  it has room: the homes are thrown away, and on a busy disk their metadata
  writes (mkdir, create, rename: ~200,000 per run) cost CPU and stall on the
  journal. ``PYTEST_DEBUG_TEMPROOT`` or ``--basetemp`` chooses another place
  (``PYTEST_DEBUG_TEMPROOT=/tmp``: the disk).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_console_scripts

PYCACHE = os.environ.get("PYTHONPYCACHEPREFIX") or str(
    Path(tempfile.gettempdir()) / f"holon-cli-test-pycache-{os.getuid()}"
)
sys.pycache_prefix = PYCACHE
sys.dont_write_bytecode = False

from child_signals import default_sigint  # noqa: E402,F401  (re-exported)

from holon_cli import clock  # noqa: E402

TMPFS = Path("/dev/shm")
TMPFS_ROOM = 2 << 30  # a full run writes ~100 MB; leave the machine its memory


def _temp_on_tmpfs() -> None:
    """Point pytest's temp root at tmpfs unless the run chose one (see above)."""
    if os.environ.get("PYTEST_DEBUG_TEMPROOT") or sys.platform != "linux":
        return
    try:
        st = os.statvfs(TMPFS)
    except OSError:
        return
    if st.f_bavail * st.f_frsize >= TMPFS_ROOM and os.access(TMPFS, os.W_OK | os.X_OK):
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(TMPFS)


_temp_on_tmpfs()


def _find_shared() -> Path:
    # /work/main/tests -> /work/shared; a worktree (/work/wt/x/tests) looks further up
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "shared"
        if (cand / "provider-fixtures").is_dir():
            return cand
    return here.parents[1].parent / "shared"


SHARED = _find_shared()
FIXTURES = SHARED / "provider-fixtures"
BIN = Path(sys.executable).parent
T0 = 1_780_000_000.0  # 2026-05-28T20:26:40Z

_SCRUB = (
    "HOLON_AGENT_ID",
    "HOLON_MODEL",
    "HOLON_FALLBACK_MODELS",
    "HOLON_CONTROL_TOKEN",
    "HOLON_HTTP_ADDR",
    "HOLON_TEMPLATES_DIR",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "VISUAL",
    "EDITOR",
    "NO_COLOR",
    # tracing is off unless a test turns it on (runtime/telemetry)
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    "OTEL_SEMCONV_STABILITY_OPT_IN",
    "TRACEPARENT",
    "TRACESTATE",
)


def pytest_configure(config: pytest.Config) -> None:
    # property tests try fewer examples when slow tests are deselected (see property_budget)
    import property_budget

    property_budget.FULL = "not slow" not in (config.getoption("markexpr") or "")


@pytest.fixture
def sigint_ignored() -> Iterator[None]:
    """Run the test with SIGINT ignored, as in a shell's background job."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    if rep.when == "call":
        item.stash[_PASSED] = rep.passed
    return rep


_PASSED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def holon_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """The test's HOLON_HOME: beside ``tmp_path``, not inside it, because the
    holon home (and any folder containing it) can never be a workspace or an
    execution root, and many tests work in ``tmp_path`` (a command's workdir,
    ``holon run``'s directory). Removed after a passing test, kept after a
    failing one (as pytest keeps ``tmp_path``); same path length as
    ``tmp_path / "holon-home"`` (AF_UNIX socket paths under it must fit)."""
    for k in _SCRUB:
        monkeypatch.delenv(k, raising=False)
    home = tmp_path.parent / f"{tmp_path.name}-holon-home"
    if home.exists():
        # pytest reuses a passing test's tmp_path number (retention "failed"),
        # so this path may hold an earlier test's home that a process of that
        # test wrote to after its removal: never start a test on it
        import shutil

        shutil.rmtree(home)
    monkeypatch.setenv("HOLON_HOME", str(home))
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    yield home
    telemetry = sys.modules.get("holon_cli.runtime.telemetry")
    if telemetry is not None:  # a test that traced leaves no plane behind
        telemetry.use(None)
    if request.node.stash.get(_PASSED, False):
        import shutil

        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(autouse=True)
def _clean_default_catalog() -> None:
    """Each test starts with the process's default tool catalog as built:
    ``monkeypatch.setattr(default_catalog(), "execute", ...)`` undoes to an
    instance attribute (the bound method it read), which then hides a later
    test's patch of ``ToolCatalog.execute`` (CI failed on that order), and an
    in-process ``serve`` leaves it ``warm``."""
    catalog = sys.modules.get("holon_cli.tools.catalog")
    default = getattr(catalog, "_default", None)
    if default is not None:
        vars(default).pop("execute", None)
        default.warm = False


@pytest.fixture(autouse=True)
def _no_idle_supervisors() -> Iterator[None]:
    """A command supervisor forked in one test waits for its caller's next
    call (``runtime/tasks/forked.py``): it must not serve the next test's,
    which may have patched what a fresh fork would inherit."""
    yield
    forked = sys.modules.get("holon_cli.runtime.tasks.forked")
    if forked is not None:
        forked.retire_idle(wait_s=2.0)


@pytest.fixture
def reap_test_tasks(holon_home: Path) -> Iterator[None]:
    """After the test (and after its own fixtures' ``task_stop``), SIGKILL
    whatever its tasks left running, found by their records (marker, group,
    supervisor identity: ``tests/task_reaper.py``), so a failing test of the
    task plane leaves no process behind. A passing test that needed it gets a
    warning: something survived a stop."""
    yield
    from task_reaper import reap_tasks

    killed = reap_tasks(holon_home)
    if killed:
        import warnings

        warnings.warn(
            f"killed {len(killed)} processes the test's tasks left running: {sorted(killed)}",
            stacklevel=1,
        )


ON_HOST_CONFIG = "execution:\n  sandbox: none\n  env:\n    pass: [HOLON_HOME]\n"


@pytest.fixture
def commands_on_host(holon_home: Path) -> Path:
    """``config.yaml`` with ``execution.sandbox: none`` and ``HOLON_HOME``
    passed to commands: for tests whose model-run commands read the home or
    call ``holon`` on it (the default sandbox hides the home, and the default
    environment names only the core variables). Returns the config's path."""
    holon_home.mkdir(parents=True, exist_ok=True)
    cfg = holon_home / "config.yaml"
    cfg.write_text(ON_HOST_CONFIG)
    return cfg


@functools.cache
def _console_scripts(name: str) -> tuple[Any, ...]:
    return tuple(importlib.metadata.entry_points(group="console_scripts", name=name))


class _CachedEntryPoints:
    """pytest-console-scripts looks ``holon`` up among every installed
    distribution's entry points on each in-process run (~6 ms each, ~800 runs):
    the answer cannot change during a session, so it is looked up once."""

    @staticmethod
    def entry_points(*, group: str, name: str) -> tuple[Any, ...]:
        if group == "console_scripts":
            return _console_scripts(name)
        return tuple(importlib.metadata.entry_points(group=group, name=name))


pytest_console_scripts.importlib_metadata = _CachedEntryPoints  # type: ignore[attr-defined]


REAL_FSYNC = os.fsync


def _fsync_without_waiting(fd: int) -> None:
    os.fstat(fd)  # a bad fd still fails, as with the real call


@pytest.fixture(autouse=True)
def _fast_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", _fsync_without_waiting)


@pytest.fixture(autouse=True)
def _child_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    # run the console script next to this interpreter, not a version-manager shim
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    # many short-lived processes: cache bytecode in the shared temp dir, never in the repo
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", PYCACHE)


@pytest.fixture
def now() -> Iterator[list[float]]:
    """The runtime clock frozen at ``T0``; assign ``now[0]`` to move it."""
    t = [T0]
    clock.set_clock(lambda: t[0])
    yield t
    clock.set_clock(None)


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"shared provider fixtures not found at {FIXTURES}")
    return FIXTURES
