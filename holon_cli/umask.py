"""The process umask: holon's own is 077, the user's is remembered.

Every file and folder holon creates under ``HOLON_HOME`` must be 0600 / 0700
whichever command creates it first and whatever the user's umask (the home
holds message content, trigger tokens, ``config.yaml``). Rather than a mode
at each of the many places that create something, the ``holon`` entry point
sets the process umask to 077 (:func:`enter_private`) and restores it on
return (:func:`leave_private`: an in-process caller, a test, gets its own
back). What holon makes on the user's behalf outside the home keeps the
user's umask (:func:`user_umask`): a model-run command (the supervisor passes
it to the command), ``ApplyPatch``'s new files and folders in a workspace,
and the ``holon serve`` a ``holon daemon start`` spawns.

Base layer, standard library only: ``holon --version`` imports it.
"""

from __future__ import annotations

import os

PRIVATE = 0o077
_user: int | None = None


def enter_private() -> tuple[int, int | None]:
    """Umask 077 from here on; returns what :func:`leave_private` restores."""
    global _user
    saved = (os.umask(PRIVATE), _user)
    if _user is None:
        _user = saved[0]
    return saved


def leave_private(saved: tuple[int, int | None]) -> None:
    global _user
    os.umask(saved[0])
    _user = saved[1]


def current() -> int:
    """The process umask, read without changing it where the platform allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # no /proc: the classic (briefly racy) dance
    os.umask(old)
    return old


def user_umask() -> int:
    """The umask of the user who started holon (the process's own when the
    private one was never entered: a library caller, a test)."""
    return current() if _user is None else _user
