"""Home layout, agent id validation, and config.yaml validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from property_budget import examples

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
        "model: openai/gpt-4.1\nfallback_models: [anthropic/claude]\nproviders:\n  local:\n    "
        "transport: openai_chat_completions\n    base_url: http://127.0.0.1:1/v1\n",
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


@pytest.mark.parametrize(
    ("text", "key", "needle"),
    [
        (
            'runtime:\n  provider_timeout_s: "30"\n',
            "runtime.provider_timeout_s",
            "must be a number",
        ),
        ("runtime:\n  max_provider_rounds: 0\n", "runtime.max_provider_rounds", "more than 0"),
        ("runtime:\n  max_provider_rounds: 2.5\n", "runtime.max_provider_rounds", "integer"),
        ("runtime:\n  exec_timeout_ms: true\n", "runtime.exec_timeout_ms", "integer"),
        ("runtime: 5\n", "runtime", "must be a mapping"),
        (
            "providers:\n  p:\n    transport: openai_responses\n    base_url: u\n    timeout_s: "
            "x\n",
            "providers.p.timeout_s",
            "must be a number",
        ),
        ("providers:\n  p:\n    base_url: u\n", "providers.p.transport", "is required"),
        (
            "providers:\n  p:\n    transport: openai_responses\n    headers: {a: 1}\n    base_url: "
            "u\n",
            "providers.p.headers.a",
            "must be a string",
        ),
        ("fallback_models: [a/b, 3]\n", "fallback_models[1]", "must be a string"),
        ("1: x\n", "1", "unknown key"),
        ("http_addr: 2001-12-01\n", "http_addr", "must be a string"),
    ],
)
def test_wrong_types_are_errors_naming_the_key(
    holon_home: Path, text: str, key: str, needle: str
) -> None:
    """Issue 7 item 5: `provider_timeout_s: "30"` was silently ignored."""
    lay = _write_config(holon_home, text)
    with pytest.raises(ConfigError) as ei:
        cfg.load_config(lay)
    assert key in ei.value.message and needle in ei.value.message, ei.value.message
    assert ei.value.details["key"] == key and ei.value.exit_code == 2


def test_quoted_number_hint_says_what_to_write(holon_home: Path) -> None:
    lay = _write_config(holon_home, 'runtime:\n  provider_timeout_s: "30"\n')
    with pytest.raises(ConfigError) as ei:
        cfg.load_config(lay)
    assert ei.value.hint == "write the number without quotes: `provider_timeout_s: 30`"


@pytest.mark.parametrize("text", ["4k", "1,000", "ten", "32 000"])
def test_a_number_with_letters_is_not_told_to_drop_its_quotes(holon_home: Path, text: str) -> None:
    """The `4k` hint (issue 42): `context_budget_tokens: 4k` was told to
    "write the number without quotes: `context_budget_tokens: 4k`"."""
    lay = _write_config(holon_home, f'runtime:\n  context_budget_tokens: "{text}"\n')
    with pytest.raises(ConfigError) as ei:
        cfg.load_config(lay)
    assert (
        ei.value.hint == "write it as a plain number, digits only: `context_budget_tokens: 32000`"
    )
    assert ei.value.exit_code == 2


def test_typed_settings(holon_home: Path) -> None:
    lay = _write_config(
        holon_home,
        "runtime:\n  provider_timeout_s: 30\n  max_provider_rounds: 4\n"
        "providers:\n  local:\n    transport: openai_chat_completions\n"
        "    base_url: http://127.0.0.1:1/v1\n    timeout_s: 5\n",
    )
    s = cfg.load_settings(lay)  # the checked mapping, as its TypedDict (model/config.py)
    runtime = s.get("runtime")
    assert runtime is not None and runtime.get("provider_timeout_s") == 30.0
    assert isinstance(runtime.get("provider_timeout_s"), float)
    assert runtime.get("max_provider_rounds") == 4 and runtime.get("exec_timeout_ms") is None
    assert s.get("providers") is not None and s["providers"]["local"].get("timeout_s") == 5.0
    assert s.get("model") is None
    assert "runtime.provider_timeout_s" in cfg.known_keys()
    assert "providers.<name>.base_url" in cfg.known_keys()


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"model: \xff\n", "not valid UTF-8"),
        (b"a: 2001-13-01\n", "cannot be read"),
        pytest.param(b"[" * 5000, "config.yaml", id="deeply-nested", marks=pytest.mark.slow),
        (b"!!python/object:os.system x\n", "invalid YAML"),
    ],
)
def test_unreadable_config_is_a_config_error(holon_home: Path, raw: bytes, needle: str) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_bytes(raw)
    with pytest.raises(ConfigError) as ei:
        cfg.load_config()
    assert needle in ei.value.message


def test_config_loader_property_any_yaml_ends_in_config_error(holon_home: Path) -> None:
    """Issue 13 item 5: any YAML ends in a valid config or the project's own error."""
    import yaml
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    holon_home.mkdir(parents=True, exist_ok=True)
    path = holon_home / "config.yaml"
    keys = st.sampled_from(
        ["model", "runtime", "providers", "fallback_models", "p", "transport", "base_url"]
        + cfg.known_keys()
        + [k.rsplit(".", 1)[-1] for k in cfg.known_keys()]
    )
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=8),
        st.sampled_from(list(cfg.TRANSPORTS)),
    )
    values = st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.one_of(keys, st.integers(), st.text(max_size=4)), inner, max_size=4),
        ),
        max_leaves=12,
    )
    docs = st.one_of(
        values.map(lambda v: yaml.safe_dump(v).encode()),
        st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.binary(max_size=40),
    )

    @settings(
        max_examples=examples(200),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(docs)
    def run(raw: bytes) -> None:
        path.write_bytes(raw)
        cfg._cache.clear()
        try:
            data = cfg.load_config()
        except ConfigError as exc:
            assert exc.message and str(path) in exc.message or "HOLON_HOME" in exc.message
            return
        assert isinstance(data, dict)
        cfg.load_settings()  # a valid mapping always builds

    run()


def test_an_agent_layouts_paths_are_joined_once_and_equal_the_joins(tmp_path: Path) -> None:
    """A tick asked for ~90 paths, each a fresh ``Path`` join: they are
    computed once per agent home (the same object each time) and are the
    same paths as ever."""
    from holon_cli.store.layout import AgentLayout

    home = tmp_path / "agents" / "a1"
    a, b = AgentLayout(home, "a1"), AgentLayout(home, "a1")
    rt = home / ".holon"
    assert a.state_dir == rt / "state" and a.state_dir is b.state_dir
    assert a.agent_file == rt / "state" / "agent.json"
    assert a.queue_file == rt / "state" / "queue.json"
    assert a.turn_lock == rt / "locks" / "turn.lock"
    assert a.work_items_dir == home / "work-items" and a.tasks_dir == rt / "tasks"
    assert a.ledger_path("events") == rt / "ledger" / "events.jsonl"
    assert a.ledger_path("events") is b.ledger_path("events")
    assert a.ledger_lock("events") == rt / "locks" / "events.lock"
    assert (
        AgentLayout(tmp_path / "other", "a1").state_dir == tmp_path / "other" / ".holon" / "state"
    )
