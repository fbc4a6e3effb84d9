"""Provider test fixtures: a loopback HTTP server per test, and no proxy
settings leaking in (loopback traffic must stay on 127.0.0.1).

Helpers live in ``provider_helpers.py`` and the server in ``tests/loopback.py``;
both directories are put on ``sys.path`` here so test modules can import them
by name under any import mode.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

for _p in (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1]):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from loopback import LoopbackServer  # noqa: E402

_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in _PROXY_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
