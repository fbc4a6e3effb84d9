"""Starting a supervised command: in its own session and process group, with
the parent-death signal (SIGKILL when its supervisor dies), the user's umask
and, under the sandbox, its seccomp program on a pipe bwrap reads; on a
pseudo-terminal (``tty``) or on pipes.

The supervisor (:mod:`.supervisor`) owns what these return. Standard library
only (the supervisor starts with ``python -S``).
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

from holon_cli.runtime.tasks import procs

if TYPE_CHECKING:
    from holon_cli.model.task import TaskLaunchSpec


def seccomp_fds(spec: TaskLaunchSpec, argv: list[str]) -> tuple[int, ...]:
    """The sandbox's seccomp program on a pipe bwrap reads (its fd number
    replaces the placeholder argument in ``argv``); none without one."""
    prog, at = spec.get("seccomp"), spec.get("seccomp_arg")
    if not prog or at is None:
        return ()
    r, w = os.pipe()
    try:
        os.write(w, bytes.fromhex(prog))  # ~120 bytes: far below a pipe's buffer
    finally:
        os.close(w)
    argv[at] = str(r)
    return (r,)


def umask(spec: TaskLaunchSpec) -> int:
    """The user's umask for the command (-1: leave this process's)."""
    m = spec.get("umask")
    return m if isinstance(m, int) and 0 <= m <= 0o777 else -1


def start_on_pty(
    spec: TaskLaunchSpec, argv: list[str], env: dict[str, str], fds: tuple[int, ...]
) -> tuple[subprocess.Popen[bytes], int]:
    """The command on a new terminal (its controlling one); returns it and
    the terminal's master end (non-blocking)."""
    import pty
    import termios

    master, slave = pty.openpty()

    def pre_tty() -> None:
        procs.set_parent_death_signal()
        import fcntl

        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        argv,
        cwd=spec["cwd"],
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        close_fds=True,
        pass_fds=fds,
        umask=umask(spec),
        preexec_fn=pre_tty,
    )
    os.close(slave)
    os.set_blocking(master, False)
    return proc, master


def start_on_pipes(
    spec: TaskLaunchSpec, argv: list[str], env: dict[str, str], fds: tuple[int, ...]
) -> subprocess.Popen[bytes]:
    """The command on pipes (stdin: a pipe when it ``accepts_input``, else
    ``/dev/null``), each of them non-blocking on this side."""
    wrapped = procs.pdeathsig_argv(argv, env)
    proc = subprocess.Popen(
        wrapped or argv,
        cwd=spec["cwd"],
        env=env,
        stdin=subprocess.PIPE if spec.get("accepts_input") else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
        pass_fds=fds,
        umask=umask(spec),
        preexec_fn=None if wrapped else procs.set_parent_death_signal,
    )
    assert proc.stdout is not None and proc.stderr is not None
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:  # never block on a child that does not read its input
            os.set_blocking(f.fileno(), False)
    return proc
