"""Shared fixtures: every test gets its own HOLON_HOME and HOME under tmp_path,
and no provider credentials or endpoints leak in from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FIXTURES = SHARED / "provider-fixtures"

_SCRUB = (
    "HOLON_AGENT_ID",
    "HOLON_MODEL",
    "HOLON_FALLBACK_MODELS",
    "HOLON_CONTROL_TOKEN",
    "HOLON_HTTP_ADDR",
    "HOLON_TEMPLATES_DIR",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "VISUAL",
    "EDITOR",
    "NO_COLOR",
)


@pytest.fixture(autouse=True)
def holon_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k in _SCRUB:
        monkeypatch.delenv(k, raising=False)
    home = tmp_path / "holon-home"
    monkeypatch.setenv("HOLON_HOME", str(home))
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    return home


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"shared provider fixtures not found at {FIXTURES}")
    return FIXTURES
