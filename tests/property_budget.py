"""How many examples a property test tries.

``.ci/run`` (every test, slow ones included) tries the full count each test
names; the default local run (``pytest -m "not slow"``) tries a sixth of it,
at least 20, so every property is still exercised there while the run stays
fast. ``tests/conftest.py`` sets :data:`FULL` from the run's marker
expression before any test module is imported (decorators read it).
"""

from __future__ import annotations

FULL = True


def examples(n: int) -> int:
    """``n`` in a full run; a sixth of it (at least 20) when slow tests are deselected."""
    return n if FULL else max(20, n // 6)
