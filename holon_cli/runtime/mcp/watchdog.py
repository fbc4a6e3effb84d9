"""The process between holon and a stdio MCP server (standard library only).

Run as ``python -I -S watchdog.py LIFELINE_FD -- ARGV...`` with the server's
pipes as its stdin/stdout/stderr. It forks the server into a session of its
own (``setsid``: the server and everything it starts share one process
group), hands the pipes to it, keeps none itself, and then waits for either:

- EOF on the lifeline: holon closed it (the server is being stopped) or holon
  died, SIGKILL included (the kernel closes a dead process's descriptors, and
  only holon holds the write end): the server's whole process group gets
  SIGTERM, then SIGKILL after a grace period;
- the server's exit: what it left in its group is ended the same way.

It exits with the server's exit status (128+N for a signal). Why a process
and not a parent-death signal on the server: ``PR_SET_PDEATHSIG`` fires when
the spawning *thread* ends and reaches only the direct child, while servers
are often launchers (``npx`` → ``node``, ``uvx`` → ``python``) whose real
server is a grandchild. A sandboxed server is ``bwrap --die-with-parent``,
whose pid namespace dies with it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

GRACE_S = 1.0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap(pid: int, status: list[int]) -> None:
    if status:
        return
    try:
        done, st = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        status.append(0)
        return
    if done:
        status.append(os.waitstatus_to_exitcode(st))


def _end_group(pgid: int, pid: int, status: list[int]) -> None:
    """SIGTERM the group, SIGKILL what is left after the grace period."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        _reap(pid, status)
        if not _group_alive(pgid):
            return
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(100):
        _reap(pid, status)
        if status:
            return
        time.sleep(0.01)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        os.write(2, b"usage: watchdog.py LIFELINE_FD -- ARGV...\n")
        return 2
    lifeline = int(argv[1])
    cmd = argv[3:]
    status: list[int] = []
    pid = os.fork()
    if pid == 0:  # the server
        try:
            os.setsid()
            os.close(lifeline)
            os.execvp(cmd[0], cmd)
        except OSError as exc:
            os.write(2, f"cannot start {cmd[0]!r}: {exc.strerror or exc}\n".encode())
        os._exit(127)
    # keep no end of the server's stdin/stdout: its EOF is holon's to see
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    for sig in (signal.SIGINT, signal.SIGHUP):  # a terminal's Ctrl-C is holon's to handle
        signal.signal(sig, signal.SIG_IGN)

    def on_term(*_: object) -> None:
        _end_group(pid, pid, status)
        os._exit(143)

    signal.signal(signal.SIGTERM, on_term)
    while True:
        try:
            ready, _, _ = select.select([lifeline], [], [], 0.2)
        except InterruptedError:
            continue
        if ready:
            try:
                data = os.read(lifeline, 64)
            except OSError:
                data = b""
            if not data:
                _end_group(pid, pid, status)
                break
        _reap(pid, status)
        if status:
            if _group_alive(pid):  # the server left something running
                _end_group(pid, pid, status)
            break
    code = status[0] if status else 1
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
