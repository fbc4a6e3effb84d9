"""The one seam onto CPython's private names (the interpreter is pinned by
``requires-python``; each name has a fallback where another interpreter or
a later CPython lacks it).

- ``_sha256.sha256`` (CPython 3.11) / ``_sha2.sha256`` (3.12+): SHA-256
  without ``hashlib``, which loads OpenSSL: longer than all of ``holon
  status`` (:mod:`holon_cli.digest`). The fallback is ``hashlib.sha256``:
  the same digest, slower to load.
- ``atexit._ncallbacks`` and ``atexit._run_exitfuncs``: the fast exit of the
  click-free commands runs the ``atexit`` hooks itself and then ``os._exit``,
  skipping the interpreter's teardown (:mod:`holon_cli.cli.fast`). Without
  them the process exits normally.

The contract test is ``tests/test_cpython_seam.py`` (each name, on the
running interpreter, in a fresh process).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def builtin_sha256() -> Callable[[bytes], Any]:
    """SHA-256's constructor, CPython's own implementation when it has one."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # CPython 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # CPython 3.12+
        except ImportError:
            from hashlib import sha256
    ctor: Callable[[bytes], Any] = sha256
    return ctor


def run_exit_hooks() -> bool:
    """Run the ``atexit`` hooks now (and clear them, so a normal exit after
    this runs none again); ``False`` when this interpreter cannot (its
    normal exit must run them)."""
    import atexit

    count = getattr(atexit, "_ncallbacks", None)
    if count is not None and not count():
        return True
    run = getattr(atexit, "_run_exitfuncs", None)
    if run is None:
        return False
    run()
    return True
