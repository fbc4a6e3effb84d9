"""`holon debug providers`: the provider doctor reports every candidate of
the model chain (transport, endpoint, credential presence, why unusable)
without sending a request and without ever printing a secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.inprocess_cli import bind_runner, run  # noqa: F401

SECRET = "sk-live-0123456789abcdef-DO-NOT-PRINT"


def doctor(*args: str, code: int = 0, **kw: Any) -> dict[str, Any]:
    """The report; ``code``: the exit expected (1: no candidate can be served)."""
    r = run("debug", "providers", "--json", *args, **kw)
    assert r.returncode == code, r.stderr
    assert SECRET not in r.stdout and SECRET not in r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is (code == 0)
    if code:
        assert doc["error"]["kind"] == "no_servable_model"
    data: dict[str, Any] = doc["data"]
    return data


def test_present_and_missing_credentials_never_show_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("HOLON_MODEL", "openai/gpt-5")
    monkeypatch.setenv("HOLON_FALLBACK_MODELS", "anthropic/claude-sonnet-4-5")
    d = doctor()
    assert d["retry_policy"]["max_retries"] == 2
    assert "rate_limited" in d["retry_policy"]["retryable"]
    first, second = d["candidates"]
    assert first == {
        "model": "openai/gpt-5",
        "transport": "openai_responses",
        "base_url": "https://api.openai.com/v1",
        "credentials": "present",
        "credentials_env": "OPENAI_API_KEY",
        "supported": True,
        "reason": None,
        "wire": {
            "prompt_capabilities": ["incremental_responses", "prompt_cache_key"],
            "incremental": False,
            "store": False,
        },
    }
    assert second["credentials"] == "missing"
    assert second["supported"] is False
    assert "ANTHROPIC_API_KEY" in second["reason"]
    assert d["problem"] is None
    human = run("debug", "providers")
    assert human.returncode == 0
    assert SECRET not in human.stdout + human.stderr
    assert "missing ($ANTHROPIC_API_KEY)" in human.stdout


def test_declared_provider_and_unknown_provider(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "model": "local/qwen",
                "fallback_models": ["nowhere/y"],
                "providers": {
                    "local": {
                        "transport": "openai_chat_completions",
                        "base_url": "http://user:hunter2@127.0.0.1:9/v1",
                        "headers": {"Authorization": f"Bearer {SECRET}"},
                    },
                },
            }
        )
    )
    d = doctor()
    local, nowhere = d["candidates"]
    assert local["transport"] == "openai_chat_completions"
    assert local["credentials"] == "not_needed" and local["supported"] is True
    assert local["base_url"] == "http://***@127.0.0.1:9/v1"  # no password printed
    assert nowhere["supported"] is False and "unknown model provider" in nowhere["reason"]


def test_scripted_candidates_are_loaded_not_replayed(tmp_path: Path) -> None:
    good = tmp_path / "ok.yaml"
    good.write_text("steps: [hello]\n")
    d = doctor("--model", f"scripted:{good}")
    assert d["candidates"][0]["supported"] is True
    assert d["model_source"] == "flag"
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 3\n")
    d = doctor("--model", f"scripted:{bad}", code=1)
    (c,) = d["candidates"]
    assert c["supported"] is False and c["reason"].startswith("script_error")
    assert d["problem"] == "no candidate of the model chain can be served"


def test_no_model_configured_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOLON_MODEL", raising=False)
    d = doctor(code=1)
    assert d["candidates"] == [] and d["model_source"] == "default"
    assert d["problem"].startswith("no model configured")
    human = run("debug", "providers")
    assert human.returncode == 1 and "problem: no model configured" in human.stderr
    assert "model source  default" in human.stdout


def test_model_source_names_where_the_model_comes_from(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36 §6: flag | agent | HOLON_MODEL | config | default, in the
    chain's own precedence (it said runtime_default whatever the source)."""
    monkeypatch.delenv("HOLON_MODEL", raising=False)
    script = tmp_path / "ok.yaml"
    script.write_text("steps: [hello]\n")
    ref = f"scripted:{script}"
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(f"model: {ref}\n")
    assert doctor()["model_source"] == "config"
    monkeypatch.setenv("HOLON_MODEL", ref)
    assert doctor()["model_source"] == "HOLON_MODEL"
    assert run("agent", "model", "main", ref).returncode == 0
    assert doctor()["model_source"] == "agent"
    assert doctor("--model", ref)["model_source"] == "flag"
    human = run("debug", "providers", "--model", ref)
    assert human.returncode == 0 and "model source  flag" in human.stdout


def test_unknown_agent_exits_3() -> None:
    r = run("debug", "providers", "--agent", "ghost")
    assert r.returncode == 3
    assert "unknown agent" in r.stderr


def test_a_broken_config_is_a_config_error_naming_the_key(holon_home: Path) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        "model: odd/x\nproviders:\n  odd: {transport: grpc, base_url: 'http://x'}\n"
    )
    r = run("debug", "providers")
    assert r.returncode == 2
    assert "providers.odd.transport" in r.stderr


def test_wire_features_show_beta_names_never_header_values(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "model": "gw/claude-x",
                "fallback_models": ["openai/gpt-5"],
                "runtime": {"openai_incremental": True, "anthropic_context_management": True},
                "providers": {
                    "gw": {
                        "transport": "anthropic_messages",
                        "base_url": "https://gw.example/anthropic",
                        "headers": {"X-Gateway-Key": SECRET, "anthropic-beta": "token-efficient"},
                    }
                },
            }
        )
    )
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    gw, openai = doctor()["candidates"]
    assert gw["wire"] == {
        "prompt_capabilities": ["context_management", "full_request_only", "prompt_cache_blocks"],
        "cache_breakpoints": ["tools", "system", "history", "rolling"],
        "context_management": True,
        "beta": ["token-efficient", "context-management-2025-06-27"],
    }
    assert openai["wire"] == {
        "prompt_capabilities": ["incremental_responses", "prompt_cache_key"],
        "incremental": True,
        "store": True,
    }
    human = run("debug", "providers")
    assert human.returncode == 0 and SECRET not in human.stdout + human.stderr
    assert (
        "wire openai/gpt-5: prompt_capabilities incremental_responses+prompt_cache_key, "
        "incremental on, store on"
    ) in human.stdout
    assert "context_management on" in human.stdout
