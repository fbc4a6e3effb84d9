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
- ``typing``'s own lookup of ``compile`` (3.11-3.13: only
  ``ForwardRef.__init__`` calls it): :func:`cache_forward_ref_code` puts a
  caching ``compile`` in ``typing``'s globals, which shadow the builtin for
  that module alone. Every TypedDict field and every ``get_type_hints`` makes
  a ForwardRef whose string is compiled anew: ~940 in a one-round ``holon
  run`` over ~200 distinct strings, ~9 ms of CPU. Where typing has no such
  call (a later CPython) the global is never read.

The contract test is ``tests/test_cpython_seam.py`` (each name, on the
running interpreter, in a fresh process).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# the most distinct strings the ForwardRef code cache keeps (annotations come
# from code, so a few hundred; a caller making them up at run time stops
# filling it, never grows it)
FORWARD_REF_CACHE_MAX = 4096


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


def cache_forward_ref_code() -> None:
    """Give ``typing`` a ``compile`` that keeps each string's code object
    (code objects are immutable: sharing one is safe). Anything but
    ``compile(str, filename, mode)`` goes to the builtin; a string that does
    not compile raises as before and is not kept. Idempotent."""
    import builtins
    import typing

    if "compile" in vars(typing):
        return
    real = builtins.compile
    kept: dict[tuple[str, str, str], Any] = {}

    def compile(source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:  # noqa: A001
        if args or kwargs or not isinstance(source, str) or not isinstance(filename, str):
            return real(source, filename, mode, *args, **kwargs)
        key = (source, filename, mode)
        code = kept.get(key)
        if code is None:
            code = real(source, filename, mode)
            if len(kept) < FORWARD_REF_CACHE_MAX:
                kept[key] = code
        return code

    typing.compile = compile  # type: ignore[attr-defined]
