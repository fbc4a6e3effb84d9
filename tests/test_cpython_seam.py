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


def test_typing_compiles_a_forward_refs_string_once_and_nothing_else_changes() -> None:
    """``typing`` looks ``compile`` up in its own globals and calls it only
    to make a ForwardRef (3.11-3.13): importing holon puts the cache there.
    A ForwardRef made through it is the builtin's, to the code; the same
    string twice shares one code object; a string that does not compile
    raises as it did and is not kept; anything else goes to the builtin;
    the cache stops growing at its bound."""
    done = _python(
        """
        import builtins, sys, typing
        import holon_cli
        from holon_cli import cpython_seam
        assert typing.compile is not builtins.compile
        assert [n for n in typing.__dict__ if n == "compile"] == ["compile"]
        a, b = typing.ForwardRef("list[int] | None"), typing.ForwardRef("list[int] | None")
        assert a.__forward_code__ is b.__forward_code__ and a == b
        ref = builtins.compile("list[int] | None", "<string>", "eval")
        assert a.__forward_code__.co_code == ref.co_code
        assert a._evaluate({}, {}, frozenset()) == (list[int] | None)
        for bad in ("1 +", "not valid code ("):
            try:
                typing.ForwardRef(bad)
            except SyntaxError as exc:
                assert bad in str(exc), exc
            else:
                raise AssertionError(bad)
        c = typing.compile("x = 1", "<m>", "exec", dont_inherit=True)  # not kept: goes through
        assert c is not typing.compile("x = 1", "<m>", "exec", dont_inherit=True)
        class TD(typing.TypedDict):
            x: "int"
            y: "list[str] | None"
        assert typing.get_type_hints(TD) == {"x": int, "y": list[str] | None}
        cpython_seam.cache_forward_ref_code()  # again: a no-op
        cpython_seam.FORWARD_REF_CACHE_MAX = 0  # full: read at each call
        x, y = typing.ForwardRef("dict[str, int]"), typing.ForwardRef("dict[str, int]")
        assert x.__forward_code__ is not y.__forward_code__ and x == y
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
