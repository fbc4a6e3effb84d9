"""``holon`` in this process from module-level test helpers.

pytest-console-scripts hands its runner to tests as the ``script_runner``
fixture; helpers such as ``holon(*args)`` are plain functions. A module that
imports :func:`bind_runner` (an autouse fixture) can call :func:`run` from
any helper: it uses the running test's runner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

_RUNNER: Any = None


@pytest.fixture(autouse=True)
def bind_runner(script_runner: Any) -> Iterator[None]:
    global _RUNNER
    _RUNNER = script_runner
    yield
    _RUNNER = None


def run(*args: str, **kwargs: Any) -> Any:
    """``holon ARGS``; the result has ``returncode``, ``stdout``, ``stderr``."""
    assert _RUNNER is not None, "import bind_runner into the test module"
    return _RUNNER.run(["holon", *args], print_result=False, **kwargs)
