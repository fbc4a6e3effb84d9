"""Home layout, agent id validation, and config.yaml validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from holon_cli.errors import ConfigError, UsageError
from holon_cli.store import config as cfg
from holon_cli.store.layout import HomeLayout, default_agent_id, home_root, validate_agent_id


def test_home_root_from_env(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert home_root() == holon_home
    monkeypatch.delenv("HOLON_HOME")
    assert home_root() == tmp_path / "user-home" / ".holon"


def test_default_agent_id(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_agent_id() == "main"
    monkeypatch.setenv("HOLON_AGENT_ID", "ops")
    assert default_agent_id() == "ops"


@pytest.mark.parametrize("good", ["main", "a", "A.b_c-9", "x" * 64, "9lives"])
def test_valid_agent_ids(good: str) -> None:
    assert validate_agent_id(good) == good


@pytest.mark.parametrize(
    "bad", ["", ".", "..", ".hidden", "-x", "a/b", "a b", "x" * 65, "ü", "a\n"]
)
def test_invalid_agent_ids(bad: str) -> None:
    with pytest.raises(UsageError) as ei:
        validate_agent_id(bad)
    assert ei.value.exit_code == 2 and ei.value.hint


def test_agent_layout_paths(holon_home: Path) -> None:
    lay = HomeLayout.current().agent("main")
    assert lay.home == holon_home / "agents" / "main"
    assert lay.ledger_path("events") == lay.home / ".holon" / "ledger" / "events.jsonl"
    assert lay.agent_file == lay.home / ".holon" / "state" / "agent.json"
    assert lay.inbox_dir == lay.home / ".holon" / "inbox"
    assert not lay.exists


def _write_config(holon_home: Path, text: str) -> HomeLayout:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(text)
    return HomeLayout.current()


def test_missing_config_is_empty() -> None:
    assert cfg.load_config() == {}


def test_valid_config(holon_home: Path) -> None:
    lay = _write_config(
        holon_home,
        "model: openai/gpt-4.1\nfallback_models: [anthropic/claude]\nproviders:\n  local:\n    transport: openai_chat_completions\n    base_url: http://127.0.0.1:1/v1\n",
    )
    data = cfg.load_config(lay)
    assert data["model"] == "openai/gpt-4.1"
    assert data["providers"]["local"]["transport"] == "openai_chat_completions"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("modle: x\n", "'modle'"),
        ("runtime:\n  bogus: 1\n", "runtime.bogus"),
        (
            "providers:\n  p:\n    transport: openai_responses\n    base_url: u\n    colour: red\n",
            "providers.p.colour",
        ),
        (
            "providers:\n  p:\n    transport: carrier_pigeon\n    base_url: u\n",
            "transport must be one of",
        ),
        ("fallback_models: openai/x\n", "fallback_models"),
        ("model: [1]\n", "model must be"),
        ("- a\n- b\n", "mapping"),
        ("model: [unclosed\n", "invalid YAML"),
    ],
)
def test_bad_config_names_the_problem(holon_home: Path, text: str, needle: str) -> None:
    lay = _write_config(holon_home, text)
    with pytest.raises(ConfigError) as ei:
        cfg.load_config(lay)
    assert needle in ei.value.message
    assert str(lay.config) in ei.value.message
    assert ei.value.exit_code == 2
