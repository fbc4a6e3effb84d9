"""The ``browser`` fixture; browser tests (``browser.py``) keep screenshots of a failure: every page
the test opened and each window as it was, saved in the test's tmp dir and
named in the failure message."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from browser import Browser


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    """A headless Chromium (``browser.py``); skips naming what is missing."""
    from browser import Browser, missing

    why = missing()
    if why is not None:
        pytest.skip(why)
    b = Browser(tmp_path)
    try:
        yield b
    finally:
        b.quit()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    try:
        return (yield)
    except Exception as exc:
        b = getattr(item, "funcargs", {}).get("browser")
        if b is None:
            raise
        shots = b.screenshots()
        listed = "\n".join(f"  {p}" for p in shots) or "  (none could be taken)"
        raise AssertionError(f"{type(exc).__name__}: {exc}\nscreenshots:\n{listed}") from exc
