"""``preexec_fn`` helpers for child processes a test will signal.

A module of its own (not ``conftest``): ``from conftest import ...`` finds
whichever ``conftest`` pytest imported last (``tests/providers`` and
``tests/tools`` have their own), so it broke when those folders were
collected in the same run.
"""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """``preexec_fn`` for children a test interrupts: SIGINT back to default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
