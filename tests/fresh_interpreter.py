"""Running a snippet in a fresh interpreter: for contract tests of seams
that change what a process imports or runs at exit, which the test process
itself has done long ago (or must not do)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run_python(code: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -c CODE`` (dedented) with this interpreter; not checked."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def output_of(code: str) -> str:
    """What CODE prints, asserting it exits 0 (its stderr otherwise)."""
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    return done.stdout
