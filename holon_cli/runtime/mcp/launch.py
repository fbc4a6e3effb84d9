"""What a stdio MCP server is started as, and starting it (standard library only).

- Environment: the command environment policy every model-run command gets
  (:func:`command_environment`: the ONE call site of that policy, so the
  ``execution.env`` rule lands here in one line), then the server's own
  ``env`` over it.
- Folder: ``cwd`` (relative to the agent's execution root) or the root.
- Sandbox: ``execution.sandbox`` of the agent, as for ``ExecCommand``
  (``runtime/tasks/sandbox.py``: the execution root writable, the home
  hidden); the server's ``network`` key overrides ``execution.network``. A
  configured sandbox that is unavailable refuses the start (fail closed).
- Lifetime: the server runs under :mod:`.watchdog`, which ends its process
  group when holon closes the lifeline or dies.

:func:`spawn` starts the process at once with :mod:`subprocess`, before the
SDK is imported: the server boots while this process imports the SDK (over a
second of CPU), so a cold call pays the longer of the two, not their sum.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import subprocess

    from holon_cli.model.config import HolonConfig
    from holon_cli.runtime.mcp.config import ServerSpec
    from holon_cli.store.agent_store import AgentStore

WATCHDOG = Path(__file__).with_name("watchdog.py")
STDERR_CAP = 1 << 20  # bytes of a server's stderr kept per start


class Spawned(NamedTuple):
    proc: subprocess.Popen[bytes]
    lifeline: int  # our end: closing it (or dying) ends the server's group
    stderr_log: Path
    argv: list[str]


def command_environment(cfg: HolonConfig, agent_id: str, extra: dict[str, str]) -> dict[str, str]:
    """The command environment policy (``execution.env``: an allowlist,
    provider keys never), then the server's own ``extra`` variables: THE call
    site of ``runtime/tasks/environment.command_env`` for MCP servers."""
    from holon_cli.runtime.tasks.environment import command_env

    return command_env(cfg, agent_id, extra=extra)


def server_argv(
    spec: ServerSpec, cfg: HolonConfig, store: AgentStore, env: dict[str, str]
) -> tuple[list[str], Path, tuple[int, ...]]:
    """The argv (sandbox applied), the folder the server starts in and the
    descriptors it must inherit (the sandbox's seccomp program, issue 35)."""
    from holon_cli.runtime.tasks import sandbox
    from holon_cli.runtime.workspace import workspace_for
    from holon_cli.runtime.workspace.guard import check_root
    from holon_cli.store.layout import home_root

    ws = workspace_for(store.layout.home, store.read_record()["state"])
    root = Path(os.path.realpath(ws.execution_root))
    cwd = root if not spec.cwd else Path(os.path.realpath(root / Path(spec.cwd).expanduser()))
    for p in (root, cwd):  # a binding recorded before the workspace check existed
        check_root(p, agent_home=store.layout.home, what="an execution root")
    pol = sandbox.policy(cfg, store.agent_id)
    if spec.network is not None:
        pol = pol._replace(network=spec.network)
    assert spec.command is not None
    wrapped = sandbox.wrap(
        [spec.command, *spec.args],
        pol,
        root=root,
        cwd=cwd,
        hidden=[home_root(), store.layout.runtime],
        env=env,
        anchor=ws.workspace_anchor,
    )
    argv, fds = wrapped.spawnable()  # argv, plus the seccomp program's pipe to pass
    return argv, cwd, fds


def stderr_path(store: AgentStore, spec: ServerSpec) -> Path:
    return Path(store.layout.runtime) / "mcp" / f"{spec.name}.stderr.log"


def spawn(spec: ServerSpec, cfg: HolonConfig, store: AgentStore) -> Spawned:
    """Start the server under its watchdog. Raises ``OSError`` when nothing
    could be started and the sandbox's ``RejectedError`` when it is unavailable."""
    env = command_environment(cfg, store.agent_id, spec.env)
    argv, cwd, fds = server_argv(spec, cfg, store, env)
    try:
        return _popen(spec, store, env, argv, cwd, fds)
    finally:
        for fd in fds:
            os.close(fd)


def _popen(
    spec: ServerSpec,
    store: AgentStore,
    env: dict[str, str],
    argv: list[str],
    cwd: Path,
    fds: tuple[int, ...],
) -> Spawned:
    import subprocess

    from holon_cli.umask import user_umask

    if not cwd.is_dir():
        raise FileNotFoundError(2, f"the server's folder {cwd} does not exist")
    log = stderr_path(store, spec)
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.close(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600))  # per start
    r, w = os.pipe()  # both ends close-on-exec; only r is passed, to the watchdog
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(WATCHDOG), str(r), "--", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(r, *fds),
            cwd=cwd,
            env=env,
            bufsize=0,
            umask=user_umask(),  # holon's own is 077; the server's files are the user's
        )
    except BaseException:
        os.close(w)
        raise
    finally:
        os.close(r)
    return Spawned(proc, w, log, argv)
