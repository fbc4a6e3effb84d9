"""Contract test of ``holon_cli/cpython_seam.py``, the one module touching
CPython's private names: on the running interpreter each one exists and does
what the seam relies on. Each check runs in a fresh interpreter (running the
``atexit`` hooks of the test process itself would end pytest's)."""

from __future__ import annotations

from fresh_interpreter import run_python as _python


def test_the_builtin_sha256_is_cpythons_own_without_openssl() -> None:
    done = _python(
        """
        import sys
        from holon_cli.cpython_seam import builtin_sha256
        ctor = builtin_sha256()
        assert ctor(b"abc").hexdigest() == (
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        )
        assert ctor.__module__ in ("_sha256", "_sha2"), ctor.__module__
        assert "_hashlib" not in sys.modules and "hashlib" not in sys.modules
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_the_atexit_hooks_run_once_then_are_cleared() -> None:
    done = _python(
        """
        import atexit
        from holon_cli.cpython_seam import run_exit_hooks
        before = atexit._ncallbacks()  # a site .pth may have registered one already
        atexit.register(print, "hook")
        assert atexit._ncallbacks() == before + 1
        assert run_exit_hooks() is True
        assert atexit._ncallbacks() == 0
        print("after")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hook\nafter\n"  # not run again by the normal exit


def test_with_no_hooks_nothing_runs() -> None:
    done = _python(
        """
        from holon_cli.cpython_seam import run_exit_hooks
        assert run_exit_hooks() is True
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
